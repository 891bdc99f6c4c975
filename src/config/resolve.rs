//! One resolver per section of the file: the raw section (and the flags of
//! `run` that override it) → validated values, each error naming its key or
//! flag. [`RawConfig::resolve`] puts the sections together.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::values::{
    address, bound, count, default_state_dir, duration, flag_or_key, listen_addr, valid_log_filter,
    DAY,
};
use super::{
    invalid, Config, ConfigError, Limits, LogFormat, OnUnreachable, RawConfig, RobotsConfig,
    TlsConfig,
};
use crate::access::Access;
use crate::bots::{Bot, Bots, Fingerprint};
use crate::cli::RunArgs;
use crate::egress::PortSet;
use crate::egress::Prefix;
use crate::metrics::NO_BOT;
use crate::politeness::{GateBy, PolitenessConfig};
use crate::robots::{valid_product_token, valid_virtual_agent, BotProfile};
use crate::spelling::SelectorReading;

impl RawConfig {
    /// Applies the flags of `run` over the file and validates the result.
    pub fn resolve(self, flags: &RunArgs) -> Result<Config, ConfigError> {
        // Section by section, in the file's order: the first error reported is
        // the first in the file.
        let listen = listen(&self, flags)?;
        let (socks5_users, socks5_https_ports) = socks5(&self)?;
        let (gopher_public_host, gopher_public_port, selector_reading) =
            gopher(&self, listen.gopher)?;
        let access = access(&self, &listen)?;
        let bots = bots(&self, flags, &socks5_users, &access)?;
        let robots = robots(&self)?;
        let limits = limits(&self, flags)?;
        let tls = tls(&self)?;
        let politeness = politeness(&self, flags)?;
        let (log_format, log_level) = log(&self, flags)?;
        let metrics_per_host = metrics(&self)?;
        let state_dir = flags
            .state_dir
            .clone()
            .or(self.state_dir.as_ref().map(PathBuf::from))
            .unwrap_or_else(default_state_dir);
        Ok(Config {
            state_dir,
            gemini_listen: listen.gemini,
            gopher_listen: listen.gopher,
            metrics_listen: listen.metrics,
            socks5_listen: listen.socks5,
            socks5_users,
            socks5_https_ports,
            gopher_public_host,
            gopher_public_port,
            selector_reading,
            bots,
            access,
            robots,
            politeness,
            log_format,
            metrics_per_host,
            log_level,
            limits,
            tls,
        })
    }
}

/// The listen addresses.
struct Listens {
    gemini: SocketAddr,
    gopher: SocketAddr,
    metrics: SocketAddr,
    socks5: Option<SocketAddr>,
}

/// `[listen]` and the `--*-listen` flags.
fn listen(raw: &RawConfig, flags: &RunArgs) -> Result<Listens, ConfigError> {
    let l = &raw.listen;
    let loopback = [127, 0, 0, 1];
    let gemini_listen = listen_addr(
        flag_or_key(
            ("--gemini-listen", &flags.gemini_listen),
            ("listen.gemini", &l.gemini),
        ),
        (loopback, 1965),
    )?;
    let gopher_listen = listen_addr(
        flag_or_key(
            ("--gopher-listen", &flags.gopher_listen),
            ("listen.gopher", &l.gopher),
        ),
        (loopback, 7070),
    )?;
    let metrics_listen = listen_addr(
        flag_or_key(
            ("--metrics-listen", &flags.metrics_listen),
            ("listen.metrics", &l.metrics),
        ),
        (loopback, 9770),
    )?;
    // Off unless set; an empty key is off too.
    let socks5_key = l.socks5.clone().filter(|k| !k.is_empty());
    let socks5_listen = match flag_or_key(
        ("--socks5-listen", &flags.socks5_listen),
        ("listen.socks5", &socks5_key),
    ) {
        (name, Some(text)) => Some(address(name, text)?),
        (_, None) => None,
    };
    Ok(Listens {
        gemini: gemini_listen,
        gopher: gopher_listen,
        metrics: metrics_listen,
        socks5: socks5_listen,
    })
}

/// `[socks5]`: users (RFC 1929) and the ports whose TLS is HTTPS.
fn socks5(raw: &RawConfig) -> Result<(Vec<(String, String)>, PortSet), ConfigError> {
    let socks5_https_ports = match &raw.socks5.https_ports {
        None => PortSet::parse(&["443", "8443"]).expect("the default parses"),
        Some(items) => PortSet::parse(items).map_err(|e| invalid("socks5.https_ports", e))?,
    };
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
    Ok((socks5_users, socks5_https_ports))
}

/// `[gopher]`: where rewritten menus point, and how selectors are read.
fn gopher(
    raw: &RawConfig,
    gopher_listen: SocketAddr,
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
    if gopher_public_host.is_none() && gopher_listen.ip().is_unspecified() {
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

/// `[bot]`, `--agent` and `--virtual-agent`: the default bot's profile, or
/// `None` when there is no default bot (`[[bots]]` without `[bot]` or flags).
fn default_bot(
    raw: &RawConfig,
    flags: &RunArgs,
) -> Result<Option<(String, BotProfile)>, ConfigError> {
    let section = raw.bot.as_ref();
    let has_default = section.is_some()
        || flags.agent.is_some()
        || !flags.virtual_agents.is_empty()
        || raw.bots.is_empty();
    if !has_default {
        return Ok(None);
    }
    let (agent_key, agent) = match &flags.agent {
        Some(a) => ("--agent", a.clone()),
        None => (
            "bot.agent",
            section.and_then(|b| b.agent.clone()).unwrap_or_default(),
        ),
    };
    let virtual_agents = if flags.virtual_agents.is_empty() {
        section
            .and_then(|b| b.virtual_agents.clone())
            .unwrap_or_default()
    } else {
        flags.virtual_agents.clone()
    };
    // An empty token is the anonymous bot: only `*` groups apply to it.
    let profile = bot_profile(agent_key, "bot.virtual_agents", &agent, &virtual_agents)?;
    let name = section
        .and_then(|b| b.name.clone())
        .unwrap_or_else(|| "default".to_string());
    Ok(Some((name, profile)))
}

/// A bot's robots.txt identity, each error naming its key. An empty `agent`
/// is the anonymous bot.
fn bot_profile(
    agent_key: &'static str,
    virtual_key: &'static str,
    agent: &str,
    virtual_agents: &[String],
) -> Result<BotProfile, ConfigError> {
    if !agent.is_empty() && !valid_product_token(agent) {
        return Err(invalid(
            agent_key,
            format!("{agent:?} is not a product token (letters, digits, '_' and '-', optionally /VERSION)"),
        ));
    }
    if let Some(v) = virtual_agents.iter().find(|v| !valid_virtual_agent(v)) {
        return Err(invalid(virtual_key, format!("{v:?} is not one word")));
    }
    Ok(virtual_agents
        .iter()
        .fold(BotProfile::new(agent), |b, v| b.with_virtual_agent(v)))
}

/// A bot's name: the `bot` label of metrics, so short and plain.
fn valid_bot_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name != NO_BOT
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `[bot]` and `[[bots]]`: every bot, which one is the default, and what
/// picks each, every user, certificate and range claimed by one bot only.
fn bots(
    raw: &RawConfig,
    flags: &RunArgs,
    socks5_users: &[(String, String)],
    access: &Access,
) -> Result<Bots, ConfigError> {
    let mut bots: Vec<Bot> = Vec::new();
    let default = default_bot(raw, flags)?;
    if let Some((name, profile)) = default {
        if !valid_bot_name(&name) {
            return Err(invalid("bot.name", bad_name(&name)));
        }
        bots.push(Bot::named(&name, profile));
    }
    let has_default = !bots.is_empty();
    for entry in &raw.bots {
        let name = &entry.name;
        if !valid_bot_name(name) {
            return Err(invalid("bots.name", bad_name(name)));
        }
        if bots.iter().any(|b| &b.name == name) {
            return Err(invalid("bots.name", format!("two bots are named {name:?}")));
        }
        if entry.agent.is_empty() {
            return Err(invalid(
                "bots.agent",
                format!("bot {name:?}: give it its product token (the name robots.txt groups use)"),
            ));
        }
        let mut bot = Bot::named(
            name,
            bot_profile(
                "bots.agent",
                "bots.virtual_agents",
                &entry.agent,
                &entry.virtual_agents,
            )
            .map_err(|e| in_bot(name, e))?,
        );
        let socks5_user = |user: &str| match socks5_users.iter().any(|(u, _)| u == user) {
            true => Ok(user.to_string()),
            false => Err(format!("{user:?} is not a [socks5] users entry")),
        };
        bot.socks5_users = claim(
            ("bots.socks5_users", name),
            &entry.socks5_users,
            socks5_user,
            &bots,
            |b| &b.socks5_users,
        )?;
        bot.client_certs = claim(
            ("bots.client_certs", name),
            &entry.client_certs,
            Fingerprint::parse,
            &bots,
            |b| &b.client_certs,
        )?;
        bot.clients = claim(
            ("bots.clients", name),
            &entry.clients,
            Prefix::parse,
            &bots,
            |b| &b.clients,
        )?;
        if let Some(range) = bot
            .clients
            .iter()
            .find(|r| !access.allow_from.iter().any(|a| a.overlaps(r)))
        {
            return Err(invalid(
                "bots.clients",
                format!(
                    "bot {name:?}: {range} is outside access.allow_from, so its clients are refused before a bot is picked"
                ),
            ));
        }
        if bot.socks5_users.is_empty() && bot.client_certs.is_empty() && bot.clients.is_empty() {
            return Err(invalid(
                "bots.name",
                format!(
                    "bot {name:?}: nothing picks it; give it socks5_users, client_certs or clients (the default bot is [bot])"
                ),
            ));
        }
        bots.push(bot);
    }
    let bots = Bots::new(bots, has_default.then_some(0));
    if access.require_client_cert && !bots.lists_certs() {
        return Err(invalid(
            "access.require_client_cert",
            "no bot lists client_certs, so every Gemini request would be refused",
        ));
    }
    Ok(bots)
}

/// One key of a `[[bots]]` entry (a user, certificate or range list): each
/// item parsed, and picking this bot only (an item another bot has is an error,
/// so which bot a client is never depends on the file's order).
fn claim<T: PartialEq>(
    (key, name): (&'static str, &str),
    items: &[String],
    parse: impl Fn(&str) -> Result<T, String>,
    bots: &[Bot],
    claimed: impl Fn(&Bot) -> &Vec<T>,
) -> Result<Vec<T>, ConfigError> {
    let mut out: Vec<T> = Vec::new();
    for text in items {
        let item = parse(text).map_err(|e| invalid(key, format!("bot {name:?}: {e}")))?;
        if let Some(other) = bots.iter().find(|b| claimed(b).contains(&item)) {
            return Err(invalid(
                key,
                format!("{text:?} picks both {:?} and {name:?}", other.name),
            ));
        }
        out.push(item);
    }
    Ok(out)
}

fn bad_name(name: &str) -> String {
    format!(
        "{name:?} is not a bot name (1 to 64 letters, digits, '_', '-' and '.'; not {NO_BOT:?})"
    )
}

/// A profile error inside `[[bots]]`, with the bot's name.
fn in_bot(name: &str, e: ConfigError) -> ConfigError {
    match e {
        ConfigError::Invalid { key, message } => ConfigError::Invalid {
            key,
            message: format!("bot {name:?}: {message}"),
        },
        other => other,
    }
}

/// `[access]`, and the listeners it must cover: a listener reachable from
/// other machines needs `allow_from` to say who may use it.
fn access(raw: &RawConfig, listen: &Listens) -> Result<Access, ConfigError> {
    let allow_from = match &raw.access.allow_from {
        None => Access::loopback(),
        Some(items) => items
            .iter()
            .map(|t| Prefix::parse(t).map_err(|e| invalid("access.allow_from", e)))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let access = Access {
        allow_from,
        require_client_cert: raw.access.require_client_cert.unwrap_or(false),
    };
    if access.loopback_only() {
        let proxy_listeners = [
            ("Gemini", Some(listen.gemini)),
            ("Gopher", Some(listen.gopher)),
            ("SOCKS5", listen.socks5),
        ];
        for (listener, addr) in proxy_listeners {
            let Some(addr) = addr else { continue };
            if !addr.ip().is_loopback() {
                return Err(invalid(
                    "access.allow_from",
                    format!(
                        "the {listener} listener is on {addr}, reachable from other machines, but access.allow_from admits only this machine; \
                         list the client ranges to serve (allow_from = [\"192.168.1.0/24\"]), or allow_from = [\"0.0.0.0/0\", \"::/0\"] to serve anyone"
                    ),
                ));
            }
        }
    }
    Ok(access)
}

/// `[robots]`.
fn robots(raw: &RawConfig) -> Result<RobotsConfig, ConfigError> {
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
    let cache_bytes = count(
        "robots.cache_bytes",
        r.cache_bytes,
        64 * 1024 * 1024,
        bound::CACHE_BYTES,
    )?;
    let robots = RobotsConfig {
        ttl: duration(
            "robots.ttl",
            r.ttl.as_deref(),
            Duration::from_secs(DAY),
            bound::TTL,
        )?,
        cache_bytes,
        max_stale: duration(
            "robots.max_stale",
            r.max_stale.as_deref(),
            Duration::from_secs(7 * DAY),
            bound::MAX_STALE,
        )?,
        unreachable_retry: duration(
            "robots.unreachable_retry",
            r.unreachable_retry.as_deref(),
            Duration::from_secs(60),
            bound::UNREACHABLE_RETRY,
        )?,
        on_unreachable,
        fetch_timeout: duration(
            "robots.fetch_timeout",
            r.fetch_timeout.as_deref(),
            Duration::from_secs(15),
            bound::TIMEOUT,
        )?,
        name_bot_in_request: r.name_bot_in_request.unwrap_or(false),
    };

    Ok(robots)
}

/// `[limits]` and `--allow-private-upstreams`.
fn limits(raw: &RawConfig, flags: &RunArgs) -> Result<Limits, ConfigError> {
    let l = &raw.limits;
    let limits = Limits {
        max_connections: count(
            "limits.max_connections",
            l.max_connections,
            1024,
            bound::MAX_CONNECTIONS,
        )?,
        max_connections_per_client: count(
            "limits.max_connections_per_client",
            l.max_connections_per_client,
            256,
            bound::MAX_CONNECTIONS,
        )?,
        request_timeout: duration(
            "limits.request_timeout",
            l.request_timeout.as_deref(),
            Duration::from_secs(10),
            bound::TIMEOUT,
        )?,
        connect_timeout: duration(
            "limits.connect_timeout",
            l.connect_timeout.as_deref(),
            Duration::from_secs(10),
            bound::TIMEOUT,
        )?,
        idle_timeout: duration(
            "limits.idle_timeout",
            l.idle_timeout.as_deref(),
            Duration::from_secs(60),
            bound::IDLE_TIMEOUT,
        )?,
        shutdown_grace: duration(
            "limits.shutdown_grace",
            l.shutdown_grace.as_deref(),
            Duration::from_secs(10),
            bound::SHUTDOWN_GRACE,
        )?,
        allow_private_upstreams: flags.allow_private_upstreams
            || l.allow_private_upstreams.unwrap_or(false),
        upstream_ports: match &l.upstream_ports {
            None => PortSet::default_set(),
            Some(items) => match PortSet::parse(items) {
                Ok(set) if set.is_empty() => {
                    return Err(invalid("limits.upstream_ports", "allows no port"))
                }
                Ok(set) => set,
                Err(e) => return Err(invalid("limits.upstream_ports", e)),
            },
        },
    };

    Ok(limits)
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

/// `[politeness]`, `--default-delay` and `--max-wait`.
fn politeness(raw: &RawConfig, flags: &RunArgs) -> Result<PolitenessConfig, ConfigError> {
    let p = &raw.politeness;
    let (default_key, default_text) = flag_or_key(
        ("--default-delay", &flags.default_delay),
        ("politeness.default_delay", &p.default_delay),
    );
    let (wait_key, wait_text) = flag_or_key(
        ("--max-wait", &flags.max_wait),
        ("politeness.max_wait", &p.max_wait),
    );
    let politeness = PolitenessConfig {
        default_delay: duration(
            default_key,
            default_text,
            Duration::from_secs(1),
            bound::DELAY,
        )?,
        min_delay: duration(
            "politeness.min_delay",
            p.min_delay.as_deref(),
            Duration::ZERO,
            bound::DELAY,
        )?,
        max_delay: match p.max_delay.as_deref() {
            None | Some("") => None,
            Some(text) => Some(duration(
                "politeness.max_delay",
                Some(text),
                Duration::ZERO,
                bound::DELAY,
            )?),
        },
        per_host_concurrency: count(
            "politeness.per_host_concurrency",
            p.per_host_concurrency,
            1,
            bound::PER_HOST_CONCURRENCY,
        )?,
        max_wait: duration(
            wait_key,
            wait_text,
            Duration::from_secs(60),
            bound::MAX_WAIT,
        )?,
        key: match p.key.as_deref() {
            None | Some("address") => GateBy::Address,
            Some("host") => GateBy::Host,
            Some(other) => {
                return Err(invalid(
                    "politeness.key",
                    format!("{other:?}: use \"address\" or \"host\""),
                ))
            }
        },
    };
    if let Some(max) = politeness.max_delay {
        if max < politeness.min_delay {
            return Err(invalid(
                "politeness.max_delay",
                "must not be less than politeness.min_delay",
            ));
        }
    }

    Ok(politeness)
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

/// `[metrics]`: the opt-in per-host series.
fn metrics(raw: &RawConfig) -> Result<Option<usize>, ConfigError> {
    let metrics_per_host = match (
        raw.metrics.per_host.unwrap_or(false),
        raw.metrics.per_host_limit,
    ) {
        (false, _) => None,
        (true, limit) => Some(count(
            "metrics.per_host_limit",
            limit,
            100,
            bound::PER_HOST_LIMIT,
        )?),
    };

    Ok(metrics_per_host)
}
