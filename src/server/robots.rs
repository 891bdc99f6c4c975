//! robots.txt fetched by each protocol's own fetcher, chosen by the server's
//! scheme: one cache serves all. Wiring, above the protocols.

use std::sync::Arc;
use std::time::Duration;

use crate::fetch::{FetchFuture, FetchOutcome, RobotsFetcher};
use crate::protocol::Protocol;
use crate::protocols::gemini::robots::GeminiRobots;
use crate::protocols::gopher::robots::GopherRobots;
use crate::protocols::nex::robots::NexRobots;
use crate::protocols::spartan::robots::SpartanRobots;
use crate::target::Server;
use crate::upstream::Upstream;

/// One fetcher per protocol, chosen by the key's scheme: one cache serves all.
pub struct ByProtocol {
    pub gemini: GeminiRobots,
    pub gopher: GopherRobots,
    pub spartan: SpartanRobots,
    pub nex: NexRobots,
}

impl ByProtocol {
    /// Each protocol's fetcher, over `upstream`, each fetch within `timeout`.
    pub fn new(upstream: &Arc<Upstream>, timeout: Duration) -> ByProtocol {
        ByProtocol {
            gemini: GeminiRobots::new(upstream.clone(), timeout),
            gopher: GopherRobots::new(upstream.clone(), timeout),
            spartan: SpartanRobots::new(upstream.clone(), timeout),
            nex: NexRobots::new(upstream.clone(), timeout),
        }
    }
}

impl RobotsFetcher for ByProtocol {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
        match Protocol::of(server.name.scheme) {
            Some(Protocol::Gemini) => self.gemini.fetch(server, bot),
            Some(Protocol::Gopher) => self.gopher.fetch(server, bot),
            Some(Protocol::Spartan) => self.spartan.fetch(server, bot),
            Some(Protocol::Nex) => self.nex.fetch(server, bot),
            // The proxy fetches only what its listeners serve.
            // Fail closed should a key of another scheme ever get here.
            None => {
                Box::pin(async { FetchOutcome::unreachable("robots.txt is not fetched over HTTP") })
            }
        }
    }
}
