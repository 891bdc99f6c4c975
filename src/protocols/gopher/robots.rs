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

use crate::fetch::outcome::{within, FetchFuture, FetchOutcome, RobotsFetcher};
use crate::fetch::plain::first_found;
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
        first_found(&self.upstream, server, &SELECTORS).await
    }
}

impl RobotsFetcher for GopherRobots {
    /// Gopher has no room for a bot's name: a selector is the file's name.
    fn fetch<'a>(&'a self, server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(within(self.timeout, self.fetch_selectors(server)))
    }
}
