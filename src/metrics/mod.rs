//! Prometheus metrics, all named `robots_proxy_*`. Every label value comes from a
//! small fixed set, and every labelled series is resolved once, here, into a
//! plain handle: counting on the request path is an atomic add, with no label
//! lookup and no lock.

use prometheus::{Encoder, Histogram, IntCounter, IntCounterVec, IntGauge, Registry};

use arc_swap::ArcSwap;

use crate::access::Denied;
use crate::bots::BotId;
use crate::fate::{Class, Fate};

mod labels;
mod register;
pub use labels::*;
use register::{build_info, reloads, Clients, Reg, Robots, Store, Upstream};

/// The series labelled by bot, resolved once per set of bots (at start and
/// at each reload that changes them).
struct BotSeries {
    /// By bot (the configured ones, then [`NO_BOT`]), [`Protocol`], then [`Class`].
    requests: Vec<Vec<Vec<IntCounter>>>,
    /// By bot, [`Protocol`], then [`Fate`].
    outcomes: Vec<Vec<Vec<IntCounter>>>,
}

/// One series per value of `L`, resolved once.
fn series<L: Copy, T>(all: &[L], make: impl Fn(L) -> T) -> Vec<T> {
    all.iter().map(|l| make(*l)).collect()
}

pub struct Metrics {
    pub registry: Registry,
    /// By [`Listener`], then [`Rejection`].
    rejected: Vec<Vec<IntCounter>>,
    /// By [`Protocol`].
    truncated: Vec<IntCounter>,
    /// `robots_proxy_requests_total` and `…_request_outcomes_total`.
    requests_vec: IntCounterVec,
    outcomes_vec: IntCounterVec,
    by_bot: ArcSwap<BotSeries>,
    /// Report mode: what would have been refused or delayed, by bot and reason.
    report_only: IntCounterVec,
    /// By [`AccessRefusal`].
    access_refusals: Vec<IntCounter>,
    /// By [`SocksAuthFailure`].
    socks5_auth_failures: Vec<IntCounter>,
    /// Config reloads: `[succeeded, failed]`.
    reloads: [IntCounter; 2],
    /// 1 when the last reload succeeded (or none was tried), 0 when it failed.
    pub config_last_reload_successful: IntGauge,
    /// By [`Protocol`], then [`FetchKind`].
    robots_fetches: Vec<Vec<IntCounter>>,
    pub cache_hits: IntCounter,
    pub cache_misses: IntCounter,
    pub cache_entries: IntGauge,
    pub cache_bytes: IntGauge,
    pub politeness_wait: Histogram,
    pub politeness_hosts: IntGauge,
    pub politeness_waiting: IntGauge,
    /// By bot: its `daily_requests_per_server`, and the most starts it made
    /// at one server in the last 24 hours (read when scraped).
    pub budget_limit: prometheus::IntGaugeVec,
    pub budget_most_used: prometheus::IntGaugeVec,
    pub upstream_first_byte: Histogram,
    pub upstream_duration: Histogram,
    pub bytes_to_client: IntCounter,
    pub bytes_to_upstream: IntCounter,
    /// By [`Listener`].
    connections_open: Vec<IntGauge>,
    gemini_status: [IntCounter; 6],
    per_host: Option<PerHost>,
    /// By [`StoreOp`].
    store_errors: Vec<IntCounter>,
    store_events: Vec<IntCounter>,
    /// By [`TlsSide`], then [`HandshakeKind`].
    tls_handshakes: Vec<Vec<IntCounter>>,
    /// Every call to the fleet store, answered or not.
    pub store_seconds: Histogram,
    /// 1 while the fleet store answers (0 without a store, or while it is down).
    pub store_up: IntGauge,
}

/// The opt-in per-host series: at most `limit` hosts get a label of their own,
/// the rest count as `other`, so cardinality stays bounded.
struct PerHost {
    requests: IntCounterVec,
    named: std::sync::Mutex<std::collections::HashSet<String>>,
    limit: usize,
}

fn seconds_buckets() -> Vec<f64> {
    vec![
        0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
    ]
}

/// The `bot` label of requests no bot served (the client was turned away first).
pub const NO_BOT: &str = "none";

impl Metrics {
    /// For one bot called `default`.
    pub fn new() -> Metrics {
        Metrics::with(&["default"], None)
    }

    /// `bots`: the names of the configured bots, in order (the `bot` label).
    /// With `Some(limit)`, also `robots_proxy_host_requests_total{host, decision}`
    /// for up to `limit` hosts.
    pub fn with(bots: &[&str], per_host_limit: Option<usize>) -> Metrics {
        let registry = Registry::new();
        let reg = Reg(&registry);
        build_info(&reg);
        let requests_vec = reg.counter_vec(
            "robots_proxy_requests_total",
            "Requests by bot, protocol and decision (allowed, disallowed, slowed, error).",
            &["bot", "protocol", "decision"],
        );
        let outcomes_vec = reg.counter_vec(
            "robots_proxy_request_outcomes_total",
            "Requests by bot, protocol and outcome: allowed, disallowed, deny-hosts \
             (limits.deny_hosts) and response-preference (a web answer's own fields refusing a \
             declared use; all three decision=\"disallowed\"), slow-down, and the \
             causes of decision=\"error\": malformed, access, proxy-rule, robots-unreachable, \
             upstream, client-left.",
            &["bot", "protocol", "outcome"],
        );
        let by_bot = ArcSwap::from_pointee(BotSeries::resolve(&requests_vec, &outcomes_vec, bots));
        let clients = Clients::new(&reg);
        let robots = Robots::new(&reg);
        let upstream = Upstream::new(&reg);
        let store = Store::new(&reg);
        let (reloads, config_last_reload_successful) = reloads(&reg);
        Metrics {
            rejected: clients.rejected,
            connections_open: clients.open,
            access_refusals: clients.access_refusals,
            socks5_auth_failures: clients.socks5_auth_failures,
            tls_handshakes: clients.tls_handshakes,
            requests_vec,
            outcomes_vec,
            by_bot,
            reloads,
            config_last_reload_successful,
            robots_fetches: robots.fetches,
            cache_hits: robots.hits,
            cache_misses: robots.misses,
            cache_entries: robots.entries,
            cache_bytes: robots.bytes,
            politeness_wait: reg.histogram(
                "robots_proxy_politeness_wait_seconds",
                "Time requests waited for their host's turn.",
                seconds_buckets(),
            ),
            politeness_hosts: reg.gauge(
                "robots_proxy_politeness_hosts",
                "Hosts whose spacing the proxy remembers.",
            ),
            politeness_waiting: reg.gauge(
                "robots_proxy_politeness_waiting",
                "Requests waiting for their host's turn.",
            ),
            budget_limit: reg.gauge_vec(
                "robots_proxy_budget_daily_limit",
                "A bot's daily_requests_per_server (bots that set one).",
                &["bot"],
            ),
            budget_most_used: reg.gauge_vec(
                "robots_proxy_budget_most_used",
                "The most requests a bot started at one server in the last 24 hours, as its \
                 daily budget counts them (this proxy's count): near robots_proxy_budget_daily_limit, \
                 the bot is about to be refused there.",
                &["bot"],
            ),
            truncated: upstream.truncated,
            upstream_first_byte: upstream.first_byte,
            upstream_duration: upstream.duration,
            bytes_to_client: upstream.to_client,
            bytes_to_upstream: upstream.to_upstream,
            gemini_status: upstream.gemini_status,
            per_host: per_host_limit.map(|limit| PerHost {
                requests: reg.counter_vec(
                    "robots_proxy_host_requests_total",
                    "Requests by target host (turned on by metrics.per_host; hosts past the limit count as `other`).",
                    &["host", "decision"],
                ),
                named: std::sync::Mutex::new(std::collections::HashSet::new()),
                limit,
            }),
            store_errors: store.errors,
            store_events: store.events,
            store_seconds: store.seconds,
            store_up: store.up,
            report_only: reg.counter_vec(
                "robots_proxy_report_only_total",
                "Requests of bots in report mode that robots.txt or the bot's limits would have \
                 refused or delayed, relayed at once, by bot and reason (disallowed, \
                 content_usage, robots_unreachable, crawl_delay, min_delay, visit_time, or the \
                 limit's key).",
                &["bot", "reason"],
            ),
            registry,
        }
    }

    /// A request of `bot`, in report mode, that `reason` would have refused
    /// or delayed. The labels are bounded: a configured bot's name, and a
    /// reason from a fixed set ([`crate::report::reason`]).
    pub fn report_only(&self, bot: &str, reason: &str) {
        self.report_only.with_label_values(&[bot, reason]).inc();
    }

    /// A call to the fleet store failed or passed its deadline.
    pub fn store_error(&self, op: StoreOp) {
        self.store_errors[op.index()].inc();
    }

    pub fn store_event(&self, event: StoreEvent) {
        self.store_events[event.index()].inc();
    }

    /// A finished TLS handshake.
    pub fn tls_handshake(&self, side: TlsSide, kind: Option<rustls::HandshakeKind>) {
        self.tls_handshakes[side.index()][HandshakeKind::of(kind).index()].inc();
    }

    /// An answer cut short by its upstream.
    pub fn truncated(&self, protocol: Protocol) {
        self.truncated[protocol.index()].inc();
    }

    /// A connection closed without serving a request.
    pub fn rejected(&self, listener: Listener, why: Rejection) {
        self.rejected[listener.index()][why.index()].inc();
    }

    /// A finished request of `bot` (`None`: turned away before a bot was picked).
    pub fn request(&self, bot: Option<BotId>, protocol: Protocol, fate: Fate) {
        let by_bot = self.by_bot.load();
        let last = by_bot.requests.len() - 1;
        let slot = bot.map_or(last, |b| b.min(last));
        by_bot.requests[slot][protocol.index()][fate.class().index()].inc();
        by_bot.outcomes[slot][protocol.index()][fate.index()].inc();
    }

    /// The bots after a reload: their series are resolved now (those of bots
    /// that are gone keep their last values, as Prometheus counters do).
    pub fn set_bots(&self, bots: &[&str]) {
        self.by_bot.store(std::sync::Arc::new(BotSeries::resolve(
            &self.requests_vec,
            &self.outcomes_vec,
            bots,
        )));
    }

    /// Requests so far by `decision` (allowed, disallowed, slowed, error),
    /// over every bot and protocol: the status page's counts.
    pub fn requests_by_decision(&self) -> Vec<(&'static str, u64)> {
        use prometheus::core::Collector;
        let mut totals: Vec<(&'static str, u64)> =
            Class::ALL.iter().map(|c| (c.as_str(), 0)).collect();
        for family in self.requests_vec.collect() {
            for m in family.get_metric() {
                let decision = m.get_label().iter().find(|l| l.name() == "decision");
                if let Some(slot) =
                    decision.and_then(|d| totals.iter_mut().find(|(c, _)| *c == d.value()))
                {
                    slot.1 += m.get_counter().get_value() as u64;
                }
            }
        }
        totals
    }

    /// A client refused by the access rules.
    pub fn access_refused(&self, denied: &Denied) {
        self.access_refusals[AccessRefusal::of(denied).index()].inc();
    }

    /// A SOCKS5 client that failed to authenticate.
    pub fn socks5_auth_failed(&self, why: SocksAuthFailure) {
        self.socks5_auth_failures[why.index()].inc();
    }

    /// A config reload, and whether it took.
    pub fn reloaded(&self, ok: bool) {
        self.reloads[usize::from(!ok)].inc();
        self.config_last_reload_successful.set(i64::from(ok));
    }

    /// Counts a request for `host` when the per-host series is on.
    pub fn host_request(&self, host: &str, class: Class) {
        let Some(per_host) = &self.per_host else {
            return;
        };
        let label = {
            let mut named = per_host.named.lock().unwrap_or_else(|e| e.into_inner());
            if named.contains(host)
                || (named.len() < per_host.limit && named.insert(host.to_string()))
            {
                host
            } else {
                "other"
            }
        };
        per_host
            .requests
            .with_label_values(&[label, class.as_str()])
            .inc();
    }

    pub fn robots_fetch(&self, protocol: Protocol, outcome: FetchKind) {
        self.robots_fetches[protocol.index()][outcome.index()].inc();
    }

    /// One more open connection on `listener`, until the guard drops.
    pub fn connection(self: &std::sync::Arc<Self>, listener: Listener) -> ConnectionGuard {
        self.connections_open[listener.index()].inc();
        ConnectionGuard {
            metrics: self.clone(),
            listener,
        }
    }

    pub fn gemini_status(&self, status: u8) {
        if let Some(c) = self
            .gemini_status
            .get(usize::from(status / 10).wrapping_sub(1))
        {
            c.inc();
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl BotSeries {
    fn resolve(requests: &IntCounterVec, outcomes: &IntCounterVec, bots: &[&str]) -> BotSeries {
        let bots: Vec<&str> = bots.iter().copied().chain([NO_BOT]).collect();
        let by = |vec: &IntCounterVec, label: fn(Fate) -> &'static str, all: &[Fate]| {
            series(&bots, |b| {
                series(Protocol::ALL, |p| {
                    series(all, |f| vec.with_label_values(&[b, p.as_str(), label(f)]))
                })
            })
        };
        // One representative fate per class, in `Class::ALL` order.
        let classes: Vec<Fate> = Class::ALL
            .iter()
            .map(|c| {
                *Fate::ALL
                    .iter()
                    .find(|f| f.class() == *c)
                    .expect("every class has a fate")
            })
            .collect();
        BotSeries {
            requests: by(requests, |f| f.class().as_str(), &classes),
            outcomes: by(outcomes, Fate::as_str, Fate::ALL),
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

pub struct ConnectionGuard {
    metrics: std::sync::Arc<Metrics>,
    listener: Listener,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.metrics.connections_open[self.listener.index()].dec();
    }
}
