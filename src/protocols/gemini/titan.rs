//! Titan (`titan://`, Gemini's upload companion): the client sends
//! `titan://host[:port]/path;size=N[;mime=…][;token=…]` CRLF over TLS, then N
//! bytes; the server answers as Gemini does. An upload is not crawling: it is
//! refused for a bot without `uploads = true`, and decided by the capsule's
//! robots.txt on the path before the first `;`.

use crate::protocol::MAX_UPLOAD;
use crate::protocols::gemini::wire::{parse_url, BadRequest};
use crate::target::{Scheme, Target};

/// A Titan upload: where to (the path without its parameters), the
/// parameters as the client sent them, and how many bytes follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upload {
    pub target: Target,
    /// `;size=N…`, each `key=value`, passed on as they are.
    pub params: String,
    pub size: u64,
}

impl Upload {
    /// A `titan://` URL (UTF-8, its line end removed).
    pub fn parse(url: &str) -> Result<Upload, BadRequest> {
        let path_start = url
            .split_once("://")
            .map(|(scheme, rest)| scheme.len() + 3 + rest.find('/').unwrap_or(rest.len()))
            .ok_or(BadRequest::NotAbsolute)?;
        let (resource, params) = match url[path_start..].find(';') {
            Some(at) => url.split_at(path_start + at),
            None => (url, ""),
        };
        let target = parse_url(resource.as_bytes())?;
        if target.scheme != Scheme::Titan {
            return Err(BadRequest::NotGemini(target.scheme.as_str()));
        }
        let mut size = None;
        for param in params.split(';').skip(1) {
            let (key, value) = param
                .split_once('=')
                .filter(|(k, v)| {
                    !k.is_empty()
                        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                        && v.bytes()
                            .all(|b| b.is_ascii_graphic() && !b"?#;".contains(&b))
                })
                .ok_or_else(|| BadRequest::TitanParameter(crate::protocol::one_line(param, 64)))?;
            if key.eq_ignore_ascii_case("size") {
                let n = (value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| value.parse::<u64>().ok())
                    .flatten()
                    .ok_or(BadRequest::TitanSize)?;
                if size.replace(n).is_some() {
                    return Err(BadRequest::TitanSize);
                }
            }
        }
        let size = size.ok_or(BadRequest::TitanSize)?;
        if size > MAX_UPLOAD {
            return Err(BadRequest::TitanTooLarge(size));
        }
        Ok(Upload {
            target,
            params: params.to_string(),
            size,
        })
    }

    /// The line sent upstream: the canonical URL, its parameters, CRLF.
    pub fn upstream_line(&self) -> String {
        format!("{}{}\r\n", self.target.url(), self.params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Resource;

    #[test]
    fn the_path_before_its_parameters_is_decided() {
        let u = Upload::parse(
            "titan://Example.org/a/../wiki/page.gmi;mime=text/plain;size=12;token=x%20y",
        )
        .unwrap();
        assert_eq!(u.target.resource, Resource::Path("/wiki/page.gmi".into()));
        assert_eq!(u.size, 12);
        assert_eq!(
            u.upstream_line(),
            "titan://example.org/wiki/page.gmi;mime=text/plain;size=12;token=x%20y\r\n"
        );
        assert_eq!(u.target.authority(), "example.org:1965");
        let u = Upload::parse("titan://example.org:1966/;size=0").unwrap();
        assert_eq!((u.target.port, u.size), (1966, 0));
    }

    #[test]
    fn bad_uploads_are_named() {
        for (url, want) in [
            ("titan://example.org/page", "size"),
            ("titan://example.org/page;mime=text/plain", "size"),
            ("titan://example.org/page;size=", "size"),
            ("titan://example.org/page;size=-1", "size"),
            ("titan://example.org/page;size=1;size=2", "size"),
            (
                "titan://example.org/page;size=99999999999999999999999",
                "size",
            ),
            ("titan://example.org/page;size=16777217", "at most"),
            ("titan://example.org/page;size=3;x", "key=value"),
            ("titan://example.org/page;size=3?q", "key=value"),
            ("titan://example.org/page;size=3;=v", "key=value"),
            ("titan://example.org/page;size=3#f", "key=value"),
            ("titan://u@example.org/page;size=3", "userinfo"),
            ("titan://exa mple.org/page;size=3", "invalid host"),
            ("titan://example.org;size=3", "invalid host"),
        ] {
            let err = Upload::parse(url).unwrap_err().to_string();
            assert!(err.contains(want), "{url}: {err}");
        }
    }
}
