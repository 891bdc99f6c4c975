//! Gopher menus as they stream through the proxy: cut into lines whatever
//! the chunks ([`MenuLines`]), each line read as an item ([`item`]), and
//! written out again by a [`MenuLine`]: rewritten to point back through the
//! Gopher listener ([`MenuRewriter`]), or rendered as `text/gemini` for the
//! Gemini listener (`crate::gateway::gemtext`).

use crate::proxy::Transform;
use crate::target::gopher_url;

/// The longest menu line held while waiting for its end. A longer line is
/// passed through as it streams when the writer says so (text only), else
/// dropped, and the writer says so in its place.
pub const MAX_MENU_LINE: usize = 64 * 1024;

/// One menu line with at least one tab, its fields as the menu gave them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item<'a> {
    /// `None`: the line starts with its tab.
    pub item_type: Option<u8>,
    pub display: &'a [u8],
    pub selector: &'a [u8],
    /// Trimmed, non-empty, without spaces.
    pub host: Option<&'a str>,
    /// A number from 1 to 65535.
    pub port: Option<u16>,
    /// The fields after the port, each with its tab (a Gopher+ `+`).
    pub rest: &'a [u8],
}

/// A menu line (without its end) as an item; `None` for a line without a
/// tab (text, or the terminating `.`).
pub fn item(line: &[u8]) -> Option<Item<'_>> {
    let mut tabs = memchr::memchr_iter(b'\t', line);
    let first_tab = tabs.next()?;
    // Where each field after the first ends: the next tab, or the line's end.
    let ends: [Option<usize>; 3] = [tabs.next(), tabs.next(), tabs.next()];
    let field = |i: usize| {
        let start = if i == 0 { first_tab } else { ends[i - 1]? } + 1;
        Some(&line[start..ends[i].unwrap_or(line.len())])
    };
    let first = &line[..first_tab];
    Some(Item {
        item_type: first.first().copied(),
        display: first.get(1..).unwrap_or_default(),
        selector: field(0).unwrap_or_default(),
        host: field(1)
            .and_then(|h| std::str::from_utf8(h).ok())
            .map(str::trim)
            .filter(|h| !h.is_empty() && !h.contains(' ')),
        port: field(2)
            .and_then(|p| std::str::from_utf8(p).ok())
            .and_then(|p| p.trim().parse::<u16>().ok())
            .filter(|p| *p != 0),
        rest: ends[2].map_or(&[][..], |at| &line[at..]),
    })
}

/// Item types whose selector and host are not fetched over Gopher:
/// information, error, telnet, tn3270, CSO (a different protocol), and `h`
/// items with a `URL:` selector (the web).
pub fn is_gopher_item(item_type: u8, selector: &[u8]) -> bool {
    match item_type {
        b'i' | b'3' | b'8' | b'T' | b'2' => false,
        b'h' => !selector.starts_with(b"URL:"),
        _ => true,
    }
}

/// How one kind of output writes a menu's lines.
pub trait MenuLine {
    /// Whether an over-long line starting with `first` passes through as
    /// it streams, bytes unchanged (else it is dropped).
    fn passes_overlong(&self, first: Option<u8>) -> bool;
    /// One whole line, without its end; `ending` is the end to write (CR
    /// LF, or nothing for a last line that had none).
    fn line(&mut self, body: &[u8], out: &mut Vec<u8>, ending: &[u8]);
    /// In place of an over-long line that was dropped.
    fn dropped(&mut self, out: &mut Vec<u8>, ending: &[u8]);
}

/// What happens to the line being read when it is longer than [`MAX_MENU_LINE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overlong {
    Pass,
    Drop,
}

/// A menu cut into lines as it streams through, each written by `H`. Lines
/// end at CR LF, LF or a CR alone. The output does not depend on how the
/// input is cut into chunks.
pub struct MenuLines<H> {
    writer: H,
    /// What the last [`Transform`] call wrote.
    out: Vec<u8>,
    partial: Vec<u8>,
    /// The line being read is over-long.
    overlong: Option<Overlong>,
    /// The last line ended in a CR: a LF right after it is part of that end.
    after_cr: bool,
}

impl<H: MenuLine> MenuLines<H> {
    pub fn with(writer: H) -> MenuLines<H> {
        MenuLines {
            writer,
            out: Vec::new(),
            partial: Vec::new(),
            overlong: None,
            after_cr: false,
        }
    }

    /// Writes the complete lines in `chunk` into `out`; keeps an unfinished one.
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

    /// The answer ended: a last line without its end is written too (and
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
            Some(Overlong::Drop) => self.writer.dropped(out, ending),
            None if self.partial.is_empty() => self.writer.line(piece, out, ending),
            None => {
                let mut whole = std::mem::take(&mut self.partial);
                whole.extend_from_slice(piece);
                self.writer.line(&whole, out, ending);
                // The buffer is kept for the next line.
                whole.clear();
                self.partial = whole;
            }
        }
    }

    fn overlong_verdict(&self, piece: &[u8]) -> Overlong {
        let first = self.partial.first().or(piece.first()).copied();
        if self.writer.passes_overlong(first) {
            Overlong::Pass
        } else {
            Overlong::Drop
        }
    }
}

/// The pump's [`Transform`]: each chunk's complete lines, written.
impl<H: MenuLine> Transform for MenuLines<H> {
    fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> &'a [u8] {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        MenuLines::feed(self, chunk, &mut out);
        self.out = out;
        &self.out
    }

    fn finish(&mut self) -> &[u8] {
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        MenuLines::finish(self, &mut out);
        self.out = out;
        &self.out
    }
}

/// Rewrites a menu for the Gopher listener's clients: every item that
/// points at a Gopher server gets the proxy's host and port and, as its
/// selector, the original item as a Gopher URL. Text (`i`, `3`), items of
/// other protocols (telnet, CSO, `h` with a `URL:` selector), the
/// terminating `.` and lines without a tab pass through. A Gopher item that
/// cannot be rewritten (no host, a bad or missing port, no type) becomes an
/// `i` line: nothing leads around the proxy. Lines are written with CR LF
/// (RFC 1436).
pub struct Rewrite {
    proxy_host: String,
    proxy_port: u16,
}

/// The Gopher listener's menus, rewritten as they stream ([`Rewrite`]).
pub type MenuRewriter = MenuLines<Rewrite>;

impl MenuLines<Rewrite> {
    pub fn new(proxy_host: &str, proxy_port: u16) -> MenuRewriter {
        MenuLines::with(Rewrite {
            proxy_host: proxy_host.to_string(),
            proxy_port,
        })
    }
}

impl Rewrite {
    /// An `i` line showing `text`, pointing nowhere but the proxy.
    fn info(&self, text: &[u8], out: &mut Vec<u8>) {
        out.push(b'i');
        out.extend_from_slice(text);
        out.extend_from_slice(b"\t\t");
        out.extend_from_slice(self.proxy_host.as_bytes());
        out.push(b'\t');
        out.extend_from_slice(self.proxy_port.to_string().as_bytes());
    }
}

impl MenuLine for Rewrite {
    /// Over-long text passes; an over-long item could not be rewritten
    /// without holding it whole.
    fn passes_overlong(&self, first: Option<u8>) -> bool {
        matches!(first, Some(b'i' | b'3'))
    }

    fn line(&mut self, body: &[u8], out: &mut Vec<u8>, ending: &[u8]) {
        let Some(it) = item(body) else {
            // No tab: text, or the terminating `.`.
            out.extend_from_slice(body);
            out.extend_from_slice(ending);
            return;
        };
        if it
            .item_type
            .is_some_and(|t| !is_gopher_item(t, it.selector))
        {
            out.extend_from_slice(body);
            out.extend_from_slice(ending);
            return;
        }
        let (Some(item_type), Some(host), Some(port)) = (it.item_type, it.host, it.port) else {
            // A Gopher item the proxy cannot send back through itself.
            self.info(it.display, out);
            out.extend_from_slice(ending);
            return;
        };
        out.push(item_type);
        out.extend_from_slice(it.display);
        out.push(b'\t');
        out.extend_from_slice(gopher_url(host, port, item_type, it.selector).as_bytes());
        out.push(b'\t');
        out.extend_from_slice(self.proxy_host.as_bytes());
        out.push(b'\t');
        out.extend_from_slice(self.proxy_port.to_string().as_bytes());
        out.extend_from_slice(it.rest);
        out.extend_from_slice(ending);
    }

    fn dropped(&mut self, out: &mut Vec<u8>, ending: &[u8]) {
        self.info(
            b"[an item longer than 64 KiB was dropped by the proxy]",
            out,
        );
        out.extend_from_slice(ending);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_keep_their_fields() {
        let it = item(b"7Search\t/s\t host \t 70 \t+\textra").unwrap();
        assert_eq!(it.item_type, Some(b'7'));
        assert_eq!(it.display, b"Search");
        assert_eq!(it.selector, b"/s");
        assert_eq!((it.host, it.port), (Some("host"), Some(70)));
        assert_eq!(it.rest, b"\t+\textra");
        let it = item(b"\t/x").unwrap();
        assert_eq!((it.item_type, it.host, it.port), (None, None, None));
        assert_eq!(it.rest, b"");
        assert_eq!(item(b"1A\t/a\th\t70").unwrap().rest, b"");
        assert_eq!(item(b"just text"), None);
        assert_eq!(item(b"1Bad\t/x\th\t0").unwrap().port, None);
        assert_eq!(item(b"1Bad\t/x\ta b\t70").unwrap().host, None);
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
