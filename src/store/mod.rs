//! Fleet mode: several proxies share one politeness gate, the robots.txt
//! outcomes, the certificate pins and the bots' limit counts through Redis or
//! Valkey (`[store] url`),
//! so three proxies give a capsule its Crawl-delay once, not three times
//! (docs/architecture.md, "Fleet mode").
//!
//! This module is the store's side only: the connection (the `redis` crate's
//! connection manager, which reconnects on its own), the key layout, the
//! server-side scripts, a deadline on every call, and whether the store is up.
//! What to do with the answers stays with the gate (`politeness`), the cache
//! (`cache`), the connector (`upstream`) and the limits (`bot_limits`).
//!
//! Keys are `<prefix>{<tag>}:<kind>`: one hash tag per server, so a Redis
//! Cluster keeps a server's keys in one slot and its scripts may touch them
//! together. Every key is written with a time to live: nothing stored grows
//! without bound.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use thiserror::Error;
use tokio_util::sync::CancellationToken;

use crate::metrics::{Metrics, StoreEvent, StoreOp};

mod address;
mod batch;
mod counts;
mod gate;
mod link;
mod pins;
mod renew;
mod ride;
mod robots;
mod wake;

pub use address::Address;
pub use counts::{CountAsk, Counted, Window};
pub use gate::{GateAsk, Lease, SlowedAs};
pub use link::Node;
pub use robots::{FetchLock, Kind, Record, RobotsTurn, Stored};

use link::{Conn, Link};

/// What requests get while the store does not answer (`[store] on_unavailable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnUnavailable {
    /// "Slow down" (`44 N`, `3503`): never risk N times a server's rate (the default).
    Refuse,
    /// Each proxy falls back to its own gate and cache until the store is back.
    Local,
}

impl OnUnavailable {
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnavailable::Refuse => "refuse",
            OnUnavailable::Local => "local",
        }
    }
}

/// `[store]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// `redis://[user:password@]host:port/db`, `unix:///path/redis.sock`,
    /// `redis+cluster://…` or `redis+sentinel://…` (`Address`).
    pub url: String,
    /// Put in front of every key and the wake-up channel.
    pub prefix: String,
    pub on_unavailable: OnUnavailable,
    /// The deadline of every call.
    pub timeout: Duration,
    /// How long a request's lease outlives its proxy (renewed while it runs).
    pub lease: Duration,
}

/// The store did not answer, or not in time.
#[derive(Clone, Debug, Error)]
pub enum StoreError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Redis(String),
    #[error("an answer of the wrong shape: {0}")]
    Shape(&'static str),
}

/// The URL with any password replaced, for logs.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// One proxy's handle on the fleet store.
pub struct Store {
    link: Link,
    address: Address,
    config: StoreConfig,
    shown: String,
    up: AtomicBool,
    metrics: Arc<Metrics>,
    wakers: crate::waiters::Waiters,
    /// Makes this proxy's lease names unique in the fleet.
    instance: String,
    leases: AtomicU64,
    /// The masters with their run ids, as last seen by the health check.
    nodes: std::sync::Mutex<Option<Vec<Node>>>,
    /// Counts the store's restarts and failovers seen; lease renewals watch
    /// it, so the requests running here are re-asserted at once in a store
    /// that lost them.
    restarts: tokio::sync::watch::Sender<u64>,
    /// The last time the health check found the store broken (no answer, a
    /// restart, a failover): the data it holds may have lost writes made
    /// before then (`since_break`). Microseconds after `opened`, plus one;
    /// 0: never. Read by every reservation: an atomic, not a lock.
    broke: AtomicU64,
    opened: std::time::Instant,
    /// Whether the state logged last was up, and when a change logged it.
    said: std::sync::Mutex<Option<(bool, Option<std::time::Instant>)>>,
    /// What requests leave behind (leases given back, starts recorded),
    /// sent in batches.
    batch: batch::Batch,
    /// Reservations riding together (`ride`).
    rides: gate::GateRides,
    /// The leases held here, renewed by one task (`renew`).
    renewals: renew::Renewals,
}

/// What the status page shows of the store.
#[derive(Clone, Debug)]
pub struct Topology {
    pub kind: &'static str,
    pub shown: String,
    pub up: bool,
    pub on_unavailable: &'static str,
    pub masters: Vec<Node>,
    pub restarts: u64,
    pub since_break: Option<Duration>,
}

/// The longest wait anything schedules: about a century (`politeness::NEVER`).
/// Every duration given to the store's scripts is capped at it: in
/// microseconds it stays below 2^53, exact in Lua's numbers (doubles).
pub const NEVER: Duration = Duration::from_secs(100 * 365 * 86_400);

/// How often the health check asks the store.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

impl Store {
    /// Connects lazily (a store that is down at start is not fatal: requests
    /// get what `on_unavailable` says until it answers), asks it once so the
    /// first requests know where they stand, and starts the health check and
    /// the wake-up listener. A URL that cannot be parsed is an error.
    pub async fn open(
        config: StoreConfig,
        metrics: Arc<Metrics>,
        stop: CancellationToken,
    ) -> Result<Arc<Store>, StoreError> {
        let address = Address::parse(&config.url).map_err(StoreError::Redis)?;
        let link =
            Link::open(&address, config.timeout).map_err(|e| StoreError::Redis(e.to_string()))?;
        let instance = format!(
            "{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
                & 0xffff_ffff_ffff
        );
        let store = Arc::new(Store {
            link,
            address,
            shown: redacted(&config.url),
            config,
            up: AtomicBool::new(false),
            metrics,
            wakers: crate::waiters::Waiters::default(),
            instance,
            leases: AtomicU64::new(0),
            nodes: std::sync::Mutex::new(None),
            restarts: tokio::sync::watch::Sender::new(0),
            broke: AtomicU64::new(0),
            opened: std::time::Instant::now(),
            said: std::sync::Mutex::new(None),
            batch: batch::Batch::default(),
            rides: gate::GateRides::default(),
            renewals: renew::Renewals::default(),
        });
        // Up, it is logged as a change; down at start needs saying here.
        match store.ping().await {
            Ok(()) => {}
            Err(e) => {
                *store.said.lock().unwrap_or_else(|e| e.into_inner()) = Some((false, None));
                tracing::warn!(
                    store = %store.shown,
                    error = %e,
                    on_unavailable = store.config.on_unavailable.as_str(),
                    "fleet store does not answer at start"
                )
            }
        }
        tokio::spawn(store.clone().health(stop.clone()));
        tokio::spawn(batch::send(store.clone(), stop.clone()));
        tokio::spawn(renew::run(store.clone(), stop.clone()));
        tokio::spawn(wake::listen(store.clone(), stop));
        Ok(store)
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Whether the last call was answered.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// The store is down and requests are to be answered "slow down".
    pub fn refuses(&self) -> bool {
        !self.is_up() && self.config.on_unavailable == OnUnavailable::Refuse
    }

    /// `<prefix>{<tag>}:<kind>`. Braces in a tag would split its hash tag:
    /// they are percent-encoded.
    fn key(&self, tag: &str, kind: &str) -> String {
        let tag = tag.replace('{', "%7B").replace('}', "%7D");
        format!("{}{{{tag}}}:{kind}", self.config.prefix)
    }

    /// The channel that says "a lease was released" or "a robots.txt was written".
    fn channel(&self) -> String {
        format!("{}wake", self.config.prefix)
    }

    /// Deletes `key` (an operator's forget action).
    async fn delete(&self, op: StoreOp, key: String) -> Result<(), StoreError> {
        let mut conn = self.connection();
        self.run(op, async move {
            redis::cmd("DEL")
                .arg(&key)
                .query_async::<i64>(&mut conn)
                .await
        })
        .await
        .map(drop)
    }

    fn connection(&self) -> Conn {
        self.link.conn()
    }

    /// Runs one call with the deadline, timing it and counting a failure;
    /// a change between up and down is logged once.
    async fn run<T>(
        &self,
        op: StoreOp,
        call: impl Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        let started = std::time::Instant::now();
        let result = match tokio::time::timeout(self.config.timeout, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(StoreError::Redis(e.to_string())),
            Err(_) => Err(StoreError::Timeout(self.config.timeout)),
        };
        self.metrics
            .store_seconds
            .observe(started.elapsed().as_secs_f64());
        match &result {
            Ok(_) => self.mark(true, None),
            Err(e) => {
                self.metrics.store_error(op);
                self.mark(false, Some(e));
            }
        }
        result
    }

    fn mark(&self, up: bool, error: Option<&StoreError>) {
        if self.up.swap(up, Ordering::AcqRel) == up {
            return;
        }
        self.metrics.store_up.set(i64::from(up));
        self.say(up, error, false);
    }

    /// Logs a change between up and down, at most once a second (a Cluster
    /// with one master down answers some calls and not others); the health
    /// check logs the state it finds when the last word said otherwise.
    fn say(&self, up: bool, error: Option<&StoreError>, health: bool) {
        {
            let mut said = self.said.lock().unwrap_or_else(|e| e.into_inner());
            match *said {
                Some((was, _)) if was == up => return,
                Some((_, Some(at))) if !health && at.elapsed() < HEALTH_EVERY => return,
                _ => {}
            }
            *said = Some((up, Some(std::time::Instant::now())));
        }
        match error {
            None if up => {
                tracing::info!(store = %self.shown, kind = self.address.kind(), "fleet store answers: the gate, robots.txt and pins are shared with the fleet")
            }
            _ => tracing::warn!(
                store = %self.shown,
                error = %error.map_or_else(String::new, ToString::to_string),
                on_unavailable = self.config.on_unavailable.as_str(),
                "fleet store unavailable: {}",
                match self.config.on_unavailable {
                    OnUnavailable::Refuse => "requests are answered \"slow down\" until it is back",
                    OnUnavailable::Local => "each proxy uses its own gate and cache until it is back",
                }
            ),
        }
    }

    /// Asks the store who its masters are (`INFO server` on each): another
    /// run id at an address is a restart, another address a failover
    /// (another master); either may have lost writes. So is a store that
    /// does not answer: its master may be dying.
    async fn ping(&self) -> Result<(), StoreError> {
        let seen = self.run(StoreOp::Ping, self.link.look(&self.shown)).await;
        let seen = match seen {
            Ok(seen) => seen,
            Err(e) => {
                self.broken();
                return Err(e);
            }
        };
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = nodes.as_ref().filter(|old| **old != seen) {
            let moved = old.iter().map(|n| &n.addr).ne(seen.iter().map(|n| &n.addr));
            let (event, what) = if moved {
                (StoreEvent::Failover, "another master answers (a failover)")
            } else {
                (StoreEvent::Restart, "a master restarted (another run id)")
            };
            self.metrics.store_event(event);
            tracing::warn!(
                store = %self.shown,
                before = %list(old),
                now = %list(&seen),
                "fleet store: {what}: requests running here are re-asserted in it; each server's next start waits out its spacing"
            );
            self.broken();
            self.restarts.send_modify(|n| *n += 1);
        }
        *nodes = Some(seen);
        Ok(())
    }

    /// The store may have lost writes made until now.
    fn broken(&self) {
        self.broke.store(
            micros(self.opened.elapsed()).saturating_add(1),
            Ordering::Release,
        );
    }

    /// How long since the health check last found the store broken (no
    /// answer, a restart, a failover); `None` if it never did. Every start
    /// the store may have lost was made before then, so the gate spaces the
    /// next start at each server from then (the gate's `RESERVE`).
    fn since_break(&self) -> Option<Duration> {
        match self.broke.load(Ordering::Acquire) {
            0 => None,
            at => Some(
                self.opened
                    .elapsed()
                    .saturating_sub(Duration::from_micros(at - 1)),
            ),
        }
    }

    /// The store's shape, its masters and its health, for the status page.
    pub fn topology(&self) -> Topology {
        Topology {
            kind: self.address.kind(),
            shown: self.shown.clone(),
            up: self.is_up(),
            on_unavailable: self.config.on_unavailable.as_str(),
            masters: self
                .nodes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
                .unwrap_or_default(),
            restarts: *self.restarts.borrow(),
            since_break: self.since_break(),
        }
    }

    /// Asks the store once a second, so a store that comes back is noticed
    /// without a request having to fail first.
    async fn health(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(HEALTH_EVERY) => {}
            }
            let looked = self.ping().await;
            self.say(self.is_up(), looked.as_ref().err(), true);
        }
    }

    /// How long after a store starts every running request of the fleet has
    /// been re-asserted in it: each proxy's health check notices within
    /// `HEALTH_EVERY`, then renews its leases, each call within `timeout`.
    fn reassert_within(&self) -> Duration {
        HEALTH_EVERY + 2 * self.config.timeout
    }

    /// Renews a lease while it is held (`renew`): `renewal` makes one call.
    /// Until `self.renewals.stop` (the lease's drop calls it).
    fn renewing(
        &self,
        op: StoreOp,
        renewal: impl Fn(&Store) -> redis::ScriptInvocation<'static> + Send + Sync + 'static,
    ) -> renew::Renewal {
        self.renewals.add(op, Arc::new(renewal))
    }

    /// A name for one lease, unique in the fleet.
    fn lease_name(&self) -> String {
        format!(
            "{}-{}",
            self.instance,
            self.leases.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// `addr (run id)`, comma-separated, for a log line.
fn list(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| format!("{} ({})", n.addr, n.run_id.get(..8).unwrap_or(&n.run_id)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whole microseconds, saturating: what the scripts take.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redacted("redis://user:secret@10.0.0.1:6379/0"),
            "redis://***@10.0.0.1:6379/0"
        );
        assert_eq!(
            redacted("unix:///run/redis/redis.sock"),
            "unix:///run/redis/redis.sock"
        );
        assert_eq!(redacted("redis://:p@ss@h:1"), "redis://***@h:1");
    }
}
