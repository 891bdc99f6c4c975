//! A bot's own limits, set by the operator beyond what robots.txt asks
//! (`[bot]` and `[[bots]]`: `min_delay`, `concurrency`, `rate`,
//! `daily_requests_per_server`, `quiet_hours`). Each is one
//! [`admission::Limit`](crate::admission::Limit) step, asked after robots.txt
//! and before the gate (docs/architecture.md, "Adding a limit"); `min_delay`
//! is a floor under the bot's spacing at the gate itself.
//!
//! A request a limit holds waits (within `politeness.max_wait`) like a queued
//! request; one it cannot wait for is answered "slow down" with the seconds
//! until it could start, naming the limit. What the limits count ([`Ledger`])
//! lasts across reloads; a bot is known by its name.
//!
//! In fleet mode each count is taken in the store as well (`shared`), with
//! the shared gate's failure rules (`[store] on_unavailable`).
//!
//! A server is what the gate calls one ([`crate::politeness::aliases`]):
//! with `key = "address"`, every address a name resolves to, so `localhost`,
//! `127.0.0.1` and `[::1]` share a budget as they share a gate.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::admission::{Left, Limit, Limits, Usage};
use crate::bots::Bots;
use crate::politeness::GateBy;
use crate::refusal::{BotLimit, Busy, Refusal, SlowDown};
use crate::waiters::Waiters;

mod budget;
mod clock;
mod hours;
mod inflight;
mod keep;
mod rate;
mod shared;
/// The values (what the operator writes), kept with the bots.
pub use crate::bots::limits as values;
pub use shared::{Alone, Fleet as SharedFleet, Scope, SharedCounts};

pub use budget::{BUDGET_PAIRS, MAX_BUCKETS, MAX_BUDGET_PAIRS};
pub use clock::Clock;
pub use keep::{
    read_bound as budgets_read_bound, ReadBack, FILE as BUDGETS_FILE, MAX_LINE as BUDGETS_MAX_LINE,
};
pub use values::{BotLimits, DayWindow, Rate, WallClock, MAX_BUDGET};

/// What the limits have counted: in flight, starts, per bot and server.
/// Owned by the process (kept across reloads), shared by every generation's
/// limit steps.
pub struct Ledger {
    clock: Clock,
    /// Where the budgets are kept across restarts (`None`: not kept).
    path: Option<std::path::PathBuf>,
    /// Starts counted so far, and as of the last write.
    changes: std::sync::atomic::AtomicU64,
    saved: std::sync::atomic::AtomicU64,
    /// By bot name: woken when anything of that bot's counts is given back
    /// or started, so its requests waiting on a count look again (and no
    /// other bot's).
    waiters: Waiters,
    inflight: inflight::Book,
    rate: rate::Book,
    budget: budget::Book,
    /// Where the counts are shared beyond this process (fleet mode: the
    /// store as well).
    shared: Box<dyn shared::SharedCounts>,
}

impl Ledger {
    /// A ledger that starts empty; `path`: where [`Ledger::save`] keeps the
    /// budgets; `shared`: where the counts are shared beyond this process
    /// ([`Alone`], or the fleet's store: [`SharedFleet`]).
    pub fn new(
        clock: Clock,
        path: Option<std::path::PathBuf>,
        shared: Box<dyn shared::SharedCounts>,
    ) -> Arc<Ledger> {
        Arc::new(Ledger {
            clock,
            path,
            changes: Default::default(),
            saved: Default::default(),
            waiters: Waiters::default(),
            inflight: inflight::Book::default(),
            rate: rate::Book::default(),
            budget: budget::Book::default(),
            shared,
        })
    }

    /// `limits.max_budget_pairs`, from a config (at start, on reload).
    pub fn set_max_budget_pairs(&self, max: usize) {
        self.budget.set_max_pairs(max);
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Something of `bot`'s counts was given back or started: its waiting
    /// requests look again.
    fn changed(&self, bot: &str) {
        self.waiters.wake(bot);
    }
}

impl Usage for Ledger {
    fn budget_used(&self, bot: &str, top: usize) -> Vec<(String, u32)> {
        self.budget.used_by(bot, self.clock.unix(), top)
    }

    fn left(&self, bot: &str, limits: &BotLimits) -> Left {
        Left {
            concurrency: limits
                .concurrency
                .map(|max| max.saturating_sub(self.inflight.busiest(bot))),
            rate: limits.rate.map(|rate| {
                let counted = self.rate.counted(bot, rate, Instant::now());
                (rate.count as usize).saturating_sub(counted)
            }),
            quiet_for: (!limits.quiet_hours.is_empty()).then(|| {
                hours::quiet_for(&limits.quiet_hours, self.clock.unix()).unwrap_or_default()
            }),
        }
    }
}

/// The limit steps of one configuration, over the process's ledger:
/// robots.txt's `Visit-time` (every bot), then only those some bot sets, in
/// the order they are asked (the cheapest first, and
/// a count reserved last so a request held by an earlier one holds nothing).
pub fn steps(
    bots: &Bots,
    hosts: &Arc<crate::hosts::HostRules>,
    key: GateBy,
    ledger: &Arc<Ledger>,
) -> Limits {
    let mut steps: Vec<Arc<dyn Limit>> = Vec::new();
    let ledger = || ledger.clone();
    steps.push(Arc::new(hours::VisitTimes { ledger: ledger() }));
    if let Some(windows) = PerBot::of(bots, |l| {
        (!l.quiet_hours.is_empty()).then(|| l.quiet_hours.clone())
    }) {
        steps.push(Arc::new(hours::QuietHours {
            windows,
            ledger: ledger(),
        }));
    }
    if let Some(max) = PerBot::of(bots, |l| l.concurrency) {
        steps.push(Arc::new(inflight::Concurrency {
            max,
            key,
            ledger: ledger(),
        }));
    }
    if let Some(rates) = PerBot::of(bots, |l| l.rate) {
        steps.push(Arc::new(rate::RateLimit {
            rates,
            ledger: ledger(),
        }));
    }
    // A bot's own daily budget, or one a `[[hosts]]` entry sets for every bot.
    let budgets = PerBot::of(bots, |l| l.daily_requests_per_server);
    if budgets.is_some() || hosts.any_budget() {
        steps.push(Arc::new(budget::DailyBudget {
            budgets: budgets.unwrap_or(PerBot { set: Vec::new() }),
            names: bots.all().iter().map(|b| b.name.clone()).collect(),
            hosts: hosts.clone(),
            key,
            ledger: ledger(),
        }));
    }
    Limits::new(steps, Some(ledger()))
}

/// One limit's value for each bot that sets it, by bot id, with the bot's
/// name (what its counts are kept under across reloads).
struct PerBot<T> {
    set: Vec<Option<(String, T)>>,
}

impl<T> PerBot<T> {
    /// `None` when no bot sets it: the step is left out.
    fn of(bots: &Bots, value: impl Fn(&BotLimits) -> Option<T>) -> Option<PerBot<T>> {
        let set: Vec<_> = bots
            .all()
            .iter()
            .map(|b| value(&b.limits).map(|v| (b.name.clone(), v)))
            .collect();
        set.iter().any(Option::is_some).then_some(PerBot { set })
    }

    fn get(&self, bot: crate::bots::BotId) -> Option<(&str, &T)> {
        self.set
            .get(bot)?
            .as_ref()
            .map(|(name, v)| (name.as_str(), v))
    }
}

/// Why a count cannot be taken now.
enum Blocked {
    /// It can at this time (a start leaves the window).
    Until(Instant),
    /// When something counted is given back (a request in flight ends).
    Released,
    /// At this time, held by another bound than the step's own limit (the
    /// budgets' book full): the answer names that one.
    By(BotLimit, Instant),
}

/// Asks `take` until it succeeds, waiting between tries for the time it names
/// or (given `bot`) for a change in that bot's counts, up to `deadline`; a
/// wait past the deadline is answered "slow down" at once, naming `limit`
/// (or the bound that held it last, [`Blocked::By`]).
/// A request that is let through at once watches nothing.
async fn wait_for<T>(
    ledger: &Ledger,
    (bot, deadline): (Option<&str>, Instant),
    mut limit: BotLimit,
    mut take: impl FnMut() -> Result<T, Blocked>,
) -> Result<T, Refusal> {
    if let Ok(taken) = take() {
        return Ok(taken);
    }
    let watch = bot.map(|bot| ledger.waiters.watch(bot.to_string()));
    loop {
        // Listening before asking (again): a change between the answer and
        // the wait is not missed.
        let changed = watch.as_ref().map(|w| w.notify.notified());
        tokio::pin!(changed);
        if let Some(changed) = changed.as_mut().as_pin_mut() {
            changed.enable();
        }
        let changed = async {
            match changed.as_pin_mut() {
                Some(changed) => changed.await,
                None => std::future::pending().await,
            }
        };
        let now = Instant::now();
        // `None`: until something counted is given back.
        let until = match take() {
            Ok(taken) => return Ok(taken),
            Err(Blocked::Released) => None,
            Err(Blocked::Until(t)) => Some(t),
            Err(Blocked::By(by, t)) => {
                limit = by;
                Some(t)
            }
        };
        let woken = match until {
            Some(t) if t > deadline => {
                return Err(slow_down(limit, t.saturating_duration_since(now)))
            }
            Some(t) => {
                tokio::time::timeout_at(deadline, async {
                    tokio::select! {
                        () = tokio::time::sleep_until(t) => {}
                        () = changed => {}
                    }
                })
                .await
            }
            None => tokio::time::timeout_at(deadline, changed).await,
        };
        if woken.is_err() {
            // The deadline passed with no count given back: ask again in a
            // second (a request in flight ends at an unknown time).
            return Err(slow_down(limit, Duration::from_secs(1)));
        }
    }
}

/// What a step foresees from when it would next let the request through
/// (`None`: now, or when something counted is given back, which cannot be
/// told): "slow down" at once when that is past the deadline.
fn beyond(deadline: Instant, limit: BotLimit, until: Option<Instant>) -> Option<Refusal> {
    let until = until?;
    (until > deadline).then(|| slow_down(limit, until.saturating_duration_since(Instant::now())))
}

fn slow_down(limit: BotLimit, retry_after: Duration) -> Refusal {
    Refusal::SlowDown(SlowDown {
        // Exact: the answer rounds it up to whole seconds (at least 1), and
        // report mode logs it as it is.
        retry_after,
        why: Busy::Limit(limit),
    })
}
