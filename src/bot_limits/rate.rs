//! `rate = "10/s"`: at most that many starts of one bot, across all servers,
//! in any window of that length (a sliding log of its starts, exact: a bot
//! spreading requests over many servers cannot beat it).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::shared::Scope;
use super::values::Rate;
use super::{wait_for, Blocked, Ledger, PerBot};
use crate::admission::{Asked, Held, Hold, Limit};
use crate::refusal::{BotLimit, Refusal};

/// One bot's starts in its window, oldest first, and the requests that have
/// passed this step and not started yet (they count until they start or
/// give up).
#[derive(Default)]
struct Log {
    starts: VecDeque<Instant>,
    pending: usize,
}

/// Every bot's log, by name.
#[derive(Default)]
pub(super) struct Book(Mutex<HashMap<String, Log>>);

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Log>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more request of `bot` if `rate` lets it.
    fn take(&self, bot: &str, rate: Rate, now: Instant) -> Result<(), Blocked> {
        let mut book = self.lock();
        let log = book.entry(bot.to_string()).or_default();
        while log.starts.front().is_some_and(|&t| t + rate.per <= now) {
            log.starts.pop_front();
        }
        let counted = log.starts.len() + log.pending;
        let limit = rate.count as usize;
        if counted < limit {
            log.pending += 1;
            return Ok(());
        }
        // The start whose leaving the window makes room.
        match log.starts.get(counted - limit) {
            Some(&t) => Err(Blocked::Until(t + rate.per)),
            None => Err(Blocked::Released),
        }
    }

    /// `bot`'s starts in `rate`'s window up to `now`, and those counted
    /// that have not started yet.
    pub(super) fn counted(&self, bot: &str, rate: Rate, now: Instant) -> usize {
        self.lock().get(bot).map_or(0, |log| {
            let recent = log.starts.iter().filter(|&&t| t + rate.per > now).count();
            recent + log.pending
        })
    }

    /// When `bot` could next start under `rate` (`None`: now, or when a
    /// counted request gives up), counting nothing.
    fn free_at(&self, bot: &str, rate: Rate, now: Instant) -> Option<Instant> {
        let book = self.lock();
        let log = book.get(bot)?;
        // The starts are in order: those still in the window are a tail,
        // found by bisection (no copy, however many the rate allows).
        let first = log.starts.partition_point(|&t| t + rate.per <= now);
        let counted = log.starts.len() - first + log.pending;
        let limit = rate.count as usize;
        let t = log.starts.get(first + counted.checked_sub(limit)?)?;
        Some(*t + rate.per)
    }

    /// A counted request started (`true`) or gave up.
    fn settle(&self, bot: &str, started: bool) {
        let mut book = self.lock();
        if let Some(log) = book.get_mut(bot) {
            log.pending = log.pending.saturating_sub(1);
            if started {
                log.starts.push_back(Instant::now());
            } else if log.pending == 0 && log.starts.is_empty() {
                book.remove(bot);
            }
        }
    }
}

/// The step: each bot's rate, by bot id.
pub(super) struct RateLimit {
    pub(super) rates: PerBot<Rate>,
    pub(super) ledger: Arc<Ledger>,
}

impl Limit for RateLimit {
    fn applies(&self, asked: &Asked<'_>) -> bool {
        self.rates.get(asked.bot).is_some()
    }

    fn foresee(&self, asked: &Asked<'_>) -> Option<Refusal> {
        let (name, rate) = self.rates.get(asked.bot)?;
        let free = self.ledger.rate.free_at(name, *rate, Instant::now());
        super::beyond(asked.deadline, BotLimit::Rate(*rate), free)
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Some((name, rate)) = self.rates.get(asked.bot) else {
                return Ok(None);
            };
            let book = &self.ledger.rate;
            wait_for(
                &self.ledger,
                (Some(name), asked.deadline),
                BotLimit::Rate(*rate),
                || book.take(name, *rate, Instant::now()),
            )
            .await?;
            let mut held = Counted {
                ledger: self.ledger.clone(),
                bot: name.to_string(),
                started: false,
                shared: None,
            };
            held.shared = self
                .ledger
                .shared
                .take(
                    (name, Scope::Everywhere),
                    (rate.count, crate::store::Window::Log(rate.per)),
                    asked.deadline,
                    BotLimit::Rate(*rate),
                )
                .await?;
            Ok(Some(Box::new(held) as Box<dyn Held>))
        })
    }
}

/// A request counted against its bot's rate (in the fleet's count too, in
/// fleet mode).
struct Counted {
    ledger: Arc<Ledger>,
    bot: String,
    started: bool,
    shared: Option<crate::store::Counted>,
}

impl Held for Counted {
    fn started(&mut self) {
        self.started = true;
        if let Some(shared) = &mut self.shared {
            shared.started();
        }
        self.ledger.rate.settle(&self.bot, true);
        self.ledger.changed(&self.bot);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.started {
            self.ledger.rate.settle(&self.bot, false);
            self.ledger.changed(&self.bot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_window_holds_at_most_count_starts() {
        let book = Book::default();
        let rate = Rate {
            count: 2,
            per: Duration::from_secs(1),
        };
        let t0 = Instant::now();
        assert!(book.take("a", rate, t0).is_ok());
        assert!(book.take("a", rate, t0).is_ok());
        // Two counted, none started: the third waits for one to be given back.
        assert!(matches!(book.take("a", rate, t0), Err(Blocked::Released)));
        book.settle("a", true);
        tokio::time::advance(Duration::from_millis(300)).await;
        book.settle("a", true);
        match book.take("a", rate, Instant::now()) {
            Err(Blocked::Until(t)) => assert_eq!(t, t0 + Duration::from_secs(1)),
            _ => panic!("the oldest start leaves the window at 1 s"),
        }
        // Another bot has its own log.
        assert!(book.take("b", rate, Instant::now()).is_ok());
        tokio::time::advance(Duration::from_millis(700)).await;
        assert!(book.take("a", rate, Instant::now()).is_ok());
    }
}
