//! What the status page and `/api/…` show, as types: gathered once
//! (`status.rs`), then serialised for `/api/…` or rendered as HTML and SVG
//! (`page.rs`, `charts.rs`). No JSON value sits between gathering and
//! rendering: a renamed field is a compile error, not a blank page.
//! Times are seconds as `f64` (rounded to milliseconds), as the API gives them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A value per bot, by its name, in the configuration's order (the order
/// the bots' colours follow); serialised as a JSON object.
#[derive(Clone, Debug, Default)]
pub struct PerBot<T>(pub Vec<(String, T)>);

impl<T> PerBot<T> {
    pub fn get(&self, bot: &str) -> Option<&T> {
        self.0.iter().find(|(b, _)| b == bot).map(|(_, v)| v)
    }
}

impl<T: Serialize> Serialize for PerBot<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for PerBot<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Read back in the order written (a JSON object's order is kept by
        // reading it as a sequence of entries).
        struct Entries<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Entries<T> {
            type Value = PerBot<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of values by bot name")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PerBot<T>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry()? {
                    out.push((k, v));
                }
                Ok(PerBot(out))
            }
        }
        d.deserialize_map(Entries(std::marker::PhantomData))
    }
}

/// `/api/status` and `/`: the proxy, its bots, listeners, counts, the fleet
/// store, recent hosts and refusals.
#[derive(Debug, Serialize, Deserialize)]
pub struct Status {
    pub version: String,
    pub uptime_seconds: u64,
    pub config_generation: u64,
    pub bots: Vec<Bot>,
    /// Listener (as the page names it) → its address.
    pub listeners: BTreeMap<String, String>,
    /// Requests by decision.
    pub requests: BTreeMap<String, u64>,
    pub pins: usize,
    /// Fleet mode's store; `None` without one.
    pub store: Option<Store>,
    pub hosts: Vec<HostRow>,
    /// The latest refusal at each host, newest first, at most
    /// [`RECENT_REFUSALS`](super::status::RECENT_REFUSALS).
    pub recent_refusals: Vec<RecentRefusal>,
}

/// One configured bot.
#[derive(Debug, Serialize, Deserialize)]
pub struct Bot {
    pub name: String,
    pub agent: String,
    pub virtual_agents: Vec<String>,
    /// `enforce` or `report`.
    pub mode: String,
    pub content_usage: Vec<String>,
    pub limits: Limits,
    /// What is left of each limit now, as this proxy counted it.
    pub left: Left,
    pub budgets: Option<Budgets>,
    pub per_minute: Vec<Minute>,
}

impl Bot {
    /// In report mode: nothing it asks is held or refused, only counted.
    pub fn reports(&self) -> bool {
        self.mode == "report"
    }
}

/// A bot's limits as set (those unset left out).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delay_seconds: Option<f64>,
    /// Its crawler's patience (`max_wait`), where the bot sets its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_requests_per_server: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quiet_hours: Vec<String>,
}

/// What is left of each limit set, now (those unset left out).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Left {
    /// Requests that may still start at once at its busiest server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    /// Starts left in the rate's window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<usize>,
    /// The smallest daily budget left at any server it used (the whole
    /// budget where it used none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_requests_per_server: Option<u32>,
    /// Quiet now for this long (0: not quiet now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet_for_seconds: Option<f64>,
}

/// A bot's daily budget per server.
#[derive(Debug, Serialize, Deserialize)]
pub struct Budgets {
    pub per_server: u32,
    /// Whether it is enforced (not a bot in report mode).
    pub enforced: bool,
    pub servers: Vec<BudgetRow>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct BudgetRow {
    pub server: String,
    pub used: u32,
    pub left: u32,
}

/// A bot's requests in one minute, by decision.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Minute {
    pub minutes_ago: u64,
    pub allowed: u32,
    pub disallowed: u32,
    pub slowed: u32,
    pub error: u32,
}

impl Minute {
    /// The counts, by decision, in the order the pictures stack them.
    pub fn by_decision(&self) -> [(&'static str, u32); 4] {
        [
            ("allowed", self.allowed),
            ("disallowed", self.disallowed),
            ("slowed", self.slowed),
            ("error", self.error),
        ]
    }
}

/// Fleet mode's store: its shape and health.
#[derive(Debug, Serialize, Deserialize)]
pub struct Store {
    pub kind: String,
    pub url: String,
    pub up: bool,
    pub on_unavailable: String,
    pub masters: Vec<StoreNode>,
    pub restarts_and_failovers: u64,
    pub broken_seconds_ago: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct StoreNode {
    pub addr: String,
    pub run_id: String,
}

/// One server the proxy saw lately (a row of the hosts table; a host
/// page's summary of one scheme).
#[derive(Debug, Serialize, Deserialize)]
pub struct HostRow {
    pub key: String,
    pub scheme: String,
    pub host: String,
    pub port: u16,
    pub robots: Robots,
    pub crawl_delay: PerBot<Option<f64>>,
    /// `None` when its robots.txt is not cached.
    pub spacing: Option<PerBot<Spacing>>,
    pub queue: usize,
    pub in_flight: usize,
    pub next_start_in_seconds: Option<f64>,
    pub slow_down_factor: u32,
    pub requests: u64,
    pub refusals: u64,
    /// Requests that ended in an error, by outcome.
    pub errors: BTreeMap<String, ErrorCount>,
    /// Pages crawlers lost here, by why (`wait`, `limit`, `client-left`,
    /// `given-up`); none: empty.
    #[serde(default)]
    pub lost: BTreeMap<String, u64>,
    pub last_seen_seconds_ago: Option<f64>,
    pub last_refusal: Option<LastRefusal>,
}

/// A cached robots.txt's state.
#[derive(Debug, Serialize, Deserialize)]
pub struct Robots {
    /// `not cached`, `found`, `missing`, `unreachable`, `stale`.
    pub state: String,
    pub sha256: Option<String>,
    pub fetched_unix: Option<u64>,
    pub age_seconds: Option<f64>,
    pub fresh_for_seconds: Option<f64>,
    pub detail: Option<String>,
}

/// A bot's spacing at a server, and what it comes from.
#[derive(Debug, Serialize, Deserialize)]
pub struct Spacing {
    pub seconds: f64,
    /// The setting it comes from (`crawl_delay`, `min_delay`, …).
    pub from: String,
    /// The robots.txt line of the Crawl-delay it comes from.
    pub line: Option<u32>,
    /// The Crawl-delay robots.txt asks of it.
    pub crawl_delay: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorCount {
    pub count: u64,
    pub cause: String,
}

/// A server's last refusal, and the rule that refused it.
#[derive(Debug, Serialize, Deserialize)]
pub struct LastRefusal {
    pub seconds_ago: f64,
    pub outcome: String,
    pub detail: String,
    pub robots_sha256: Option<String>,
}

/// One of the latest refusals across servers.
#[derive(Debug, Serialize, Deserialize)]
pub struct RecentRefusal {
    pub key: String,
    /// `HOST:PORT`, the host page's path.
    pub host_port: String,
    #[serde(flatten)]
    pub refusal: LastRefusal,
}

/// `/api/host/HOST:PORT[?explain=URL]`.
#[derive(Debug, Serialize, Deserialize)]
pub struct HostAnswer {
    pub host: HostPage,
    pub explain: Option<Explained>,
}

/// A host: each scheme the proxy knows there.
#[derive(Debug, Serialize, Deserialize)]
pub struct HostPage {
    pub host: String,
    pub port: u16,
    pub bots: Vec<String>,
    /// Whether the starts shown are this proxy's only (fleet mode).
    pub fleet: bool,
    pub entries: Vec<HostEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct HostEntry {
    pub summary: HostRow,
    pub robots_txt: Option<Vec<String>>,
    pub bots: Vec<Followed>,
    pub timeline: Timeline,
}

/// The lines of a robots.txt one bot follows.
#[derive(Debug, Serialize, Deserialize)]
pub struct Followed {
    pub bot: String,
    pub lines: Vec<u32>,
    /// Which groups it follows, in words.
    pub groups: String,
    pub crawl_delay_line: Option<u32>,
}

impl Followed {
    pub fn follows(&self, line: u32) -> bool {
        self.lines.contains(&line)
    }
}

/// A server's recent starts and queue lengths, times in seconds before now.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Timeline {
    pub window_seconds: f64,
    pub starts: Vec<StartMark>,
    pub queue: Vec<QueuePoint>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StartMark {
    pub seconds_ago: f64,
    pub bot: String,
    pub spacing_seconds: f64,
    /// Since the start before it that it had to keep its spacing after: the
    /// enforced start before an enforced one, any start before a reported one.
    pub gap_seconds: Option<f64>,
    /// Sooner than its spacing after that start.
    pub early: bool,
    /// A bot in report mode: not held.
    pub reported: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueuePoint {
    pub seconds_ago: f64,
    pub waiting: u32,
}

/// "Explain": what the proxy would decide for a URL, per bot.
#[derive(Debug, Serialize, Deserialize)]
pub struct Explained {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub robots: Option<Robots>,
    pub bots: Vec<Verdict>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Verdict {
    pub bot: String,
    /// `allow`, `disallow`, `unknown`, `error`.
    pub decision: String,
    pub explanation: String,
}
