//! The effective configuration as the file would write it, defaults
//! included: [`RawConfig::effective`] maps a [`Config`] back onto the raw
//! sections (every struct written out whole, so a key added to the file is a
//! compile error here until it is printed too), and serde writes it out as
//! TOML: what `run --check-config` prints, and what reads back to the same
//! `Config`. A key left out is unset (its meaning is in docs/guide/configuration.md).

use super::raw::*;
use super::{format_duration, Config, LogFormat, OnUnreachable};
use crate::bots::limits::Mode;
use crate::listener::Listener;
use crate::protocol::Protocol;
use crate::spelling::SelectorReading;

/// A duration as the file writes it.
fn d(value: std::time::Duration) -> Option<DurationText> {
    Some(DurationText(format_duration(value)))
}

/// Items written as they read back.
fn strings<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(|i| i.to_string()).collect()
}

/// `value`, or in the redacted print what stands for it (`hidden`).
fn secret(value: &str, redact: bool, hidden: impl FnOnce(&str) -> String) -> String {
    match redact {
        true => hidden(value),
        false => value.to_string(),
    }
}

/// A bot's limits as its section writes them (an unset one left out).
struct LimitKeys {
    min_delay: Option<DurationText>,
    max_wait: Option<DurationText>,
    concurrency: Option<usize>,
    rate: Option<String>,
    daily_requests_per_server: Option<u32>,
    quiet_hours: Option<Vec<String>>,
    mode: Option<String>,
    content_usage: Option<Vec<String>>,
    uploads: Option<bool>,
    user_agent: Option<String>,
    http_methods: Option<Vec<String>>,
    web_bot_auth: Option<String>,
    signature_agent: Option<String>,
}

fn limits_of(bot: &crate::bots::Bot) -> LimitKeys {
    let l = &bot.limits;
    LimitKeys {
        min_delay: d(l.min_delay),
        max_wait: l.max_wait.and_then(d),
        concurrency: l.concurrency,
        rate: l.rate.map(|r| r.to_string()),
        daily_requests_per_server: l.daily_requests_per_server,
        quiet_hours: (!l.quiet_hours.is_empty()).then(|| strings(&l.quiet_hours)),
        mode: (l.mode != Mode::Enforce).then(|| l.mode.as_str().to_string()),
        content_usage: (!bot.profile.uses().is_empty()).then(|| strings(bot.profile.uses())),
        uploads: l.uploads.then_some(true),
        user_agent: l.user_agent.clone(),
        http_methods: Some(l.http_methods.all().to_vec()),
        web_bot_auth: (l.signing.when != crate::identity::When::Off)
            .then(|| l.signing.when.as_str().to_string()),
        signature_agent: (!l.signing.agent.is_empty()).then(|| l.signing.agent.clone()),
    }
}

impl Config {
    /// What `run --check-config` prints: [`Config::to_toml`] with SOCKS5
    /// passwords, the admin token and the store's password replaced, so the
    /// output can be pasted into an issue or a log safely.
    pub fn to_toml_redacted(&self) -> String {
        print(&RawConfig::effective(self, true))
    }

    /// The effective configuration as a TOML file that reads back to this `Config`.
    pub fn to_toml(&self) -> String {
        print(&RawConfig::effective(self, false))
    }
}

fn print(raw: &RawConfig) -> String {
    let body = toml::to_string(raw).expect("the raw sections are plain TOML values");
    format!("# The effective configuration, defaults included; a key left out is unset.\n\n{body}")
}

impl RawConfig {
    /// The file that resolves to `config` (with no flags); `redact` replaces
    /// secrets with a placeholder.
    pub fn effective(config: &Config, redact: bool) -> RawConfig {
        let default = config.bots.default_bot();
        let bots = config.bots.all().iter().enumerate();
        RawConfig {
            state_dir: Some(config.state_dir.display().to_string()),
            listen: listen(config),
            bot: default.map(|id| {
                let bot = &config.bots.all()[id];
                let l = limits_of(bot);
                RawBot {
                    name: Some(bot.name.clone()),
                    agent: Some(bot.profile.token().to_string()),
                    virtual_agents: Some(bot.profile.virtual_agents().to_vec()),
                    min_delay: l.min_delay,
                    max_wait: l.max_wait,
                    concurrency: l.concurrency,
                    rate: l.rate,
                    daily_requests_per_server: l.daily_requests_per_server,
                    quiet_hours: l.quiet_hours,
                    mode: l.mode,
                    content_usage: l.content_usage,
                    uploads: l.uploads,
                    user_agent: l.user_agent,
                    http_methods: l.http_methods,
                    web_bot_auth: l.web_bot_auth,
                    signature_agent: l.signature_agent,
                }
            }),
            bots: bots
                .filter(|(id, _)| Some(*id) != default)
                .map(|(_, bot)| {
                    let l = limits_of(bot);
                    RawNamedBot {
                        name: bot.name.clone(),
                        agent: bot.profile.token().to_string(),
                        virtual_agents: bot.profile.virtual_agents().to_vec(),
                        socks5_users: bot.socks5_users.clone(),
                        client_certs: strings(&bot.client_certs),
                        clients: strings(&bot.clients),
                        min_delay: l.min_delay,
                        max_wait: l.max_wait,
                        concurrency: l.concurrency,
                        rate: l.rate,
                        daily_requests_per_server: l.daily_requests_per_server,
                        quiet_hours: l.quiet_hours,
                        mode: l.mode,
                        content_usage: l.content_usage,
                        uploads: l.uploads,
                        user_agent: l.user_agent,
                        http_methods: l.http_methods,
                        web_bot_auth: l.web_bot_auth,
                        signature_agent: l.signature_agent,
                    }
                })
                .collect(),
            hosts: {
                let mut hosts: Vec<RawHost> = config
                    .hosts
                    .all()
                    .map(|h| RawHost {
                        host: h.host.to_string(),
                        min_delay: (!h.min_delay.is_zero()).then(|| d(h.min_delay)).flatten(),
                        daily_requests_per_server: h.daily_requests_per_server,
                    })
                    .collect();
                hosts.sort_by(|a, b| a.host.cmp(&b.host));
                hosts
            },
            access: RawAccess {
                allow_from: Some(strings(&config.access.allow_from)),
                require_client_cert: Some(config.access.require_client_cert),
            },
            robots: robots(config),
            limits: limits(config),
            tls: RawTls {
                cert: config
                    .tls
                    .cert_and_key
                    .as_ref()
                    .map(|(cert, _)| cert.display().to_string()),
                key: config
                    .tls
                    .cert_and_key
                    .as_ref()
                    .map(|(_, key)| key.display().to_string()),
                hostnames: Some(config.tls.hostnames.clone()),
            },
            http: RawHttp {
                extra_roots: Some(
                    config
                        .http
                        .extra_roots_named()
                        .map(|(_, f)| f.display().to_string())
                        .collect(),
                ),
                robots_user_agent: Some(config.http.robots_user_agent.clone()),
            },
            gopher: RawGopher {
                public_host: config.gopher_public_host.clone(),
                public_port: config.gopher_public_port,
                literal_selectors: Some(config.selector_reading == SelectorReading::Literal),
            },
            politeness: politeness(config),
            log: RawLog {
                format: Some(
                    match config.log_format {
                        LogFormat::Human => "human",
                        LogFormat::Json => "json",
                    }
                    .to_string(),
                ),
                level: Some(config.log_level.clone()),
            },
            metrics: RawMetrics {
                per_host: Some(config.metrics_per_host.is_some()),
                per_host_limit: config.metrics_per_host,
            },
            ports: Protocol::ALL
                .iter()
                .map(|&p| (p.as_str().to_string(), config.ports.ports(p).to_vec()))
                .collect(),
            socks5: RawSocks5 {
                users: Some(
                    config
                        .socks5_users
                        .iter()
                        .map(|(name, password)| RawSocksUser {
                            name: name.clone(),
                            password: secret(password, redact, |_| "(redacted)".into()),
                        })
                        .collect(),
                ),
                https_ports: None,
            },
            store: match &config.store {
                None => RawStore::default(),
                Some(st) => RawStore {
                    url: Some(secret(&st.url, redact, crate::store::redacted)),
                    prefix: Some(st.prefix.clone()),
                    on_unavailable: Some(st.on_unavailable.as_str().to_string()),
                    timeout: d(st.timeout),
                    lease: d(st.lease),
                },
            },
            admin: RawAdmin {
                token: (config.admin.token.as_deref())
                    .map(|t| secret(t, redact, |_| "<redacted>".into())),
                allow_from: config.admin.allow_from.as_deref().map(strings),
                hosts: Some(config.admin.hosts.clone()),
            },
        }
    }
}

/// `[listen]`: every listener of the table that is on, and `"off"` for one
/// on by default that is off.
fn listen(config: &Config) -> RawListen {
    let mut raw = RawListen::default();
    for &listener in Listener::ALL {
        *raw.get_mut(listener) = match config.listen.get(listener) {
            Some(addr) => Some(addr.to_string()),
            None => listener.default_addr().map(|_| super::raw::OFF.to_string()),
        };
    }
    raw
}

fn robots(config: &Config) -> RawRobots {
    let r = &config.robots;
    RawRobots {
        ttl: d(r.ttl),
        cache_bytes: Some(r.cache_bytes),
        max_stale: d(r.max_stale),
        unreachable_retry: d(r.unreachable_retry),
        on_unreachable: Some(
            match r.on_unreachable {
                OnUnreachable::Disallow => "disallow",
                OnUnreachable::Allow => "allow",
            }
            .to_string(),
        ),
        fetch_timeout: d(r.fetch_timeout),
        name_bot_in_request: Some(r.name_bot_in_request),
    }
}

fn limits(config: &Config) -> RawLimits {
    let l = &config.limits;
    RawLimits {
        max_connections: Some(l.max_connections),
        max_connections_per_client: Some(l.max_connections_per_client),
        max_budget_pairs: Some(l.max_budget_pairs),
        worker_threads: l.worker_threads,
        request_timeout: d(l.request_timeout),
        connect_timeout: d(l.connect_timeout),
        idle_timeout: d(l.idle_timeout),
        shutdown_grace: d(l.shutdown_grace),
        allow_private_upstreams: Some(l.allow_private_upstreams),
        upstream_ports: Some(l.upstream_ports.items()),
        deny_hosts: (!l.deny_hosts.is_empty()).then(|| l.deny_hosts.items().to_vec()),
        upstream_mark: l.upstream_mark.map(i64::from),
    }
}

fn politeness(config: &Config) -> RawPoliteness {
    let p = &config.politeness;
    RawPoliteness {
        key: Some(p.key.as_str().to_string()),
        default_delay: d(p.default_delay),
        min_delay: d(p.min_delay),
        max_delay: p.max_delay.and_then(d),
        per_host_concurrency: Some(p.per_host_concurrency),
        max_wait: d(p.max_wait),
        web_max_wait: d(p.web_max_wait),
        horizon: d(p.horizon),
        max_slow_down: d(p.max_slow_down),
        web_backoff: d(p.web_backoff.first),
        web_backoff_forgive: d(p.web_backoff.forgive),
        web_backoff_jitter: Some((p.web_backoff.jitter * 100.0).round() as u32),
    }
}
