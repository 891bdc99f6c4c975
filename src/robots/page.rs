//! A page's own preferences: the `<meta>` tags in the head of an HTML
//! answer (`<meta name="robots" content="noai">`, a bot's own name for
//! `robots`, TDMRep's `<meta name="tdm-reservation" content="1">`), read from
//! a bounded prefix of the page. A scan as a browser's tokenizer reads tags,
//! as far as meta tags go: comments, doctypes and processing instructions
//! are skipped, `<script>`, `<style>`, `<title>`, `<textarea>` are raw text
//! (a `<meta` inside one is none), attribute values are quoted either way or
//! bare and their character references decoded; the head ends at `<body` or
//! `</head>`. What a prefix cuts short is read as far as it goes. Pure: no
//! I/O; linear in the prefix.

/// A `<meta>` tag whose `name` the reader asked for: its name (lower case,
/// trimmed) and its `content`, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    pub name: String,
    pub content: Vec<u8>,
}

/// What a scan of a page's prefix found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// The meta tags asked for, in the page's order.
    pub metas: Vec<Meta>,
    /// Whether the head ended within the prefix (`<body`, `</head>`): the
    /// rest of the page holds no head's meta tag.
    pub ended: bool,
}

/// Elements whose content is text up to their end tag, not markup.
const RAW_TEXT: [&[u8]; 4] = [b"script", b"style", b"title", b"textarea"];

/// Scans `html` (a page's prefix) for meta tags whose name `wanted` says
/// (given lower case, trimmed).
pub fn scan(html: &[u8], wanted: impl Fn(&str) -> bool) -> Head {
    let mut head = Head::default();
    let mut at = 0;
    while let Some(lt) = memchr::memchr(b'<', &html[at..]) {
        let tag = &html[at + lt..];
        at += lt + 1;
        if tag.starts_with(b"<!--") {
            // A comment: to `-->` (an unclosed one runs to the end).
            match memchr::memmem::find(&tag[4..], b"-->") {
                Some(end) => at += 3 + end + 3,
                None => break,
            }
        } else if tag.starts_with(b"<!") || tag.starts_with(b"<?") {
            match memchr::memchr(b'>', &tag[2..]) {
                Some(end) => at += 1 + end + 1,
                None => break,
            }
        } else if let Some(rest) = tag.strip_prefix(b"</") {
            let name = tag_name(rest);
            if name.eq_ignore_ascii_case(b"head") {
                head.ended = true;
                break;
            }
        } else if tag.get(1).is_some_and(u8::is_ascii_alphabetic) {
            let name = tag_name(&tag[1..]);
            let is_meta = name.eq_ignore_ascii_case(b"meta");
            let (attributes, len) = attributes(&tag[1 + name.len()..], is_meta);
            at += name.len() + len;
            if name.eq_ignore_ascii_case(b"body") {
                head.ended = true;
                break;
            }
            if is_meta {
                // Every one wanted, however many: the prefix bounds them (a
                // cap here would drop the one that refuses).
                if let Some(meta) = meta(&attributes, &wanted) {
                    head.metas.push(meta);
                }
            } else if let Some(raw) = RAW_TEXT.iter().find(|r| name.eq_ignore_ascii_case(r)) {
                match end_tag(&html[at..], raw) {
                    Some(end) => at += end,
                    None => break,
                }
            }
        }
    }
    head
}

/// A tag's name: up to whitespace, `/` or `>`.
fn tag_name(after_lt: &[u8]) -> &[u8] {
    let end = after_lt
        .iter()
        .position(|&b| b.is_ascii_whitespace() || b == b'/' || b == b'>')
        .unwrap_or(after_lt.len());
    &after_lt[..end]
}

/// A tag's attributes: each name (lower case) and value (decoded).
type Attributes = Vec<(Vec<u8>, Vec<u8>)>;

/// A start tag's attributes, up to its `>` (or the end of the prefix), and
/// how many bytes they took; kept (lower-cased, decoded) only when `keep`
/// (a meta tag: any other tag is only stepped over).
fn attributes(mut rest: &[u8], keep: bool) -> (Attributes, usize) {
    let start = rest.len();
    let mut found = Vec::new();
    loop {
        rest = trim_start(rest, |b| b.is_ascii_whitespace() || b == b'/');
        match rest.first() {
            None => break,
            Some(b'>') => {
                rest = &rest[1..];
                break;
            }
            Some(_) => {}
        }
        // An attribute name: up to whitespace, `/`, `>` or `=` (the first
        // character may be `=`, read as part of the name, as HTML does).
        let end = rest
            .iter()
            .skip(1)
            .position(|&b| b.is_ascii_whitespace() || b == b'/' || b == b'>' || b == b'=')
            .map_or(rest.len(), |p| p + 1);
        let name = &rest[..end];
        rest = trim_start(&rest[end..], |b| b.is_ascii_whitespace());
        let mut value = Vec::new();
        if let Some(after) = rest.strip_prefix(b"=") {
            rest = trim_start(after, |b| b.is_ascii_whitespace());
            let (raw, len) = match rest.first() {
                Some(&q @ (b'"' | b'\'')) => match memchr::memchr(q, &rest[1..]) {
                    Some(close) => (&rest[1..1 + close], close + 2),
                    None => (&rest[1..], rest.len()),
                },
                _ => {
                    let end = rest
                        .iter()
                        .position(|&b| b.is_ascii_whitespace() || b == b'>')
                        .unwrap_or(rest.len());
                    (&rest[..end], end)
                }
            };
            if keep {
                value = decode(raw);
            }
            rest = &rest[len..];
        }
        if keep {
            found.push((name.to_ascii_lowercase(), value));
        }
    }
    (found, start - rest.len())
}

fn trim_start(bytes: &[u8], skip: impl Fn(u8) -> bool) -> &[u8] {
    let n = bytes.iter().position(|&b| !skip(b)).unwrap_or(bytes.len());
    &bytes[n..]
}

/// A meta tag's name and content, if its name is wanted (the first of each
/// attribute counts, as in HTML).
fn meta(attributes: &[(Vec<u8>, Vec<u8>)], wanted: impl Fn(&str) -> bool) -> Option<Meta> {
    let first = |key: &[u8]| attributes.iter().find(|(n, _)| n == key).map(|(_, v)| v);
    let name = String::from_utf8_lossy(first(b"name")?.trim_ascii()).to_ascii_lowercase();
    if !wanted(&name) {
        return None;
    }
    Some(Meta {
        name,
        content: first(b"content")?.clone(),
    })
}

/// Where the end tag `</name` of a raw-text element ends (after its `>`), in
/// `after` (what follows its start tag).
fn end_tag(after: &[u8], name: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(lt) = memchr::memmem::find(&after[at..], b"</") {
        let start = at + lt + 2;
        let candidate = after.get(start..start + name.len())?;
        let next = after.get(start + name.len()).copied();
        at = start;
        if candidate.eq_ignore_ascii_case(name)
            && next.is_none_or(|b| b.is_ascii_whitespace() || b == b'/' || b == b'>')
        {
            return Some(memchr::memchr(b'>', &after[at..]).map_or(after.len(), |e| at + e + 1));
        }
    }
    None
}

/// An attribute value with its character references decoded: numeric
/// (`&#97;`, `&#x61;`) and the common named ones; anything else as written.
fn decode(raw: &[u8]) -> Vec<u8> {
    const NAMED: [(&[u8], char); 6] = [
        (b"amp", '&'),
        (b"quot", '"'),
        (b"apos", '\''),
        (b"lt", '<'),
        (b"gt", '>'),
        (b"nbsp", '\u{a0}'),
    ];
    if !raw.contains(&b'&') {
        return raw.to_vec();
    }
    let mut out = Vec::with_capacity(raw.len());
    let mut at = 0;
    while at < raw.len() {
        if raw[at] == b'&' {
            let rest = &raw[at + 1..];
            let end = rest.iter().take(10).position(|&b| b == b';');
            let decoded = end.and_then(|end| {
                let body = &rest[..end];
                let c = match body {
                    [b'#', b'x' | b'X', hex @ ..] => std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u32::from_str_radix(h, 16).ok())
                        .and_then(char::from_u32),
                    [b'#', dec @ ..] => std::str::from_utf8(dec)
                        .ok()
                        .and_then(|d| d.parse().ok())
                        .and_then(char::from_u32),
                    named => NAMED
                        .iter()
                        .find(|(n, _)| named.eq_ignore_ascii_case(n))
                        .map(|(_, c)| *c),
                };
                c.map(|c| (c, end + 2))
            });
            if let Some((c, len)) = decoded {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                at += len;
                continue;
            }
        }
        out.push(raw[at]);
        at += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn robots_metas(html: &str) -> Head {
        scan(html.as_bytes(), |n| n == "robots" || n == "tdm-reservation")
    }

    fn contents(head: &Head) -> Vec<(&str, &str)> {
        head.metas
            .iter()
            .map(|m| (m.name.as_str(), std::str::from_utf8(&m.content).unwrap()))
            .collect()
    }

    #[test]
    fn meta_tags_are_read_however_they_are_written() {
        let html = r#"<!doctype html><html><head>
            <meta charset=utf-8>
            <META NAME="Robots" CONTENT="noindex, noai">
            <meta content='1' name='tdm-reservation'/>
            <meta name=robots content=noimageai>
            <meta name="description" content="noai">
            <meta name = " ROBOTS " content = "no&#97;i, &amp;x">
            </head><body><meta name="robots" content="late">"#;
        let head = robots_metas(html);
        assert!(head.ended);
        assert_eq!(
            contents(&head),
            [
                ("robots", "noindex, noai"),
                ("tdm-reservation", "1"),
                ("robots", "noimageai"),
                ("robots", "noai, &x"),
            ]
        );
    }

    #[test]
    fn comments_scripts_and_text_hold_no_meta_tag() {
        let html = r#"<head><!-- <meta name="robots" content="a"> --><script>
            document.write('<meta name="robots" content="b"></scripts>');
            </script><style>/* <meta name="robots" content="c"> */</style>
            <title><meta name="robots" content="d"></title>
            <textarea><body></textarea>
            <meta name="robots" content="e"></head>"#;
        let head = robots_metas(html);
        assert_eq!(contents(&head), [("robots", "e")]);
        assert!(head.ended);
    }

    #[test]
    fn a_cut_prefix_is_read_as_far_as_it_goes() {
        for html in [
            "<meta name=robots content=noai",
            "<meta name=\"robots\" content=\"noai",
            "<head><meta name=robots content=noai><!-- never closed",
            "<head><meta name=robots content=noai><script>never closed",
        ] {
            let head = robots_metas(html);
            assert_eq!(contents(&head), [("robots", "noai")], "{html}");
            assert!(!head.ended, "{html}");
        }
        assert_eq!(robots_metas("<head><meta name=robots").metas, []);
    }

    #[test]
    fn hostile_pages_are_bounded() {
        let many = format!(
            "{}<meta name=robots content=noai>",
            "<meta name=robots content=x>".repeat(2_000)
        );
        let head = robots_metas(&many);
        assert_eq!(head.metas.len(), 2_001, "none dropped: the last one counts");
        // Junk, binary, unclosed everything: no panic, linear.
        let junk: Vec<u8> = (0..70_000u32).map(|i| (i * 7919 % 256) as u8).collect();
        let _ = scan(&junk, |_| true);
        for weird in [
            "<",
            "<!",
            "<!-",
            "</",
            "<a",
            "<a b=",
            "<a b='",
            "&#xFFFFFFFF;",
            "<meta name=robots content=&#1114112;>",
        ] {
            let _ = robots_metas(weird);
        }
        let refs = robots_metas("<meta name=robots content='&#1114112;&#x110000;&bogus;'>");
        assert_eq!(contents(&refs), [("robots", "&#1114112;&#x110000;&bogus;")]);
    }
}
