//! Fetching robots.txt: what a fetch can end in, whatever the protocol, and the
//! fetchers that know where each protocol keeps the file.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use std::sync::Arc;

use crate::metrics::{FetchKind, Metrics, Protocol};
use crate::politeness::Politeness;
use crate::target::{Scheme, Server};

pub mod gemini;
pub mod gopher;

/// How a fetch ended (docs/architecture.md, "Fetching robots.txt").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// A robots.txt body (at most the parse limit plus one byte).
    Found(Vec<u8>),
    /// There is no robots.txt: everything is allowed (RFC 9309 §2.3.1.3).
    Missing(String),
    /// A redirect loop or more than five redirects: treated as no robots.txt
    /// (RFC 9309 §2.3.1.2), counted apart.
    TooManyRedirects(String),
    /// The host could not be asked: connect, TLS, timeout, a temporary failure.
    Unreachable {
        why: String,
        /// When the host said to try again (a Gemini `44 N`).
        retry_after: Option<Duration>,
    },
}

impl FetchOutcome {
    /// The host could not be asked, with no hint of when to try again.
    pub fn unreachable(why: impl Into<String>) -> FetchOutcome {
        FetchOutcome::Unreachable {
            why: why.into(),
            retry_after: None,
        }
    }
}

/// A boxed future, so fetchers can be chosen at run time and faked in tests.
pub type FetchFuture<'a> = Pin<Box<dyn Future<Output = FetchOutcome> + Send + 'a>>;

/// Something that fetches robots.txt for a host, from the addresses it was
/// resolved to. `bot`: the token to name in the request where the protocol
/// can carry it (`robots.name_bot_in_request`): the bot whose request caused
/// the fetch.
pub trait RobotsFetcher: Send + Sync {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a>;
}

/// One fetcher per protocol, chosen by the key's scheme: one cache serves both.
pub struct ByScheme {
    pub gemini: gemini::GeminiRobots,
    pub gopher: gopher::GopherRobots,
}

impl FetchOutcome {
    /// The outcome as the metrics count it.
    pub fn kind(&self) -> FetchKind {
        match self {
            FetchOutcome::Found(_) => FetchKind::Found,
            FetchOutcome::Missing(_) => FetchKind::Missing,
            FetchOutcome::Unreachable { .. } => FetchKind::Unreachable,
            FetchOutcome::TooManyRedirects(_) => FetchKind::RedirectLimit,
        }
    }
}

impl RobotsFetcher for ByScheme {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
        match server.name.scheme {
            Scheme::Gopher => self.gopher.fetch(server, bot),
            Scheme::Gemini => self.gemini.fetch(server, bot),
            // The proxy fetches only what its listeners serve.
            // Fail closed should a key of another scheme ever get here.
            Scheme::Http | Scheme::Https => Box::pin(async {
                FetchOutcome::Unreachable {
                    why: "robots.txt is not fetched over HTTP".to_string(),
                    retry_after: None,
                }
            }),
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
                    let outcome = self.inner.fetch(server, bot).await;
                    drop(permit);
                    self.metrics
                        .robots_fetch(Protocol::of(server.name.scheme), outcome.kind());
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
