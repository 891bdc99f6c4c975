//! What the proxy saw of each server lately, for the status page: requests,
//! refusals by outcome and the last refusal with its rule, the addresses the
//! name resolved to, and the history its pictures draw ([`series`]): starts
//! and queue lengths per server, requests per minute per bot. Bounded: at
//! most [`MAX_HOSTS`], forgotten a day after they were last seen, least
//! recently seen first when full; at most [`MAX_BOTS`] bots.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::fate::{Fate, Lost};
use crate::target::{HostKey, Server};

pub mod series;
pub use series::{LastHour, Minutes, PerClass, Series, Start};

/// The most hosts remembered.
pub const MAX_HOSTS: u64 = 1000;

/// How long a host is remembered after it was last seen.
const IDLE: Duration = Duration::from_secs(86_400);

/// The most bots whose requests per minute are remembered (a reload may
/// rename them; the least recently active is forgotten first).
pub const MAX_BOTS: usize = 256;

/// How often the queues of active servers are looked at.
pub const QUEUE_SAMPLE: Duration = Duration::from_secs(1);

/// A server is looked at by the queue sampler this long after its last start.
const ACTIVE: Duration = Duration::from_secs(600);

/// One host's recent history.
#[derive(Clone, Debug, Default)]
pub struct Activity {
    /// The addresses its name resolved to, last time.
    pub addrs: Vec<SocketAddr>,
    pub requests: u64,
    /// Requests not relayed (the client leaving is not counted).
    pub refusals: u64,
    pub last_seen: Option<SystemTime>,
    /// When, and why (the rule, for a robots.txt refusal).
    pub last_refusal: Option<(SystemTime, &'static str, String)>,
    /// The SHA-256 of the robots.txt the last refusal was decided with.
    pub last_refusal_robots: Option<Arc<str>>,
    /// Requests by how they ended, indexed by [`Fate::index`].
    pub by_fate: [u64; Fate::ALL.len()],
    /// Pages crawlers lost here, by why, indexed by [`Lost::index`].
    pub lost: [u64; Lost::ALL.len()],
}

/// One host's summary and its history.
#[derive(Default)]
struct Host {
    activity: Activity,
    series: Series,
}

pub struct Recent {
    hosts: moka::sync::Cache<HostKey, Arc<Mutex<Host>>>,
    /// Each bot's requests per minute, by its name.
    bots: Mutex<HashMap<Arc<str>, Minutes>>,
    /// Minute 0 of [`Minutes`].
    base: Instant,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent::new()
    }
}

impl Recent {
    pub fn new() -> Recent {
        Recent {
            hosts: moka::sync::Cache::builder()
                .max_capacity(MAX_HOSTS)
                .time_to_idle(IDLE)
                .build(),
            bots: Mutex::new(HashMap::new()),
            base: Instant::now(),
        }
    }

    fn entry(&self, key: &HostKey) -> Arc<Mutex<Host>> {
        self.hosts.get_with_by_ref(key, Default::default)
    }

    /// The minute of [`Minutes`] `at` falls in.
    pub fn minute(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.base).as_secs() / 60
    }

    /// The addresses `key` resolved to for a request.
    pub fn resolved(&self, key: &HostKey, addrs: &[SocketAddr]) {
        let entry = self.entry(key);
        Self::addrs(&mut lock(&entry), addrs);
    }

    fn addrs(h: &mut Host, addrs: &[SocketAddr]) {
        if h.activity.addrs != addrs {
            h.activity.addrs = addrs.to_vec();
        }
    }

    /// The name `bot` as the history keeps it (one copy per bot).
    fn bot_name(bots: &mut HashMap<Arc<str>, Minutes>, bot: &str) -> Arc<str> {
        if let Some((name, _)) = bots.get_key_value(bot) {
            return name.clone();
        }
        if bots.len() >= MAX_BOTS {
            let idlest = bots
                .iter()
                .min_by_key(|(_, m)| m.last())
                .map(|(name, _)| name.clone());
            if let Some(name) = idlest {
                bots.remove(&name);
            }
        }
        let name: Arc<str> = Arc::from(bot);
        bots.insert(name.clone(), Minutes::default());
        name
    }

    /// A request to `server` by `bot` started `at` (its gate's time), spaced
    /// by `spacing` from the start before it (`reported`: a bot in report
    /// mode, started at once), `waiting` requests left in the queue behind it;
    /// the addresses `server` resolved to for it, as [`resolved`](Self::resolved).
    pub fn started(
        &self,
        server: &Server,
        bot: &str,
        (at, spacing, reported): (Instant, Duration, bool),
        waiting: usize,
    ) {
        let bot = Self::bot_name(&mut lock(&self.bots), bot);
        let entry = self.entry(&server.name);
        let mut h = lock(&entry);
        Self::addrs(&mut h, &server.addrs);
        h.series.started(Start {
            at,
            bot,
            spacing,
            reported,
        });
        let waiting = u32::try_from(waiting).unwrap_or(u32::MAX);
        h.series.queue_seen(Instant::now(), waiting);
    }

    /// A finished request to `key` by `bot` (`None`: turned away before a
    /// bot was picked).
    pub fn finished(
        &self,
        key: &HostKey,
        bot: Option<&str>,
        (fate, lost): (Fate, Option<Lost>),
        detail: &str,
        robots: Option<Arc<str>>,
    ) {
        if let Some(bot) = bot {
            let minute = self.minute(Instant::now());
            let mut bots = lock(&self.bots);
            let name = Self::bot_name(&mut bots, bot);
            if let Some(m) = bots.get_mut(&name) {
                m.count(minute, fate.class());
            }
        }
        let entry = self.entry(key);
        let mut h = lock(&entry);
        let a = &mut h.activity;
        let now = SystemTime::now();
        a.requests += 1;
        a.by_fate[fate.index()] += 1;
        if let Some(lost) = lost {
            a.lost[lost.index()] += 1;
        }
        a.last_seen = Some(now);
        if !matches!(fate, Fate::Relayed | Fate::ClientLeft) {
            a.refusals += 1;
            let detail: String = detail.chars().take(300).collect();
            a.last_refusal = Some((now, fate.as_str(), detail));
            a.last_refusal_robots = robots;
        }
    }

    /// Pages crawlers gave up at `key`: places they left in line and did
    /// not come back for (see `politeness::Place`).
    pub fn given_up(&self, key: &HostKey) {
        let entry = self.entry(key);
        lock(&entry).activity.lost[Lost::GivenUp.index()] += 1;
    }

    /// Every host remembered, most recently seen first.
    pub fn snapshot(&self) -> Vec<(HostKey, Activity)> {
        let mut all: Vec<(HostKey, Activity)> = self
            .hosts
            .iter()
            .map(|(k, v)| ((*k).clone(), lock(&v).activity.clone()))
            .collect();
        all.sort_by_key(|(_, a)| std::cmp::Reverse(a.last_seen));
        all
    }

    /// One host's summary.
    pub fn get(&self, key: &HostKey) -> Option<Activity> {
        self.hosts.get(key).map(|h| lock(&h).activity.clone())
    }

    /// One host's starts and queue lengths.
    pub fn series(&self, key: &HostKey) -> Option<Series> {
        self.hosts.get(key).map(|h| lock(&h).series.clone())
    }

    /// Each bot's requests per minute over the last hour, by name:
    /// `(minutes ago, counts by class)`, oldest first.
    pub fn bot_minutes(&self) -> Vec<(Arc<str>, LastHour)> {
        let minute = self.minute(Instant::now());
        let mut all: Vec<_> = lock(&self.bots)
            .iter()
            .map(|(name, m)| (name.clone(), m.last_hour(minute)))
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Notes the queue length of each server that started a request lately
    /// or had requests waiting when last seen; `waiting` looks at its gate.
    pub fn sample_queues(&self, waiting: impl Fn(&Server) -> Option<usize>) {
        let now = Instant::now();
        for (key, host) in self.hosts.iter() {
            let server = {
                let h = lock(&host);
                let active = h
                    .series
                    .last_start()
                    .is_some_and(|t| now.saturating_duration_since(t) < ACTIVE);
                if !active && h.series.waiting() == 0 {
                    continue;
                }
                Server {
                    name: (*key).clone(),
                    addrs: h.activity.addrs.clone(),
                }
            };
            // The gate is looked at without this host's lock held.
            let n = waiting(&server).unwrap_or(0);
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            lock(&host).series.queue_seen(now, n);
        }
    }

    /// Samples the queues every [`QUEUE_SAMPLE`] until `shutdown`, and
    /// notes the pages crawlers gave up meanwhile (their kept places due).
    pub async fn sampler(
        self: Arc<Self>,
        politeness: Arc<crate::politeness::Politeness>,
        shutdown: tokio_util::sync::CancellationToken,
    ) {
        let mut tick = tokio::time::interval(QUEUE_SAMPLE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    self.sample_queues(|s| politeness.peek(s).map(|g| g.waiting));
                    for server in politeness.given_up() {
                        self.given_up(&server);
                    }
                }
                () = shutdown.cancelled() => return,
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Scheme;

    fn key(i: usize) -> HostKey {
        HostKey {
            scheme: Scheme::Gemini,
            host: format!("h{i}.example"),
            port: 1965,
        }
    }

    #[test]
    fn counts_requests_refusals_and_the_last_rule() {
        let recent = Recent::new();
        recent.finished(&key(1), Some("b"), (Fate::Relayed, None), "", None);
        recent.finished(
            &key(1),
            Some("b"),
            (Fate::Disallowed, None),
            "rule Disallow: /a (line 2)",
            None,
        );
        recent.finished(&key(1), None, (Fate::ClientLeft, None), "left", None);
        let a = recent.get(&key(1)).unwrap();
        assert_eq!((a.requests, a.refusals), (3, 1));
        let (_, outcome, why) = a.last_refusal.unwrap();
        assert_eq!(
            (outcome, why.as_str()),
            ("disallowed", "rule Disallow: /a (line 2)")
        );
    }

    #[test]
    fn requests_are_counted_by_outcome_and_by_bot() {
        let recent = Recent::new();
        recent.finished(&key(1), Some("a"), (Fate::UpstreamFailed, None), "", None);
        recent.finished(&key(1), Some("a"), (Fate::UpstreamFailed, None), "", None);
        recent.finished(&key(1), Some("b"), (Fate::Relayed, None), "", None);
        recent.finished(&key(1), None, (Fate::Malformed, None), "", None);
        let a = recent.get(&key(1)).unwrap();
        assert_eq!(a.by_fate[Fate::UpstreamFailed.index()], 2);
        assert_eq!(a.by_fate[Fate::Malformed.index()], 1);
        let bots = recent.bot_minutes();
        let names: Vec<&str> = bots.iter().map(|(n, _)| &**n).collect();
        assert_eq!(names, ["a", "b"], "a request with no bot counts for none");
        assert_eq!(bots[0].1, vec![(0, [0, 0, 0, 2])]);
    }

    /// Bots named by endless reloads cannot grow the per-bot history.
    #[test]
    fn the_bots_are_bounded() {
        let recent = Recent::new();
        for i in 0..(MAX_BOTS * 3) {
            recent.finished(
                &key(1),
                Some(&format!("bot{i}")),
                (Fate::Relayed, None),
                "",
                None,
            );
        }
        assert_eq!(recent.bot_minutes().len(), MAX_BOTS);
    }

    /// A crawler visiting endless hosts cannot grow the table past its bound.
    #[test]
    fn the_table_is_bounded() {
        let recent = Recent::new();
        for i in 0..(MAX_HOSTS as usize * 3) {
            recent.finished(&key(i), Some("b"), (Fate::Relayed, None), "", None);
        }
        recent.hosts.run_pending_tasks();
        assert!(recent.hosts.entry_count() <= MAX_HOSTS);
    }
}
