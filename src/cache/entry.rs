//! One cache entry: what a host's robots.txt says, compiled for each bot,
//! with its freshness, its last good copy (parsed and as text) and what it
//! weighs.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bots::BotId;
use crate::fetch::Validators;
use crate::protocol::rules::Naming;
use crate::robots::{BotProfile, Policy, RobotsTxt};
use crate::target::HostKey;

/// What a host's robots.txt says right now.
#[derive(Debug)]
pub enum Rules {
    /// A robots.txt, compiled for each bot (in the order of [`crate::bots::Bots`]).
    /// `stale` says why a newer one could not be fetched, when this is a last good copy.
    Found {
        policies: Box<[Policy]>,
        stale: Option<String>,
    },
    /// No robots.txt: everything allowed.
    Missing(String),
    /// robots.txt could not be fetched and there is no good copy.
    Unreachable { why: String, retry_at: Instant },
    /// Fleet mode, the store down, `on_unavailable = "refuse"`: the request
    /// is answered "slow down". Never cached.
    StoreDown,
}

/// A good robots.txt: parsed, when it was fetched (or its server last said
/// it had not changed), its text, the text's SHA-256 (hex): what a decision
/// made with it names, and what its server named its version by.
#[derive(Clone, Debug)]
pub(super) struct Good {
    pub robots: Arc<RobotsTxt>,
    pub at: Instant,
    pub body: Arc<[u8]>,
    pub sha256: Arc<str>,
    pub validators: Validators,
}

/// A fetched robots.txt's body as a [`Good`] copy: parsed and digested once.
pub(super) fn good(body: Vec<u8>, fetched: Instant, validators: Validators) -> Good {
    let digest = crate::robots::sha256_hex(&body);
    Good {
        robots: Arc::new(RobotsTxt::parse(&body)),
        at: fetched,
        body: Arc::from(body),
        sha256: Arc::from(digest),
        validators,
    }
}

impl Good {
    /// The same copy, its server having said at `at` that it has not changed.
    pub(super) fn confirmed(&self, at: Instant) -> Good {
        Good { at, ..self.clone() }
    }
}

/// The robots.txt a decision was made with: its digest and when it was
/// fetched (by this proxy, or by the fleet's proxy that shared it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// SHA-256 of its text, lower-case hex (`robots-proxy check --sha256`).
    pub sha256: Arc<str>,
    pub fetched: std::time::SystemTime,
    /// What in it allowed the request (its group and rule), when it was
    /// allowed; a refusal names its own.
    pub allowed_by: Option<AllowedBy>,
}

/// The decision that allowed a request, written out only when its log line
/// is: `group * (line 1); rule Allow: /public (line 2)`.
#[derive(Clone, Debug)]
pub struct AllowedBy {
    pub entry: Arc<Entry>,
    pub bot: BotId,
    pub decision: crate::robots::Decision,
}

impl std::fmt::Display for AllowedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.entry.rules {
            Rules::Found { policies, .. } => match policies.get(self.bot) {
                Some(policy) => write!(f, "{:#}", policy.explain(&self.decision)),
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }
}

impl PartialEq for AllowedBy {
    fn eq(&self, other: &AllowedBy) -> bool {
        Arc::ptr_eq(&self.entry, &other.entry)
            && self.bot == other.bot
            && self.decision == other.decision
    }
}

impl Eq for AllowedBy {}

impl Evidence {
    /// Seconds since the Unix epoch when it was fetched.
    pub fn fetched_unix(&self) -> u64 {
        self.fetched
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

#[derive(Debug)]
pub struct Entry {
    pub rules: Rules,
    /// Until when this entry answers without a new fetch.
    pub(super) fresh_until: Instant,
    /// The last robots.txt that was fetched, and when: kept for stale-if-error
    /// (and its text, for the status page).
    pub(super) good: Option<Good>,
    /// The set of bots `rules` was compiled for (see [`super::RobotsCache::reconfigure`]).
    pub(super) generation: u64,
    /// Whose robots.txt: a web server's names a bot by its token alone (the
    /// Gemini virtual agents are the small web's).
    pub(super) scheme: crate::target::Scheme,
}

/// What moka keeps per entry besides the key and the value: its hash-table
/// slot, the entry's metadata, and the access- and write-order queue nodes
/// (measured with `benches/cache_memory.rs`, which checks the sum below
/// against the process's resident memory for 100 000 hosts).
const MOKA_PER_ENTRY: usize = 280;

/// What the allocator adds to each allocation (its header and rounding).
const PER_ALLOCATION: usize = 16;

impl Entry {
    /// The set of bots this entry's policies were compiled for.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// This entry with its robots.txt compiled for another set of bots (a
    /// reload changed them); the fetch, its freshness and its good copy stay.
    pub fn recompiled(&self, generation: u64, bots: &[BotProfile]) -> Entry {
        let rules = match &self.rules {
            Rules::Found { stale, .. } => match &self.good {
                Some(Good { robots, .. }) => Rules::Found {
                    policies: bots
                        .iter()
                        .map(|b| robots.policy(&as_named(b, self.scheme)))
                        .collect(),
                    stale: stale.clone(),
                },
                // A found robots.txt always keeps its body; this cannot happen.
                None => Rules::Missing("the cached robots.txt was lost".into()),
            },
            Rules::Missing(why) => Rules::Missing(why.clone()),
            Rules::Unreachable { why, retry_at } => Rules::Unreachable {
                why: why.clone(),
                retry_at: *retry_at,
            },
            Rules::StoreDown => Rules::StoreDown,
        };
        Entry {
            rules,
            fresh_until: self.fresh_until,
            good: self.good.clone(),
            generation,
            scheme: self.scheme,
        }
    }

    /// What the status page says of it: `found`, `stale` (a last good copy
    /// stands in for an unreachable host), `missing`, `unreachable`, `store-down`.
    pub fn state(&self) -> &'static str {
        match &self.rules {
            Rules::Found { stale: None, .. } => "found",
            Rules::Found { stale: Some(_), .. } => "stale",
            Rules::Missing(_) => "missing",
            Rules::Unreachable { .. } => "unreachable",
            Rules::StoreDown => "store-down",
        }
    }

    /// Why it is missing, unreachable or stale.
    pub fn detail(&self) -> Option<&str> {
        match &self.rules {
            Rules::Found { stale, .. } => stale.as_deref(),
            Rules::Missing(why) | Rules::Unreachable { why, .. } => Some(why),
            Rules::StoreDown => None,
        }
    }

    /// The robots.txt in force (or last good), its text, and when it was fetched.
    pub fn robots(&self) -> Option<(&RobotsTxt, &[u8], Instant)> {
        self.good.as_ref().map(|g| (&*g.robots, &*g.body, g.at))
    }

    /// The robots.txt the entry's decisions are made with (found, or a
    /// last good copy standing in): `None` when there is none.
    pub fn evidence(&self) -> Option<Evidence> {
        if !matches!(self.rules, Rules::Found { .. }) {
            return None;
        }
        let good = self.good.as_ref()?;
        Some(Evidence {
            sha256: good.sha256.clone(),
            fetched: std::time::SystemTime::now()
                .checked_sub(good.at.elapsed())
                .unwrap_or(std::time::UNIX_EPOCH),
            allowed_by: None,
        })
    }

    /// Until when this entry answers without a new fetch.
    pub fn fresh_until(&self) -> Instant {
        self.fresh_until
    }

    /// This entry as `generation`'s bots need it: itself when it was compiled
    /// for them, else compiled again from its kept robots.txt.
    pub fn for_generation(self: &Arc<Self>, generation: u64, bots: &[BotProfile]) -> Arc<Entry> {
        match self.generation == generation {
            true => self.clone(),
            false => Arc::new(self.recompiled(generation, bots)),
        }
    }

    /// The Crawl-delay robots.txt gives `bot`, if any.
    pub fn crawl_delay(&self, bot: BotId) -> Option<Duration> {
        match &self.rules {
            Rules::Found { policies, .. } => policies.get(bot).and_then(|p| p.crawl_delay()),
            _ => None,
        }
    }

    /// Every bot's Crawl-delay here (`None` for a bot it gives none).
    pub fn crawl_delays(&self) -> impl Iterator<Item = Option<Duration>> + '_ {
        let policies: &[Policy] = match &self.rules {
            Rules::Found { policies, .. } => policies,
            _ => &[],
        };
        policies.iter().map(|p| p.crawl_delay())
    }

    /// The bytes this entry really costs in the cache: moka's own per-entry
    /// state, the key (kept by moka and by the entry's map slot), the entry,
    /// the strings it holds, and the parsed and compiled robots.txt, each
    /// allocation with the allocator's share.
    pub fn weight(&self, key: &HostKey) -> u32 {
        let string = |s: &String| s.capacity() + PER_ALLOCATION;
        let mut total = MOKA_PER_ENTRY
            + 2 * (std::mem::size_of::<HostKey>() + key.host.capacity() + PER_ALLOCATION)
            + std::mem::size_of::<Entry>()
            + 16
            + PER_ALLOCATION;
        total += match &self.rules {
            Rules::Found { policies, stale } => {
                policies
                    .iter()
                    .map(|p| std::mem::size_of::<Policy>() + p.heap_size() + 3 * PER_ALLOCATION)
                    .sum::<usize>()
                    + PER_ALLOCATION
                    + stale.as_ref().map_or(0, string)
            }
            Rules::Missing(why) => string(why),
            Rules::Unreachable { why, .. } => string(why),
            Rules::StoreDown => 0,
        };
        if let Some(good) = &self.good {
            total += std::mem::size_of::<RobotsTxt>()
                + 16
                + good.robots.heap_size()
                + 6 * PER_ALLOCATION
                + 16
                + good.body.len()
                + PER_ALLOCATION
                + good.validators.heap_size();
        }
        u32::try_from(total).unwrap_or(u32::MAX)
    }
}

/// The entry that says "slow down: the fleet's store is down".
pub(super) fn store_down() -> Entry {
    Entry {
        rules: Rules::StoreDown,
        fresh_until: Instant::now(),
        good: None,
        generation: 0,
        scheme: crate::target::Scheme::Gemini,
    }
}

/// The bot as `scheme`'s robots.txt names it: on the web by its product
/// token alone, the Gemini virtual agents being the small web's.
pub(super) fn as_named(
    bot: &BotProfile,
    scheme: crate::target::Scheme,
) -> std::borrow::Cow<'_, BotProfile> {
    match crate::protocol::rules::of(scheme).naming {
        Naming::ProductToken => std::borrow::Cow::Owned(bot.on_the_web()),
        Naming::WithVirtualAgents => std::borrow::Cow::Borrowed(bot),
    }
}

/// The more recently fetched of two good copies.
pub(super) fn newest(a: Option<Good>, b: Option<Good>) -> Option<Good> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if a.at >= b.at { a } else { b }),
        (a, b) => a.or(b),
    }
}
