//! robots.txt over Nex: the path `/robots.txt` to the server's Nex port.
//! Nex has no status, so an answer counts as found only if it holds at least
//! one robots.txt field line (a server's "not found" text does not); a
//! connect error or timeout makes the host unreachable.

use std::sync::Arc;
use std::time::Duration;

use crate::fetch::outcome::{within, FetchFuture, RobotsFetcher};
use crate::fetch::plain::first_found;
use crate::target::Server;
use crate::upstream::Upstream;

pub struct NexRobots {
    upstream: Arc<Upstream>,
    timeout: Duration,
}

impl NexRobots {
    pub fn new(upstream: Arc<Upstream>, timeout: Duration) -> NexRobots {
        NexRobots { upstream, timeout }
    }
}

impl RobotsFetcher for NexRobots {
    /// Nex has no room for a bot's name.
    fn fetch<'a>(&'a self, server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(within(
            self.timeout,
            first_found(&self.upstream, server, &["/robots.txt"]),
        ))
    }
}
