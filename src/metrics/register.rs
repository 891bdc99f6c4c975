//! Every series, made and registered once at start, in groups.

use prometheus::{
    Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use super::{
    seconds_buckets, series, AccessRefusal, FetchKind, HandshakeKind, Listener, Protocol,
    Rejection, SocksAuthFailure, StoreEvent, StoreOp, TlsSide,
};

/// Registers each metric as it is made: a name or label set used twice is
/// a bug caught at start.
pub(super) struct Reg<'a>(pub(super) &'a Registry);

impl Reg<'_> {
    pub(super) fn add<M: prometheus::core::Collector + Clone + 'static>(&self, metric: M) -> M {
        self.0
            .register(Box::new(metric.clone()))
            .expect("unique metric");
        metric
    }

    pub(super) fn counter(&self, name: &str, help: &str) -> IntCounter {
        self.add(IntCounter::new(name, help).expect("valid metric"))
    }

    pub(super) fn counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.add(IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub(super) fn gauge(&self, name: &str, help: &str) -> IntGauge {
        self.add(IntGauge::new(name, help).expect("valid metric"))
    }

    pub(super) fn gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.add(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub(super) fn histogram(&self, name: &str, help: &str, buckets: Vec<f64>) -> Histogram {
        self.add(
            Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))
                .expect("valid metric"),
        )
    }
}

/// `robots_proxy_build_info`, and the process's own series (Linux).
pub(super) fn build_info(reg: &Reg) {
    reg.gauge_vec(
        "robots_proxy_build_info",
        "Always 1; the labels say which build runs.",
        &["version"],
    )
    .with_label_values(&[env!("CARGO_PKG_VERSION")])
    .set(1);
    #[cfg(target_os = "linux")]
    reg.0
        .register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))
        .expect("unique metric");
}

/// Config reloads: the counters `[succeeded, failed]`, and whether the last
/// one succeeded.
pub(super) fn reloads(reg: &Reg) -> ([IntCounter; 2], IntGauge) {
    let reloads = reg.counter_vec(
        "robots_proxy_config_reloads_total",
        "Config reloads (SIGHUP), by result (success, failure).",
        &["result"],
    );
    let last = reg.gauge(
        "robots_proxy_config_last_reload_successful",
        "1 when the last config reload succeeded (or none was tried), 0 when it failed.",
    );
    last.set(1);
    (
        ["success", "failure"].map(|r| reloads.with_label_values(&[r])),
        last,
    )
}

/// What happens to clients' connections before a request.
pub(super) struct Clients {
    pub(super) rejected: Vec<Vec<IntCounter>>,
    pub(super) open: Vec<IntGauge>,
    pub(super) access_refusals: Vec<IntCounter>,
    pub(super) socks5_auth_failures: Vec<IntCounter>,
    pub(super) tls_handshakes: Vec<Vec<IntCounter>>,
}

impl Clients {
    pub(super) fn new(reg: &Reg) -> Clients {
        let rejected = reg.counter_vec(
            "robots_proxy_connections_rejected_total",
            "Connections closed without serving a request, by listener and reason (destination, not-redirected, http, https, client-cap, full, access).",
            &["listener", "reason"],
        );
        let open = reg.gauge_vec(
            "robots_proxy_connections_open",
            "Client connections open, by listener.",
            &["listener"],
        );
        let access = reg.counter_vec(
            "robots_proxy_access_refusals_total",
            "Clients refused by the access rules, by reason (address, no-certificate, unknown-certificate, no-bot).",
            &["reason"],
        );
        let socks_auth = reg.counter_vec(
            "robots_proxy_socks5_auth_failures_total",
            "SOCKS5 clients that failed to authenticate, by reason (bad-credentials; no-method; throttled: the client had spent its failed logins, its password was not checked).",
            &["reason"],
        );
        let handshakes = reg.counter_vec(
            "robots_proxy_tls_handshakes_total",
            "Finished TLS handshakes, by side (listener: crawlers to the proxy; upstream: the proxy to capsules) and kind (full, resumed).",
            &["side", "kind"],
        );
        Clients {
            rejected: series(Listener::ALL, |l| {
                series(Rejection::ALL, |r| {
                    rejected.with_label_values(&[l.as_str(), r.as_str()])
                })
            }),
            open: series(Listener::ALL, |l| open.with_label_values(&[l.as_str()])),
            access_refusals: series(AccessRefusal::ALL, |r| {
                access.with_label_values(&[r.as_str()])
            }),
            socks5_auth_failures: series(SocksAuthFailure::ALL, |r| {
                socks_auth.with_label_values(&[r.as_str()])
            }),
            tls_handshakes: series(TlsSide::ALL, |s| {
                series(HandshakeKind::ALL, |k| {
                    handshakes.with_label_values(&[s.as_str(), k.as_str()])
                })
            }),
        }
    }
}

/// robots.txt: fetches and the cache.
pub(super) struct Robots {
    pub(super) fetches: Vec<Vec<IntCounter>>,
    pub(super) hits: IntCounter,
    pub(super) misses: IntCounter,
    pub(super) entries: IntGauge,
    pub(super) bytes: IntGauge,
}

impl Robots {
    pub(super) fn new(reg: &Reg) -> Robots {
        let fetches = reg.counter_vec(
            "robots_proxy_robots_fetches_total",
            "robots.txt fetches by protocol and outcome (found, missing, unreachable, redirect-limit).",
            &["protocol", "outcome"],
        );
        Robots {
            fetches: series(Protocol::ALL, |p| {
                series(FetchKind::ALL, |o| {
                    fetches.with_label_values(&[p.as_str(), o.as_str()])
                })
            }),
            hits: reg.counter(
                "robots_proxy_robots_cache_hits_total",
                "robots.txt cache lookups answered from the cache.",
            ),
            misses: reg.counter(
                "robots_proxy_robots_cache_misses_total",
                "robots.txt cache lookups that needed a fetch.",
            ),
            entries: reg.gauge(
                "robots_proxy_robots_cache_entries",
                "Hosts in the robots.txt cache.",
            ),
            bytes: reg.gauge(
                "robots_proxy_robots_cache_bytes",
                "Weight of the robots.txt cache, in bytes.",
            ),
        }
    }
}

/// Upstreams: timing, bytes, Gemini status classes, answers cut short.
pub(super) struct Upstream {
    pub(super) first_byte: Histogram,
    pub(super) duration: Histogram,
    pub(super) to_client: IntCounter,
    pub(super) to_upstream: IntCounter,
    pub(super) gemini_status: [IntCounter; 6],
    pub(super) truncated: Vec<IntCounter>,
}

impl Upstream {
    pub(super) fn new(reg: &Reg) -> Upstream {
        let status = reg.counter_vec(
            "robots_proxy_upstream_gemini_status_total",
            "Gemini answers relayed, by status class (1x input … 6x certificate).",
            &["class"],
        );
        let truncated = reg.counter_vec(
            "robots_proxy_upstream_truncated_total",
            "Answers whose upstream failed mid-body; the client connection was cut (no TLS close_notify, or a TCP reset) so it can tell.",
            &["protocol"],
        );
        Upstream {
            first_byte: reg.histogram(
                "robots_proxy_upstream_first_byte_seconds",
                "From connecting upstream to its first byte.",
                seconds_buckets(),
            ),
            duration: reg.histogram(
                "robots_proxy_upstream_duration_seconds",
                "From connecting upstream to the end of the relayed answer.",
                seconds_buckets(),
            ),
            to_client: reg.counter(
                "robots_proxy_relayed_to_client_bytes_total",
                "Bytes relayed from upstreams to clients.",
            ),
            to_upstream: reg.counter(
                "robots_proxy_relayed_to_upstream_bytes_total",
                "Bytes sent to upstreams.",
            ),
            gemini_status: ["1x", "2x", "3x", "4x", "5x", "6x"]
                .map(|c| status.with_label_values(&[c])),
            truncated: series(Protocol::ALL, |p| {
                truncated.with_label_values(&[p.as_str()])
            }),
        }
    }
}

/// The fleet store.
pub(super) struct Store {
    pub(super) errors: Vec<IntCounter>,
    pub(super) events: Vec<IntCounter>,
    pub(super) seconds: Histogram,
    pub(super) up: IntGauge,
}

impl Store {
    pub(super) fn new(reg: &Reg) -> Store {
        let errors = reg.counter_vec(
            "robots_proxy_store_errors_total",
            "Calls to the fleet store that failed or passed their deadline, by operation (gate, slow-down, robots, pin, ping).",
            &["op"],
        );
        let events = reg.counter_vec(
            "robots_proxy_store_events_total",
            "What the fleet store did besides failing a call: junk (a value in the proxy's keys that is no number in bounds; the request slowed), restart (a master came back as another server at its address), failover (another master answers: a Cluster or Sentinel failover), lease-lost (a reserved start the store forgot; asked again), cancelled (a reservation given up on, taken back).",
            &["event"],
        );
        Store {
            errors: series(StoreOp::ALL, |o| errors.with_label_values(&[o.as_str()])),
            events: series(StoreEvent::ALL, |e| events.with_label_values(&[e.as_str()])),
            seconds: reg.histogram(
                "robots_proxy_store_seconds",
                "Time each call to the fleet store took, failed ones included.",
                vec![
                    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                    0.5, 1.0, 2.5,
                ],
            ),
            up: reg.gauge(
                "robots_proxy_store_up",
                "1 while the fleet store answers; 0 while it does not, or when there is none.",
            ),
        }
    }
}
