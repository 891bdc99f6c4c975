//! The limits' counts in fleet mode: a request counted here is counted in
//! the fleet's store too ([`crate::store::Store::count`]), so a bot spread
//! over several proxies gets its `concurrency`, `rate` and daily budget once.
//! This process's own count is taken first and kept as well: it is what the
//! state file and the status page show, and what still holds while the store
//! does not answer and `on_unavailable = "local"`. With `"refuse"`, a request
//! a limit counts is answered "slow down" while the store is down.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::slow_down;
use crate::politeness::{fleet_tag, GateBy};
use crate::refusal::{BotLimit, Busy, Refusal, SlowDown};
use crate::store::{CountAsk, Counted, OnUnavailable, Store, Window};
use crate::target::Server;

/// Whose count: a bot at a server (`by`), or a bot everywhere.
pub enum Scope<'a> {
    Server(GateBy, &'a Server),
    Everywhere,
}

/// Where the limits' counts are shared beyond this process: nowhere
/// ([`Alone`]) or the fleet's store ([`Fleet`]). Chosen once, where the
/// process is put together; the limits never ask which.
pub trait SharedCounts: Send + Sync {
    /// Counts the request of `bot` beyond this process too, waiting until
    /// `deadline` for room: `Ok(None)` when nothing beyond it counts (alone,
    /// or the store down and this process's count standing in for it).
    fn take<'a>(
        &'a self,
        whose: (&'a str, Scope<'a>),
        most: (u32, Window),
        deadline: Instant,
        limit: BotLimit,
    ) -> BoxFuture<'a, Result<Option<Counted>, Refusal>>;
}

/// One process: its own counts are all there is.
pub struct Alone;

impl SharedCounts for Alone {
    fn take<'a>(
        &'a self,
        _: (&'a str, Scope<'a>),
        _: (u32, Window),
        _: Instant,
        _: BotLimit,
    ) -> BoxFuture<'a, Result<Option<Counted>, Refusal>> {
        Box::pin(async { Ok(None) })
    }
}

/// A fleet: each count is taken in the store as well.
pub struct Fleet(pub Arc<Store>);

impl SharedCounts for Fleet {
    fn take<'a>(
        &'a self,
        (bot, scope): (&'a str, Scope<'a>),
        (max, window): (u32, Window),
        deadline: Instant,
        limit: BotLimit,
    ) -> BoxFuture<'a, Result<Option<Counted>, Refusal>> {
        Box::pin(take(&self.0, (bot, scope), (max, window), deadline, limit))
    }
}

/// Counts the request of `bot` in the fleet's `store`, waiting until
/// `deadline` for room: `Ok(None)` while the store is down and this
/// process's count stands in for it.
async fn take(
    store: &Arc<Store>,
    (bot, scope): (&str, Scope<'_>),
    (max, window): (u32, Window),
    deadline: Instant,
    limit: BotLimit,
) -> Result<Option<Counted>, Refusal> {
    let local = store.config().on_unavailable == OnUnavailable::Local;
    let down = || match local {
        true => Ok(None),
        false => Err(Refusal::SlowDown(SlowDown {
            retry_after: Duration::from_secs(1),
            why: Busy::StoreDown,
        })),
    };
    if !store.is_up() {
        // Known down: no call that would wait for its deadline first.
        return down();
    }
    // Bot names have no '/' (config/clients.rs): a tag names one count.
    let kind = match window {
        Window::Running => "bc",
        Window::Log(_) => "br",
        Window::Day => "bd",
    };
    let tag = match scope {
        Scope::Server(by, server) => format!("{kind}/{bot}/{}", fleet_tag(by, server)),
        Scope::Everywhere => format!("{kind}/{bot}"),
    };
    let ask = CountAsk {
        tag: &tag,
        max,
        window,
    };
    match store.count(ask, deadline).await {
        Ok(Ok(counted)) => Ok(Some(counted)),
        Ok(Err(retry_after)) => Err(slow_down(limit, retry_after)),
        Err(_) => down(),
    }
}
