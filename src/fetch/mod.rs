//! Fetching robots.txt: the fetcher of each protocol (its unit's `robots`
//! module knows where the protocol keeps the file), chosen by the server's
//! scheme, and [`Polite`], which gates every fetch like a request.

use std::sync::Arc;
use std::time::Duration;

use crate::gemini::robots::GeminiRobots;
use crate::gopher::robots::GopherRobots;
use crate::metrics::Metrics;
use crate::nex::robots::NexRobots;
use crate::politeness::Politeness;
use crate::protocol::Protocol;
use crate::spartan::robots::SpartanRobots;
use crate::target::Server;
use crate::upstream::Upstream;

pub mod outcome;
pub mod plain;
pub use outcome::{FetchFuture, FetchOutcome, RobotsFetcher};

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

/// Fetching robots.txt counts as a request to the host (docs/architecture.md): it waits its
/// turn at the politeness gate like any other, and so takes a cold host's first slot.
pub struct Polite<F> {
    pub inner: F,
    pub gate: Arc<Politeness>,
    pub metrics: Arc<Metrics>,
}

impl<F: RobotsFetcher> RobotsFetcher for Polite<F> {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(async move {
            match self.gate.admit(server, None).await {
                Ok(permit) => {
                    let outcome = self.inner.fetch(server, bot).await.judged();
                    drop(permit);
                    if let Some(protocol) = Protocol::of(server.name.scheme) {
                        self.metrics.robots_fetch(protocol, outcome.kind());
                    }
                    outcome
                }
                Err(slow) => FetchOutcome::Unreachable {
                    why: "the host's politeness queue is longer than max_wait".to_string(),
                    retry_after: Some(slow.retry_after),
                },
            }
        })
    }
}
