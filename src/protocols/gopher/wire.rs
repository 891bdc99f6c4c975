//! Gopher on the wire: the request a client sends the proxy (a Gopher URL as its
//! selector), the type-3 error menus the proxy answers with, and the rewriting
//! of menus so that every Gopher item points back through the proxy.

use thiserror::Error;

pub use crate::protocol::sniff::looks_like_http;
pub use crate::protocols::gopher::menu::{MenuRewriter, MAX_MENU_LINE};
pub use crate::target::gopher_url;
use crate::target::{Resource, Scheme, Target, TargetError};

/// A selector line longer than this is refused. RFC 1436 selectors are at most
/// 255 bytes; a URL around one, with search terms, fits easily.
pub const MAX_REQUEST: usize = 2048;

/// A request to the proxy: the target, and what follows a literal tab (search
/// terms, or a Gopher+ suffix), passed on as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub target: Target,
    pub after_tab: Option<Vec<u8>>,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BadRequest {
    #[error("send a Gopher URL as the selector, e.g. gopher://host/1/")]
    NotAUrl,
    #[error("this proxy fetches gopher:// URLs, not {0}://")]
    OtherScheme(String),
    #[error("the URL is not UTF-8")]
    NotUtf8,
    #[error("{0}")]
    Target(#[from] TargetError),
    /// An HTTP request line: a web client pointed at a Gopher port (or through
    /// the SOCKS5 drop-in, which is for the small web's protocols only).
    #[error("an HTTP request; this proxy is for the small web's protocols only")]
    Http,
    /// Through a drop-in, to a port `[ports]` does not list: a line that reads
    /// as another protocol's request (a Spartan request line), which is
    /// refused rather than sent as a selector.
    #[error("a {} request line to port {port}, which [ports] does not list for it", protocol.as_str())]
    Unlisted {
        protocol: crate::protocol::Protocol,
        port: u16,
    },
}

/// Splits a request line at its first tab: what follows (search terms, or a
/// Gopher+ suffix) is passed on as it is, so it may hold no CR, LF or NUL.
fn split_tab(line: &[u8]) -> Result<(&[u8], Option<Vec<u8>>), BadRequest> {
    let Some(tab) = memchr::memchr(b'\t', line) else {
        return Ok((line, None));
    };
    let after = &line[tab + 1..];
    if after.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(TargetError::ControlCharacter.into());
    }
    Ok((&line[..tab], Some(after.to_vec())))
}

/// Parses the selector line a client sent the proxy (its line end removed):
/// `gopher://host[:port]/<type><selector>`, search terms after `%09` or a tab.
pub fn parse_request(line: &[u8]) -> Result<Request, BadRequest> {
    if looks_like_http(line) {
        return Err(BadRequest::Http);
    }
    let (url, after_tab) = split_tab(line)?;
    let url = std::str::from_utf8(url).map_err(|_| BadRequest::NotUtf8)?;
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(TargetError::NotAbsolute) => return Err(BadRequest::NotAUrl),
        Err(TargetError::UnsupportedScheme(s)) => return Err(BadRequest::OtherScheme(s)),
        Err(e) => return Err(e.into()),
    };
    if target.scheme != Scheme::Gopher {
        return Err(BadRequest::OtherScheme(target.scheme.as_str().to_string()));
    }
    Ok(Request { target, after_tab })
}

/// Parses a bare selector line for `host` and `port` (SOCKS5 drop-in mode:
/// the client connected to the server itself and sends what it would send it).
/// What follows a tab is passed on as it is; the selector is checked as a
/// URL's selector is, so both reach one decision.
pub fn parse_selector_line(host: &str, port: u16, line: &[u8]) -> Result<Request, BadRequest> {
    if looks_like_http(line) {
        return Err(BadRequest::Http);
    }
    let (selector, after_tab) = split_tab(line)?;
    let target = Target::gopher(host.to_string(), port, selector.to_vec(), None)?;
    Ok(Request { target, after_tab })
}

impl Request {
    /// The line sent upstream: the selector, a tab and search terms if any, CRLF.
    pub fn upstream_line(&self) -> Vec<u8> {
        let Resource::Gopher {
            selector, search, ..
        } = &self.target.resource
        else {
            return b"\r\n".to_vec();
        };
        let mut line = selector.clone();
        if let Some(extra) = self.after_tab.as_ref().or(search.as_ref()) {
            line.push(b'\t');
            line.extend_from_slice(extra);
        }
        line.extend_from_slice(b"\r\n");
        line
    }

    /// The item type the client asked for (`1` for an empty path).
    pub fn item_type(&self) -> u8 {
        match &self.target.resource {
            Resource::Gopher { item_type, .. } => *item_type,
            Resource::Path(_) | Resource::Selector(_) => b'1',
        }
    }

    /// Whether the answer is a menu: type 1, and the results of a type-7 search.
    pub fn answer_is_menu(&self) -> bool {
        matches!(self.item_type(), b'1' | b'7')
    }
}

/// A type-3 error menu: `3<text>\t<text>\texample.com\t0`, then `.` (the
/// contemporary Gopher draft's form). `text` is e.g. `403 Forbidden: reason`.
pub fn error_menu(text: &str) -> Vec<u8> {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(512)
        .collect();
    format!("3{clean}\t{clean}\texample.com\t0\r\n.\r\n").into_bytes()
}

/// A request this parser refused, as the proxy's answer names it.
impl From<BadRequest> for crate::refusal::Malformed {
    fn from(bad: BadRequest) -> Self {
        crate::refusal::Malformed::request("gopher", bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let r = parse_request(b"gopher://Example.org:7070/1/dir").unwrap();
        assert_eq!(r.target.authority(), "example.org:7070");
        assert_eq!(r.upstream_line(), b"/dir\r\n");
        assert!(r.answer_is_menu());
        let r = parse_request(b"gopher://example.org/7/search%09caf%C3%A9").unwrap();
        assert_eq!(r.upstream_line(), "/search\tcafé\r\n".as_bytes());
        let r = parse_request(b"gopher://example.org/7/search\tterms here").unwrap();
        assert_eq!(r.upstream_line(), b"/search\tterms here\r\n");
        let r = parse_request(b"gopher://example.org/0robots.txt").unwrap();
        assert_eq!(r.upstream_line(), b"robots.txt\r\n");
        assert!(!r.answer_is_menu());
        let r = parse_request(b"gopher://example.org").unwrap();
        assert_eq!((r.upstream_line(), r.item_type()), (b"\r\n".to_vec(), b'1'));

        let bad: &[(&[u8], &str)] = &[
            (b"/plain/selector", "send a Gopher URL"),
            (b"gemini://example.org/", "not gemini://"),
            (b"ftp://example.org/", "not ftp://"),
            (b"gopher://example.org/0a%0Db", "CR, LF or NUL"),
            (b"gopher://example.org/1x\tq\x00", "CR, LF or NUL"),
            (b"gopher://\xff/", "not UTF-8"),
            (b"gopher://exa mple/", "invalid host"),
        ];
        for (line, want) in bad {
            let err = parse_request(line).unwrap_err().to_string();
            assert!(err.contains(want), "{line:?}: {err}");
        }
    }

    #[test]
    fn error_menus() {
        assert_eq!(
            error_menu("403 Forbidden: robots.txt says\tno\r\n"),
            b"3403 Forbidden: robots.txt says no  \t403 Forbidden: robots.txt says no  \texample.com\t0\r\n.\r\n"
        );
    }

    #[test]
    fn urls_for_items() {
        assert_eq!(
            gopher_url("example.org", 70, b'1', b"/dir"),
            "gopher://example.org/1/dir"
        );
        assert_eq!(
            gopher_url("example.org", 7070, b'0', b"a b?#%"),
            "gopher://example.org:7070/0a%20b%3F%23%25"
        );
        assert_eq!(gopher_url("::1", 70, b'1', b""), "gopher://[::1]/1");
        // What the proxy writes, it reads back to the same item.
        let url = gopher_url("example.org", 7070, b'7', "/s\u{e9}arch\tx".as_bytes());
        let r = parse_request(url.as_bytes()).unwrap();
        assert_eq!(r.target.matched_path(), "/s\u{e9}arch".as_bytes());
    }
}
