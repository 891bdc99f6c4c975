//! An HTML answer's head, read before any of it is relayed to a bot that
//! declares uses, so that the page's own meta tags (`robots::page`) refuse
//! as the answer's fields do. At most [`MAX_HEAD`] bytes of the page
//! (decoded), less when its head ends sooner; each frame within
//! `limits.idle_timeout`, as when relayed; at most [`MAX_READ`] bytes as
//! sent. The frames read are relayed unchanged, before the rest.
//!
//! A page the proxy cannot read is not relayed to such a bot: a coding other
//! than gzip or deflate (so a bot that declares uses asks only for those:
//! [`readable_codings`]), or a compressed head that does not decode. Bots
//! that declare no use are not touched: their answers stream as they come.

use std::collections::VecDeque;
use std::io::Write;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::{Body as _, Bytes, Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};

/// The most bytes of a page (decoded) read for its head: a page whose head
/// is longer is decided on this much of it.
pub const MAX_HEAD: usize = 64 * 1024;

/// The most bytes of a page read as the server sent them (a compressed head
/// that yields little).
pub const MAX_READ: usize = 256 * 1024;

/// The content codings the proxy reads a page's head through.
const READABLE: [&str; 4] = ["gzip", "x-gzip", "deflate", "identity"];

/// Whether an answer with these fields is a page whose head is read: HTML
/// or XHTML by its `Content-Type`, or no `Content-Type` at all (a client
/// would sniff it).
pub fn is_page(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return true;
    };
    let essence = value.as_bytes().split(|&b| b == b';').next().unwrap_or(b"");
    let essence = essence.trim_ascii();
    essence.eq_ignore_ascii_case(b"text/html")
        || essence.eq_ignore_ascii_case(b"application/xhtml+xml")
}

/// How a page was coded (`Content-Encoding`), if the proxy can read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Identity,
    Gzip,
    Deflate,
}

impl Coding {
    /// The answer's coding; `Err` names one the proxy cannot read (one it
    /// does not know, or several).
    pub fn of(headers: &HeaderMap) -> Result<Coding, String> {
        let mut codings = headers
            .get_all(header::CONTENT_ENCODING)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(|c| String::from_utf8_lossy(c.trim_ascii()).to_ascii_lowercase())
            .filter(|c| !c.is_empty() && c != "identity");
        let coding = match codings.next().as_deref() {
            None => Coding::Identity,
            Some("gzip" | "x-gzip") => Coding::Gzip,
            Some("deflate") => Coding::Deflate,
            Some(other) => return Err(other.chars().take(40).collect()),
        };
        match codings.next() {
            None => Ok(coding),
            Some(_) => Err("several codings".into()),
        }
    }
}

/// A request's `Accept-Encoding` cut to the codings a page's head can be
/// read through (for a bot that declares uses): `br, gzip;q=0.8, *` asks for
/// `gzip;q=0.8`; nothing left asks for `identity`. A request without the
/// field is left so (it takes what the server sends: see [`Coding::of`]).
pub fn readable_codings(headers: &mut HeaderMap) {
    let asked: Vec<HeaderValue> = headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .cloned()
        .collect();
    if asked.is_empty() {
        return;
    }
    let kept: Vec<String> = asked
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|item| String::from_utf8_lossy(item.trim_ascii()).into_owned())
        .filter(|item| {
            let coding = item.split(';').next().unwrap_or("").trim();
            READABLE.iter().any(|r| coding.eq_ignore_ascii_case(r))
        })
        .collect();
    let value = match kept.is_empty() {
        true => HeaderValue::from_static("identity"),
        false => HeaderValue::from_str(&kept.join(", "))
            .unwrap_or_else(|_| HeaderValue::from_static("identity")),
    };
    headers.insert(header::ACCEPT_ENCODING, value);
}

/// The head of a page: the frames read (relayed first, as they came) and
/// the page's text they hold, decoded.
#[derive(Debug, Default)]
pub struct Head {
    pub frames: VecDeque<Frame<Bytes>>,
    pub html: Vec<u8>,
}

/// Reads `body`'s head (see the module), each frame within `idle`. `Err`
/// says why it could not be read; the answer is then not relayed.
pub async fn read(body: &mut Incoming, coding: Coding, idle: Duration) -> Result<Head, String> {
    let mut head = Head::default();
    let mut decoder = Decoder::new(coding);
    let mut read = 0;
    // The head is looked for when the page has grown past each power of two
    // (and at its end): linear in the page however it is cut into frames.
    let mut look_at = 512;
    loop {
        if body.is_end_stream() {
            // The whole page: a compressed one must be whole too.
            decoder.finish(&mut head.html)?;
            break;
        }
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => return Err(format!("the page's head did not come within {idle:?}")),
            Ok(None) => {
                decoder.finish(&mut head.html)?;
                break;
            }
            Ok(Some(Err(e))) => return Err(format!("the page failed in its head ({e})")),
            Ok(Some(Ok(frame))) => frame,
        };
        if let Some(data) = frame.data_ref() {
            read += data.len();
            decoder.feed(data, &mut head.html)?;
        }
        head.frames.push_back(frame);
        let full = head.html.len() >= MAX_HEAD || read >= MAX_READ || decoder.done;
        if full {
            break;
        }
        if head.html.len() >= look_at {
            look_at = look_at.saturating_mul(2);
            if crate::robots::page::scan(&head.html, |_| false).ended {
                break;
            }
        }
    }
    head.html.truncate(MAX_HEAD);
    Ok(head)
}

/// What a page's head says to the bot whose product token is `token` and
/// who declares `uses`: the frames read (to be relayed first), and the use
/// its meta tags refuse, if any; `Err` says why it could not be read.
pub async fn refused(
    body: &mut Incoming,
    headers: &HeaderMap,
    idle: Duration,
    (token, uses): (&str, &[crate::robots::Use]),
) -> Result<
    (
        VecDeque<Frame<Bytes>>,
        Option<crate::robots::response::Refused>,
    ),
    String,
> {
    let coding = Coding::of(headers)
        .map_err(|c| format!("the page is in a coding the proxy cannot read its head in ({c})"))?;
    let head = read(body, coding, idle).await?;
    let mut stated = crate::robots::response::ResponsePreferences::default();
    stated.page(&head.html, token);
    Ok((head.frames, stated.refused(uses)))
}

/// A page's bytes as sent, decoded into its text, at most [`MAX_HEAD`].
struct Decoder {
    inner: Inner,
    /// The decoded text has reached the cap: the rest is not decoded.
    done: bool,
}

enum Inner {
    Identity,
    Gzip(flate2::write::GzDecoder<Capped>),
    /// zlib, as RFC 9110's `deflate` is; with the bytes so far, to be read
    /// again as raw deflate if they are not zlib (servers send both).
    Zlib(flate2::write::ZlibDecoder<Capped>, Vec<u8>),
    Raw(flate2::write::DeflateDecoder<Capped>),
}

impl Decoder {
    fn new(coding: Coding) -> Decoder {
        let inner = match coding {
            Coding::Identity => Inner::Identity,
            Coding::Gzip => Inner::Gzip(flate2::write::GzDecoder::new(Capped::default())),
            Coding::Deflate => Inner::Zlib(
                flate2::write::ZlibDecoder::new(Capped::default()),
                Vec::new(),
            ),
        };
        Decoder { inner, done: false }
    }

    /// Decodes `data` onto `html`.
    fn feed(&mut self, data: &[u8], html: &mut Vec<u8>) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        let written = match &mut self.inner {
            Inner::Identity => {
                html.extend_from_slice(
                    &data[..data.len().min(MAX_HEAD - html.len().min(MAX_HEAD))],
                );
                self.done = html.len() >= MAX_HEAD;
                return Ok(());
            }
            Inner::Gzip(d) => d.write_all(data).and_then(|()| d.flush()),
            Inner::Zlib(d, seen) => {
                let first = d.get_ref().1 == 0;
                if first {
                    seen.extend_from_slice(data);
                }
                match d.write_all(data).and_then(|()| d.flush()) {
                    // Not zlib: raw deflate, from the start.
                    Err(e) if !Capped::is_full(&e) && first => {
                        let mut raw = flate2::write::DeflateDecoder::new(Capped::default());
                        let again = raw.write_all(seen).and_then(|()| raw.flush());
                        self.inner = Inner::Raw(raw);
                        again
                    }
                    other => {
                        if d.get_ref().1 > 0 {
                            *seen = Vec::new();
                        }
                        other
                    }
                }
            }
            Inner::Raw(d) => d.write_all(data).and_then(|()| d.flush()),
        };
        self.settle(written, html)
    }

    /// The page has ended: what is left decoded, and a compressed page
    /// checked whole (a cut or broken stream is no page).
    fn finish(&mut self, html: &mut Vec<u8>) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        let finished = match &mut self.inner {
            Inner::Identity => return Ok(()),
            Inner::Gzip(d) => d.try_finish(),
            Inner::Zlib(d, _) => d.try_finish(),
            Inner::Raw(d) => d.try_finish(),
        };
        self.settle(finished, html)
    }

    /// What the decoder wrote moved onto `html`; its error said.
    fn settle(&mut self, written: std::io::Result<()>, html: &mut Vec<u8>) -> Result<(), String> {
        let out = match &mut self.inner {
            Inner::Identity => return Ok(()),
            Inner::Gzip(d) => &mut d.get_mut().0,
            Inner::Zlib(d, _) => &mut d.get_mut().0,
            Inner::Raw(d) => &mut d.get_mut().0,
        };
        html.append(out);
        match written {
            Ok(()) => Ok(()),
            Err(e) if Capped::is_full(&e) => {
                self.done = true;
                Ok(())
            }
            Err(e) => Err(format!("the page's head does not decode ({e})")),
        }
    }
}

/// Where decoded text goes, refusing past [`MAX_HEAD`] in all: the decoder
/// stops there (a small body that inflates to gigabytes is not inflated).
#[derive(Default)]
struct Capped(Vec<u8>, usize);

impl Capped {
    const FULL: &'static str = "the page's head is read";

    fn is_full(e: &std::io::Error) -> bool {
        e.get_ref()
            .is_some_and(|inner| inner.to_string() == Capped::FULL)
    }
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = MAX_HEAD.saturating_sub(self.1);
        if room == 0 {
            return Err(std::io::Error::other(Capped::FULL));
        }
        let n = buf.len().min(room);
        self.0.extend_from_slice(&buf[..n]);
        self.1 += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(fields: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in fields {
            h.append(*n, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn pages_are_html_or_untyped() {
        for (ct, page) in [
            (Some("text/html"), true),
            (Some("TEXT/HTML; charset=utf-8"), true),
            (Some(" application/xhtml+xml "), true),
            (None, true),
            (Some("text/plain"), false),
            (Some("image/png"), false),
            (Some("text/htmlx"), false),
        ] {
            let h = ct.map_or_else(HeaderMap::new, |ct| headers(&[("content-type", ct)]));
            assert_eq!(is_page(&h), page, "{ct:?}");
        }
    }

    #[test]
    fn only_readable_codings_are_asked_for() {
        for (asked, sent) in [
            ("br, gzip;q=0.8, *", Some("gzip;q=0.8")),
            ("gzip, deflate, br, zstd", Some("gzip, deflate")),
            ("br", Some("identity")),
            ("*", Some("identity")),
            ("identity", Some("identity")),
        ] {
            let mut h = headers(&[("accept-encoding", asked)]);
            readable_codings(&mut h);
            let got = h.get(header::ACCEPT_ENCODING).map(|v| v.to_str().unwrap());
            assert_eq!(got, sent, "{asked}");
        }
        let mut none = HeaderMap::new();
        readable_codings(&mut none);
        assert!(none.is_empty());
        assert_eq!(
            Coding::of(&headers(&[("content-encoding", "GZIP")])),
            Ok(Coding::Gzip)
        );
        assert!(Coding::of(&headers(&[("content-encoding", "br")])).is_err());
        assert!(Coding::of(&headers(&[("content-encoding", "gzip, gzip")])).is_err());
        assert_eq!(Coding::of(&HeaderMap::new()), Ok(Coding::Identity));
    }

    fn decoded(coding: Coding, chunks: &[&[u8]]) -> Result<Vec<u8>, String> {
        let mut d = Decoder::new(coding);
        let mut html = Vec::new();
        for c in chunks {
            d.feed(c, &mut html)?;
        }
        d.finish(&mut html)?;
        Ok(html)
    }

    #[test]
    fn compressed_heads_are_decoded_and_bounded() {
        let page = b"<head><meta name=robots content=noai></head>".repeat(3);
        let gz = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&page).unwrap();
            e.finish().unwrap()
        };
        let zlib = {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&page).unwrap();
            e.finish().unwrap()
        };
        let raw = {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&page).unwrap();
            e.finish().unwrap()
        };
        for (coding, bytes) in [
            (Coding::Gzip, gz),
            (Coding::Deflate, zlib),
            (Coding::Deflate, raw),
        ] {
            // Whole, and a byte at a time.
            assert_eq!(decoded(coding, &[&bytes]).unwrap(), page, "{coding:?}");
            let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(
                decoded(coding, &bytewise).unwrap(),
                page,
                "{coding:?} bytewise"
            );
        }
        // A bomb: 100 MB of zeros in a small body stops at the cap.
        let bomb = {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
            for _ in 0..100 {
                e.write_all(&[0u8; 1 << 20]).unwrap();
            }
            e.finish().unwrap()
        };
        assert!(bomb.len() < MAX_READ);
        assert_eq!(decoded(Coding::Gzip, &[&bomb]).unwrap().len(), MAX_HEAD);
        assert!(decoded(Coding::Gzip, &[b"not gzip at all"]).is_err());
        assert!(decoded(Coding::Gzip, &[b"not gzip"]).is_err(), "too short");
        assert!(decoded(Coding::Deflate, &[b"\xff\xff\xff"]).is_err());
        assert_eq!(
            decoded(Coding::Identity, &[&[b'x'; 100_000]])
                .unwrap()
                .len(),
            MAX_HEAD
        );
    }
}
