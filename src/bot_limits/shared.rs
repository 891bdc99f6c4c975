//! The limits' counts in fleet mode: a request counted here is counted in
//! the fleet's store too ([`crate::store::Store::count`]), so a bot spread
//! over several proxies gets its `concurrency`, `rate` and daily budget once.
//! This process's own count is taken first and kept as well: it is what the
//! state file and the status page show, and what still holds while the store
//! does not answer and `on_unavailable = "local"`. With `"refuse"`, a request
//! a limit counts is answered "slow down" while the store is down.

use std::time::Duration;

use tokio::time::Instant;

use super::{slow_down, Ledger};
use crate::politeness::{fleet_tag, GateBy};
use crate::refusal::{BotLimit, Busy, Refusal, SlowDown};
use crate::store::{CountAsk, Counted, OnUnavailable, Window};
use crate::target::Server;

/// Whose count: a bot at a server (`by`), or a bot everywhere.
pub(super) enum Scope<'a> {
    Server(GateBy, &'a Server),
    Everywhere,
}

/// Counts the request of `bot` in the fleet's store (fleet mode), waiting
/// until `deadline` for room: `Ok(None)` outside fleet mode, or while the
/// store is down and this process's count stands in for it.
pub(super) async fn take(
    ledger: &Ledger,
    (bot, scope): (&str, Scope<'_>),
    (max, window): (u32, Window),
    deadline: Instant,
    limit: BotLimit,
) -> Result<Option<Counted>, Refusal> {
    let Some(store) = &ledger.store else {
        return Ok(None);
    };
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
