//! The robots.txt cache: one entry per `(scheme, host, port)`, fresh for the TTL,
//! bounded by a byte budget (moka's weigher), at most one fetch per host in flight
//! (requests that arrive meanwhile wait for it), and stale-if-error: a host that
//! becomes unreachable keeps being judged by its last good robots.txt, up to
//! `max_stale`; with no good copy its requests are refused (or allowed, by
//! `on_unreachable`) until `unreachable_retry` has passed.
//!
//! Freshness is measured with `tokio::time`, so tests can move the clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::bots::BotId;
use crate::config::{OnUnreachable, RobotsConfig};
use crate::fetch::{FetchOutcome, RobotsFetcher};
use crate::robots::{BotProfile, Policy, RobotsTxt};
use crate::target::{HostKey, Server};

mod entry;
mod fleet;
use entry::Good;
pub use entry::{AllowedBy, Entry, Evidence, Rules};
pub use fleet::Fleet;

/// How an entry came to be, for metrics and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Hit,
    Miss,
}

pub struct RobotsCache {
    entries: moka::future::Cache<HostKey, Arc<Entry>>,
    inflight: Mutex<HashMap<HostKey, Arc<OnceCell<Arc<Entry>>>>>,
    /// What a reload may change (`reconfigure`).
    settings: arc_swap::ArcSwap<Settings>,
    /// Where a miss gets its outcome (chosen once, at start).
    outcomes: Box<dyn Outcomes>,
}

/// Where a host's robots.txt outcome comes from when this process has no
/// fresh one: this process fetches ([`Local`]), or the fleet shares one fetch
/// through the store ([`Fleet`]). One is chosen at start; the owner,
/// [`RobotsCache`], does not ask which.
pub trait Outcomes: Send + Sync {
    /// The new entry for `miss.server`.
    fn entry<'a>(&'a self, miss: Miss<'a>) -> BoxFuture<'a, Entry>;
    /// Forgets `key`'s outcome wherever it is kept beyond this process.
    fn forget<'a>(&'a self, key: &'a HostKey) -> BoxFuture<'a, ()>;
    /// How many fetches this process started (each may follow redirects).
    fn fetch_count(&self) -> u64;
}

/// One miss: what the cache knows when it has no fresh entry for a server.
pub struct Miss<'a> {
    settings: &'a Settings,
    server: &'a Server,
    /// The bot named in the fetch, if any.
    name: Option<&'a str>,
    /// The entry that was no longer fresh.
    previous: Option<&'a Entry>,
}

/// Outcomes fetched by this process alone, counting its fetches. In fleet
/// mode, what [`Fleet`] fetches with when the fleet's turn is this
/// process's or the store does not answer.
#[derive(Default)]
pub struct Local {
    fetches: AtomicU64,
}

impl Local {
    /// This process fetches `miss.server`'s robots.txt.
    async fn fetch(&self, miss: &Miss<'_>) -> Entry {
        let s = miss.settings;
        let outcome = self.fetch_outcome(miss).await;
        let good = miss.previous.and_then(|p| p.good.clone());
        s.entry_at(
            (outcome, miss.server.name.scheme),
            (Instant::now(), s.config.ttl),
            good,
        )
    }

    /// The outcome of this process's fetch, counted: conditional when this
    /// process's last good copy names its version (a `304` renews it).
    async fn fetch_outcome(&self, miss: &Miss<'_>) -> FetchOutcome {
        self.fetch_outcome_since(miss, miss.previous.and_then(|p| p.good.as_ref()))
            .await
    }

    /// The outcome of this process's fetch, counted: conditional when
    /// `known`, the newest copy at hand, names its version.
    async fn fetch_outcome_since(&self, miss: &Miss<'_>, known: Option<&Good>) -> FetchOutcome {
        self.fetches.fetch_add(1, Ordering::Relaxed);
        let fetcher = &miss.settings.fetcher;
        match known {
            Some(good) if !good.validators.is_empty() => {
                fetcher
                    .fetch_since(miss.server, miss.name, &good.validators)
                    .await
            }
            _ => fetcher.fetch(miss.server, miss.name).await,
        }
    }
}

impl Outcomes for Local {
    fn entry<'a>(&'a self, miss: Miss<'a>) -> BoxFuture<'a, Entry> {
        Box::pin(async move { self.fetch(&miss).await })
    }

    fn forget<'a>(&'a self, _key: &'a HostKey) -> BoxFuture<'a, ()> {
        Box::pin(std::future::ready(()))
    }

    fn fetch_count(&self) -> u64 {
        self.fetches.load(Ordering::Relaxed)
    }
}

/// The cache's settings: swapped whole by a reload.
struct Settings {
    fetcher: Arc<dyn RobotsFetcher>,
    config: RobotsConfig,
    /// Every bot's profile: one robots.txt, one policy per bot.
    bots: Vec<BotProfile>,
    /// Which set of bots: entries compiled for another are compiled again.
    generation: u64,
    /// How long a fleet fetch lock is held, and a waiter waits for it: a
    /// fetch's turn at the gate plus the fetch.
    lock_hold: Duration,
}

impl Settings {
    fn new(
        fetcher: Arc<dyn RobotsFetcher>,
        config: RobotsConfig,
        bots: Vec<BotProfile>,
        (generation, max_wait): (u64, Duration),
    ) -> Settings {
        let lock_hold = max_wait
            .saturating_add(config.fetch_timeout)
            .saturating_add(Duration::from_secs(1));
        Settings {
            fetcher,
            config,
            bots,
            generation,
            lock_hold,
        }
    }
    /// The entry for `outcome`, fetched at `fetched` and fresh for
    /// `fresh_for` after now (an unreachable host: until its retry); `good`:
    /// the last good robots.txt known, for stale-if-error.
    fn entry_at(
        &self,
        (outcome, scheme): (FetchOutcome, crate::target::Scheme),
        (fetched, fresh_for): (Instant, Duration),
        good: Option<Good>,
    ) -> Entry {
        let now = Instant::now();
        let fresh_until = now + outcome.fresh_for(fresh_for);
        match outcome {
            FetchOutcome::Found(body) => self.found(
                entry::good(body, fetched, Default::default()),
                fresh_until,
                scheme,
            ),
            FetchOutcome::FoundFor(body, _, validators) => {
                self.found(entry::good(body, fetched, validators), fresh_until, scheme)
            }
            // The copy asked about still stands, and counts from now; a
            // `304` to nothing asked (no copy kept) answers nothing.
            FetchOutcome::NotModified(_) => match good {
                Some(good) => self.found(good.confirmed(now), fresh_until, scheme),
                None => self.entry_at(
                    (
                        FetchOutcome::unreachable(
                            "robots.txt answered 304 to an unconditional request",
                        ),
                        scheme,
                    ),
                    (fetched, fresh_for),
                    None,
                ),
            },
            FetchOutcome::Missing(why) | FetchOutcome::TooManyRedirects(why) => Entry {
                rules: Rules::Missing(why),
                fresh_until,
                good: None,
                generation: self.generation,
                scheme,
            },
            FetchOutcome::Unreachable { why, retry_after } => {
                let retry_at = now + self.retry(retry_after);
                let good = good.filter(|g| {
                    now.duration_since(g.at) <= self.config.ttl + self.config.max_stale
                });
                match good {
                    Some(good) => Entry {
                        rules: Rules::Found {
                            policies: self.policies(&good.robots, scheme),
                            stale: Some(why),
                        },
                        fresh_until: retry_at,
                        good: Some(good),
                        generation: self.generation,
                        scheme,
                    },
                    None => Entry {
                        rules: Rules::Unreachable { why, retry_at },
                        fresh_until: retry_at,
                        good: None,
                        generation: self.generation,
                        scheme,
                    },
                }
            }
        }
    }

    /// The entry for a good robots.txt, fresh until `fresh_until`.
    fn found(&self, good: Good, fresh_until: Instant, scheme: crate::target::Scheme) -> Entry {
        Entry {
            rules: Rules::Found {
                policies: self.policies(&good.robots, scheme),
                stale: None,
            },
            fresh_until,
            good: Some(good),
            generation: self.generation,
            scheme,
        }
    }

    /// How long an unreachable host is not asked again.
    fn retry(&self, retry_after: Option<Duration>) -> Duration {
        retry_after
            .unwrap_or(self.config.unreachable_retry)
            .min(self.config.ttl)
            .max(Duration::from_secs(1))
    }

    /// One robots.txt compiled for every bot, as `scheme`'s servers name it.
    fn policies(&self, robots: &RobotsTxt, scheme: crate::target::Scheme) -> Box<[Policy]> {
        self.bots
            .iter()
            .map(|b| robots.policy(&entry::as_named(b, scheme)))
            .collect()
    }
}

impl RobotsCache {
    pub fn new(
        fetcher: Arc<dyn RobotsFetcher>,
        config: RobotsConfig,
        bots: Vec<BotProfile>,
    ) -> RobotsCache {
        let entries = moka::future::Cache::builder()
            .max_capacity(config.cache_bytes)
            .weigher(|k: &HostKey, e: &Arc<Entry>| e.weight(k))
            // Kept past freshness so that a stale copy can stand in for an unreachable host.
            .time_to_live(config.ttl.saturating_add(config.max_stale))
            .build();
        RobotsCache {
            entries,
            inflight: Mutex::new(HashMap::new()),
            settings: arc_swap::ArcSwap::from_pointee(Settings::new(
                fetcher,
                config,
                bots,
                (0, Duration::from_secs(59)),
            )),
            outcomes: Box::<Local>::default(),
        }
    }

    /// Misses get their outcome from `outcomes` (fleet mode: [`Fleet`], one
    /// fetch per host for the whole fleet). `max_wait`: how long a fetch may
    /// wait for its turn at the gate.
    pub fn with_outcomes(mut self, outcomes: Box<dyn Outcomes>, max_wait: Duration) -> RobotsCache {
        let s = self.settings.load_full();
        self.reconfigure(
            s.fetcher.clone(),
            s.config.clone(),
            s.bots.clone(),
            (s.generation, max_wait),
        );
        self.outcomes = outcomes;
        self
    }

    /// A reload: the fetcher (timeouts, where the proxy may connect), the
    /// robots settings and the bots. Cached entries stay; those compiled for
    /// other bots (`generation` differs) are compiled again from their kept
    /// robots.txt when next asked for, without a fetch. The byte budget and
    /// the longest an entry is kept are fixed at start.
    pub fn reconfigure(
        &self,
        fetcher: Arc<dyn RobotsFetcher>,
        config: RobotsConfig,
        bots: Vec<BotProfile>,
        (generation, max_wait): (u64, Duration),
    ) {
        self.settings.store(Arc::new(Settings::new(
            fetcher,
            config,
            bots,
            (generation, max_wait),
        )));
    }

    /// How many fetches were started (each may follow redirects).
    pub fn fetch_count(&self) -> u64 {
        self.outcomes.fetch_count()
    }

    /// The host's current rules, fetching them (from `server`'s addresses) if
    /// the cached ones are not fresh; `bot` is the bot asking (named in the
    /// fetch when `robots.name_bot_in_request` is set).
    pub async fn rules(&self, server: &Server, bot: BotId) -> (Arc<Entry>, Lookup) {
        let key = &server.name;
        let settings = self.settings.load_full();
        let mut previous = self.entries.get(key).await;
        if let Some(entry) = &mut previous {
            if entry.generation != settings.generation {
                *entry = Arc::new(entry.recompiled(settings.generation, &settings.bots));
                self.entries.insert(key.clone(), entry.clone()).await;
            }
            if Instant::now() < entry.fresh_until {
                return (entry.clone(), Lookup::Hit);
            }
        }
        let cell = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
            inflight.entry(key.clone()).or_default().clone()
        };
        // One caller runs the fetch; the others wait on the same cell. If the one
        // fetching goes away (its client hung up), a waiter takes over.
        let entry = cell
            .get_or_init(|| async {
                let s = &settings;
                let name = s
                    .bots
                    .get(bot)
                    .map(|b| b.token())
                    .filter(|t| s.config.name_bot_in_request && !t.is_empty());
                let miss = Miss {
                    settings: s,
                    server,
                    name,
                    previous: previous.as_deref(),
                };
                let entry = Arc::new(self.outcomes.entry(miss).await);
                if !matches!(entry.rules, Rules::StoreDown) {
                    self.entries.insert(key.clone(), entry.clone()).await;
                }
                entry
            })
            .await
            .clone();
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight.get(key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            inflight.remove(key);
        }
        (entry, Lookup::Miss)
    }

    pub fn on_unreachable(&self) -> OnUnreachable {
        self.settings.load().config.on_unreachable
    }

    /// Forgets `key`'s robots.txt (an operator's action): the next request
    /// fetches it again. In fleet mode the fleet's copy is forgotten too.
    /// Returns whether this proxy had it cached.
    pub async fn forget(&self, key: &HostKey) -> bool {
        self.outcomes.forget(key).await;
        self.entries.remove(key).await.is_some()
    }

    /// A copy of one cached entry, if any (the status page).
    pub async fn peek(&self, key: &HostKey) -> Option<Arc<Entry>> {
        self.entries.get(key).await
    }

    /// Every cached entry (the status page). Walks the whole cache.
    pub fn snapshot(&self) -> Vec<(HostKey, Arc<Entry>)> {
        self.entries
            .iter()
            .map(|(k, v)| ((*k).clone(), v))
            .collect()
    }

    /// Entries and their weight, for metrics.
    pub async fn usage(&self) -> (u64, u64) {
        self.entries.run_pending_tasks().await;
        (self.entries.entry_count(), self.entries.weighted_size())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::fetch::FetchFuture;
    use crate::target::Scheme;

    /// Answers from a script, one outcome per fetch, counting fetches and
    /// holding each for a while so that concurrent requests overlap.
    struct Scripted {
        outcomes: Mutex<Vec<FetchOutcome>>,
    }

    impl RobotsFetcher for Scripted {
        fn fetch<'a>(&'a self, _server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                self.outcomes.lock().unwrap().remove(0)
            })
        }
    }

    pub(in crate::cache) fn config() -> RobotsConfig {
        RobotsConfig {
            ttl: Duration::from_secs(3600),
            cache_bytes: 1 << 20,
            max_stale: Duration::from_secs(86400),
            unreachable_retry: Duration::from_secs(60),
            on_unreachable: OnUnreachable::Disallow,
            fetch_timeout: Duration::from_secs(5),
            name_bot_in_request: false,
        }
    }

    fn key() -> Server {
        Server {
            name: HostKey {
                scheme: Scheme::Gemini,
                host: "example.org".into(),
                port: 1965,
            },
            addrs: Vec::new(),
        }
    }

    fn cache(outcomes: Vec<FetchOutcome>) -> RobotsCache {
        RobotsCache::new(
            Arc::new(Scripted {
                outcomes: Mutex::new(outcomes),
            }),
            config(),
            vec![BotProfile::new("bot")],
        )
    }

    fn allows(entry: &Entry, path: &str) -> Option<bool> {
        match &entry.rules {
            Rules::Found { policies, .. } => Some(policies[0].decide(path).allowed()),
            Rules::Missing(_) => Some(true),
            Rules::Unreachable { .. } | Rules::StoreDown => None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_misses_share_one_fetch() {
        let cache = Arc::new(cache(vec![FetchOutcome::Found(
            b"User-agent: *\nDisallow: /p\n".to_vec(),
        )]));
        let lookups = (0..50).map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.rules(&key(), 0).await })
        });
        for lookup in lookups {
            let (entry, _) = lookup.await.unwrap();
            assert_eq!(allows(&entry, "/p"), Some(false));
        }
        assert_eq!(cache.fetch_count(), 1);
        let (_, how) = cache.rules(&key(), 0).await;
        assert_eq!(how, Lookup::Hit);
        assert_eq!(cache.fetch_count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn stale_copy_stands_in_when_the_host_becomes_unreachable() {
        let cache = cache(vec![
            FetchOutcome::Found(b"User-agent: *\nDisallow: /p\n".to_vec()),
            FetchOutcome::Unreachable {
                why: "down".into(),
                retry_after: None,
            },
            FetchOutcome::Found(b"User-agent: *\nDisallow: /q\n".to_vec()),
        ]);
        let (e, _) = cache.rules(&key(), 0).await;
        assert_eq!(allows(&e, "/p"), Some(false));
        tokio::time::advance(Duration::from_secs(3601)).await;
        let (e, how) = cache.rules(&key(), 0).await;
        assert_eq!(how, Lookup::Miss);
        assert!(matches!(&e.rules, Rules::Found { stale: Some(why), .. } if why == "down"));
        assert_eq!(allows(&e, "/p"), Some(false));
        // The next try is after the retry period, not the full TTL.
        tokio::time::advance(Duration::from_secs(61)).await;
        let (e, _) = cache.rules(&key(), 0).await;
        assert_eq!(allows(&e, "/p"), Some(true));
        assert_eq!(allows(&e, "/q"), Some(false));
        assert_eq!(cache.fetch_count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn unreachable_without_a_copy_is_retried_after_the_retry_period() {
        let cache = cache(vec![
            FetchOutcome::Unreachable {
                why: "44".into(),
                retry_after: Some(Duration::from_secs(5)),
            },
            FetchOutcome::Missing("51".into()),
        ]);
        let (e, _) = cache.rules(&key(), 0).await;
        assert!(matches!(e.rules, Rules::Unreachable { .. }));
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(cache.rules(&key(), 0).await.1, Lookup::Hit);
        tokio::time::advance(Duration::from_secs(3)).await;
        let (e, how) = cache.rules(&key(), 0).await;
        assert_eq!(how, Lookup::Miss);
        assert_eq!(allows(&e, "/anything"), Some(true));
    }

    /// One fetch serves every bot, each judged by its own groups; the bot
    /// whose request caused the fetch is the one named in it.
    #[tokio::test(start_paused = true)]
    async fn one_fetch_one_policy_per_bot() {
        struct Named(Mutex<Vec<Option<String>>>);
        impl RobotsFetcher for Named {
            fn fetch<'a>(&'a self, _server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a> {
                self.0.lock().unwrap().push(bot.map(String::from));
                Box::pin(async {
                    FetchOutcome::Found(
                        b"User-agent: alpha\nDisallow: /b\nCrawl-delay: 3\n\nUser-agent: beta\nDisallow: /a\n"
                            .to_vec(),
                    )
                })
            }
        }
        let fetcher = Arc::new(Named(Mutex::new(Vec::new())));
        let mut named = config();
        named.name_bot_in_request = true;
        let cache = RobotsCache::new(
            fetcher.clone(),
            named,
            vec![BotProfile::new("alpha"), BotProfile::new("beta")],
        );
        let (entry, _) = cache.rules(&key(), 1).await;
        let Rules::Found { policies, .. } = &entry.rules else {
            panic!("{:?}", entry.rules)
        };
        assert!(policies[0].decide("/a").allowed() && !policies[0].decide("/b").allowed());
        assert!(!policies[1].decide("/a").allowed() && policies[1].decide("/b").allowed());
        assert_eq!(entry.crawl_delay(0), Some(Duration::from_secs(3)));
        assert_eq!(entry.crawl_delay(1), None);
        assert_eq!(cache.rules(&key(), 0).await.1, Lookup::Hit);
        assert_eq!(*fetcher.0.lock().unwrap(), [Some("beta".to_string())]);
    }
}
