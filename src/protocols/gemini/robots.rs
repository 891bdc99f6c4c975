//! robots.txt over Gemini: `gemini://host:port/robots.txt`.
//!
//! | answer | outcome |
//! | --- | --- |
//! | `20 text/*` | the body is parsed |
//! | `20` anything else | no robots.txt |
//! | `3x` | followed, at most 5 hops; a loop or a 6th hop: no robots.txt (RFC 9309 §2.3.1.2) |
//! | `1x`, `5x`, `6x` | no robots.txt |
//! | `4x` | unreachable; a `44 N` says when to try again |
//! | connect, TLS or header errors, timeout | unreachable |

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};

use crate::fetch::outcome::{text_body, within, FetchFuture, FetchOutcome, RobotsFetcher};
use crate::fetch::{Hops, MAX_REDIRECTS};
use crate::protocols::gemini::wire::{parse_header, read_line, MAX_HEADER};
use crate::target::{Resource, Scheme, Server, Target};
use crate::upstream::Upstream;

pub struct GeminiRobots {
    upstream: Arc<Upstream>,
    /// The whole fetch, redirects included, must end within this.
    timeout: Duration,
}

impl GeminiRobots {
    pub fn new(upstream: Arc<Upstream>, timeout: Duration) -> GeminiRobots {
        GeminiRobots { upstream, timeout }
    }

    /// `bot`: ask for `robots.txt?token`, so operators see who asked.
    async fn fetch_url(&self, server: &Server, bot: Option<&str>) -> FetchOutcome {
        let key = &server.name;
        let query = bot.map(|t| format!("?{t}")).unwrap_or_default();
        let mut url = format!("gemini://{}:{}/robots.txt{query}", key.host, key.port);
        let mut hops = Hops::default();
        for _hop in 0..=MAX_REDIRECTS {
            let target = match hops.next(&url, |s| s == Scheme::Gemini) {
                Ok(target) => target,
                Err(ended) => return ended,
            };
            let canonical = target.url();

            // The host's own robots.txt goes to the addresses it was resolved
            // to for this request; a redirect elsewhere is resolved afresh.
            let connected = if target.host == key.host && target.port == key.port {
                self.upstream
                    .connect_gemini_to(&target.host, target.port, &server.addrs)
                    .await
            } else {
                self.upstream
                    .connect_gemini(&target.host, target.port)
                    .await
            };
            let stream = match connected {
                Ok(s) => s,
                Err(e) => return FetchOutcome::unreachable(e.to_string()),
            };
            let mut stream = BufReader::new(stream);
            if let Err(e) = stream
                .get_mut()
                .write_all(format!("{canonical}\r\n").as_bytes())
                .await
            {
                return FetchOutcome::unreachable(format!("sending the request: {e}"));
            }
            let line = match read_line(&mut stream, MAX_HEADER, self.timeout).await {
                Ok(l) => l,
                Err(e) => return FetchOutcome::unreachable(format!("reading the header: {e}")),
            };
            let header = match parse_header(&line) {
                Ok(h) => h,
                Err(e) => return FetchOutcome::unreachable(e.to_string()),
            };
            match header.class() {
                2 => return text_body(&mut stream, &header.meta).await,
                3 => url = resolve_redirect(&target, header.meta.trim()),
                4 => {
                    let retry_after = (header.status == 44)
                        .then(|| header.meta.trim().parse::<u64>().ok())
                        .flatten()
                        .map(Duration::from_secs);
                    return FetchOutcome::Unreachable {
                        why: format!("robots.txt answered {} {}", header.status, header.meta),
                        retry_after,
                    };
                }
                _ => {
                    return FetchOutcome::Missing(format!(
                        "robots.txt answered {} {}",
                        header.status, header.meta
                    ))
                }
            }
        }
        FetchOutcome::TooManyRedirects(format!(
            "robots.txt redirects more than {MAX_REDIRECTS} times"
        ))
    }
}

/// A redirect's URL against the URL that answered it (absolute, `//host/…`,
/// `/path` or relative).
fn resolve_redirect(base: &Target, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    if let Some(rest) = location.strip_prefix("//") {
        return format!("gemini://{rest}");
    }
    let origin = format!("gemini://{}:{}", base.host, base.port);
    if location.starts_with('/') {
        return format!("{origin}{location}");
    }
    let base_path = match &base.resource {
        Resource::Path(p) => p.split('?').next().unwrap_or("/"),
        Resource::Gopher { .. } | Resource::Selector(_) => "/",
    };
    let dir = &base_path[..base_path.rfind('/').map_or(0, |i| i + 1)];
    format!("{origin}{dir}{location}")
}

impl RobotsFetcher for GeminiRobots {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(within(self.timeout, self.fetch_url(server, bot)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_against_the_answering_url() {
        let base = Target::parse("gemini://example.org/dir/robots.txt").unwrap();
        let cases = [
            (
                "gemini://other.example/r.txt",
                "gemini://other.example/r.txt",
            ),
            ("//other.example/r.txt", "gemini://other.example/r.txt"),
            ("/r.txt", "gemini://example.org:1965/r.txt"),
            ("r.txt", "gemini://example.org:1965/dir/r.txt"),
            ("../r.txt", "gemini://example.org:1965/dir/../r.txt"),
        ];
        for (location, want) in cases {
            assert_eq!(resolve_redirect(&base, location), want, "{location}");
        }
    }
}
