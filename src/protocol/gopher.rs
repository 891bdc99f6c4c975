//! Gopher on the wire: the request a client sends the proxy (a Gopher URL as its
//! selector), the type-3 error menus the proxy answers with, and the rewriting
//! of menus so that every Gopher item points back through the proxy.

use thiserror::Error;

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

#[derive(Debug, Error, PartialEq, Eq)]
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
    /// the SOCKS5 drop-in, which is for Gemini and Gopher only).
    #[error("an HTTP request; this proxy is for Gemini and Gopher only")]
    Http,
}

/// `METHOD SP TARGET SP HTTP/x`: an HTTP/1 request line (or HTTP/2's preface
/// `PRI * HTTP/2.0`). No Gopher selector or Gopher URL has this shape by chance:
/// an upper-case word, one space, a word, one space, and `HTTP/`.
pub fn looks_like_http(line: &[u8]) -> bool {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    (1..=16).contains(&method.len())
        && method.iter().all(u8::is_ascii_uppercase)
        && !target.is_empty()
        && version.starts_with(b"HTTP/")
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
            Resource::Path(_) => b'1',
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

/// Item types whose selector and host are not fetched over Gopher, left as
/// they are: information, error, telnet, tn3270, CSO (a different protocol).
fn is_gopher_item(item_type: u8, selector: &[u8]) -> bool {
    match item_type {
        b'i' | b'3' | b'8' | b'T' | b'2' => false,
        // `h` items with a `URL:` selector point at the web, not at a Gopher server.
        b'h' => !selector.starts_with(b"URL:"),
        _ => true,
    }
}

/// The longest menu line the rewriter holds while waiting for its end; a longer
/// one is passed through as it is.
const MAX_MENU_LINE: usize = 64 * 1024;

/// Rewrites a menu as it streams through: every item that points at a Gopher
/// server gets the proxy's host and port and, as its selector, the original
/// item as a Gopher URL. Other items, the terminating `.`, and lines that are
/// not menu lines pass through unchanged.
pub struct MenuRewriter {
    proxy_host: String,
    proxy_port: u16,
    partial: Vec<u8>,
    /// In the middle of an over-long line that is being passed through.
    passing_through: bool,
}

impl MenuRewriter {
    pub fn new(proxy_host: &str, proxy_port: u16) -> MenuRewriter {
        MenuRewriter {
            proxy_host: proxy_host.to_string(),
            proxy_port,
            partial: Vec::new(),
            passing_through: false,
        }
    }

    /// Rewrites the complete lines in `chunk` into `out`; keeps an unfinished one.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<u8>) {
        while !chunk.is_empty() {
            match memchr::memchr(b'\n', chunk) {
                Some(lf) => {
                    let (line, rest) = chunk.split_at(lf + 1);
                    chunk = rest;
                    if self.passing_through {
                        out.extend_from_slice(line);
                        self.passing_through = false;
                    } else if self.partial.is_empty() {
                        self.line(line, out);
                    } else {
                        let mut whole = std::mem::take(&mut self.partial);
                        whole.extend_from_slice(line);
                        self.line(&whole, out);
                    }
                }
                None => {
                    if self.passing_through {
                        out.extend_from_slice(chunk);
                    } else if self.partial.len() + chunk.len() > MAX_MENU_LINE {
                        out.append(&mut self.partial);
                        out.extend_from_slice(chunk);
                        self.passing_through = true;
                    } else {
                        self.partial.extend_from_slice(chunk);
                    }
                    return;
                }
            }
        }
    }

    /// The answer ended: a last line without its end is rewritten too.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, out);
        }
    }

    /// One line, its end (`\r\n` or `\n`, or none) included.
    fn line(&self, line: &[u8], out: &mut Vec<u8>) {
        let body_len = line
            .iter()
            .rposition(|&b| b != b'\n' && b != b'\r')
            .map_or(0, |i| i + 1);
        let (body, ending) = line.split_at(body_len);
        let mut fields = body.split(|&b| b == b'\t');
        let (Some(first), Some(selector), Some(host), Some(port)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            out.extend_from_slice(line);
            return;
        };
        let Some((&item_type, _display)) = first.split_first() else {
            out.extend_from_slice(line);
            return;
        };
        let port = std::str::from_utf8(port)
            .ok()
            .and_then(|p| p.trim().parse::<u16>().ok());
        let host = std::str::from_utf8(host)
            .ok()
            .map(str::trim)
            .filter(|h| !h.is_empty());
        let (Some(port), Some(host)) = (port, host) else {
            out.extend_from_slice(line);
            return;
        };
        if !is_gopher_item(item_type, selector) || port == 0 {
            out.extend_from_slice(line);
            return;
        }
        out.extend_from_slice(first);
        out.push(b'\t');
        out.extend_from_slice(gopher_url(host, port, item_type, selector).as_bytes());
        out.push(b'\t');
        out.extend_from_slice(self.proxy_host.as_bytes());
        out.push(b'\t');
        out.extend_from_slice(self.proxy_port.to_string().as_bytes());
        for extra in fields {
            out.push(b'\t');
            out.extend_from_slice(extra);
        }
        out.extend_from_slice(ending);
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

    fn rewrite(menu: &[u8], chunk: usize) -> Vec<u8> {
        let mut rw = MenuRewriter::new("proxy.local", 7070);
        let mut out = Vec::new();
        for piece in menu.chunks(chunk) {
            rw.feed(piece, &mut out);
        }
        rw.finish(&mut out);
        out
    }

    #[test]
    fn menus_point_back_through_the_proxy() {
        let menu = b"iWelcome\t\tnull.host\t1\r\n\
1Docs\t/docs\texample.org\t70\r\n\
0About\tabout.txt\texample.org\t7000\r\n\
7Search\t/search\tother.example\t70\t+\r\n\
3Error\terr\terror.host\t1\r\n\
8Telnet\t\tbbs.example\t23\r\n\
hWeb\tURL:https://example.org/\texample.org\t70\r\n\
hPage\t/page.html\texample.org\t70\r\n\
not a menu line\r\n\
1Bad port\t/x\texample.org\tseventy\r\n\
.\r\n";
        let want = b"iWelcome\t\tnull.host\t1\r\n\
1Docs\tgopher://example.org/1/docs\tproxy.local\t7070\r\n\
0About\tgopher://example.org:7000/0about.txt\tproxy.local\t7070\r\n\
7Search\tgopher://other.example/7/search\tproxy.local\t7070\t+\r\n\
3Error\terr\terror.host\t1\r\n\
8Telnet\t\tbbs.example\t23\r\n\
hWeb\tURL:https://example.org/\texample.org\t70\r\n\
hPage\tgopher://example.org/h/page.html\tproxy.local\t7070\r\n\
not a menu line\r\n\
1Bad port\t/x\texample.org\tseventy\r\n\
.\r\n";
        for chunk in [1, 3, 7, 64, 4096] {
            assert_eq!(
                String::from_utf8_lossy(&rewrite(menu, chunk)),
                String::from_utf8_lossy(want),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn line_ends_are_kept_and_a_last_unterminated_line_is_rewritten() {
        assert_eq!(
            rewrite(b"1A\t/a\th\t70\n1B\t/b\th\t70", 5),
            b"1A\tgopher://h/1/a\tproxy.local\t7070\n1B\tgopher://h/1/b\tproxy.local\t7070"
        );
    }

    #[test]
    fn overlong_lines_pass_through() {
        let mut menu = vec![b'i'; MAX_MENU_LINE + 10];
        menu.extend_from_slice(b"\t/x\th\t70\r\n1A\t/a\th\t70\r\n");
        let out = rewrite(&menu, 1000);
        assert!(out.starts_with(&menu[..MAX_MENU_LINE]));
        assert!(out.ends_with(b"1A\tgopher://h/1/a\tproxy.local\t7070\r\n"));
    }
}
