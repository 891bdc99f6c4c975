//! Gopher on the wire: the request a client sends the proxy (a Gopher URL as its
//! selector), the type-3 error menus the proxy answers with, and the rewriting
//! of menus so that every Gopher item points back through the proxy.

use thiserror::Error;

pub use crate::protocol::sniff::looks_like_http;
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

/// The longest menu line the rewriter holds while waiting for its end. A
/// longer `i` or `3` line (text only) is passed through as it streams; any
/// other longer line is dropped and an `i` line says so, since it could not be
/// rewritten without holding it whole.
pub const MAX_MENU_LINE: usize = 64 * 1024;

/// What happens to the line being read when it is longer than [`MAX_MENU_LINE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overlong {
    Pass,
    Drop,
}

/// Rewrites a menu as it streams through: every item that points at a Gopher
/// server gets the proxy's host and port and, as its selector, the original
/// item as a Gopher URL. Text (`i`, `3`), items of other protocols (telnet,
/// CSO, `h` with a `URL:` selector), the terminating `.` and lines without a
/// tab pass through. A Gopher item that cannot be rewritten (no host, a bad or
/// missing port, no type) becomes an `i` line: nothing leads around the proxy.
///
/// Lines end at CR LF, LF or a CR alone, and are written with CR LF (RFC
/// 1436). The output does not depend on how the input is cut into chunks.
pub struct MenuRewriter {
    proxy_host: String,
    proxy_port: u16,
    partial: Vec<u8>,
    /// The line being read is over-long.
    overlong: Option<Overlong>,
    /// The last line ended in a CR: a LF right after it is part of that end.
    after_cr: bool,
}

impl MenuRewriter {
    pub fn new(proxy_host: &str, proxy_port: u16) -> MenuRewriter {
        MenuRewriter {
            proxy_host: proxy_host.to_string(),
            proxy_port,
            partial: Vec::new(),
            overlong: None,
            after_cr: false,
        }
    }

    /// Rewrites the complete lines in `chunk` into `out`; keeps an unfinished one.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<u8>) {
        while let Some((&first, rest)) = chunk.split_first() {
            if std::mem::take(&mut self.after_cr) && first == b'\n' {
                chunk = rest;
                continue;
            }
            match memchr::memchr2(b'\r', b'\n', chunk) {
                Some(end) => {
                    self.after_cr = chunk[end] == b'\r';
                    self.end_line(&chunk[..end], out, b"\r\n");
                    chunk = &chunk[end + 1..];
                }
                None => {
                    self.continue_line(chunk, out);
                    return;
                }
            }
        }
    }

    /// The answer ended: a last line without its end is rewritten too (and
    /// given none).
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if !self.partial.is_empty() || self.overlong.is_some() {
            self.end_line(&[], out, b"");
        }
    }

    /// Part of a line whose end has not come yet.
    fn continue_line(&mut self, piece: &[u8], out: &mut Vec<u8>) {
        match self.overlong {
            Some(Overlong::Pass) => out.extend_from_slice(piece),
            Some(Overlong::Drop) => {}
            None if self.partial.len() + piece.len() > MAX_MENU_LINE => {
                let verdict = self.overlong_verdict(piece);
                if verdict == Overlong::Pass {
                    out.append(&mut self.partial);
                    out.extend_from_slice(piece);
                }
                self.partial.clear();
                self.overlong = Some(verdict);
            }
            None => self.partial.extend_from_slice(piece),
        }
    }

    /// The end of a line: `piece` is its last part, `ending` what to end it with.
    fn end_line(&mut self, piece: &[u8], out: &mut Vec<u8>, ending: &[u8]) {
        if self.overlong.is_none() && self.partial.len() + piece.len() > MAX_MENU_LINE {
            let verdict = self.overlong_verdict(piece);
            if verdict == Overlong::Pass {
                out.append(&mut self.partial);
            }
            self.partial.clear();
            self.overlong = Some(verdict);
        }
        match self.overlong.take() {
            Some(Overlong::Pass) => {
                out.extend_from_slice(piece);
                out.extend_from_slice(ending);
            }
            Some(Overlong::Drop) => {
                self.info(
                    b"[an item longer than 64 KiB was dropped by the proxy]",
                    out,
                );
                out.extend_from_slice(ending);
            }
            None if self.partial.is_empty() => self.line(piece, out, ending),
            None => {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(piece);
                self.line(&whole, out, ending);
            }
        }
    }

    /// An over-long line is passed through only when it is text.
    fn overlong_verdict(&self, piece: &[u8]) -> Overlong {
        match self.partial.first().or(piece.first()) {
            Some(b'i' | b'3') => Overlong::Pass,
            _ => Overlong::Drop,
        }
    }

    /// An `i` line showing `text`, pointing nowhere but the proxy.
    fn info(&self, text: &[u8], out: &mut Vec<u8>) {
        out.push(b'i');
        out.extend_from_slice(text);
        out.extend_from_slice(b"\t\t");
        out.extend_from_slice(self.proxy_host.as_bytes());
        out.push(b'\t');
        out.extend_from_slice(self.proxy_port.to_string().as_bytes());
    }

    /// One whole line, without its end.
    fn line(&self, body: &[u8], out: &mut Vec<u8>, ending: &[u8]) {
        let mut fields = body.split(|&b| b == b'\t');
        let first = fields.next().unwrap_or_default();
        let selector = fields.next();
        let Some(selector) = selector else {
            // No tab: text, or the terminating `.`.
            out.extend_from_slice(body);
            out.extend_from_slice(ending);
            return;
        };
        let item_type = first.first().copied();
        if item_type.is_some_and(|t| !is_gopher_item(t, selector)) {
            out.extend_from_slice(body);
            out.extend_from_slice(ending);
            return;
        }
        let host = fields
            .next()
            .and_then(|h| std::str::from_utf8(h).ok())
            .map(str::trim)
            .filter(|h| !h.is_empty() && !h.contains(' '));
        let port = fields
            .next()
            .and_then(|p| std::str::from_utf8(p).ok())
            .and_then(|p| p.trim().parse::<u16>().ok())
            .filter(|p| *p != 0);
        let (Some(item_type), Some(host), Some(port)) = (item_type, host, port) else {
            // A Gopher item the proxy cannot send back through itself.
            self.info(first.get(1..).unwrap_or_default(), out);
            out.extend_from_slice(ending);
            return;
        };
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
iBad port\t\tproxy.local\t7070\r\n\
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
    fn line_ends_become_crlf_and_a_last_unterminated_line_is_rewritten() {
        assert_eq!(
            rewrite(b"1A\t/a\th\t70\n1B\t/b\th\t70", 5),
            b"1A\tgopher://h/1/a\tproxy.local\t7070\r\n1B\tgopher://h/1/b\tproxy.local\t7070"
        );
        // A CR alone ends a line too, whatever the chunks.
        for chunk in [1, 2, 3, 100] {
            assert_eq!(
                rewrite(b"1A\t/a\th\t70\r1B\t/b\th\t70\r\r\n.\r", chunk),
                b"1A\tgopher://h/1/a\tproxy.local\t7070\r\n1B\tgopher://h/1/b\tproxy.local\t7070\r\n\r\n.\r\n",
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn items_that_cannot_be_rewritten_become_info_lines() {
        let menu = b"1Bad port\t/x\texample.org\tseventy\r\n\
1No port\t/x\texample.org\r\n\
1No host\t/x\r\n\
0Port zero\t/x\texample.org\t0\r\n\
0Port too big\t/x\texample.org\t70000\r\n\
1Empty host\t/x\t\t70\r\n\
\t/x\texample.org\t70\r\n";
        let want = b"iBad port\t\tproxy.local\t7070\r\n\
iNo port\t\tproxy.local\t7070\r\n\
iNo host\t\tproxy.local\t7070\r\n\
iPort zero\t\tproxy.local\t7070\r\n\
iPort too big\t\tproxy.local\t7070\r\n\
iEmpty host\t\tproxy.local\t7070\r\n\
i\t\tproxy.local\t7070\r\n";
        assert_eq!(
            String::from_utf8_lossy(&rewrite(menu, 4096)),
            String::from_utf8_lossy(want)
        );
    }

    #[test]
    fn overlong_items_are_dropped_and_overlong_text_passes() {
        let mut menu = b"1".to_vec();
        menu.extend(vec![b'x'; 200 * 1024]);
        menu.extend_from_slice(b"\t/x\texample.org\t70\r\n");
        let mut text = b"i".to_vec();
        text.extend(vec![b'y'; MAX_MENU_LINE + 10]);
        menu.extend_from_slice(&text);
        menu.extend_from_slice(b"\t\tnull.host\t1\r\n1A\t/a\th\t70\r\n");
        for chunk in [1000, 4096, 300 * 1024] {
            let out = rewrite(&menu, chunk);
            let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
            assert_eq!(
                lines[0],
                b"i[an item longer than 64 KiB was dropped by the proxy]\t\tproxy.local\t7070\r"
            );
            assert!(lines[1].starts_with(&text), "chunk {chunk}");
            assert_eq!(lines[2], b"1A\tgopher://h/1/a\tproxy.local\t7070\r");
            assert!(!out.windows(11).any(|w| w == b"example.org"));
        }
    }
}
