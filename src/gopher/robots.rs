//! robots.txt over Gopher: the selector `robots.txt`, then `/robots.txt`, then
//! `0/robots.txt`, each only if the one before is missing (the Gopher proposal;
//! the contemporary draft uses `/robots.txt`; UMN-like servers want the type).
//!
//! Servers report a missing file in many ways (a type-3 menu; gophernicus's
//! plain-text `Error: File or directory not found!` page; nothing), so an answer
//! counts as found only if it holds at least one robots.txt field line.
//! A connect error or timeout makes the host unreachable at once.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::fetch::outcome::{FetchFuture, FetchOutcome, RobotsFetcher};
use crate::robots::{RobotsTxt, PARSE_LIMIT};
use crate::target::Server;
use crate::upstream::Upstream;

/// Where robots.txt may live, in the order asked.
pub const SELECTORS: [&str; 3] = ["robots.txt", "/robots.txt", "0/robots.txt"];

pub struct GopherRobots {
    upstream: Arc<Upstream>,
    /// The whole fetch, all selectors included, must end within this.
    timeout: Duration,
}

impl GopherRobots {
    pub fn new(upstream: Arc<Upstream>, timeout: Duration) -> GopherRobots {
        GopherRobots { upstream, timeout }
    }

    async fn fetch_selectors(&self, server: &Server) -> FetchOutcome {
        for selector in SELECTORS {
            let connected = self
                .upstream
                .connect_tcp(&server.name.host, &server.addrs)
                .await;
            let mut stream = match connected {
                Ok(s) => s,
                Err(e) => return FetchOutcome::unreachable(e.to_string()),
            };
            if let Err(e) = stream.write_all(format!("{selector}\r\n").as_bytes()).await {
                return FetchOutcome::unreachable(format!("sending {selector:?}: {e}"));
            }
            let mut body = Vec::new();
            // Reading past the parse limit would only cost memory.
            if let Err(e) = (&mut stream)
                .take(PARSE_LIMIT as u64 + 1)
                .read_to_end(&mut body)
                .await
            {
                if body.is_empty() {
                    return FetchOutcome::unreachable(format!("reading {selector:?}: {e}"));
                }
            }
            if RobotsTxt::parse(&body).field_lines() > 0 {
                return FetchOutcome::Found(body);
            }
        }
        FetchOutcome::Missing(format!("no robots.txt at {}", SELECTORS.join(", ")))
    }
}

impl RobotsFetcher for GopherRobots {
    /// Gopher has no room for a bot's name: a selector is the file's name.
    fn fetch<'a>(&'a self, server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(async move {
            tokio::time::timeout(self.timeout, self.fetch_selectors(server))
                .await
                .unwrap_or_else(|_| {
                    FetchOutcome::unreachable(format!(
                        "robots.txt not fetched within {:?}",
                        self.timeout
                    ))
                })
        })
    }
}
