//! Password guessing on the SOCKS5 listener: each client (an IPv4 address, or
//! an IPv6 /64, as for the per-client cap) has a budget of failed logins, a
//! token bucket of [`BURST`] refilled one per [`REFILL`]. A client whose
//! budget is spent is answered "failure" without its password being looked
//! at, so guessing runs at about six tries a minute whatever the client's
//! speed, and a right guess made then does not tell it anything. Failures are
//! logged under a budget of lines a second (the rest counted in the next line).
//! Bounded: at most [`MAX_CLIENTS`] clients are remembered, each forgotten
//! once its bucket is full again.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::slots::ClientKey;

/// Failed logins a client may make at once.
pub const BURST: u32 = 5;
/// One more failed login allowed each time this passes.
pub const REFILL: Duration = Duration::from_secs(10);
/// Clients remembered at most; past it the fullest buckets are dropped first.
pub const MAX_CLIENTS: usize = 100_000;

struct Bucket {
    /// Failures still allowed, as of `at`.
    left: f64,
    at: Instant,
}

impl Bucket {
    fn now(&self, now: Instant) -> f64 {
        let refilled = now.duration_since(self.at).as_secs_f64() / REFILL.as_secs_f64();
        (self.left + refilled).min(f64::from(BURST))
    }
}

/// The failed-login budgets, and the budget of log lines about them.
pub struct Guesses {
    buckets: Mutex<HashMap<ClientKey, Bucket>>,
    log: Mutex<crate::accept::LogBudget>,
}

impl Default for Guesses {
    fn default() -> Guesses {
        Guesses {
            buckets: Mutex::default(),
            log: Mutex::new(crate::accept::LogBudget::new(LOG_LINES_PER_SECOND)),
        }
    }
}

/// Lines a second about refused SOCKS5 handshakes.
pub const LOG_LINES_PER_SECOND: u32 = 20;

impl Guesses {
    /// `Some(lines left out since the last one)` when a refused handshake
    /// may be logged now.
    pub fn log_line(&self) -> Option<u64> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).note()
    }

    /// Takes one password check for `ip`, if its budget has one. It is taken
    /// before the password is looked at, not after a wrong one: connections
    /// racing each other (a client opening many at once, or the next one
    /// opened while the last failure was being written) cannot check more
    /// passwords between them than the budget holds. A right password gives
    /// the check back ([`Guesses::succeeded`]).
    pub fn take(&self, ip: IpAddr) -> bool {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if buckets.len() >= MAX_CLIENTS {
            buckets.retain(|_, b| b.now(now) < f64::from(BURST));
            if buckets.len() >= MAX_CLIENTS {
                // Still full of clients guessing: forget the ones with the
                // most left (the least dangerous).
                let mut lefts: Vec<f64> = buckets.values().map(|b| b.now(now)).collect();
                lefts.sort_by(|a, b| b.total_cmp(a));
                let cut = lefts[MAX_CLIENTS / 2];
                buckets.retain(|_, b| b.now(now) < cut);
            }
        }
        let bucket = buckets.entry(ClientKey::of(ip)).or_insert(Bucket {
            left: f64::from(BURST),
            at: now,
        });
        let left = bucket.now(now);
        if left < 1.0 {
            return false;
        }
        bucket.left = left - 1.0;
        bucket.at = now;
        true
    }

    /// Whether `ip` has no password check left now (for the log line of a
    /// failed one).
    pub fn spent(&self, ip: IpAddr) -> bool {
        let now = Instant::now();
        let buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets
            .get(&ClientKey::of(ip))
            .is_some_and(|b| b.now(now) < 1.0)
    }

    /// A client logged in: its failures are forgotten.
    pub fn succeeded(&self, ip: IpAddr) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.remove(&ClientKey::of(ip));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_one_guess_per_refill() {
        let g = Guesses::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        for i in 0..BURST {
            assert!(g.take(a), "try {i}");
            assert_eq!(g.spent(a), i + 1 == BURST);
        }
        assert!(!g.take(a));
        assert!(g.take(b), "another client is not affected");
        tokio::time::advance(REFILL).await;
        assert!(g.take(a));
        assert!(g.spent(a));
        assert!(!g.take(a));
        // The same /64 is one client.
        for _ in 0..BURST {
            assert!(g.take("2001:db8::1".parse().unwrap()));
        }
        assert!(!g.take("2001:db8::ffff".parse().unwrap()));
        g.succeeded(a);
        assert!(g.take(a));
    }
}
