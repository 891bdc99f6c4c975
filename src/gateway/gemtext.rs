//! Other protocols' documents as a Gemini client reads them: the MIME type
//! of a Gopher item or a Nex path, and Gopher menus and Nex listings
//! rendered as `text/gemini` whose links keep their own scheme (so a client
//! that follows one asks the proxy again). Pure: no I/O.

use crate::protocols::gopher::menu::{item, MenuLine, MenuLines};
use crate::target::gopher_url;

/// The MIME type a file's name says, by its extension; `None` when it has
/// none the table knows.
pub fn mime_by_name(path: &[u8]) -> Option<&'static str> {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
    let dot = memchr::memrchr(b'.', name)?;
    let ext = std::str::from_utf8(&name[dot + 1..]).ok()?;
    let mime = match ext.to_ascii_lowercase().as_str() {
        "gmi" | "gemini" => "text/gemini",
        "txt" | "text" => "text/plain",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "wav" => "audio/wav",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        _ => return None,
    };
    Some(mime)
}

/// How a Gopher item reaches a Gemini client: its MIME type, `text/gemini`
/// for a menu (type 1, a type-7 search's results), which is rendered.
pub fn gopher_mime(item_type: u8, selector: &[u8]) -> &'static str {
    match item_type {
        b'1' | b'7' => "text/gemini",
        b'0' | b'3' | b'i' => "text/plain",
        b'h' => "text/html",
        b'g' => "image/gif",
        b'p' => "image/png",
        b'd' => "application/pdf",
        _ => mime_by_name(selector).unwrap_or("application/octet-stream"),
    }
}

/// Whether a Nex path is a directory (empty, or ending in `/`): its
/// listing is rendered as `text/gemini`.
pub fn nex_is_listing(path: &[u8]) -> bool {
    path.is_empty() || path.ends_with(b"/")
}

/// A Nex document's MIME type: a listing is `text/gemini`; a file is
/// typed by its extension, plain text when it has none.
pub fn nex_mime(path: &[u8]) -> &'static str {
    if nex_is_listing(path) {
        return "text/gemini";
    }
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
    match mime_by_name(path) {
        Some(mime) => mime,
        None if !name.contains(&b'.') => "text/plain",
        None => "application/octet-stream",
    }
}

/// Text as it may appear in a line of gemtext: UTF-8 (invalid bytes
/// replaced), control characters (escape sequences, a stray CR) made spaces.
fn clean(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .map(|c| if c.is_control() && c != '\t' { ' ' } else { c })
        .collect()
}

/// A line of plain text, which no gemtext reader takes for a link, a
/// heading, a list item, a quote or a preformatting toggle: such a line is
/// written after a space.
fn text_line(text: &[u8], out: &mut Vec<u8>) {
    let text = clean(text);
    let marked = ["=>", "=:", "```", "#", "* ", ">"]
        .iter()
        .any(|m| text.starts_with(m));
    if marked {
        out.push(b' ');
    }
    out.extend_from_slice(text.trim_end().as_bytes());
    out.push(b'\n');
}

/// `=> url label`: the URL percent-encodes whitespace and controls, C1
/// controls and Unicode spaces too (it ends at the first space, and a
/// reader may break a line at NEL or U+2028), the label is one clean line.
fn link_line(url: &str, label: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"=> ");
    for c in url.chars() {
        if c.is_whitespace() || c.is_control() {
            let mut utf8 = [0; 4];
            for b in c.encode_utf8(&mut utf8).bytes() {
                out.extend_from_slice(format!("%{b:02X}").as_bytes());
            }
        } else {
            let mut utf8 = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
    }
    let label = clean(label);
    let label = label.trim();
    if !label.is_empty() {
        out.push(b' ');
        out.extend_from_slice(label.as_bytes());
    }
    out.push(b'\n');
}

/// A Gopher menu as gemtext: `i` and `3` lines as text, each Gopher item
/// a `gopher://` link, `h` items with a `URL:` selector a link to that URL,
/// telnet items a `telnet://` link, an item with no usable host or port
/// text. Nothing after the terminating `.` is shown.
#[derive(Default)]
pub struct GopherMenu {
    ended: bool,
}

impl MenuLine for GopherMenu {
    fn passes_overlong(&self, _first: Option<u8>) -> bool {
        false
    }

    fn line(&mut self, body: &[u8], out: &mut Vec<u8>, _ending: &[u8]) {
        if self.ended {
            return;
        }
        let Some(it) = item(body) else {
            if body == b"." {
                self.ended = true;
            } else {
                text_line(body, out);
            }
            return;
        };
        let place = it.host.zip(it.port);
        match (it.item_type, place) {
            (Some(b'i' | b'3') | None, _) => text_line(it.display, out),
            (Some(b'h'), _) if it.selector.starts_with(b"URL:") => {
                link_line(&clean(&it.selector[4..]), it.display, out)
            }
            (Some(b'8' | b'T'), Some((host, port))) => {
                link_line(&format!("telnet://{host}:{port}"), it.display, out)
            }
            (Some(b'2' | b'8' | b'T'), _) => text_line(it.display, out),
            (Some(item_type), Some((host, port))) => link_line(
                &gopher_url(host, port, item_type, it.selector),
                it.display,
                out,
            ),
            (Some(_), None) => text_line(it.display, out),
        }
    }

    fn dropped(&mut self, out: &mut Vec<u8>, _ending: &[u8]) {
        if !self.ended {
            text_line(
                b"[an item longer than 64 KiB was dropped by the proxy]",
                out,
            );
        }
    }
}

/// A Nex listing as gemtext: its `=> ` lines are links already (a relative
/// one resolves against the `nex://` URL the client asked for), the other
/// lines are text.
#[derive(Default)]
pub struct NexListing;

impl MenuLine for NexListing {
    fn passes_overlong(&self, _first: Option<u8>) -> bool {
        false
    }

    fn line(&mut self, body: &[u8], out: &mut Vec<u8>, _ending: &[u8]) {
        match body.strip_prefix(b"=>") {
            Some(link) => {
                let link = clean(link);
                let link = link.trim_start();
                let (url, label) = link.split_once([' ', '\t']).unwrap_or((link, ""));
                link_line(url, label.as_bytes(), out);
            }
            None => text_line(body, out),
        }
    }

    fn dropped(&mut self, out: &mut Vec<u8>, _ending: &[u8]) {
        text_line(b"[a line longer than 64 KiB was dropped by the proxy]", out);
    }
}

/// A Gopher menu rendered as it streams.
pub fn gopher_menu() -> MenuLines<GopherMenu> {
    MenuLines::with(GopherMenu::default())
}

/// A Nex listing rendered as it streams (its lines cut as a menu's are).
pub fn nex_listing() -> MenuLines<NexListing> {
    MenuLines::with(NexListing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render<H: MenuLine>(mut lines: MenuLines<H>, input: &[u8], chunk: usize) -> String {
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            lines.feed(piece, &mut out);
        }
        lines.finish(&mut out);
        String::from_utf8(out).expect("gemtext is UTF-8")
    }

    #[test]
    fn a_link_never_carries_a_c1_control_or_a_unicode_line_break() {
        // Found by the `gemtext` fuzz target: a host with U+0094 in it.
        let menu = "0\t1\t0\u{94}0\t1\n1x\t/a\u{2028}b\u{85}\tex.org\t70\n".as_bytes();
        let out = render(gopher_menu(), menu, 4096);
        assert!(
            !out.chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{2028}'),
            "{out:?}"
        );
        assert!(
            out.contains("%C2%94") && out.contains("%E2%80%A8") && out.contains("%C2%85"),
            "{out:?}"
        );
    }

    #[test]
    fn a_menu_becomes_links_that_keep_their_scheme() {
        let menu = b"iWelcome to the hole\t\tnull.host\t1\r\n\
i=> not a link\t\tnull.host\t1\r\n\
i```\t\tnull.host\t1\r\n\
1Docs\t/docs\texample.org\t70\r\n\
0About us\tabout us.txt\texample.org\t7000\r\n\
7Search\t/search\tother.example\t70\t+\r\n\
3Error here\terr\terror.host\t1\r\n\
8BBS\t\tbbs.example\t23\r\n\
hWeb\tURL:https://example.org/a b\texample.org\t70\r\n\
1Bad port\t/x\texample.org\tseventy\r\n\
1\x1b[2JEscape\t/e\texample.org\t70\r\n\
.\r\n\
1After the end\t/x\texample.org\t70\r\n";
        let want = "Welcome to the hole\n \
=> not a link\n \
```\n\
=> gopher://example.org/1/docs Docs\n\
=> gopher://example.org:7000/0about%20us.txt About us\n\
=> gopher://other.example/7/search Search\n\
Error here\n\
=> telnet://bbs.example:23 BBS\n\
=> https://example.org/a%20b Web\n\
Bad port\n\
=> gopher://example.org/1/e [2JEscape\n";
        for chunk in [1, 5, 4096] {
            assert_eq!(render(gopher_menu(), menu, chunk), want, "chunk {chunk}");
        }
    }

    #[test]
    fn a_listing_keeps_its_links_and_its_text_stays_text() {
        let listing: &[u8] = b"# not a heading\n=> nex/ The nex directory\n=>info.txt\n\
plain text, \xc3\xa9\n* star\n\xff\n";
        let want = " # not a heading\n=> nex/ The nex directory\n=> info.txt\n\
plain text, é\n * star\n\u{fffd}\n";
        assert_eq!(render(nex_listing(), listing, 3), want);
    }

    #[test]
    fn types_by_item_and_by_name() {
        assert_eq!(gopher_mime(b'1', b"/"), "text/gemini");
        assert_eq!(gopher_mime(b'0', b"/x.png"), "text/plain");
        assert_eq!(gopher_mime(b'I', b"/cat.JPG"), "image/jpeg");
        assert_eq!(gopher_mime(b'9', b"/blob"), "application/octet-stream");
        assert_eq!(nex_mime(b""), "text/gemini");
        assert_eq!(nex_mime(b"/dir/"), "text/gemini");
        assert_eq!(nex_mime(b"/notes"), "text/plain");
        assert_eq!(nex_mime(b"/a.gmi"), "text/gemini");
        assert_eq!(nex_mime(b"/a.tar.xz"), "application/octet-stream");
        assert_eq!(nex_mime(b"/v1.2/readme"), "text/plain");
    }
}
