//! Fetching robots.txt: what a fetch gives ([`FetchOutcome`]), the seam each
//! protocol's fetcher fills ([`RobotsFetcher`]: its unit's `robots` module
//! knows where the protocol keeps the file), the plain-line fetch Gopher and
//! Nex share, and [`Polite`], which gates every fetch like a request. The
//! fetchers are put together, one per protocol, in `server/robots.rs`.

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::politeness::Politeness;
use crate::protocol::Protocol;
use crate::target::Server;

/// RFC 9309 §2.3.1.2: follow at least five consecutive redirects.
pub const MAX_REDIRECTS: usize = 5;

pub mod outcome;
pub mod plain;

/// The URLs a robots.txt fetch has been sent to, hop by hop: each next one
/// parsed, of a scheme the fetcher follows, and not seen before (a loop is
/// "no robots.txt", RFC 9309 §2.3.1.2).
#[derive(Default)]
pub struct Hops {
    seen: Vec<String>,
}

impl Hops {
    /// The next hop's target, or what the fetch ends in instead.
    pub fn next(
        &mut self,
        url: &str,
        follows: impl Fn(crate::target::Scheme) -> bool,
    ) -> Result<crate::target::Target, FetchOutcome> {
        let target = match crate::target::Target::parse(url) {
            Ok(t) if follows(t.scheme) => t,
            Ok(t) => {
                return Err(FetchOutcome::Missing(format!(
                    "robots.txt redirects to {}",
                    t.url()
                )))
            }
            Err(e) => {
                return Err(FetchOutcome::Missing(format!(
                    "robots.txt redirects to a bad URL: {e}"
                )))
            }
        };
        let canonical = target.url();
        if self.seen.contains(&canonical) {
            return Err(FetchOutcome::TooManyRedirects(format!(
                "robots.txt redirect loop at {canonical}"
            )));
        }
        self.seen.push(canonical);
        Ok(target)
    }
}
pub use outcome::{FetchFuture, FetchOutcome, RobotsFetcher, Validators};

/// No validators: an unconditional fetch.
static NO_VALIDATORS: Validators = Validators {
    etag: None,
    last_modified: None,
};

/// Fetching robots.txt counts as a request to the host (docs/architecture.md): it waits its
/// turn at the politeness gate like any other, and so takes a cold host's first slot.
pub struct Polite<F> {
    pub inner: F,
    pub gate: Arc<Politeness>,
    pub metrics: Arc<Metrics>,
}

impl<F: RobotsFetcher> RobotsFetcher for Polite<F> {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
        self.fetch_since(server, bot, &NO_VALIDATORS)
    }

    fn fetch_since<'a>(
        &'a self,
        server: &'a Server,
        bot: Option<&'a str>,
        since: &'a Validators,
    ) -> FetchFuture<'a> {
        Box::pin(async move {
            match self.gate.admit(server, None).await {
                Ok(permit) => {
                    let outcome = match since.is_empty() {
                        true => self.inner.fetch(server, bot).await,
                        false => self.inner.fetch_since(server, bot, since).await,
                    }
                    .judged();
                    drop(permit);
                    if let Some(protocol) = Protocol::of(server.name.scheme) {
                        self.metrics.robots_fetch(protocol, outcome.kind());
                    }
                    outcome
                }
                Err(slow) => FetchOutcome::Unreachable {
                    why: "its turn at the host is more than max_wait away: a queue, or the host asked to slow down".to_string(),
                    retry_after: Some(slow.retry_after),
                },
            }
        })
    }
}
