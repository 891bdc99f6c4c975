//! Targets in one canonical form, so that a refusal cannot be dodged by spelling.
//!
//! docs/architecture.md, "Canonical targets": the host is lower-cased, loses a trailing dot
//! and is converted to punycode, the default port is made explicit; a Gemini (or
//! HTTP) path has its dot segments removed (RFC 3986 §5.2.4) after unreserved
//! percent-escapes are decoded and the others upper-cased (§6.2.2). A Gopher
//! selector is sent as the client wrote it; [`crate::spelling`] decides it over
//! every spelling a server may read it as.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use thiserror::Error;

use crate::robots::encoding::{normalize, percent_decode, Mode};
use crate::robots::{Decision, Policy};
use crate::spelling::{self, remove_dot_segments, PathReading, SelectorReading, SpellingError};

/// The protocols a target can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    Gemini,
    Gopher,
    Spartan,
    Nex,
    /// Gemini's upload companion: a `titan://` URL sends data to a capsule.
    Titan,
    Http,
    Https,
}

impl Scheme {
    pub const ALL: [Scheme; 7] = [
        Scheme::Gemini,
        Scheme::Gopher,
        Scheme::Spartan,
        Scheme::Nex,
        Scheme::Titan,
        Scheme::Http,
        Scheme::Https,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Gemini => "gemini",
            Scheme::Gopher => "gopher",
            Scheme::Spartan => "spartan",
            Scheme::Nex => "nex",
            Scheme::Titan => "titan",
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Gemini | Scheme::Titan => 1965,
            Scheme::Gopher => 70,
            Scheme::Spartan => 300,
            Scheme::Nex => 1900,
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The scheme whose robots.txt rules it: its own, but for Titan, whose
    /// uploads go to a Gemini capsule and are ruled by its robots.txt.
    pub fn robots_scheme(self) -> Scheme {
        match self {
            Scheme::Titan => Scheme::Gemini,
            s => s,
        }
    }

    fn from_name(name: &str) -> Option<Scheme> {
        Scheme::ALL
            .into_iter()
            .find(|s| s.as_str().eq_ignore_ascii_case(name))
    }
}

/// What on the host a target asks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Resource {
    /// Gemini and HTTP: the canonical path with its query (`/a/b?q`), starting with `/`.
    Path(String),
    /// Gopher: the item type, the selector bytes as they are sent, and search terms.
    Gopher {
        item_type: u8,
        selector: Vec<u8>,
        search: Option<Vec<u8>>,
    },
    /// Nex: the path as it is sent (a URL's path decoded once, or the line a
    /// client sent), read by servers as loosely as a Gopher selector, so
    /// decided over the same spellings.
    Selector(Vec<u8>),
}

/// A parsed, canonical target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub scheme: Scheme,
    /// Lower-case ASCII (punycode), no trailing dot; IPv6 in brackets.
    pub host: String,
    /// Always explicit: the scheme's default when the URL named none.
    pub port: u16,
    pub resource: Resource,
    /// The URL carried `user@` (Gemini forbids it: the proxy refuses such requests).
    pub had_userinfo: bool,
    /// The URL carried `#fragment` (dropped; Gemini forbids it in requests).
    pub had_fragment: bool,
}

/// The host a robots.txt belongs to: `(scheme, host, port)`, host canonical.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HostKey {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
}

impl fmt::Display for HostKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

/// The server a request goes to: the host it names and the addresses that
/// name resolved to, checked by the proxy's address rules. It is resolved once
/// per request; the robots.txt fetch, the politeness gate and the connection
/// all use these addresses.
#[derive(Clone, Debug)]
pub struct Server {
    pub name: HostKey,
    pub addrs: Vec<std::net::SocketAddr>,
}

/// Why a target could not be parsed. These are the client's mistakes.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum TargetError {
    #[error("not an absolute URL (expected scheme://host/...)")]
    NotAbsolute,
    #[error("unsupported scheme {0:?}")]
    UnsupportedScheme(String),
    #[error("CR, LF or NUL inside the URL")]
    ControlCharacter,
    #[error("empty host")]
    EmptyHost,
    #[error("invalid host {0:?}")]
    InvalidHost(String),
    #[error("invalid port {0:?}")]
    InvalidPort(String),
    #[error("{0}")]
    Spelling(#[from] SpellingError),
}

impl Target {
    /// Parses an absolute URL of a [`Scheme`].
    pub fn parse(input: &str) -> Result<Target, TargetError> {
        if input.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            return Err(TargetError::ControlCharacter);
        }
        let (scheme_name, rest) = input.split_once("://").ok_or(TargetError::NotAbsolute)?;
        let scheme = Scheme::from_name(scheme_name)
            .ok_or_else(|| TargetError::UnsupportedScheme(scheme_name.to_string()))?;
        let (rest, had_fragment) = match rest.split_once('#') {
            Some((before, _)) => (before, true),
            None => (rest, false),
        };
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path_and_query) = rest.split_at(authority_end);
        let (userinfo, host_port) = match authority.rsplit_once('@') {
            Some((_, hp)) => (true, hp),
            None => (false, authority),
        };
        let (host, port) = split_host_port(host_port)?;
        let host = canonical_host(host)?;
        let port = match port {
            None | Some("") => scheme.default_port(),
            Some(p) => parse_port(p)?,
        };
        let resource = match scheme {
            Scheme::Gopher => gopher_resource(path_and_query)?,
            Scheme::Nex => nex_resource(path_and_query)?,
            _ => Resource::Path(canonical_path(path_and_query)?),
        };
        Ok(Target {
            scheme,
            host,
            port,
            resource,
            had_userinfo: userinfo,
            had_fragment,
        })
    }

    /// `host:port` with the port always present (the key for robots.txt and politeness).
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The canonical URL: what the proxy forwards upstream (Gemini) and logs.
    /// The default port is left out, as clients usually write it.
    pub fn url(&self) -> String {
        match &self.resource {
            Resource::Path(p) => {
                let mut url = origin(self.scheme, &self.host, self.port);
                url.push_str(p);
                url
            }
            Resource::Gopher {
                item_type,
                selector,
                search,
            } => {
                // Every byte a URL would change is escaped, `%` included: the
                // selector is sent as it is, so its URL must give it back exactly.
                let mut url = gopher_url(&self.host, self.port, *item_type, selector);
                if let Some(search) = search {
                    url.push_str("%09");
                    push_url_escaped(&mut url, search);
                }
                url
            }
            Resource::Selector(path) => {
                let mut url = origin(self.scheme, &self.host, self.port);
                if path.first() != Some(&b'/') {
                    url.push('/');
                }
                push_url_escaped(&mut url, path);
                url
            }
        }
    }

    /// The path or selector the rules see, as bytes.
    pub fn matched_path(&self) -> &[u8] {
        match &self.resource {
            Resource::Path(p) => p.as_bytes(),
            Resource::Gopher { selector, .. } | Resource::Selector(selector) => selector,
        }
    }

    /// Decides this target over every spelling that reaches the same resource
    /// ([`crate::spelling`]); `reading` says how its protocol's servers read
    /// a path (its rules: `protocol::rules`) and how Gopher selectors are read.
    pub fn decide(
        &self,
        policy: &Policy,
        (paths, selectors): (PathReading, SelectorReading),
    ) -> Result<Decision, TargetError> {
        match &self.resource {
            Resource::Path(p) => Ok(spelling::decide_path_as(policy, p.as_bytes(), paths)),
            Resource::Gopher { selector, .. } | Resource::Selector(selector) => {
                Ok(spelling::decide_selector(policy, selector, selectors)?)
            }
        }
    }

    /// A target of a path-addressed protocol (Gemini, Spartan) from a request
    /// line's parts: `host` already canonical, `path` made canonical and
    /// checked as a URL's would be.
    pub fn with_path(
        scheme: Scheme,
        host: String,
        port: u16,
        path: &str,
    ) -> Result<Target, TargetError> {
        Ok(Target {
            scheme,
            host,
            port,
            resource: Resource::Path(canonical_path(path)?),
            had_userinfo: false,
            had_fragment: false,
        })
    }

    /// A Nex target from the line a client sent (drop-in mode): `host`
    /// already canonical. The path is checked as a URL's would be.
    pub fn nex(host: String, port: u16, line: Vec<u8>) -> Result<Target, TargetError> {
        Ok(Target {
            scheme: Scheme::Nex,
            host,
            port,
            resource: selector_checked(line)?,
            had_userinfo: false,
            had_fragment: false,
        })
    }

    /// A Gopher target from a selector sent as it is (SOCKS5 drop-in mode):
    /// `host` already canonical. The selector is checked as a URL's would be.
    pub fn gopher(
        host: String,
        port: u16,
        selector: Vec<u8>,
        search: Option<Vec<u8>>,
    ) -> Result<Target, TargetError> {
        let resource = gopher_checked(b'0', selector, search)?;
        Ok(Target {
            scheme: Scheme::Gopher,
            host,
            port,
            resource,
            had_userinfo: false,
            had_fragment: false,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.url())
    }
}

fn split_host_port(host_port: &str) -> Result<(&str, Option<&str>), TargetError> {
    if let Some(rest) = host_port.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| TargetError::InvalidHost(host_port.to_string()))?;
        return match after {
            "" => Ok((host_port, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((&host_port[..host.len() + 2], Some(port))),
                None => Err(TargetError::InvalidHost(host_port.to_string())),
            },
        };
    }
    Ok(match host_port.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (host_port, None),
    })
}

fn parse_port(port: &str) -> Result<u16, TargetError> {
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(TargetError::InvalidPort(port.to_string()));
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(TargetError::InvalidPort(port.to_string())),
    }
}

/// An address as a canonical host: dotted IPv4 (an IPv4-mapped IPv6 address
/// included), other IPv6 in brackets.
pub fn ip_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => format!("[{v6}]"),
        },
    }
}

/// The longest host name (RFC 1035's 253 bytes; an IPv6 literal is shorter).
pub const MAX_HOST: usize = 253;

/// Lower-case, no trailing dot, IDN to punycode (UTS 46), IPv6 in canonical
/// text form. IPv4 is dotted-quad however it was written (`127.1`,
/// `0x7f.0.0.1`, `2130706433`, `[::ffff:127.0.0.1]`: what resolvers and the
/// WHATWG URL standard read as `127.0.0.1`), so one address is one host.
pub fn canonical_host(host: &str) -> Result<String, TargetError> {
    if host.is_empty() {
        return Err(TargetError::EmptyHost);
    }
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        let addr: Ipv6Addr = inner
            .parse()
            .map_err(|_| TargetError::InvalidHost(host.to_string()))?;
        return Ok(ip_host(IpAddr::V6(addr)));
    }
    // UTS 46 maps other full stops (`。`) to `.`, so labels are checked after it.
    let ascii =
        idna::domain_to_ascii(host).map_err(|_| TargetError::InvalidHost(host.to_string()))?;
    // One trailing dot is the root label; an empty label anywhere else
    // (`a..b`, `.a`, `a..`) names no host.
    let ascii = ascii.strip_suffix('.').map(str::to_string).unwrap_or(ascii);
    if let Some(v4) = ipv4_number_form(&ascii) {
        return v4
            .map(|a| a.to_string())
            .ok_or_else(|| TargetError::InvalidHost(host.to_string()));
    }
    // A name is at most 253 bytes, a label 63 (RFC 1035): longer names no
    // host, and would make every table keyed by host longer than it need be.
    let valid = !ascii.is_empty()
        && ascii.len() <= MAX_HOST
        && !ascii.split('.').any(|l| l.is_empty() || l.len() > 63)
        && ascii.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_')
        });
    if !valid {
        return Err(TargetError::InvalidHost(host.to_string()));
    }
    Ok(ascii)
}

/// WHATWG URL, "IPv4 parser": a host whose last label is a number is an IPv4
/// address of one to four parts, each decimal, `0x` hex or `0`-led octal, the
/// last filling the remaining bytes. `None`: not a number form; `Some(None)`:
/// a number form that is no address (`1.2.3.4.5`, `256.1.1.1`).
fn ipv4_number_form(host: &str) -> Option<Option<Ipv4Addr>> {
    let number = |part: &str| -> Option<u64> {
        let (digits, radix) =
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                (hex, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (part, 10)
            };
        if digits.is_empty() {
            return (radix == 16).then_some(0);
        }
        if digits.len() > 20 {
            return None;
        }
        u64::from_str_radix(digits, radix).ok()
    };
    let last = host.rsplit('.').next()?;
    let last_is_number = !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || ((last.starts_with("0x") || last.starts_with("0X"))
                && last[2..].bytes().all(|b| b.is_ascii_hexdigit())));
    if !last_is_number {
        return None;
    }
    let parts: Vec<&str> = host.split('.').collect();
    if parts.len() > 4 {
        return Some(None);
    }
    let numbers: Option<Vec<u64>> = parts.iter().map(|p| number(p)).collect();
    let Some(numbers) = numbers else {
        return Some(None);
    };
    let (last, head) = numbers.split_last()?;
    if head.iter().any(|&n| n > 255) || *last >= 1u64 << (8 * (5 - numbers.len())) {
        return Some(None);
    }
    let mut value = *last;
    for (i, &n) in head.iter().enumerate() {
        value += n << (8 * (3 - i));
    }
    Some(u32::try_from(value).ok().map(Ipv4Addr::from))
}

/// Canonical path and query of a Gemini or HTTP URL: percent-encoding normalised,
/// dot segments removed from the path (not the query), `/` when empty. A NUL
/// behind escapes is refused ([`spelling::check_path`]): it is decided as a
/// server that stops there reads it, which is not at all.
fn canonical_path(path_and_query: &str) -> Result<String, TargetError> {
    spelling::check_path(path_and_query.as_bytes())?;
    let (path, query) = match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    };
    let mut normal = Vec::with_capacity(path.len());
    normalize(path.as_bytes(), Mode::Url, &mut normal);
    let mut out = remove_dot_segments(&normal);
    if out.first() != Some(&b'/') {
        out.insert(0, b'/');
    }
    if let Some(q) = query {
        out.push(b'?');
        normalize(q.as_bytes(), Mode::Url, &mut out);
    }
    // The normal form is ASCII by construction.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// RFC 4266: `/<type><selector>`, percent-decoded, `%09` (or a literal tab)
/// separating the search terms. An empty path is the root menu.
fn gopher_resource(path_and_query: &str) -> Result<Resource, TargetError> {
    let rest = path_and_query.strip_prefix('/').unwrap_or(path_and_query);
    let decoded = percent_decode(rest.as_bytes());
    let Some((&item_type, rest)) = decoded.split_first() else {
        return Ok(Resource::Gopher {
            item_type: b'1',
            selector: Vec::new(),
            search: None,
        });
    };
    let (selector, search) = match rest.iter().position(|&b| b == b'\t') {
        Some(tab) => (rest[..tab].to_vec(), Some(rest[tab + 1..].to_vec())),
        None => (rest.to_vec(), None),
    };
    if matches!(item_type, b'\r' | b'\n' | 0) {
        return Err(TargetError::ControlCharacter);
    }
    gopher_checked(item_type, selector, search)
}

/// A Nex URL's path (its query too: Nex has none, a `?` is part of the
/// path), percent-decoded once, as a Gopher URL's selector is.
fn nex_resource(path_and_query: &str) -> Result<Resource, TargetError> {
    selector_checked(percent_decode(path_and_query.as_bytes()))
}

/// A path sent as written, holding no CR, LF or NUL, not even behind escapes
/// a server would decode.
fn selector_checked(path: Vec<u8>) -> Result<Resource, TargetError> {
    if path.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(TargetError::ControlCharacter);
    }
    spelling::check_selector(&path)?;
    Ok(Resource::Selector(path))
}

/// `scheme://host[:port]`, the port left out when it is the scheme's default.
fn origin(scheme: Scheme, host: &str, port: u16) -> String {
    let mut url = format!("{}://{host}", scheme.as_str());
    if port != scheme.default_port() {
        url.push_str(&format!(":{port}"));
    }
    url
}

/// A Gopher resource whose selector and search hold no CR, LF or NUL, not
/// even behind escapes a server would decode ([`spelling::check_selector`]).
fn gopher_checked(
    item_type: u8,
    selector: Vec<u8>,
    search: Option<Vec<u8>>,
) -> Result<Resource, TargetError> {
    let raw_control = |b: &[u8]| b.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0));
    if raw_control(&selector) || search.as_deref().is_some_and(raw_control) {
        return Err(TargetError::ControlCharacter);
    }
    spelling::check_selector(&selector)?;
    Ok(Resource::Gopher {
        item_type,
        selector,
        search,
    })
}

/// Bytes kept as they are in the selector part of a Gopher URL; everything
/// else is percent-encoded (RFC 4266 §2.1), `%`, `?`, `#` and tab included.
fn url_safe(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b)
}

/// `gopher://host[:port]/<type><selector>` with the selector percent-encoded.
pub fn gopher_url(host: &str, port: u16, item_type: u8, selector: &[u8]) -> String {
    let mut url = String::with_capacity(16 + host.len() + selector.len() * 2);
    url.push_str("gopher://");
    if host.contains(':') && !host.starts_with('[') {
        url.push('[');
        url.push_str(host);
        url.push(']');
    } else {
        url.push_str(host);
    }
    if port != 70 {
        url.push_str(&format!(":{port}"));
    }
    url.push('/');
    if item_type.is_ascii_graphic() && url_safe(item_type) {
        url.push(item_type as char);
    } else {
        url.push_str(&format!("%{item_type:02X}"));
    }
    push_url_escaped(&mut url, selector);
    url
}

fn push_url_escaped(url: &mut String, bytes: &[u8]) {
    for &b in bytes {
        if url_safe(b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts() {
        let cases: &[(&str, Result<&str, ()>)] = &[
            ("Example.ORG.", Ok("example.org")),
            ("example.org", Ok("example.org")),
            ("bücher.example", Ok("xn--bcher-kva.example")),
            ("XN--BCHER-KVA.example", Ok("xn--bcher-kva.example")),
            ("127.0.0.1", Ok("127.0.0.1")),
            ("[::1]", Ok("[::1]")),
            ("[0:0::1]", Ok("[::1]")),
            ("", Err(())),
            ("a b", Err(())),
            ("[nope]", Err(())),
            ("a..", Err(())),
            ("a..b", Err(())),
            (".a", Err(())),
            (".", Err(())),
            ("a\u{3002}\u{3002}b", Err(())),
            ("Example\u{3002}org\u{3002}", Ok("example.org")),
            // One IPv4 address, however it is written.
            ("127.1", Ok("127.0.0.1")),
            ("127.0.0.1.", Ok("127.0.0.1")),
            ("0x7f.0.0.1", Ok("127.0.0.1")),
            ("0X7F.1", Ok("127.0.0.1")),
            ("0177.0.0.1", Ok("127.0.0.1")),
            ("2130706433", Ok("127.0.0.1")),
            ("0x7f000001", Ok("127.0.0.1")),
            ("[::ffff:127.0.0.1]", Ok("127.0.0.1")),
            ("[::FFFF:7f00:1]", Ok("127.0.0.1")),
            ("192.168.257", Ok("192.168.1.1")),
            ("256.0.0.1", Err(())),
            ("1.2.3.4.5", Err(())),
            ("4294967296", Err(())),
            ("0x", Ok("0.0.0.0")),
            ("09.1.1.1", Err(())),
            ("1.example", Ok("1.example")),
            ("example.1a", Ok("example.1a")),
        ];
        for (host, want) in cases {
            assert_eq!(
                canonical_host(host).map_err(|_| ()).as_deref(),
                want.as_deref(),
                "{host:?}"
            );
        }
    }

    #[test]
    fn gemini_urls() {
        let cases: &[(&str, &str, &str)] = &[
            // input, authority, canonical url
            (
                "gemini://Example.ORG.:1965/",
                "example.org:1965",
                "gemini://example.org/",
            ),
            (
                "gemini://example.org",
                "example.org:1965",
                "gemini://example.org/",
            ),
            (
                "gemini://example.org:1966/a",
                "example.org:1966",
                "gemini://example.org:1966/a",
            ),
            (
                "GEMINI://example.org/%70rivate",
                "example.org:1965",
                "gemini://example.org/private",
            ),
            (
                "gemini://example.org/a/../private",
                "example.org:1965",
                "gemini://example.org/private",
            ),
            (
                "gemini://example.org/a/%2E%2E/private",
                "example.org:1965",
                "gemini://example.org/private",
            ),
            (
                "gemini://example.org/./x/./y/..",
                "example.org:1965",
                "gemini://example.org/x/",
            ),
            (
                "gemini://example.org/q?a=%7e&b=%2f",
                "example.org:1965",
                "gemini://example.org/q?a=~&b=%2F",
            ),
            (
                "gemini://example.org/ü",
                "example.org:1965",
                "gemini://example.org/%C3%BC",
            ),
            (
                "gemini://example.org/*$",
                "example.org:1965",
                "gemini://example.org/*$",
            ),
            (
                "gemini://[::1]:2000/x",
                "[::1]:2000",
                "gemini://[::1]:2000/x",
            ),
            (
                "gemini://example.org?q",
                "example.org:1965",
                "gemini://example.org/?q",
            ),
        ];
        for (input, authority, url) in cases {
            let t = Target::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(t.authority(), *authority, "{input}");
            assert_eq!(t.url(), *url, "{input}");
            assert_eq!(
                Target::parse(&t.url()).as_ref(),
                Ok(&t),
                "canonical form is stable"
            );
        }
    }

    #[test]
    fn flags_and_errors() {
        let t = Target::parse("gemini://user@example.org/x#frag").unwrap();
        assert!(t.had_userinfo && t.had_fragment);
        assert_eq!(t.url(), "gemini://example.org/x");
        let errors: &[(&str, TargetError)] = &[
            ("/relative", TargetError::NotAbsolute),
            (
                "ftp://example.org/",
                TargetError::UnsupportedScheme("ftp".into()),
            ),
            ("gemini://example.org/\r\nx", TargetError::ControlCharacter),
            ("gemini:///path", TargetError::EmptyHost),
            (
                "gemini://example.org:99999/",
                TargetError::InvalidPort("99999".into()),
            ),
            (
                "gemini://example.org:x/",
                TargetError::InvalidPort("x".into()),
            ),
            (
                "gopher://example.org/0a%0D%0Ab",
                TargetError::ControlCharacter,
            ),
        ];
        for (input, want) in errors {
            assert_eq!(Target::parse(input).as_ref(), Err(want), "{input}");
        }
    }

    #[test]
    fn gopher_urls() {
        let t = Target::parse("gopher://Example.org").unwrap();
        assert_eq!(t.authority(), "example.org:70");
        assert_eq!(
            t.resource,
            Resource::Gopher {
                item_type: b'1',
                selector: vec![],
                search: None
            }
        );
        let t = Target::parse("gopher://example.org:7070/7/search%09caf%C3%A9").unwrap();
        assert_eq!(
            t.resource,
            Resource::Gopher {
                item_type: b'7',
                selector: b"/search".to_vec(),
                search: Some("café".as_bytes().to_vec())
            }
        );
        assert_eq!(t.url(), "gopher://example.org:7070/7/search%09caf%C3%A9");
        let t = Target::parse("gopher://example.org/0robots.txt").unwrap();
        assert_eq!(t.matched_path(), b"robots.txt");
        let t = Target::parse("gopher://example.org/1/a%20b").unwrap();
        assert_eq!(t.matched_path(), b"/a b");
        // A selector holding an escape keeps it through the canonical URL.
        let t = Target::parse("gopher://example.org/0/x%2541%2520y").unwrap();
        assert_eq!(t.matched_path(), b"/x%41%20y");
        assert_eq!(Target::parse(&t.url()).unwrap(), t);
    }

    #[test]
    fn dot_segments() {
        let cases: &[(&str, &str)] = &[
            ("/a/b/c/./../../g", "/a/g"),
            ("mid/content=5/../6", "mid/6"),
            ("/./private/x", "/private/x"),
            ("/../private", "/private"),
            ("/a/..", "/"),
            ("/a/.", "/a/"),
            ("..", ""),
            ("/", "/"),
        ];
        for (input, want) in cases {
            assert_eq!(
                remove_dot_segments(input.as_bytes()),
                want.as_bytes(),
                "{input}"
            );
        }
        assert_eq!(&*spelling::fold_path(b"//private//x"), b"/private/x");
        assert_eq!(&*spelling::fold_path(b"/./private/x"), b"/private/x");
        assert!(matches!(
            spelling::fold_path(b"/plain/x.txt"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode(b"a%20b%zz%4"), b"a b%zz%4");
        assert_eq!(percent_decode(b"%"), b"%");
        assert_eq!(percent_decode(b"%C3%BC"), "ü".as_bytes());
    }
}
