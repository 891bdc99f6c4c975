//! HTTP/1.1 as the proxy reads and writes it, with no I/O: what a request
//! asks for (an absolute URL, a `CONNECT` authority, or a path on the server
//! a tunnel or a drop-in connection is for), the headers that stop at each
//! hop, `Via` and a loop through it, and the answer to each refusal: its
//! status and its `Proxy-Status` (RFC 9209).

use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, StatusCode, Uri};

use crate::refusal::{Busy, Malformed, ProxyRule, Refusal, UpstreamFailure};
use crate::target::{canonical_host, Scheme, Target, TargetError};
use crate::upstream::UpstreamError;

/// This proxy in `Via` and `Proxy-Status`: its name and a random tag per
/// process, so a request that comes back through it is a loop, while two
/// proxies in a row are not.
pub fn pseudonym() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let mut tag = [0u8; 4];
        let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut tag);
        let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        format!("robots-proxy-{tag}")
    })
}

/// The most bytes of a request's header section (request line included):
/// hyper's read buffer, as squid's `request_header_max_size` (a robots.txt
/// rule may be as long as a 16 KiB URL). A longer one is answered `431` and
/// the connection closed.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The most header fields one request may carry.
pub const MAX_HEADERS: usize = 100;

/// What a request on the proxy listener asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// An absolute `http://` or `https://` URL.
    Url(Target),
    /// `CONNECT host:port`: a tunnel, whose requests are decided one by one.
    Connect { host: String, port: u16 },
}

/// Why a request names nothing the proxy fetches (a `400`).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadRequest {
    #[error("a proxy request names an absolute http:// or https:// URL (or CONNECT host:port), not a path")]
    OriginForm,
    #[error("this listener fetches http:// and https:// URLs, not {0}://")]
    OtherScheme(String),
    #[error("{0}")]
    Target(TargetError),
    #[error(
        "a URL with userinfo (user@host) is refused: credentials do not travel through this proxy"
    )]
    Userinfo,
    #[error("CONNECT names host:port, not {0:?}")]
    ConnectAuthority(String),
    #[error("an IPv6 address with a zone id ({0:?}) names no address the proxy can check")]
    ZoneId(String),
    #[error("the request's Host ({0:?}) is no host")]
    Host(String),
    #[error("{0} is not relayed: it would carry requests that are never decided")]
    Upgrade(&'static str),
}

impl From<BadRequest> for Malformed {
    fn from(e: BadRequest) -> Malformed {
        match e {
            BadRequest::Target(e @ TargetError::Spelling(_)) => Malformed::Target(e),
            e => Malformed::request("http", e),
        }
    }
}

/// What a request on the proxy listener asks for.
pub fn asked(method: &Method, uri: &Uri) -> Result<Asked, BadRequest> {
    if method == Method::CONNECT {
        let authority = uri
            .authority()
            .filter(|_| uri.scheme().is_none() && uri.path_and_query().is_none())
            .ok_or_else(|| BadRequest::ConnectAuthority(uri.to_string()))?;
        let port = authority
            .port_u16()
            .filter(|&p| p != 0)
            .ok_or_else(|| BadRequest::ConnectAuthority(uri.to_string()))?;
        let host = authority_host(authority.host())?;
        return Ok(Asked::Connect { host, port });
    }
    let scheme = uri.scheme_str().ok_or(BadRequest::OriginForm)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => return Err(BadRequest::OtherScheme(other.to_string())),
    };
    let authority = uri.authority().ok_or(BadRequest::OriginForm)?;
    if authority.as_str().contains('@') {
        return Err(BadRequest::Userinfo);
    }
    authority_host(authority.host())?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}://{}{}", scheme.as_str(), authority.as_str(), path);
    Target::parse(&url)
        .map(Asked::Url)
        .map_err(BadRequest::Target)
}

/// A request on a connection made for one server (a tunnel's, or a
/// drop-in's): its origin-form path on `scheme://host:port`. The `Host`
/// header, when it names another server, is answered `421` by the caller
/// (see [`host_named`]).
pub fn on_server(
    scheme: Scheme,
    (host, port): (&str, u16),
    uri: &Uri,
) -> Result<Target, BadRequest> {
    // An absolute URL inside a tunnel is allowed by HTTP/1.1; its server is
    // checked against the tunnel's by the caller, like a Host header.
    let path = match (uri.scheme(), uri.path_and_query()) {
        (None, Some(p)) if p.as_str().starts_with('/') => p.as_str(),
        (None, _) if uri == "*" => return Err(BadRequest::OriginForm),
        (Some(_), p) => p.map_or("/", |p| p.as_str()),
        _ => "/",
    };
    let host = canonical_host(host).map_err(BadRequest::Target)?;
    Target::with_path(scheme, host, port, path).map_err(BadRequest::Target)
}

/// The server a request's `Host` header (or absolute URL) names, canonical,
/// with its port (the scheme's when none): to compare with the server a
/// connection was made for. `None` when it names none.
pub fn host_named(
    scheme: Scheme,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Option<(String, u16)>, BadRequest> {
    let authority = match uri.authority() {
        Some(a) => a.as_str().to_string(),
        None => match headers.get(header::HOST) {
            Some(v) => v
                .to_str()
                .map_err(|_| BadRequest::Host(String::from_utf8_lossy(v.as_bytes()).into()))?
                .to_string(),
            None => return Ok(None),
        },
    };
    let parsed: hyper::http::uri::Authority = authority
        .parse()
        .map_err(|_| BadRequest::Host(authority.clone()))?;
    if authority.contains('@') {
        return Err(BadRequest::Userinfo);
    }
    let host = authority_host(parsed.host())?;
    Ok(Some((
        host,
        parsed.port_u16().unwrap_or(scheme.default_port()),
    )))
}

/// A URI's host made canonical; an IPv6 zone id refused.
fn authority_host(host: &str) -> Result<String, BadRequest> {
    if host.starts_with('[') && host.contains('%') {
        return Err(BadRequest::ZoneId(host.to_string()));
    }
    canonical_host(host).map_err(BadRequest::Target)
}

/// The headers that stop at each hop (RFC 9110 §7.6.1): `Connection` and
/// each field it names, and the ones that never travel past a proxy.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Removes the hop-by-hop headers (`Transfer-Encoding` is hyper's to set
/// for the next hop).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// Whether the request came through this proxy already: its `Via` names
/// `pseudonym` (a proxy loop).
pub fn looped(headers: &HeaderMap, pseudonym: &str) -> bool {
    headers
        .get_all(header::VIA)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|hop| hop.split_whitespace().nth(1) == Some(pseudonym))
}

/// Adds this hop to `Via`.
pub fn add_via(headers: &mut HeaderMap, received: hyper::Version, pseudonym: &str) {
    let protocol = match received {
        hyper::Version::HTTP_2 => "2",
        hyper::Version::HTTP_10 => "1.0",
        _ => "1.1",
    };
    if let Ok(v) = HeaderValue::from_str(&format!("{protocol} {pseudonym}")) {
        headers.append(header::VIA, v);
    }
}

/// The `Host` header for `target`: its host, and its port unless the
/// scheme's default.
pub fn host_header(target: &Target) -> String {
    match target.port == target.scheme.default_port() {
        true => target.host.clone(),
        false => target.authority(),
    }
}

/// A `Retry-After` (RFC 9110 §10.2.3) the site can be held to:
/// delay-seconds, or an HTTP-date (from now by this machine's clock).
/// Anything else (a negative number, text, `0`, a date past) says nothing
/// the proxy uses: a `429` or `503` with it is held by the web's back-off
/// instead, never let through at once. Its size is the gate's to cap.
pub fn retry_after(headers: &HeaderMap) -> Option<std::time::Duration> {
    let value = headers.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if value.is_empty() {
        return None;
    }
    let wait = match value.bytes().all(|b| b.is_ascii_digit()) {
        // Digits past what a u64 holds are "not in our lifetime".
        true => std::time::Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX)),
        false => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(std::time::SystemTime::now())
            .ok()?,
    };
    (!wait.is_zero()).then_some(wait)
}

/// The user and password of a `Proxy-Authorization: Basic` header.
pub fn basic_credentials(headers: &HeaderMap) -> Option<(Vec<u8>, Vec<u8>)> {
    use base64::Engine;
    let value = headers
        .get(header::PROXY_AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// How the proxy answers a refusal over HTTP.
#[derive(Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: StatusCode,
    /// RFC 9209's `error` parameter.
    pub error: &'static str,
    /// Whole seconds before asking again, where the refusal says.
    pub retry_after: Option<u64>,
}

/// The status and `Proxy-Status` error for each refusal (the guide's table).
pub fn answer_for(refusal: &Refusal) -> Answer {
    use StatusCode as S;
    let retry_after = refusal.ask_again_in().map(crate::refusal::ceil_secs);
    let (status, error) = match refusal {
        Refusal::Malformed(_) => (S::BAD_REQUEST, "http_request_error"),
        Refusal::Denied(crate::access::Denied::ProxyAuth) => {
            (S::PROXY_AUTHENTICATION_REQUIRED, "http_request_denied")
        }
        Refusal::Denied(_) => (S::FORBIDDEN, "http_request_denied"),
        Refusal::ProxyRule(ProxyRule::Egress { .. }) => (S::FORBIDDEN, "destination_ip_prohibited"),
        Refusal::ProxyRule(ProxyRule::OtherHost { .. }) => {
            (S::MISDIRECTED_REQUEST, "http_request_denied")
        }
        Refusal::ProxyRule(ProxyRule::Method { .. }) => {
            (S::METHOD_NOT_ALLOWED, "http_request_denied")
        }
        // 508: the loop is the proxy's to report, not the client's mistake.
        Refusal::ProxyRule(ProxyRule::Loop) => (S::LOOP_DETECTED, "proxy_loop_detected"),
        Refusal::ProxyRule(_) => (S::FORBIDDEN, "http_request_denied"),
        Refusal::Disallowed(_) | Refusal::Preference(_) => (S::FORBIDDEN, "http_request_denied"),
        Refusal::RobotsUnreachable(_) => (S::SERVICE_UNAVAILABLE, "destination_unavailable"),
        Refusal::SlowDown(s) => match s.why {
            Busy::ShuttingDown | Busy::StoreDown => {
                (S::SERVICE_UNAVAILABLE, "proxy_internal_response")
            }
            Busy::Turn | Busy::Limit(_) | Busy::Certificates => {
                (S::TOO_MANY_REQUESTS, "http_request_denied")
            }
        },
        Refusal::Upstream(failure) => upstream_answer(failure),
    };
    Answer {
        status,
        error,
        retry_after,
    }
}

fn upstream_answer(failure: &UpstreamFailure) -> (StatusCode, &'static str) {
    use StatusCode as S;
    match failure {
        UpstreamFailure::Connect(e) => match e {
            UpstreamError::Resolve { .. } => (S::BAD_GATEWAY, "dns_error"),
            UpstreamError::Refused { .. } => (S::FORBIDDEN, "destination_ip_prohibited"),
            UpstreamError::DenyHosts { .. } => (S::FORBIDDEN, "http_request_denied"),
            UpstreamError::Connect { .. } => (S::BAD_GATEWAY, "connection_refused"),
            UpstreamError::Timeout { .. } => (S::GATEWAY_TIMEOUT, "connection_timeout"),
            UpstreamError::Tls { .. } | UpstreamError::CertificateChanged { .. } => {
                (S::BAD_GATEWAY, "tls_certificate_error")
            }
        },
        UpstreamFailure::Send { .. } => (S::BAD_GATEWAY, "connection_terminated"),
        UpstreamFailure::Answer { .. } => (S::BAD_GATEWAY, "http_protocol_error"),
        UpstreamFailure::Silent { .. } => (S::GATEWAY_TIMEOUT, "http_response_timeout"),
    }
}

/// The `Proxy-Status` value: this proxy, the error, and the refusal's text
/// as `details` (an sf-string: printable ASCII, `"` and `\` escaped).
pub fn proxy_status(pseudonym: &str, error: &str, details: &str) -> String {
    let mut quoted = String::with_capacity(details.len() + 2);
    for c in details.chars().take(512) {
        match c {
            '"' | '\\' => {
                quoted.push('\\');
                quoted.push(c);
            }
            ' '..='~' => quoted.push(c),
            _ => quoted.push('?'),
        }
    }
    format!("{pseudonym}; error={error}; details=\"{quoted}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uri(s: &str) -> Uri {
        s.parse().unwrap()
    }

    #[test]
    fn a_proxy_request_names_an_absolute_url_or_a_connect_authority() {
        let Asked::Url(t) = asked(&Method::GET, &uri("http://Example.COM./a/../b?q")).unwrap()
        else {
            panic!()
        };
        assert_eq!(t.url(), "http://example.com/b?q");
        assert_eq!(
            asked(&Method::CONNECT, &uri("example.com:443")).unwrap(),
            Asked::Connect {
                host: "example.com".into(),
                port: 443
            }
        );
        assert_eq!(asked(&Method::GET, &uri("/a")), Err(BadRequest::OriginForm));
        assert!(matches!(
            asked(&Method::GET, &uri("ftp://example.com/")),
            Err(BadRequest::OtherScheme(_))
        ));
        assert_eq!(
            asked(&Method::GET, &uri("http://u:p@example.com/")),
            Err(BadRequest::Userinfo)
        );
        for no_port in ["example.com", "example.com:0"] {
            assert!(matches!(
                asked(&Method::CONNECT, &uri(no_port)),
                Err(BadRequest::ConnectAuthority(_))
            ));
        }
        assert!(matches!(
            asked(&Method::CONNECT, &uri("[fe80::1%25eth0]:443")),
            Err(BadRequest::ZoneId(_)) | Err(BadRequest::ConnectAuthority(_))
        ));
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_stop_here() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, "close, X-Secret".parse().unwrap());
        h.insert("x-secret", "1".parse().unwrap());
        h.insert(header::PROXY_AUTHORIZATION, "Basic eDp5".parse().unwrap());
        h.insert(header::UPGRADE, "websocket".parse().unwrap());
        h.insert(header::TE, "trailers".parse().unwrap());
        h.insert(header::ACCEPT, "*/*".parse().unwrap());
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h.contains_key(header::ACCEPT));
    }

    #[test]
    fn a_request_that_came_through_this_proxy_is_a_loop() {
        let mut h = HeaderMap::new();
        h.insert(header::VIA, "1.0 fred, 1.1 p.example".parse().unwrap());
        assert!(!looped(&h, "robots-proxy-1"));
        add_via(&mut h, hyper::Version::HTTP_11, "robots-proxy-1");
        assert!(looped(&h, "robots-proxy-1"));
        assert!(!looped(&h, "robots-proxy-2"));
    }

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let at = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::RETRY_AFTER, v.parse().unwrap());
            retry_after(&h)
        };
        assert_eq!(at("120"), Some(std::time::Duration::from_secs(120)));
        assert_eq!(
            at("99999999999999999999999"),
            Some(std::time::Duration::from_secs(u64::MAX))
        );
        let soon = httpdate::fmt_http_date(
            std::time::SystemTime::now() + std::time::Duration::from_secs(300),
        );
        let wait = at(&soon).unwrap().as_secs();
        assert!((295..=300).contains(&wait), "{wait}");
        // A date past or a zero says no time the site can be held to: the
        // back-off holds it instead (issue 50), never "go at once".
        assert_eq!(at("Sun, 06 Nov 1994 08:49:37 GMT"), None);
        assert_eq!(at("0"), None);
        assert_eq!(at("soon"), None);
        assert_eq!(at("-5"), None);
    }

    #[test]
    fn proxy_status_details_cannot_break_out_of_their_string() {
        assert_eq!(
            proxy_status("p", "http_request_denied", "a \"rule\" \\ é\r\n"),
            "p; error=http_request_denied; details=\"a \\\"rule\\\" \\\\ ???\""
        );
    }
}
