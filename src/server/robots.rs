//! robots.txt fetched by each protocol's own fetcher, chosen by the server's
//! scheme: one cache serves all. Wiring, above the protocols.

use std::sync::Arc;

use crate::config::Config;
use crate::fetch::{FetchFuture, FetchOutcome, RobotsFetcher, Validators};
use crate::protocol::Protocol;
use crate::target::Server;
use crate::upstream::Upstream;

/// One fetcher per protocol (`protocols::ALL`'s rows), chosen by the key's
/// scheme: one cache serves all.
pub struct ByProtocol {
    /// In [`Protocol::ALL`]'s order.
    fetchers: Vec<Box<dyn RobotsFetcher>>,
}

impl ByProtocol {
    /// Each protocol's fetcher, over `upstream`, as `config` says.
    pub fn new(upstream: &Arc<Upstream>, config: &Config) -> ByProtocol {
        ByProtocol {
            fetchers: crate::protocols::ALL
                .iter()
                .map(|row| row.robots(upstream, config))
                .collect(),
        }
    }
}

impl ByProtocol {
    /// The fetcher for `server`'s scheme.
    fn fetcher(&self, server: &Server) -> Option<&dyn RobotsFetcher> {
        Protocol::of(server.name.scheme)
            .and_then(|p| self.fetchers.get(p.index()))
            .map(|f| &**f)
    }
}

/// The proxy fetches only what its listeners serve. Fail closed should a
/// key of another scheme ever get here.
fn no_fetcher<'a>() -> FetchFuture<'a> {
    Box::pin(async { FetchOutcome::unreachable("robots.txt is not fetched for this scheme") })
}

impl RobotsFetcher for ByProtocol {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
        match self.fetcher(server) {
            Some(fetcher) => fetcher.fetch(server, bot),
            None => no_fetcher(),
        }
    }

    fn fetch_since<'a>(
        &'a self,
        server: &'a Server,
        bot: Option<&'a str>,
        since: &'a Validators,
    ) -> FetchFuture<'a> {
        match self.fetcher(server) {
            Some(fetcher) => fetcher.fetch_since(server, bot, since),
            None => no_fetcher(),
        }
    }
}
