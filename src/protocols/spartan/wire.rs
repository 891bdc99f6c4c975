//! Spartan on the wire (spartan://, plain TCP, port 300): the request line
//! `host SP path SP content-length CRLF` and the data block that follows it,
//! the status line `<digit> SP meta CRLF` (2 success, 3 redirect, 4 client
//! error, 5 server error), and what a URL's query becomes (the data block).

use thiserror::Error;

use crate::robots::encoding::percent_decode;
use crate::target::{canonical_host, Resource, Scheme, Target, TargetError};

/// A request line longer than this is refused: a host, a path and a number.
pub const MAX_REQUEST: usize = 2048;

/// A status line is one digit, a space and a meta of at most 1024 bytes.
pub const MAX_HEADER: usize = 2 + 1024;

pub use crate::protocol::MAX_UPLOAD;

/// What follows a request's line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    /// Nothing: `content-length` 0.
    None,
    /// A URL's query, percent-decoded: the data block of a prompt's answer.
    Inline(Vec<u8>),
    /// This many bytes, which the client sends after its line.
    Follows(u64),
}

/// A Spartan request: the target (its query, if a URL had one, is part of
/// the path the rules see) and its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub target: Target,
    pub data: Data,
    /// The target came from a URL, whose query is the data block (not sent
    /// in the line); a request line's `?` is part of its path.
    pub query_is_data: bool,
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum BadRequest {
    #[error("a Spartan request is `host SP /path SP content-length`")]
    Shape,
    #[error("the path must start with /")]
    PathNotAbsolute,
    #[error("content-length {0:?} is not a number")]
    Length(String),
    #[error("the request announces {0} bytes of data; at most {MAX_UPLOAD} are relayed")]
    TooLarge(u64),
    #[error("the request line is not ASCII")]
    NotAscii,
    #[error("{0}")]
    Target(#[from] TargetError),
}

impl Request {
    /// A request for a `spartan://` URL: its query, percent-decoded, is the data.
    pub fn from_url(target: Target) -> Result<Request, BadRequest> {
        let query = match &target.resource {
            Resource::Path(p) => p.split_once('?').map(|(_, q)| q),
            _ => None,
        };
        let data = match query {
            Some(q) => Data::Inline(percent_decode(q.as_bytes())),
            None => Data::None,
        };
        if let Data::Inline(d) = &data {
            if d.len() as u64 > MAX_UPLOAD {
                return Err(BadRequest::TooLarge(d.len() as u64));
            }
        }
        Ok(Request {
            target,
            data,
            query_is_data: true,
        })
    }

    /// Whether it sends data: an upload.
    pub fn uploads(&self) -> bool {
        match &self.data {
            Data::None => false,
            Data::Inline(d) => !d.is_empty(),
            Data::Follows(n) => *n > 0,
        }
    }

    /// The bytes the data block holds.
    pub fn data_len(&self) -> u64 {
        match &self.data {
            Data::None => 0,
            Data::Inline(d) => d.len() as u64,
            Data::Follows(n) => *n,
        }
    }

    /// What is sent upstream first: the line for the canonical target, then
    /// an inline data block (data that follows comes from the client).
    pub fn upstream_head(&self) -> Vec<u8> {
        let path = match &self.target.resource {
            Resource::Path(p) if self.query_is_data => {
                p.split_once('?').map_or(p.as_str(), |(p, _)| p)
            }
            Resource::Path(p) => p.as_str(),
            _ => "/",
        };
        // The host without brackets or port, as the spec asks.
        let host = self
            .target
            .host
            .trim_start_matches('[')
            .trim_end_matches(']');
        let mut head = format!("{host} {path} {}\r\n", self.data_len()).into_bytes();
        if let Data::Inline(d) = &self.data {
            head.extend_from_slice(d);
        }
        head
    }
}

/// Does `line` read as a Spartan request line (`host SP /path SP digits`)?
/// A Gopher selector has this shape only by design, never by chance.
pub fn looks_like_spartan(line: &[u8]) -> bool {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(host), Some(path), Some(len), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !host.is_empty()
        && !host.contains(&b'/')
        && path.first() == Some(&b'/')
        && (1..=20).contains(&len.len())
        && len.iter().all(u8::is_ascii_digit)
}

/// Parses a request line a client sent a Spartan server through the proxy
/// (SOCKS5, transparent mode): the host it names (canonical), the target on
/// `port`, and how much data follows.
pub fn parse_request_line(port: u16, line: &[u8]) -> Result<Request, BadRequest> {
    if !line.is_ascii() {
        return Err(BadRequest::NotAscii);
    }
    let text = std::str::from_utf8(line).map_err(|_| BadRequest::NotAscii)?;
    let mut parts = text.split(' ');
    let (Some(host), Some(path), Some(len), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(BadRequest::Shape);
    };
    if !path.starts_with('/') {
        return Err(BadRequest::PathNotAbsolute);
    }
    if len.is_empty() || len.len() > 20 || !len.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BadRequest::Length(len.chars().take(24).collect()));
    }
    let len: u64 = len
        .parse()
        .map_err(|_| BadRequest::Length(len.chars().take(24).collect()))?;
    if len > MAX_UPLOAD {
        return Err(BadRequest::TooLarge(len));
    }
    let host = canonical_host(host)?;
    // The line's path is a path: a `?` in it is no query (the data block is).
    let target = Target::with_path(Scheme::Spartan, host, port, path)?;
    let data = match len {
        0 => Data::None,
        n => Data::Follows(n),
    };
    Ok(Request {
        target,
        data,
        query_is_data: false,
    })
}

/// A Spartan status line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// 2 success, 3 redirect, 4 client error, 5 server error.
    pub status: u8,
    pub meta: String,
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("malformed Spartan status line: {0}")]
pub struct HeaderError(pub &'static str);

/// Parses `<digit> SP meta` (2 to 5).
pub fn parse_header(line: &[u8]) -> Result<Header, HeaderError> {
    let (status, rest) = match line {
        [d, rest @ ..] if (b'2'..=b'5').contains(d) => (d - b'0', rest),
        _ => return Err(HeaderError("no status digit 2-5")),
    };
    let meta = crate::protocol::status_meta(rest).map_err(HeaderError)?;
    Ok(Header {
        status,
        meta: meta.to_string(),
    })
}

/// A status line the proxy writes: control characters become spaces, the
/// meta is cut at 1024 bytes.
pub fn header(status: u8, meta: &str) -> Vec<u8> {
    crate::protocol::status_line(status, meta)
}

/// A request this parser refused, as the proxy's answer names it.
impl From<BadRequest> for crate::refusal::Malformed {
    fn from(bad: BadRequest) -> Self {
        crate::refusal::Malformed::request("spartan", bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_parse_and_hostile_ones_do_not() {
        let r = parse_request_line(300, b"Example.ORG /a/../b%7e 0").unwrap();
        assert_eq!(r.target.url(), "spartan://example.org/b~");
        assert_eq!(r.data, Data::None);
        assert!(!r.uploads());
        assert_eq!(r.upstream_head(), b"example.org /b~ 0\r\n");
        let r = parse_request_line(3000, b"127.1 /guestbook 12").unwrap();
        assert_eq!(r.target.url(), "spartan://127.0.0.1:3000/guestbook");
        assert_eq!(r.data, Data::Follows(12));
        assert!(r.uploads());
        // A `?` in a line's path is sent as it came.
        let r = parse_request_line(300, b"h /a?b 0").unwrap();
        assert_eq!(r.upstream_head(), b"h /a?b 0\r\n");
        for bad in [
            &b"example.org /a"[..],
            b"example.org a 0",
            b"example.org /a 0 extra",
            b"example.org /a -1",
            b"example.org /a 0x10",
            b"example.org /a 99999999999999999999999",
            b"example.org /a 1e3",
            b"exa mple.org /a 0",
            b"ex\xffample /a 0",
            b"",
        ] {
            assert!(
                parse_request_line(300, bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            parse_request_line(300, b"h /a 17000000"),
            Err(BadRequest::TooLarge(17_000_000))
        );
    }

    #[test]
    fn a_urls_query_is_its_data() {
        let t = Target::parse("spartan://example.org/search?hello%20world").unwrap();
        let r = Request::from_url(t).unwrap();
        assert_eq!(r.data, Data::Inline(b"hello world".to_vec()));
        assert!(r.uploads());
        assert_eq!(r.upstream_head(), b"example.org /search 11\r\nhello world");
        let r = Request::from_url(Target::parse("spartan://[::1]:3000/").unwrap()).unwrap();
        assert_eq!(r.upstream_head(), b"::1 / 0\r\n");
        let empty = Request::from_url(Target::parse("spartan://h/x?").unwrap()).unwrap();
        assert!(!empty.uploads());
    }

    #[test]
    fn spartan_lines_are_told_from_selectors() {
        assert!(looks_like_spartan(b"example.org /private 0"));
        assert!(looks_like_spartan(b"127.0.0.1 / 12"));
        assert!(!looks_like_spartan(b"/private"));
        assert!(!looks_like_spartan(b"0/private file 0"));
        assert!(!looks_like_spartan(b"example.org /a b"));
        assert!(!looks_like_spartan(b"GET / HTTP/1.1"));
        assert!(!looks_like_spartan(b"example.org /a 0 0"));
    }

    #[test]
    fn status_lines() {
        assert_eq!(
            parse_header(b"2 text/gemini").unwrap(),
            Header {
                status: 2,
                meta: "text/gemini".into()
            }
        );
        assert_eq!(parse_header(b"3 /new").unwrap().status, 3);
        assert_eq!(parse_header(b"5").unwrap().meta, "");
        for bad in [
            &b"1 x"[..],
            b"6 x",
            b"20 text/gemini",
            b"2\x1b[2J",
            b"",
            b"2 a\x00b",
        ] {
            assert!(parse_header(bad).is_err(), "{bad:?}");
        }
        assert_eq!(header(4, "no\r\nway"), b"4 no  way\r\n");
    }
}
