//! `daily_requests_per_server = N`: at most N starts of one bot at one server
//! in any 24 hours. Starts are counted in 5-minute buckets of the wall clock;
//! a bucket leaves the count 24 hours after it ends, so a start is counted at
//! least 24 hours (at most 24 h 5 min): never more than N in any 24 hours.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::shared::{self, Scope};
use super::values::DAY;
use super::{wait_for, Blocked, Ledger, PerBot};
use crate::admission::{Asked, Held, Hold, Limit};
use crate::politeness::{aliases, Alias, GateBy};
use crate::refusal::{BotLimit, Refusal};

/// Seconds per bucket.
const BUCKET: u64 = 300;

type Key = (String, Alias);

/// One bot's starts at one server alias: counts per bucket, oldest first,
/// and the requests that passed this step and have not started yet.
#[derive(Default)]
struct Counts {
    buckets: VecDeque<(u64, u32)>,
    pending: u32,
}

impl Counts {
    /// Drops the buckets that have left the window at `now` (seconds).
    fn prune(&mut self, now: u64) {
        while self.buckets.front().is_some_and(|&(b, _)| expiry(b) <= now) {
            self.buckets.pop_front();
        }
    }

    fn used(&self) -> u32 {
        self.buckets
            .iter()
            .map(|&(_, n)| n)
            .fold(self.pending, u32::saturating_add)
    }

    /// When `room` more starts may be made: the end of the bucket whose
    /// leaving frees that many; `None` if the pending requests alone fill it.
    fn room_at(&self, room: u32) -> Option<u64> {
        let mut freed = 0u32;
        for &(b, n) in &self.buckets {
            freed = freed.saturating_add(n);
            if freed >= room {
                return Some(expiry(b));
            }
        }
        None
    }
}

/// When a bucket's starts stop counting.
fn expiry(bucket: u64) -> u64 {
    (bucket + 1) * BUCKET + DAY
}

#[derive(Default)]
struct Inner {
    counts: HashMap<Key, Counts>,
    /// Keys in the order their newest bucket expires, to forget them without
    /// a scan: `(expiry, key)`, one per bucket made.
    expiring: VecDeque<(u64, Key)>,
}

impl Inner {
    fn forget_expired(&mut self, now: u64) {
        while let Some((at, _)) = self.expiring.front() {
            if *at > now {
                break;
            }
            let Some((_, key)) = self.expiring.pop_front() else {
                break;
            };
            if let Some(c) = self.counts.get_mut(&key) {
                c.prune(now);
                if c.buckets.is_empty() && c.pending == 0 {
                    self.counts.remove(&key);
                }
            }
        }
    }
}

/// Every bot's counts at every server.
#[derive(Default)]
pub(super) struct Book(Mutex<Inner>);

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts (and requests about to start) of `bot` at the server these
    /// aliases name, at `unix`.
    #[cfg(test)]
    fn used(&self, bot: &str, aliases: &[Alias], unix: Duration) -> u32 {
        let now = unix.as_secs();
        let mut inner = self.lock();
        inner.forget_expired(now);
        let mut most = 0;
        for a in aliases {
            if let Some(c) = inner.counts.get_mut(&(bot.to_string(), a.clone())) {
                c.prune(now);
                most = most.max(c.used());
            }
        }
        most
    }

    /// The servers (by alias) where `bot` has starts counted at `unix`, with
    /// how many: the most used first, at most `top` of them.
    pub(super) fn used_by(&self, bot: &str, unix: Duration, top: usize) -> Vec<(String, u32)> {
        let now = unix.as_secs();
        let mut inner = self.lock();
        inner.forget_expired(now);
        let mut used: Vec<(String, u32)> = inner
            .counts
            .iter_mut()
            .filter(|((b, _), _)| b == bot)
            .filter_map(|((_, alias), c)| {
                c.prune(now);
                let n = c.used();
                let server = alias.to_string();
                (n > 0).then_some((server, n))
            })
            .collect();
        used.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        used.truncate(top);
        used
    }

    /// Counts one more request if the budget has room at every alias; else
    /// when it will (seconds since the epoch).
    fn take(
        &self,
        bot: &str,
        aliases: &[Alias],
        budget: u32,
        unix: Duration,
    ) -> Result<(), Option<u64>> {
        let now = unix.as_secs();
        let keys: Vec<Key> = aliases
            .iter()
            .map(|a| (bot.to_string(), a.clone()))
            .collect();
        let mut inner = self.lock();
        inner.forget_expired(now);
        // Each full alias's time; if any is unknown (its pending requests
        // alone fill it), so is the answer.
        let mut full: Vec<Option<u64>> = Vec::new();
        for key in &keys {
            if let Some(c) = inner.counts.get_mut(key) {
                c.prune(now);
                let used = c.used();
                if used >= budget {
                    full.push(c.room_at(used - budget + 1));
                }
            }
        }
        if !full.is_empty() {
            let at: Option<Vec<u64>> = full.into_iter().collect();
            return Err(at.and_then(|at| at.into_iter().max()));
        }
        for key in keys {
            inner.counts.entry(key).or_default().pending += 1;
        }
        Ok(())
    }

    /// A bucket read back from the state file (`false`: already past).
    pub(super) fn restore(
        &self,
        bot: &str,
        alias: Alias,
        bucket: u64,
        count: u32,
        now: u64,
    ) -> bool {
        if expiry(bucket) <= now || count == 0 {
            return false;
        }
        let key = (bot.to_string(), alias);
        let mut inner = self.lock();
        let counts = inner.counts.entry(key.clone()).or_default();
        match counts.buckets.iter().position(|&(b, _)| b >= bucket) {
            Some(i) if counts.buckets[i].0 == bucket => {
                counts.buckets[i].1 = counts.buckets[i].1.saturating_add(count);
                return true;
            }
            Some(i) => counts.buckets.insert(i, (bucket, count)),
            None => counts.buckets.push_back((bucket, count)),
        }
        // `expiring` is in order: a restored bucket goes where its time is.
        let at = expiry(bucket);
        let i = inner.expiring.partition_point(|(t, _)| *t <= at);
        inner.expiring.insert(i, (at, key));
        true
    }

    /// Every bucket still counting at `now`: bot, server, bucket, count.
    pub(super) fn each(&self, now: u64, mut f: impl FnMut(&str, &Alias, u64, u32)) {
        let inner = self.lock();
        for ((bot, alias), counts) in &inner.counts {
            for &(bucket, n) in counts.buckets.iter().filter(|(b, _)| expiry(*b) > now) {
                f(bot, alias, bucket, n);
            }
        }
    }

    /// A counted request started at `unix` (`true`) or gave up.
    fn settle(&self, bot: &str, aliases: &[Alias], started: Option<Duration>) {
        let mut inner = self.lock();
        for a in aliases {
            let key = (bot.to_string(), a.clone());
            let Some(c) = inner.counts.get_mut(&key) else {
                continue;
            };
            c.pending = c.pending.saturating_sub(1);
            match started {
                Some(unix) => {
                    let bucket = unix.as_secs() / BUCKET;
                    match c.buckets.back_mut() {
                        Some((b, n)) if *b == bucket => *n = n.saturating_add(1),
                        _ => {
                            c.buckets.push_back((bucket, 1));
                            inner.expiring.push_back((expiry(bucket), key));
                        }
                    }
                }
                None if c.pending == 0 && c.buckets.is_empty() => {
                    inner.counts.remove(&key);
                }
                None => {}
            }
        }
    }
}

/// The step: each bot's budget, by bot id.
pub(super) struct DailyBudget {
    pub(super) budgets: PerBot<u32>,
    pub(super) key: GateBy,
    pub(super) ledger: Arc<Ledger>,
}

impl Limit for DailyBudget {
    fn applies(&self, asked: &Asked<'_>) -> bool {
        self.budgets.get(asked.bot).is_some()
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Some((name, budget)) = self.budgets.get(asked.bot) else {
                return Ok(None);
            };
            let aliases = aliases(self.key, asked.server);
            let clock = *self.ledger.clock();
            let book = &self.ledger.budget;
            wait_for(
                &self.ledger,
                (Some(name), asked.deadline),
                BotLimit::DailyBudget(*budget),
                || {
                    book.take(name, &aliases, *budget, clock.unix())
                        .map_err(|at| match at {
                            Some(at) => Blocked::Until(clock.instant_at(Duration::from_secs(at))),
                            None => Blocked::Released,
                        })
                },
            )
            .await?;
            let mut held = Budgeted {
                ledger: self.ledger.clone(),
                bot: name.to_string(),
                aliases,
                started: false,
                shared: None,
            };
            held.shared = shared::take(
                &self.ledger,
                (name, Scope::Server(self.key, asked.server)),
                (*budget, crate::store::Window::Day),
                asked.deadline,
                BotLimit::DailyBudget(*budget),
            )
            .await?;
            Ok(Some(Box::new(held) as Box<dyn Held>))
        })
    }
}

/// A request counted against its bot's budget at a server (in the fleet's
/// count too, in fleet mode).
struct Budgeted {
    ledger: Arc<Ledger>,
    bot: String,
    aliases: Vec<Alias>,
    started: bool,
    shared: Option<crate::store::Counted>,
}

impl Held for Budgeted {
    fn started(&mut self) {
        self.started = true;
        if let Some(shared) = &mut self.shared {
            shared.started();
        }
        let now = self.ledger.clock().unix();
        self.ledger
            .budget
            .settle(&self.bot, &self.aliases, Some(now));
        self.ledger
            .changes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        self.ledger.changed(&self.bot);
    }
}

impl Drop for Budgeted {
    fn drop(&mut self) {
        if !self.started {
            self.ledger.budget.settle(&self.bot, &self.aliases, None);
            self.ledger.changed(&self.bot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alias(last: u8) -> Alias {
        Alias::Addr(std::net::IpAddr::from([127, 0, 0, last]))
    }

    #[test]
    fn a_day_holds_at_most_the_budget_and_frees_a_day_later() {
        let book = Book::default();
        let a = [alias(3)];
        let t0 = Duration::from_secs(20_000 * DAY + 3600 + 17);
        for _ in 0..3 {
            book.take("bot", &a, 3, t0).unwrap();
            book.settle("bot", &a, Some(t0));
        }
        // The fourth waits until the bucket of the first three ends, a day later.
        let until = book.take("bot", &a, 3, t0).unwrap_err().unwrap();
        assert!(
            until >= t0.as_secs() + DAY && until <= t0.as_secs() + DAY + BUCKET,
            "{until}"
        );
        assert_eq!(book.used("bot", &a, t0), 3);
        assert!(book
            .take("bot", &a, 3, Duration::from_secs(until - 1))
            .is_err());
        assert!(book.take("bot", &a, 3, Duration::from_secs(until)).is_ok());
    }

    #[test]
    fn aliases_share_a_budget_and_bots_do_not() {
        let book = Book::default();
        let t = Duration::from_secs(20_000 * DAY);
        // `localhost` (two addresses), then one of them alone.
        let both = [alias(1), alias(2)];
        book.take("bot", &both, 1, t).unwrap();
        book.settle("bot", &both, Some(t));
        assert!(book.take("bot", &[alias(2)], 1, t).is_err());
        assert!(book.take("other", &[alias(2)], 1, t).is_ok());
        let name = Alias::Name("localhost".into());
        assert!(book.take("bot", &[name], 1, t).is_ok());
    }

    #[test]
    fn a_request_that_gives_up_gives_back_and_is_forgotten() {
        let book = Book::default();
        let a = [alias(4)];
        let t = Duration::from_secs(20_000 * DAY);
        book.take("bot", &a, 1, t).unwrap();
        assert_eq!(book.take("bot", &a, 1, t), Err(None));
        book.settle("bot", &a, None);
        assert!(book.lock().counts.is_empty());
        book.take("bot", &a, 1, t).unwrap();
        book.settle("bot", &a, Some(t));
        // A day and a bucket later, nothing of it is left.
        book.used("bot", &a, t + Duration::from_secs(DAY + BUCKET));
        let inner = book.lock();
        assert!(inner.counts.is_empty() && inner.expiring.is_empty());
    }
}
