//! One resolver per section of the file: the raw section (and the flags of
//! `run` that override it) → validated values, each error naming its key or
//! flag. [`RawConfig::resolve`] puts the sections together.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::clients::{access, bots};
use super::listens::listen;
use super::values::{
    bound, count, default_state_dir, duration, flag_or_key, valid_log_filter, DAY,
};
use super::{
    invalid, Config, ConfigError, Limits, LogFormat, OnUnreachable, RawConfig, RobotsConfig,
    TlsConfig,
};
use crate::access::AdminAccess;
use crate::addr::Prefix;
use crate::cli::RunArgs;
use crate::egress::PortSet;
use crate::listener::{Listener, Listens};
use crate::politeness::{GateBy, PolitenessConfig};
use crate::protocol::{PortTable, Protocol};
use crate::spelling::SelectorReading;

impl RawConfig {
    /// Applies the flags of `run` over the file and validates the result.
    pub fn resolve(self, flags: &RunArgs) -> Result<Config, ConfigError> {
        // Section by section, in the file's order; every section's error is
        // kept (the first in the file first), and a section that needs one
        // that failed is not looked at (its error would be that one's).
        let mut c = Checks::default();
        let listen = c.ok(listen(&self, flags));
        let socks5_users = c.ok(socks5(&self));
        let ports = c.ok(ports(&self));
        let gopher = listen
            .as_ref()
            .and_then(|l| c.ok(gopher(&self, l.get(Listener::Gopher))));
        let access = listen.as_ref().and_then(|l| c.ok(access(&self, l)));
        let bots = match (&socks5_users, &access) {
            (Some(users), Some(access)) => c.ok(bots(&self, flags, users, access)),
            _ => None,
        };
        let hosts = c.ok(hosts(&self));
        let robots = c.ok(robots(&self));
        let limits = ports.as_ref().and_then(|p| c.ok(limits(&self, flags, p)));
        let tls = c.ok(tls(&self));
        let http = c.ok(http(&self, flags));
        let politeness = c.ok(politeness(&self, flags));
        let log = c.ok(log(&self, flags));
        let metrics_per_host = c.ok(metrics(&self));
        let admin = c.ok(admin(&self, listen.as_ref()));
        let store = c.ok(super::fleet::store(&self, flags));
        let state = c.ok(match (&flags.state_dir, &self.state_dir) {
            (Some(dir), _) => Ok((dir.clone(), "--state-dir")),
            (None, Some(dir)) => Ok((PathBuf::from(dir), "state_dir")),
            (None, None) => default_state_dir(),
        });
        let (
            Some(listen),
            Some(socks5_users),
            Some(ports),
            Some((gopher_public_host, gopher_public_port, selector_reading)),
            Some(access),
            Some(bots),
            Some(hosts),
            Some(robots),
            Some(limits),
            Some(tls),
            Some(http),
            Some(politeness),
            Some((log_format, log_level)),
            Some(metrics_per_host),
            Some(admin),
            Some(store),
            Some((state_dir, state_dir_origin)),
        ) = (
            listen,
            socks5_users,
            ports,
            gopher,
            access,
            bots,
            hosts,
            robots,
            limits,
            tls,
            http,
            politeness,
            log,
            metrics_per_host,
            admin,
            store,
            state,
        )
        else {
            return Err(c.into_error());
        };
        // Requests waiting for a turn hold connections: at most three
        // quarters of them, so the rest stay for requests that go at once.
        let politeness = PolitenessConfig {
            max_queued: crate::politeness::queued_for(limits.max_connections),
            ..politeness
        };
        Ok(Config {
            state_dir,
            state_dir_origin,
            listen,
            socks5_users,
            deprecated: match self.socks5.https_ports {
                Some(_) => vec![("socks5.https_ports", "[ports] https")],
                None => Vec::new(),
            },
            ports,
            gopher_public_host,
            gopher_public_port,
            selector_reading,
            bots,
            hosts,
            access,
            robots,
            politeness,
            log_format,
            metrics_per_host,
            log_level,
            limits,
            tls,
            http,
            store,
            admin,
            wall_clock: crate::bots::limits::WallClock::System,
        })
    }
}

/// `[[hosts]]`: each entry's host (a name, or `*.` and a name) and limits.
fn hosts(raw: &RawConfig) -> Result<std::sync::Arc<crate::hosts::HostRules>, ConfigError> {
    use crate::hosts::{HostRule, HostRules, MAX_HOSTS};
    if raw.hosts.len() > MAX_HOSTS {
        return Err(invalid("hosts", format!("at most {MAX_HOSTS} entries")));
    }
    let mut rules = Vec::new();
    for h in &raw.hosts {
        let host = crate::names::Pattern::parse(&h.host).ok_or_else(|| {
            invalid(
                "hosts.host",
                format!(
                    "{:?}: a host name (big.example), *. and a name (*.big.example), or an address",
                    h.host
                ),
            )
        })?;
        let min_delay = duration(
            "hosts.min_delay",
            h.min_delay.as_deref(),
            Duration::ZERO,
            bound::DELAY,
        )?;
        let daily_requests_per_server = match h.daily_requests_per_server {
            None => None,
            Some(n) => Some(count(
                "hosts.daily_requests_per_server",
                Some(n),
                n,
                (1, crate::bots::limits::MAX_BUDGET),
            )?),
        };
        if min_delay.is_zero() && daily_requests_per_server.is_none() {
            return Err(invalid(
                "hosts",
                format!("{host}: set min_delay or daily_requests_per_server (or remove the entry)"),
            ));
        }
        rules.push(HostRule {
            host,
            min_delay,
            daily_requests_per_server,
        });
    }
    HostRules::new(rules)
        .map(std::sync::Arc::new)
        .map_err(|host| invalid("hosts.host", format!("{host} is listed twice")))
}

/// The errors of one section's values, each kept while the rest are read:
/// a wrong value stands in as its type's default until the section is done.
#[derive(Default)]
struct Checks(Vec<ConfigError>);

impl Checks {
    /// `r`'s value, or (its error kept) the default.
    fn take<T: Default>(&mut self, r: Result<T, ConfigError>) -> T {
        r.unwrap_or_else(|e| {
            self.fail(e);
            T::default()
        })
    }

    /// `r`'s value, or (its error kept) nothing: a section that needs it is
    /// not looked at.
    fn ok<T>(&mut self, r: Result<T, ConfigError>) -> Option<T> {
        r.map_err(|e| self.fail(e)).ok()
    }

    fn fail(&mut self, e: ConfigError) {
        self.0.extend(e.into_list());
    }

    /// Every error kept, as one.
    fn into_error(self) -> ConfigError {
        ConfigError::several(self.0)
    }

    /// `value`, or every error kept.
    fn done<T>(self, value: T) -> Result<T, ConfigError> {
        match self.0.is_empty() {
            true => Ok(value),
            false => Err(ConfigError::several(self.0)),
        }
    }
}

/// `[admin]`: the token actions need, who may connect, the names the
/// listener answers to. A listener other machines can reach needs
/// `allow_from` or a token: the status page lists the hosts crawled and their
/// robots.txt, so it is never open to all by accident.
fn admin(raw: &RawConfig, listen: Option<&Listens>) -> Result<AdminAccess, ConfigError> {
    let a = &raw.admin;
    let token = match &a.token {
        Some(token)
            if !(16..=256).contains(&token.len())
                || !token.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            return Err(invalid(
                "admin.token",
                "16 to 256 printable ASCII characters without spaces (e.g. from `openssl rand -hex 32`)",
            ));
        }
        token => token.clone(),
    };
    let allow_from = match &a.allow_from {
        None => None,
        Some(items) => Some(
            items
                .iter()
                .map(|t| Prefix::parse(t).map_err(|e| invalid("admin.allow_from", e)))
                .collect::<Result<Vec<_>, _>>()?,
        ),
    };
    let mut hosts = Vec::new();
    for h in a.hosts.iter().flatten() {
        let name = h.trim_end_matches('.').to_ascii_lowercase();
        let valid = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
        if !valid {
            return Err(invalid(
                "admin.hosts",
                format!("{h:?}: a host name (letters, digits, '-', '.'), as clients write it in URLs, without a port"),
            ));
        }
        hosts.push(name);
    }
    if hosts.len() > 64 {
        return Err(invalid("admin.hosts", "at most 64 names"));
    }
    let admin = AdminAccess {
        token,
        allow_from,
        hosts,
    };
    let Some(admin_listen) = listen.and_then(|l| l.get(Listener::Admin)) else {
        return Ok(admin);
    };
    if !admin.covers(admin_listen) {
        return Err(invalid(
            "admin.allow_from",
            format!(
                "the admin listener is on {}, reachable from other machines, and would show anyone the status page (hosts crawled, their robots.txt) and metrics; \
                 list who may use it (allow_from = [\"10.0.0.0/8\"]), or set [admin] token (then other clients present it), or listen on 127.0.0.1",
                admin_listen
            ),
        ));
    }
    Ok(admin)
}

/// `[socks5]`: users (RFC 1929).
fn socks5(raw: &RawConfig) -> Result<Vec<(String, String)>, ConfigError> {
    let mut socks5_users = Vec::new();
    for user in raw.socks5.users.clone().unwrap_or_default() {
        if user.name.is_empty() || user.name.len() > 255 || user.password.len() > 255 {
            return Err(invalid(
                "socks5.users",
                "names of 1 to 255 bytes, passwords of at most 255",
            ));
        }
        socks5_users.push((user.name, user.password));
    }
    Ok(socks5_users)
}

/// `socks5.https_ports`, which said which ports' TLS is HTTPS before the
/// web was served: read as `[ports] https` (a list of ports, no ranges
/// to exclude, at most as many as a protocol may list), unless that is set.
fn deprecated_https_ports(raw: &RawConfig) -> Result<Option<Vec<u16>>, ConfigError> {
    let Some(items) = &raw.socks5.https_ports else {
        return Ok(None);
    };
    if raw.ports.contains_key("https") {
        return Err(invalid(
            "socks5.https_ports",
            "[ports] https is set too; socks5.https_ports is deprecated: remove it",
        ));
    }
    let set = PortSet::parse(items).map_err(|e| invalid("socks5.https_ports", e))?;
    let ports: Vec<u16> = (1..=u16::MAX)
        .filter(|&p| set.contains(p))
        .take(crate::protocol::ports::MAX_PER_PROTOCOL + 1)
        .collect();
    if ports.len() > crate::protocol::ports::MAX_PER_PROTOCOL
        || items.iter().any(|i| i.starts_with('!'))
    {
        return Err(invalid(
            "socks5.https_ports",
            "deprecated, and read as [ports] https: a list of at most 64 ports; write [ports] https instead",
        ));
    }
    Ok(Some(ports))
}

/// `[gopher]`: where rewritten menus point, and how selectors are read.
fn gopher(
    raw: &RawConfig,
    gopher_listen: Option<SocketAddr>,
) -> Result<(Option<String>, Option<u16>, SelectorReading), ConfigError> {
    let gopher_public_host = raw.gopher.public_host.clone().filter(|h| !h.is_empty());
    if let Some(h) = &gopher_public_host {
        if h.bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(invalid(
                "gopher.public_host",
                format!("{h:?} is not a host name"),
            ));
        }
    }
    if gopher_public_host.is_none() && gopher_listen.is_some_and(|a| a.ip().is_unspecified()) {
        return Err(invalid(
            "gopher.public_host",
            "set it when the Gopher listener is on all addresses: rewritten menus must name a host clients reach",
        ));
    }
    if raw.gopher.public_port == Some(0) {
        return Err(invalid("gopher.public_port", "must be 1 to 65535"));
    }

    let reading = match raw.gopher.literal_selectors.unwrap_or(false) {
        true => SelectorReading::Literal,
        false => SelectorReading::Safe,
    };
    Ok((gopher_public_host, raw.gopher.public_port, reading))
}

/// `[robots]`.
fn robots(raw: &RawConfig) -> Result<RobotsConfig, ConfigError> {
    // Every wrong value of the section is reported, not only the first.
    let mut c = Checks::default();
    let r = &raw.robots;
    let on_unreachable = match r.on_unreachable.as_deref() {
        None | Some("disallow") => OnUnreachable::Disallow,
        Some("allow") => OnUnreachable::Allow,
        Some(other) => {
            return Err(invalid(
                "robots.on_unreachable",
                format!("{other:?}: use \"disallow\" or \"allow\""),
            ))
        }
    };
    let cache_bytes = c.take(count(
        "robots.cache_bytes",
        r.cache_bytes,
        64 * 1024 * 1024,
        bound::CACHE_BYTES,
    ));
    let robots = RobotsConfig {
        ttl: c.take(duration(
            "robots.ttl",
            r.ttl.as_deref(),
            Duration::from_secs(DAY),
            bound::TTL,
        )),
        cache_bytes,
        max_stale: c.take(duration(
            "robots.max_stale",
            r.max_stale.as_deref(),
            Duration::from_secs(7 * DAY),
            bound::MAX_STALE,
        )),
        unreachable_retry: c.take(duration(
            "robots.unreachable_retry",
            r.unreachable_retry.as_deref(),
            Duration::from_secs(60),
            bound::UNREACHABLE_RETRY,
        )),
        on_unreachable,
        fetch_timeout: c.take(duration(
            "robots.fetch_timeout",
            r.fetch_timeout.as_deref(),
            Duration::from_secs(15),
            bound::TIMEOUT,
        )),
        name_bot_in_request: r.name_bot_in_request.unwrap_or(false),
    };
    c.done(robots)
}

/// `limits.upstream_mark` or `--upstream-mark` (decimal or `0x` hex): 1 to
/// 2^32-1, since 0 is every unmarked socket's mark.
fn upstream_mark(raw: &RawConfig, flags: &RunArgs) -> Result<Option<u32>, ConfigError> {
    let (key, value) = match &flags.upstream_mark {
        Some(text) => {
            let parsed = match text.strip_prefix("0x").or(text.strip_prefix("0X")) {
                Some(hex) => i64::from_str_radix(hex, 16).ok(),
                None => text.parse::<i64>().ok(),
            };
            match parsed {
                Some(n) => ("--upstream-mark", n),
                None => {
                    return Err(invalid(
                        "--upstream-mark",
                        format!("{text:?} is not a number (42 or 0x2a)"),
                    ))
                }
            }
        }
        None => match raw.limits.upstream_mark {
            Some(n) => ("limits.upstream_mark", n),
            None => return Ok(None),
        },
    };
    match u32::try_from(value) {
        Ok(mark) if mark > 0 => {
            if !cfg!(target_os = "linux") {
                return Err(invalid(key, "SO_MARK needs Linux"));
            }
            Ok(Some(mark))
        }
        _ => Err(invalid(
            key,
            format!(
                "{value} is out of range: from 1 to {} (0 is every unmarked socket's mark)",
                u32::MAX
            ),
        )),
    }
}

/// `[limits]`, `--allow-private-upstreams` and `--upstream-mark`.
fn limits(raw: &RawConfig, flags: &RunArgs, table: &PortTable) -> Result<Limits, ConfigError> {
    // Every wrong value of the section is reported, not only the first.
    let mut c = Checks::default();
    let l = &raw.limits;
    let limits = Limits {
        max_connections: c.take(count(
            "limits.max_connections",
            l.max_connections,
            1024,
            bound::MAX_CONNECTIONS,
        )),
        max_connections_per_client: c.take(count(
            "limits.max_connections_per_client",
            l.max_connections_per_client,
            256,
            bound::MAX_CONNECTIONS,
        )),
        max_budget_pairs: c.take(count(
            "limits.max_budget_pairs",
            l.max_budget_pairs,
            crate::bots::limits::BUDGET_PAIRS,
            bound::BUDGET_PAIRS,
        )),
        worker_threads: c.take(
            l.worker_threads
                .map(|n| count("limits.worker_threads", Some(n), 1, bound::WORKER_THREADS))
                .transpose(),
        ),
        request_timeout: c.take(duration(
            "limits.request_timeout",
            l.request_timeout.as_deref(),
            Duration::from_secs(10),
            bound::TIMEOUT,
        )),
        connect_timeout: c.take(duration(
            "limits.connect_timeout",
            l.connect_timeout.as_deref(),
            Duration::from_secs(10),
            bound::TIMEOUT,
        )),
        idle_timeout: c.take(duration(
            "limits.idle_timeout",
            l.idle_timeout.as_deref(),
            Duration::from_secs(60),
            bound::IDLE_TIMEOUT,
        )),
        shutdown_grace: c.take(duration(
            "limits.shutdown_grace",
            l.shutdown_grace.as_deref(),
            Duration::from_secs(10),
            bound::SHUTDOWN_GRACE,
        )),
        allow_private_upstreams: flags.allow_private_upstreams
            || l.allow_private_upstreams.unwrap_or(false),
        upstream_ports: match &l.upstream_ports {
            // The default admits every port of `[ports]`.
            None => PortSet::default_set().allowing(&table.all()),
            Some(items) => c.take(match PortSet::parse(items) {
                Ok(set) if set.is_empty() => {
                    Err(invalid("limits.upstream_ports", "allows no port"))
                }
                Ok(set) => Ok(set),
                Err(e) => Err(invalid("limits.upstream_ports", e)),
            }),
        },
        upstream_mark: c.take(upstream_mark(raw, flags)),
        deny_hosts: c.take(
            crate::egress::DenyHosts::parse(l.deny_hosts.as_deref().unwrap_or_default())
                .map_err(|e| invalid("limits.deny_hosts", e)),
        ),
    };
    // A port the file says speaks a protocol, but no request may go to: a
    // config that contradicts itself. (A default port that an explicit
    // `upstream_ports` leaves out is only refused, as any other port.)
    for name in raw.ports.keys() {
        let Some(protocol) = Protocol::named(name) else {
            continue;
        };
        if let Some(port) = table
            .ports(protocol)
            .iter()
            .find(|&&p| !limits.upstream_ports.contains(p))
        {
            c.fail(invalid(
                "ports",
                format!("{name}: port {port} is refused by limits.upstream_ports"),
            ));
        }
    }
    c.done(limits)
}

/// `[ports]`: each protocol's list replaces its default (all given lists
/// are cleared first, so moving a port from one protocol to another does not
/// depend on the keys' order); a key that names no protocol is an error.
fn ports(raw: &RawConfig) -> Result<PortTable, ConfigError> {
    let https = deprecated_https_ports(raw)?;
    let given = raw
        .ports
        .iter()
        .map(|(name, list)| match Protocol::named(name) {
            Some(p) => Ok((p, name, list)),
            None => {
                let known: Vec<&str> = Protocol::ALL.iter().map(|p| p.as_str()).collect();
                Err(invalid(
                    "ports",
                    format!("{name:?} is no protocol ({})", known.join(", ")),
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cleared = given
        .iter()
        .try_fold(PortTable::default(), |t, (p, _, _)| t.with(*p, &[]));
    let cleared = cleared.map_err(|e| invalid("ports", e))?;
    let table = given.iter().try_fold(cleared, |table, (p, name, list)| {
        table
            .with(*p, list)
            .map_err(|e| invalid("ports", format!("{name}: {e}")))
    })?;
    match https {
        Some(list) => table
            .with(Protocol::Https, &list)
            .map_err(|e| invalid("socks5.https_ports", e)),
        None => Ok(table),
    }
}

/// `[http]` and `--extra-roots`: the web's extra roots (each file read and
/// checked by `preflight`, before anything is bound).
fn http(raw: &RawConfig, flags: &RunArgs) -> Result<super::HttpConfig, ConfigError> {
    let extra_roots = raw.http.extra_roots.clone().unwrap_or_default();
    let count = extra_roots.len() + flags.extra_roots.len();
    if count > super::MAX_EXTRA_ROOTS {
        let key = match flags.extra_roots.is_empty() {
            true => "http.extra_roots",
            false => "http.extra_roots and --extra-roots",
        };
        return Err(invalid(
            key,
            format!("{count} files: at most {}", super::MAX_EXTRA_ROOTS),
        ));
    }
    if extra_roots.iter().any(|f| f.is_empty()) {
        return Err(invalid("http.extra_roots", "an empty file name"));
    }
    if flags.extra_roots.iter().any(|f| f.as_os_str().is_empty()) {
        return Err(invalid("--extra-roots", "an empty file name"));
    }
    let robots_user_agent = match &raw.http.robots_user_agent {
        None => super::default_robots_user_agent(),
        Some(ua) if ua.trim().is_empty() => {
            return Err(invalid("http.robots_user_agent", "an empty User-Agent"))
        }
        Some(ua) if ua.len() > 256 || ua.chars().any(|c| c.is_control() || !c.is_ascii()) => {
            return Err(invalid(
                "http.robots_user_agent",
                "printable ASCII, at most 256 bytes",
            ))
        }
        Some(ua) => ua.clone(),
    };
    Ok(super::HttpConfig {
        extra_roots: extra_roots.into_iter().map(PathBuf::from).collect(),
        extra_roots_flags: flags.extra_roots.clone(),
        robots_user_agent,
    })
}

/// `[tls]`.
fn tls(raw: &RawConfig) -> Result<TlsConfig, ConfigError> {
    let tls = TlsConfig {
        cert_and_key: match (raw.tls.cert.clone(), raw.tls.key.clone()) {
            (Some(c), Some(k)) => Some((PathBuf::from(c), PathBuf::from(k))),
            (None, None) => None,
            (Some(_), None) => {
                return Err(invalid(
                    "tls.key",
                    "tls.cert is set, so tls.key must be too",
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "tls.cert",
                    "tls.key is set, so tls.cert must be too",
                ))
            }
        },
        hostnames: raw
            .tls
            .hostnames
            .clone()
            .unwrap_or_else(|| vec!["localhost".to_string()]),
    };
    if tls.hostnames.is_empty() {
        return Err(invalid("tls.hostnames", "name at least one host"));
    }

    Ok(tls)
}

/// `[politeness]`, `--default-delay` and `--max-wait` (both bounds).
fn politeness(raw: &RawConfig, flags: &RunArgs) -> Result<PolitenessConfig, ConfigError> {
    // Every wrong value of the section is reported, not only the first.
    let mut c = Checks::default();
    let p = &raw.politeness;
    let (default_key, default_text) = flag_or_key(
        ("--default-delay", &flags.default_delay),
        ("politeness.default_delay", &p.default_delay),
    );
    // `--max-wait` bounds every wait, the web's and the small web's.
    let (wait_key, wait_text) = flag_or_key(
        ("--max-wait", &flags.max_wait),
        ("politeness.max_wait", &p.max_wait),
    );

    let politeness = PolitenessConfig {
        default_delay: c.take(duration(
            default_key,
            default_text,
            Duration::from_secs(1),
            bound::DELAY,
        )),
        min_delay: c.take(duration(
            "politeness.min_delay",
            p.min_delay.as_deref(),
            Duration::ZERO,
            bound::DELAY,
        )),
        max_delay: match p.max_delay.as_deref() {
            None | Some("") => None,
            Some(text) => Some(c.take(duration(
                "politeness.max_delay",
                Some(text),
                Duration::ZERO,
                bound::DELAY,
            ))),
        },
        per_host_concurrency: c.take(count(
            "politeness.per_host_concurrency",
            p.per_host_concurrency,
            1,
            bound::PER_HOST_CONCURRENCY,
        )),
        max_wait: c.take(duration(
            wait_key,
            wait_text,
            Duration::from_secs(60),
            bound::MAX_WAIT,
        )),
        web_max_wait: c.take(duration(
            "politeness.web_max_wait",
            p.web_max_wait.as_deref(),
            crate::politeness::WEB_MAX_WAIT,
            bound::MAX_WAIT,
        )),
        // Sized from `limits.max_connections` once both are read.
        max_queued: usize::MAX,
        horizon: c.take(duration(
            "politeness.horizon",
            p.horizon.as_deref(),
            crate::politeness::HORIZON,
            bound::HORIZON,
        )),
        max_slow_down: c.take(duration(
            "politeness.max_slow_down",
            p.max_slow_down.as_deref(),
            crate::politeness::MAX_SLOW_DOWN,
            bound::MAX_SLOW_DOWN,
        )),
        web_backoff: crate::politeness::WebBackoff {
            first: c.take(duration(
                "politeness.web_backoff",
                p.web_backoff.as_deref(),
                Duration::from_secs(60),
                bound::WEB_BACKOFF,
            )),
            forgive: c.take(duration(
                "politeness.web_backoff_forgive",
                p.web_backoff_forgive.as_deref(),
                Duration::from_secs(30 * 60),
                bound::WEB_BACKOFF_FORGIVE,
            )),
            // A percentage of each hold, either way.
            jitter: f64::from(c.take(count(
                "politeness.web_backoff_jitter",
                p.web_backoff_jitter,
                10,
                bound::WEB_BACKOFF_JITTER,
            ))) / 100.0,
        },
        key: match p.key.as_deref() {
            None | Some("address") => GateBy::Address,
            Some("host") => GateBy::Host,
            Some(other) => {
                c.fail(invalid(
                    "politeness.key",
                    format!("{other:?}: use \"address\" or \"host\""),
                ));
                GateBy::Address
            }
        },
    };
    let mut politeness = politeness;
    // `--max-wait` bounds every wait: the web's too.
    if flags.max_wait.is_some() {
        politeness.web_max_wait = politeness.max_wait;
    }
    if let Some(max) = politeness.max_delay {
        if max < politeness.min_delay {
            c.fail(invalid(
                "politeness.max_delay",
                "must not be less than politeness.min_delay",
            ));
        }
    }
    c.done(politeness)
}

/// `[log]` and `--log-format`.
fn log(raw: &RawConfig, flags: &RunArgs) -> Result<(LogFormat, String), ConfigError> {
    let (format_key, format_text) = flag_or_key(
        ("--log-format", &flags.log_format),
        ("log.format", &raw.log.format),
    );
    let log_format = match format_text {
        None | Some("human") => LogFormat::Human,
        Some("json") => LogFormat::Json,
        Some(other) => {
            return Err(invalid(
                format_key,
                format!("{other:?}: use \"human\" or \"json\""),
            ))
        }
    };
    let log_level = raw.log.level.clone().unwrap_or_else(|| "info".to_string());
    if !valid_log_filter(&log_level) {
        return Err(invalid(
            "log.level",
            format!(
                "{log_level:?} is not a level (off, error, warn, info, debug, trace) \
                 or a filter of TARGET=LEVEL directives"
            ),
        ));
    }

    Ok((log_format, log_level))
}

/// `[metrics]`: the opt-in per-host series. The limit is checked even when
/// the series are off: an out-of-range value is a mistake either way.
fn metrics(raw: &RawConfig) -> Result<Option<usize>, ConfigError> {
    let limit = count(
        "metrics.per_host_limit",
        raw.metrics.per_host_limit,
        100,
        bound::PER_HOST_LIMIT,
    )?;
    let metrics_per_host = raw.metrics.per_host.unwrap_or(false).then_some(limit);

    Ok(metrics_per_host)
}
