//! robots.txt over Spartan: `host /robots.txt 0` to the capsule's Spartan
//! port, read like Gemini's.
//!
//! | answer | outcome |
//! | --- | --- |
//! | `2 text/*` | the body is parsed |
//! | `2` anything else | no robots.txt |
//! | `3 /path` | followed on the same server, at most 5 hops; a loop or a 6th hop: no robots.txt |
//! | `4` (client error: not found) | no robots.txt |
//! | `5` (server error) | unreachable |
//! | connect or status line errors, timeout | unreachable |

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};

use crate::fetch::outcome::{text_body, within, FetchFuture, FetchOutcome, RobotsFetcher};
use crate::fetch::MAX_REDIRECTS;
use crate::protocol::read_line;
use crate::protocols::spartan::wire::{parse_header, MAX_HEADER};
use crate::target::{Scheme, Server, Target};
use crate::upstream::Upstream;

pub struct SpartanRobots {
    upstream: Arc<Upstream>,
    /// The whole fetch, redirects included, must end within this.
    timeout: Duration,
}

impl SpartanRobots {
    pub fn new(upstream: Arc<Upstream>, timeout: Duration) -> SpartanRobots {
        SpartanRobots { upstream, timeout }
    }

    async fn fetch_path(&self, server: &Server) -> FetchOutcome {
        let host = server
            .name
            .host
            .trim_start_matches('[')
            .trim_end_matches(']');
        let mut path = "/robots.txt".to_string();
        let mut seen: Vec<String> = Vec::new();
        for _hop in 0..=MAX_REDIRECTS {
            if seen.contains(&path) {
                return FetchOutcome::TooManyRedirects(format!(
                    "robots.txt redirect loop at {path}"
                ));
            }
            seen.push(path.clone());
            let stream = match self
                .upstream
                .connect_tcp(&server.name.host, &server.addrs)
                .await
            {
                Ok(s) => s,
                Err(e) => return FetchOutcome::unreachable(e.to_string()),
            };
            let mut stream = BufReader::new(stream);
            let request = format!("{host} {path} 0\r\n");
            if let Err(e) = stream.get_mut().write_all(request.as_bytes()).await {
                return FetchOutcome::unreachable(format!("sending the request: {e}"));
            }
            let line = match read_line(&mut stream, MAX_HEADER, self.timeout).await {
                Ok(l) => l,
                Err(e) => return FetchOutcome::unreachable(format!("reading the status: {e}")),
            };
            let header = match parse_header(&line) {
                Ok(h) => h,
                Err(e) => return FetchOutcome::unreachable(e.to_string()),
            };
            match header.status {
                2 => return text_body(&mut stream, &header.meta).await,
                // Spartan redirects stay on the server: an absolute path.
                3 => {
                    let url = format!("spartan://{}{}", server.name.host, header.meta.trim());
                    match Target::parse(&url) {
                        Ok(t) if t.scheme == Scheme::Spartan && header.meta.starts_with('/') => {
                            path = String::from_utf8_lossy(t.matched_path()).into_owned();
                        }
                        _ => {
                            return FetchOutcome::Missing(format!(
                                "robots.txt redirects to {:?}, not a path on this server",
                                header.meta
                            ))
                        }
                    }
                }
                4 => {
                    return FetchOutcome::Missing(format!("robots.txt answered 4 {}", header.meta))
                }
                _ => {
                    return FetchOutcome::unreachable(format!(
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

impl RobotsFetcher for SpartanRobots {
    /// Spartan has no room for a bot's name: the path is the file's.
    fn fetch<'a>(&'a self, server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(within(self.timeout, self.fetch_path(server)))
    }
}
