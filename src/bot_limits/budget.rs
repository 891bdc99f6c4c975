//! `daily_requests_per_server = N`: at most N starts of one bot at one server
//! in any 24 hours. Starts are counted in 5-minute buckets of the wall clock;
//! a bucket leaves the count 24 hours after it ends, so a start is counted at
//! least 24 hours (at most 24 h 5 min): never more than N in any 24 hours.
//!
//! The book is bounded: it counts at most `limits.max_budget_pairs` (bot,
//! server) pairs, every bot's together. A request that would count a pair
//! more waits (within `max_wait`) for one to leave, or is "slow down": never
//! relayed uncounted. A pair holds at most [`MAX_BUCKETS`] buckets, so the
//! book, and the file it is kept in, are bounded by the pairs it may hold.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::shared::Scope;
use super::values::DAY;
use super::{wait_for, Blocked, Ledger, PerBot};
use crate::admission::{Asked, Held, Hold, Limit};
use crate::politeness::{aliases, Alias, GateBy};
use crate::refusal::{BotLimit, Refusal};

/// Seconds per bucket.
pub(super) const BUCKET: u64 = 300;

/// The buckets a pair holds at most: a day's, and the one being filled.
pub const MAX_BUCKETS: usize = (DAY / BUCKET) as usize + 1;

pub use super::values::{BUDGET_PAIRS, MAX_BUDGET_PAIRS};

/// A bucket: seconds since the epoch over [`BUCKET`].
type Bucket = u32;

type Key = (String, Alias);

fn bucket_at(unix_secs: u64) -> Bucket {
    Bucket::try_from(unix_secs / BUCKET).unwrap_or(Bucket::MAX)
}

/// One bot's starts at one server alias: counts per bucket, oldest first,
/// and the requests that passed this step and have not started yet.
#[derive(Default)]
struct Counts {
    buckets: VecDeque<(Bucket, u32)>,
    pending: u32,
    /// It has its one entry in `Inner::expiring`.
    listed: bool,
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

    /// Counts `n` starts in bucket `b`, where its time puts it; past
    /// [`MAX_BUCKETS`] the oldest bucket's starts move into the next one
    /// (counted longer, never less).
    fn add(&mut self, b: Bucket, n: u32) {
        match self.buckets.iter().rposition(|&(at, _)| at <= b) {
            Some(i) if self.buckets[i].0 == b => {
                self.buckets[i].1 = self.buckets[i].1.saturating_add(n);
            }
            Some(i) => self.buckets.insert(i + 1, (b, n)),
            None => self.buckets.push_front((b, n)),
        }
        while self.buckets.len() > MAX_BUCKETS {
            if let Some((_, oldest)) = self.buckets.pop_front() {
                if let Some(next) = self.buckets.front_mut() {
                    next.1 = next.1.saturating_add(oldest);
                }
            }
        }
    }
}

/// When a bucket's starts stop counting.
fn expiry(bucket: Bucket) -> u64 {
    (u64::from(bucket) + 1) * BUCKET + DAY
}

struct Inner {
    counts: HashMap<Key, Counts>,
    /// One entry per pair that has buckets, in time order: `(at, key)`, when
    /// to look at it again (its newest bucket's end, as of when it was
    /// listed). Pairs leave the book from here, without a scan.
    expiring: VecDeque<(u64, Key)>,
    /// `limits.max_budget_pairs`.
    max_pairs: usize,
}

impl Default for Inner {
    fn default() -> Inner {
        Inner {
            counts: HashMap::new(),
            expiring: VecDeque::new(),
            max_pairs: BUDGET_PAIRS,
        }
    }
}

impl Inner {
    fn list(&mut self, key: Key, at: u64) {
        let i = self.expiring.partition_point(|(t, _)| *t <= at);
        self.expiring.insert(i, (at, key));
    }

    fn forget_expired(&mut self, now: u64) {
        while self.expiring.front().is_some_and(|(at, _)| *at <= now) {
            let Some((_, key)) = self.expiring.pop_front() else {
                break;
            };
            let Some(c) = self.counts.get_mut(&key) else {
                continue;
            };
            c.listed = false;
            c.prune(now);
            match c.buckets.back() {
                Some(&(newest, _)) => {
                    c.listed = true;
                    self.list(key, expiry(newest));
                }
                None if c.pending == 0 => {
                    self.counts.remove(&key);
                }
                // Its requests still pending list it when they start.
                None => {}
            }
        }
    }

    /// Starts `n` of `key` in bucket `b` (a new pair only if there is room).
    fn count(&mut self, key: Key, b: Bucket, n: u32) -> bool {
        if !self.counts.contains_key(&key) && self.counts.len() >= self.max_pairs {
            return false;
        }
        let c = self.counts.entry(key.clone()).or_default();
        c.add(b, n);
        if !c.listed {
            c.listed = true;
            let newest = c.buckets.back().map_or(b, |&(at, _)| at);
            self.list(key, expiry(newest));
        }
        true
    }

    /// When a pair may next leave the book: the soonest a pair with no
    /// request pending has its newest bucket end (or a bucket from `now`).
    fn pair_freed_at(&self, now: u64) -> u64 {
        self.counts
            .values()
            .filter(|c| c.pending == 0)
            .filter_map(|c| c.buckets.back().map(|&(b, _)| expiry(b)))
            .min()
            .unwrap_or(now + BUCKET)
    }
}

/// Why a count is not taken.
#[derive(Debug, PartialEq, Eq)]
enum Full {
    /// The bot's budget is used up at the server; room at this time (seconds
    /// since the epoch), `None`: when a pending request gives back.
    Budget(Option<u64>),
    /// The book holds `limits.max_budget_pairs`; one may leave at this time.
    Book(u64),
}

/// What became of a pair read back from the file.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Restored {
    Kept,
    /// Nothing of it counts any more (or yet).
    Past,
    /// A new pair, and the book holds `limits.max_budget_pairs`.
    Full,
}

/// Every bot's counts at every server.
#[derive(Default)]
pub(super) struct Book(Mutex<Inner>);

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `limits.max_budget_pairs`: pairs past it are not counted (the ones
    /// already counted stay).
    pub(super) fn set_max_pairs(&self, max: usize) {
        self.lock().max_pairs = max;
    }

    pub(super) fn max_pairs(&self) -> usize {
        self.lock().max_pairs
    }

    /// Pairs counted now.
    #[cfg(test)]
    pub(super) fn pairs(&self) -> usize {
        self.lock().counts.len()
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

    /// When `bot` has room in `budget` again at every alias, counting
    /// nothing (`None`: it has room now, or the pending requests alone fill
    /// it, and when they give up cannot be told).
    fn room_at(&self, bot: &str, aliases: &[Alias], budget: u32, unix: Duration) -> Option<u64> {
        let now = unix.as_secs();
        let mut inner = self.lock();
        let mut latest = None;
        for alias in aliases {
            let Some(c) = inner.counts.get_mut(&(bot.to_string(), alias.clone())) else {
                continue;
            };
            c.prune(now);
            let used = c.used();
            if used >= budget {
                latest = latest.max(Some(c.room_at(used - budget + 1)?));
            }
        }
        latest
    }

    /// Counts one more request if the budget has room at every alias and
    /// the book has room for the pairs it adds.
    fn take(&self, bot: &str, aliases: &[Alias], budget: u32, unix: Duration) -> Result<(), Full> {
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
        let mut new = 0;
        for key in &keys {
            match inner.counts.get_mut(key) {
                Some(c) => {
                    c.prune(now);
                    let used = c.used();
                    if used >= budget {
                        full.push(c.room_at(used - budget + 1));
                    }
                }
                None => new += 1,
            }
        }
        if !full.is_empty() {
            let at: Option<Vec<u64>> = full.into_iter().collect();
            return Err(Full::Budget(at.and_then(|at| at.into_iter().max())));
        }
        if inner.counts.len() + new > inner.max_pairs {
            return Err(Full::Book(inner.pair_freed_at(now)));
        }
        for key in keys {
            inner.counts.entry(key).or_default().pending += 1;
        }
        Ok(())
    }

    /// Starts read back from the state file, `(bucket, count)`.
    pub(super) fn restore(
        &self,
        bot: &str,
        alias: Alias,
        buckets: &[(u64, u32)],
        now: u64,
    ) -> Restored {
        let current = bucket_at(now);
        let key = (bot.to_string(), alias);
        let mut inner = self.lock();
        let mut kept = Restored::Past;
        for &(b, n) in buckets {
            // A bucket past, or not begun yet (a file from a clock ahead),
            // is left out.
            let Ok(b) = Bucket::try_from(b) else { continue };
            if expiry(b) <= now || b > current || n == 0 {
                continue;
            }
            if !inner.count(key.clone(), b, n) {
                return Restored::Full;
            }
            kept = Restored::Kept;
        }
        kept
    }

    /// Every pair still counting at `now`, with its buckets still counting:
    /// bot, server, `(bucket, count)` oldest first (at most [`MAX_BUCKETS`]).
    pub(super) fn each(
        &self,
        now: u64,
        mut f: impl FnMut(&str, &Alias, &mut dyn Iterator<Item = (u64, u32)>),
    ) {
        let inner = self.lock();
        for ((bot, alias), counts) in &inner.counts {
            let mut live = counts
                .buckets
                .iter()
                .filter(|(b, n)| expiry(*b) > now && *n > 0)
                .map(|&(b, n)| (u64::from(b), n))
                .peekable();
            if live.peek().is_some() {
                f(bot, alias, &mut live);
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
                    // Counted already: a pair in the book is never refused.
                    inner.count(key, bucket_at(unix.as_secs()), 1);
                }
                None if c.pending == 0 && c.buckets.is_empty() && !c.listed => {
                    inner.counts.remove(&key);
                }
                None => {}
            }
        }
    }
}

/// The step: each bot's budget, by bot id, and the hosts' (`[[hosts]]
/// daily_requests_per_server`, for every bot): at a host with both, the
/// smaller.
pub(super) struct DailyBudget {
    pub(super) budgets: PerBot<u32>,
    /// Every bot's name, by id (what its counts are kept under).
    pub(super) names: Vec<String>,
    pub(super) hosts: Arc<crate::hosts::HostRules>,
    pub(super) key: GateBy,
    pub(super) ledger: Arc<Ledger>,
}

impl DailyBudget {
    /// The bot's name and its budget at the request's server, if any.
    fn budget(&self, asked: &Asked<'_>) -> Option<(&str, u32)> {
        let own = self.budgets.get(asked.bot).map(|(_, b)| *b);
        let host = self
            .hosts
            .for_host(&asked.server.name.host)
            .and_then(|r| r.daily_requests_per_server);
        let budget = match (own, host) {
            (Some(own), Some(host)) => own.min(host),
            (own, host) => own.or(host)?,
        };
        Some((self.names.get(asked.bot)?.as_str(), budget))
    }
}

impl Limit for DailyBudget {
    fn applies(&self, asked: &Asked<'_>) -> bool {
        self.budget(asked).is_some()
    }

    fn foresee(&self, asked: &Asked<'_>) -> Option<Refusal> {
        let (name, budget) = self.budget(asked)?;
        let clock = *self.ledger.clock();
        let aliases = aliases(self.key, asked.server);
        let room = self
            .ledger
            .budget
            .room_at(name, &aliases, budget, clock.unix());
        let room = room.map(|secs| clock.instant_at(Duration::from_secs(secs)));
        super::beyond(asked.deadline, BotLimit::DailyBudget(budget), room)
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Some((name, budget)) = self.budget(asked) else {
                return Ok(None);
            };
            let aliases = aliases(self.key, asked.server);
            let clock = *self.ledger.clock();
            let book = &self.ledger.budget;
            let at = |secs| clock.instant_at(Duration::from_secs(secs));
            wait_for(
                &self.ledger,
                (Some(name), asked.deadline),
                BotLimit::DailyBudget(budget),
                || {
                    book.take(name, &aliases, budget, clock.unix())
                        .map_err(|full| match full {
                            Full::Budget(None) => Blocked::Released,
                            Full::Budget(Some(secs)) => Blocked::Until(at(secs)),
                            Full::Book(secs) => {
                                Blocked::By(BotLimit::BudgetBook(book.max_pairs()), at(secs))
                            }
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
            held.shared = self
                .ledger
                .shared
                .take(
                    (name, Scope::Server(self.key, asked.server)),
                    (budget, crate::store::Window::Day),
                    asked.deadline,
                    BotLimit::DailyBudget(budget),
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
        let Err(Full::Budget(Some(until))) = book.take("bot", &a, 3, t0) else {
            panic!("the fourth is held by the budget");
        };
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
        assert_eq!(book.take("bot", &a, 1, t), Err(Full::Budget(None)));
        book.settle("bot", &a, None);
        assert!(book.lock().counts.is_empty());
        book.take("bot", &a, 1, t).unwrap();
        book.settle("bot", &a, Some(t));
        // A day and a bucket later, nothing of it is left.
        book.used("bot", &a, t + Duration::from_secs(DAY + BUCKET));
        let inner = book.lock();
        assert!(inner.counts.is_empty() && inner.expiring.is_empty());
    }

    /// A bot that goes to ever more servers: past `max_pairs` a new server is
    /// refused (never counted less), the servers in the book go on, and a
    /// pair leaves the book when its newest bucket leaves the day, then a
    /// new server is counted.
    #[test]
    fn the_book_holds_at_most_its_pairs_and_makes_room_as_days_pass() {
        let book = Book::default();
        book.set_max_pairs(3);
        let t0 = 20_000 * DAY;
        let at = |s: u64| Duration::from_secs(t0 + s);
        for i in 0..3 {
            book.take("bot", &[alias(i)], 100, at(u64::from(i) * BUCKET))
                .unwrap();
            book.settle("bot", &[alias(i)], Some(at(u64::from(i) * BUCKET)));
        }
        // Every bot's pairs together: another bot is refused too.
        for bot in ["bot", "other"] {
            let full = book.take(bot, &[alias(9)], 100, at(3 * BUCKET));
            assert_eq!(full, Err(Full::Book(t0 + BUCKET + DAY)), "{bot}");
        }
        // A server in the book is counted as before.
        book.take("bot", &[alias(0)], 100, at(3 * BUCKET)).unwrap();
        book.settle("bot", &[alias(0)], Some(at(3 * BUCKET)));
        // alias(0) started again; alias(1)'s bucket is the first to go.
        let full = book.take("bot", &[alias(9)], 100, at(DAY));
        assert_eq!(full, Err(Full::Book(t0 + 2 * BUCKET + DAY)));
        assert!(book
            .take("bot", &[alias(9)], 100, at(2 * BUCKET + DAY))
            .is_ok());
        assert_eq!(book.pairs(), 3);
        // Lowered (a reload): nothing new until the book is under it.
        book.set_max_pairs(1);
        assert!(matches!(
            book.take("bot", &[alias(8)], 100, at(2 * BUCKET + DAY)),
            Err(Full::Book(_))
        ));
    }

    /// Starts in every bucket for two days: a pair never holds more than
    /// [`MAX_BUCKETS`] buckets, the book one entry per pair, and what it
    /// counts in the last day is never less than what started.
    #[test]
    fn a_pair_busy_all_day_stays_bounded() {
        let book = Book::default();
        let a = [alias(1)];
        let t0 = 20_000 * DAY;
        let per_day = DAY / BUCKET;
        for i in 0..2 * per_day {
            let t = Duration::from_secs(t0 + i * BUCKET + 7);
            book.take("bot", &a, u32::MAX, t).unwrap();
            book.settle("bot", &a, Some(t));
            let inner = book.lock();
            let c = &inner.counts[&("bot".to_string(), alias(1))];
            assert!(c.buckets.len() <= MAX_BUCKETS);
            assert!(inner.expiring.len() <= inner.counts.len());
        }
        let end = Duration::from_secs(t0 + 2 * per_day * BUCKET);
        let used = book.used("bot", &a, end);
        assert!(used >= per_day as u32, "{used}");
        // Restored buckets of any age and order keep the bound too.
        let many: Vec<(u64, u32)> = (0..3 * per_day)
            .rev()
            .map(|i| (t0 / BUCKET + i, 1))
            .collect();
        let fresh = Book::default();
        let now = t0 + 3 * per_day * BUCKET;
        assert_eq!(fresh.restore("bot", alias(2), &many, now), Restored::Kept);
        let inner = fresh.lock();
        let c = &inner.counts[&("bot".to_string(), alias(2))];
        assert!(c.buckets.len() <= MAX_BUCKETS);
        assert!(c
            .buckets
            .iter()
            .zip(c.buckets.iter().skip(1))
            .all(|(x, y)| x.0 < y.0));
    }
}
