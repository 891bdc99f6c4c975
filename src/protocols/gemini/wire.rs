//! Gemini on the wire: the request line, the response header, and the headers the
//! proxy writes itself. Reading never waits forever and never buffers more than
//! one header: the buffer is the length limit (agate does the same).

use crate::protocol::MAX_UPLOAD;
use crate::target::{Scheme, Target, TargetError};
use thiserror::Error;

pub use crate::protocol::{read_line, LineError};

/// A request is an absolute URL of at most 1024 bytes, then CRLF.
pub const MAX_URL: usize = 1024;

/// A response header is `NN META` with META of at most 1024 bytes, then CRLF.
pub const MAX_HEADER: usize = 2 + 1 + 1024;

/// A Gemini response header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The two-digit status, 10 to 69.
    pub status: u8,
    pub meta: String,
}

impl Header {
    /// The status class: 1 input, 2 success, 3 redirect, 4 temporary failure,
    /// 5 permanent failure, 6 client certificate.
    pub fn class(&self) -> u8 {
        self.status / 10
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
#[error("malformed response header: {0}")]
pub struct HeaderError(pub &'static str);

/// Parses `NN META` (the space and META may be missing).
pub fn parse_header(line: &[u8]) -> Result<Header, HeaderError> {
    let (digits, rest) = match line {
        [a, b, rest @ ..] if a.is_ascii_digit() && b.is_ascii_digit() => {
            ((a - b'0') * 10 + (b - b'0'), rest)
        }
        _ => return Err(HeaderError("no two-digit status")),
    };
    if !(10..=69).contains(&digits) {
        return Err(HeaderError("status outside 10-69"));
    }
    let meta = crate::protocol::status_meta(rest).map_err(HeaderError)?;
    Ok(Header {
        status: digits,
        meta: meta.to_string(),
    })
}

/// Why a client's Gemini request line names no target (a `59`).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadRequest {
    #[error("the request is not UTF-8")]
    NotUtf8,
    #[error(
        "this proxy fetches gemini://, titan://, gopher://, spartan:// and nex:// URLs, not {0}://"
    )]
    OtherScheme(String),
    #[error("send an absolute gemini:// URL of the capsule to fetch")]
    NotAbsolute,
    #[error("{0}")]
    Target(TargetError),
    #[error("this listener fetches the small web's URLs (gemini, titan, gopher, spartan, nex), not {0}://")]
    NotGemini(&'static str),
    #[error("Gemini URLs carry no userinfo")]
    Userinfo,
    #[error("Gemini requests carry no fragment")]
    Fragment,
    /// Through a drop-in connection to a Gemini server: only its own URLs.
    #[error("a connection to a Gemini server takes gemini:// and titan:// URLs, not {0}://")]
    DropIn(&'static str),
    #[error("a titan:// URL gives the size of its data: ;size=N")]
    TitanSize,
    #[error("a titan:// upload of {0} bytes; at most {MAX_UPLOAD} are relayed")]
    TitanTooLarge(u64),
    #[error("titan:// parameter {0:?} is not key=value")]
    TitanParameter(String),
}

/// A client's request line (its line end removed) → the Gemini target it
/// names, or the reason for a `59`: UTF-8, an absolute `gemini://` URL, no
/// userinfo, no fragment, and whatever [`Target::parse`] requires.
pub fn parse_request(line: &[u8]) -> Result<Target, BadRequest> {
    let target = parse_url(line)?;
    if target.scheme != Scheme::Gemini {
        return Err(BadRequest::NotGemini(target.scheme.as_str()));
    }
    Ok(target)
}

/// A request line → the target of whatever scheme it names (the Gemini
/// listener takes other protocols' URLs too), or the reason for a `59`:
/// UTF-8, an absolute URL, no userinfo, no fragment.
pub fn parse_url(line: &[u8]) -> Result<Target, BadRequest> {
    let url = std::str::from_utf8(line).map_err(|_| BadRequest::NotUtf8)?;
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(TargetError::UnsupportedScheme(s)) => return Err(BadRequest::OtherScheme(s)),
        Err(TargetError::NotAbsolute) => return Err(BadRequest::NotAbsolute),
        Err(e) => return Err(BadRequest::Target(e)),
    };
    if target.had_userinfo {
        return Err(BadRequest::Userinfo);
    }
    if target.had_fragment {
        return Err(BadRequest::Fragment);
    }
    Ok(target)
}

/// A header the proxy writes: `NN META\r\n`, META cut to 1024 bytes on a character
/// boundary and stripped of control characters, so nothing upstream can inject a line.
pub fn header(status: u8, meta: &str) -> Vec<u8> {
    let clean = crate::protocol::one_line(meta, 1024);
    format!("{status:02} {clean}\r\n").into_bytes()
}

/// Statuses the proxy answers with itself.
pub mod status {
    /// Temporary failure; docs/architecture.md ("Answers") uses it for "upstream unreachable" and
    /// "robots.txt unreachable".
    pub const PROXY_ERROR: u8 = 43;
    /// Slow down, with a number of seconds.
    pub const SLOW_DOWN: u8 = 44;
    /// Refused: robots.txt disallows it, or the proxy's own rules do.
    pub const PROXY_REQUEST_REFUSED: u8 = 53;
    /// The request was malformed.
    pub const BAD_REQUEST: u8 = 59;
    /// A client certificate is required.
    pub const CERTIFICATE_REQUIRED: u8 = 60;
    /// The client certificate is not authorised.
    pub const CERTIFICATE_NOT_AUTHORISED: u8 = 61;
}

/// A request this parser refused, as the proxy's answer names it.
impl From<BadRequest> for crate::refusal::Malformed {
    fn from(bad: BadRequest) -> Self {
        crate::refusal::Malformed::request("gemini", bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn line(input: &[u8], max: usize) -> Result<Vec<u8>, LineError> {
        // A tiny buffer, so lines arrive in pieces as they do from a socket.
        let mut reader = tokio::io::BufReader::with_capacity(7, input);
        read_line(&mut reader, max, Duration::from_secs(1)).await
    }

    #[tokio::test]
    async fn what_follows_the_line_stays_readable() {
        use tokio::io::AsyncReadExt;
        let mut reader = tokio::io::BufReader::new(&b"20 text/plain\r\nbody bytes"[..]);
        assert_eq!(
            read_line(&mut reader, MAX_HEADER, Duration::from_secs(1)).await,
            Ok(b"20 text/plain".to_vec())
        );
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, b"body bytes");
    }

    #[tokio::test]
    async fn request_lines() {
        assert_eq!(
            line(b"gemini://a/\r\n", MAX_URL).await,
            Ok(b"gemini://a/".to_vec())
        );
        assert_eq!(
            line(b"gemini://a/\n", MAX_URL).await,
            Ok(b"gemini://a/".to_vec())
        );
        assert_eq!(
            line(b"gemini://a/\r\nextra", MAX_URL).await,
            Ok(b"gemini://a/".to_vec())
        );
        assert_eq!(line(b"gemini://a/", MAX_URL).await, Err(LineError::Closed));
        let exact = [b"gemini://x/".as_slice(), &[b'a'; MAX_URL - 11], b"\r\n"].concat();
        assert_eq!(line(&exact, MAX_URL).await.map(|l| l.len()), Ok(MAX_URL));
        let over = [b"gemini://x/".as_slice(), &[b'a'; MAX_URL - 10], b"\r\n"].concat();
        assert_eq!(line(&over, MAX_URL).await, Err(LineError::TooLong(MAX_URL)));
        let endless = vec![b'a'; 10_000];
        assert_eq!(
            line(&endless, MAX_URL).await,
            Err(LineError::TooLong(MAX_URL))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_client_times_out() {
        let (_client, server) = tokio::io::duplex(64);
        let mut server = tokio::io::BufReader::new(server);
        let got = read_line(&mut server, MAX_URL, Duration::from_secs(10)).await;
        assert_eq!(got, Err(LineError::Timeout(Duration::from_secs(10))));
    }

    #[test]
    fn headers() {
        assert_eq!(
            parse_header(b"20 text/gemini"),
            Ok(Header {
                status: 20,
                meta: "text/gemini".into()
            })
        );
        assert_eq!(
            parse_header(b"51"),
            Ok(Header {
                status: 51,
                meta: String::new()
            })
        );
        assert_eq!(parse_header(b"44 30").map(|h| h.class()), Ok(4));
        for bad in [
            &b"2 x"[..],
            b"99 x",
            b"20x",
            b"",
            b"ab cd",
            b"20 \xff",
            b"20 text/gemini\r",
            b"20 text/\rgemini",
            b"30 gemini://a/\x00",
            b"20 text/plain\x1b[2J",
            b"20 text/plain\x7f",
            b"20 text/plain\xc2\x85",
            b"20 text/plain\tcharset=x",
        ] {
            assert!(parse_header(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn written_headers_cannot_inject_lines() {
        assert_eq!(
            header(53, "no\r\n20 text/gemini"),
            b"53 no  20 text/gemini\r\n"
        );
        let long = "é".repeat(600);
        let h = header(43, &long);
        assert!(h.len() <= 3 + 1024 + 2);
        assert!(std::str::from_utf8(&h).is_ok());
    }
}
