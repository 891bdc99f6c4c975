//! `rate = "10/s"`: at most that many starts of one bot, across all servers,
//! in any window of that length (a sliding log of its starts, exact: a bot
//! spreading requests over many servers cannot beat it).

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::{wait_for, Blocked, Ledger};
use crate::admission::{Asked, Held, Hold, Limit};
use crate::refusal::{BotLimit, Refusal};

/// The most starts a rate may allow in its window: the log holds one instant
/// per start.
pub const MAX_COUNT: u32 = 100_000;

/// `N/s`, `N/min` or `N/h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = || format!("{text:?} is not a rate (write e.g. \"10/s\", \"30/min\", \"500/h\")");
        let (count, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        let count = count.trim();
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let count: u32 = count
            .parse()
            .map_err(|_| format!("{text:?}: at most {MAX_COUNT} starts"))?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "min" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        if count == 0 || count > MAX_COUNT {
            return Err(format!("{text:?}: from 1 to {MAX_COUNT} starts"));
        }
        Ok(Rate { count, per })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

impl serde::Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

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
    names: Vec<String>,
    rates: Vec<Option<Rate>>,
    ledger: Arc<Ledger>,
}

impl RateLimit {
    pub(super) fn new(
        names: Vec<String>,
        rates: Vec<Option<Rate>>,
        ledger: Arc<Ledger>,
    ) -> RateLimit {
        RateLimit {
            names,
            rates,
            ledger,
        }
    }
}

impl Limit for RateLimit {
    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let (Some(Some(rate)), Some(name)) =
                (self.rates.get(asked.bot), self.names.get(asked.bot))
            else {
                return Ok(None);
            };
            let book = &self.ledger.rate;
            wait_for(&self.ledger, asked.deadline, BotLimit::Rate(*rate), || {
                book.take(name, *rate, Instant::now())
            })
            .await?;
            Ok(Some(Box::new(Counted {
                ledger: self.ledger.clone(),
                bot: name.clone(),
                started: false,
            }) as Box<dyn Held>))
        })
    }
}

/// A request counted against its bot's rate.
struct Counted {
    ledger: Arc<Ledger>,
    bot: String,
    started: bool,
}

impl Held for Counted {
    fn started(&mut self) {
        self.started = true;
        self.ledger.rate.settle(&self.bot, true);
        self.ledger.changed.notify_waiters();
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.started {
            self.ledger.rate.settle(&self.bot, false);
            self.ledger.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        assert_eq!(
            Rate::parse("10/s").unwrap(),
            Rate {
                count: 10,
                per: Duration::from_secs(1)
            }
        );
        assert_eq!(Rate::parse(" 30 / min ").unwrap().to_string(), "30/min");
        assert_eq!(Rate::parse("500/h").unwrap().per, Duration::from_secs(3600));
        for bad in [
            "",
            "10",
            "0/s",
            "-1/s",
            "1.5/s",
            "10/d",
            "10/sec",
            "100001/s",
            "99999999999/s",
            "/s",
            "+1/s",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad:?}");
        }
    }

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
