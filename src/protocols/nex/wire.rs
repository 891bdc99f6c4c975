//! Nex on the wire (nex://, plain TCP, port 1900): the client sends a path
//! (which may be empty) and CRLF; the server sends the document and closes.
//! A path that is empty or ends in `/` is a directory: text whose lines
//! starting `=> ` are links. There is no status: the proxy's refusals are
//! short text documents whose first line starts with [`REFUSAL_MARK`].

use crate::target::{Resource, Target, TargetError};

/// A path line longer than this is refused.
pub const MAX_REQUEST: usize = 2048;

/// The start of a refusal's first line, so a program can tell it from a
/// document: `robots-proxy: 53 …`, the Gemini status the refusal would get
/// (`53` refused, `59` malformed, `43` unreachable or an upstream failure,
/// `44` slow down), then its text.
pub const REFUSAL_MARK: &str = "robots-proxy: ";

/// A Nex request through the proxy: its target (the path as it is sent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub target: Target,
}

impl Request {
    /// The line sent upstream: the path as the client gave it, CRLF.
    pub fn upstream_line(&self) -> Vec<u8> {
        let mut line = match &self.target.resource {
            Resource::Selector(path) => path.clone(),
            Resource::Path(path) => path.as_bytes().to_vec(),
            Resource::Gopher { selector, .. } => selector.clone(),
        };
        line.extend_from_slice(b"\r\n");
        line
    }
}

/// The path line a client sent a Nex server through the proxy (SOCKS5, the
/// transparent listener), for `host:port`.
pub fn parse_path_line(host: &str, port: u16, line: &[u8]) -> Result<Request, TargetError> {
    Ok(Request {
        target: Target::nex(host.to_string(), port, line.to_vec())?,
    })
}

/// A refusal as a Nex document: the mark, the status and text on the first
/// line (control characters made spaces, at most 1024 bytes), then a line
/// for people.
pub fn refusal_document(status: u8, text: &str) -> Vec<u8> {
    let clean = crate::protocol::one_line(text, 1024);
    format!("{REFUSAL_MARK}{status} {clean}\n\nThis document was not fetched: the proxy in front of this crawler refused it.\n")
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_sent_as_the_client_wrote_it() {
        for line in [&b"nex/info/specification.txt"[..], b"/a/b/", b""] {
            let r = parse_path_line("example.org", 1900, line).unwrap();
            assert_eq!(r.upstream_line(), [line, b"\r\n"].concat());
        }
        for bad in [&b"a\x00b"[..], b"%0d%0aevil", b"%250a"] {
            assert!(
                parse_path_line("example.org", 1900, bad).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_refusal_reads_as_one() {
        let doc = refusal_document(53, "robots.txt of h:1900 disallows\r\nthis");
        let text = String::from_utf8(doc).unwrap();
        let first = text.lines().next().unwrap();
        assert_eq!(
            first,
            "robots-proxy: 53 robots.txt of h:1900 disallows  this"
        );
    }
}
