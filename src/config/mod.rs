//! Configuration: the TOML file as written ([`RawConfig`], unknown keys are
//! errors) → flags applied → a validated [`Config`]. Every key has a default,
//! documented in `config/robots-proxy.toml`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod effective;
pub use effective::format_duration;
use thiserror::Error;

use crate::cli::RunArgs;
use crate::egress::PortSet;
use crate::politeness::{GateBy, PolitenessConfig};
use crate::robots::{valid_product_token, valid_virtual_agent, BotProfile};
use crate::spelling::SelectorReading;

/// A configuration problem, naming the key or flag. Exit status 2.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Syntax { path: String, message: String },
    #[error("{key}: {message}")]
    Invalid { key: &'static str, message: String },
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub state_dir: Option<String>,
    #[serde(default)]
    pub listen: RawListen,
    #[serde(default)]
    pub bot: RawBot,
    #[serde(default)]
    pub robots: RawRobots,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub tls: RawTls,
    #[serde(default)]
    pub gopher: RawGopher,
    #[serde(default)]
    pub politeness: RawPoliteness,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub socks5: RawSocks5,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub per_host: Option<bool>,
    pub per_host_limit: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub format: Option<String>,
    pub level: Option<String>,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Human,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPoliteness {
    pub default_delay: Option<String>,
    pub min_delay: Option<String>,
    pub max_delay: Option<String>,
    pub per_host_concurrency: Option<usize>,
    pub max_wait: Option<String>,
    pub key: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListen {
    pub gemini: Option<String>,
    pub gopher: Option<String>,
    pub metrics: Option<String>,
    pub socks5: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSocks5 {
    pub users: Option<Vec<RawSocksUser>>,
    pub https_ports: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSocksUser {
    pub name: String,
    pub password: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGopher {
    pub public_host: Option<String>,
    pub public_port: Option<u16>,
    pub literal_selectors: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBot {
    pub agent: Option<String>,
    pub virtual_agents: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRobots {
    pub ttl: Option<String>,
    pub cache_bytes: Option<u64>,
    pub max_stale: Option<String>,
    pub unreachable_retry: Option<String>,
    pub on_unreachable: Option<String>,
    pub fetch_timeout: Option<String>,
    pub name_bot_in_request: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    pub max_connections: Option<usize>,
    pub max_connections_per_client: Option<usize>,
    pub request_timeout: Option<String>,
    pub connect_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub shutdown_grace: Option<String>,
    pub allow_private_upstreams: Option<bool>,
    pub upstream_ports: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub hostnames: Option<Vec<String>>,
}

/// What to do when a host's robots.txt cannot be fetched and no good copy is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnUnreachable {
    /// RFC 9309 §2.3.1.4: unreachable means complete disallow (the default).
    Disallow,
    /// What many Gemini crawlers do: carry on as if there were no robots.txt.
    Allow,
}

/// The validated configuration the proxy runs with.
#[derive(Clone, Debug)]
pub struct Config {
    pub state_dir: PathBuf,
    pub gemini_listen: SocketAddr,
    pub gopher_listen: SocketAddr,
    /// `/metrics` and `/healthz`.
    pub metrics_listen: SocketAddr,
    /// The SOCKS5 drop-in listener: off unless configured.
    pub socks5_listen: Option<SocketAddr>,
    /// Username/password pairs (RFC 1929); empty: no authentication.
    pub socks5_users: Vec<(String, String)>,
    /// TLS through SOCKS5 to these ports is HTTPS, not Gemini: closed at once.
    pub socks5_https_ports: PortSet,
    /// Host and port rewritten Gopher menus point at; `None`: the listener's own.
    pub gopher_public_host: Option<String>,
    pub gopher_public_port: Option<u16>,
    /// How Gopher selectors are read: every common server's spelling (safe), or
    /// the proposal's letter (`gopher.literal_selectors`).
    pub selector_reading: SelectorReading,
    pub bot: BotProfile,
    pub robots: RobotsConfig,
    pub politeness: PolitenessConfig,
    pub log_format: LogFormat,
    /// `Some(limit)`: a per-host request series for up to `limit` hosts.
    pub metrics_per_host: Option<usize>,
    /// A `tracing` filter (`info`, `robots_proxy=debug`); `RUST_LOG` overrides it.
    pub log_level: String,
    pub limits: Limits,
    pub tls: TlsConfig,
}

#[derive(Clone, Debug)]
pub struct RobotsConfig {
    pub ttl: Duration,
    pub cache_bytes: u64,
    pub max_stale: Duration,
    pub unreachable_retry: Duration,
    pub on_unreachable: OnUnreachable,
    pub fetch_timeout: Duration,
    pub name_bot_in_request: bool,
}

#[derive(Clone, Debug)]
pub struct Limits {
    pub max_connections: usize,
    /// Connections one client (an IPv4 address, an IPv6 /64) may hold at once.
    pub max_connections_per_client: usize,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub shutdown_grace: Duration,
    pub allow_private_upstreams: bool,
    /// Ports upstream connections may go to.
    pub upstream_ports: PortSet,
}

#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// PEM files of the listener's certificate chain and key; generated when unset.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// Names in a generated certificate.
    pub hostnames: Vec<String>,
}

/// Parses `500ms`, `10s`, `1.5s`, `5m`, `24h`, `7d`, `0s`; a number too large
/// for a `Duration` gives `Duration::MAX` (which no key accepts).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86400.0,
        _ => return None,
    };
    // Too long for a Duration is still a duration, just out of every key's range.
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

/// The range a duration key accepts: beyond it a value is a mistake (a year of
/// Crawl-delay, a timeout of centuries) that would also overflow the clocks and
/// caches it feeds. Zero is allowed where `min` is zero.
#[derive(Clone, Copy, Debug)]
struct Span {
    min: Duration,
    max: Duration,
}

const DAY: u64 = 86_400;

/// A duration key: `default` when unset, else parsed and checked against `span`;
/// an error names the key and the bound.
fn duration(
    key: &'static str,
    value: Option<&str>,
    default: Duration,
    span: Span,
) -> Result<Duration, ConfigError> {
    let Some(text) = value else {
        return Ok(default);
    };
    let d = parse_duration(text).ok_or_else(|| {
        invalid(
            key,
            format!("invalid duration {text:?} (write e.g. 500ms, 10s, 5m, 24h, 7d)"),
        )
    })?;
    if d < span.min || d > span.max {
        let range = match span.min.is_zero() {
            true => format!("at most {}", format_duration(span.max)),
            false => format!(
                "from {} to {}",
                format_duration(span.min),
                format_duration(span.max)
            ),
        };
        return Err(invalid(key, format!("{text:?} is out of range: {range}")));
    }
    Ok(d)
}

/// A count key: `default` when unset, else within `min..=max`.
fn count<T: Copy + PartialOrd + std::fmt::Display>(
    key: &'static str,
    value: Option<T>,
    default: T,
    (min, max): (T, T),
) -> Result<T, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if v >= min && v <= max => Ok(v),
        Some(v) => Err(invalid(
            key,
            format!("{v} is out of range: from {min} to {max}"),
        )),
    }
}

const fn span(min_ms: u64, max_s: u64) -> Span {
    Span {
        min: Duration::from_millis(min_ms),
        max: Duration::from_secs(max_s),
    }
}

/// Every bound in one place (the README's configuration section lists them).
mod bound {
    use super::{span, Span, DAY};
    pub const TTL: Span = span(1000, 365 * DAY);
    pub const MAX_STALE: Span = span(0, 365 * DAY);
    pub const UNREACHABLE_RETRY: Span = span(1000, 7 * DAY);
    pub const TIMEOUT: Span = span(1, 3600);
    pub const IDLE_TIMEOUT: Span = span(1, DAY);
    pub const SHUTDOWN_GRACE: Span = span(0, 3600);
    pub const DELAY: Span = span(0, DAY);
    pub const MAX_WAIT: Span = span(0, DAY);
    pub const CACHE_BYTES: (u64, u64) = (1 << 20, 1 << 40);
    pub const MAX_CONNECTIONS: (usize, usize) = (1, 1 << 20);
    pub const PER_HOST_CONCURRENCY: (usize, usize) = (1, 1024);
    pub const PER_HOST_LIMIT: (usize, usize) = (1, 100_000);
}

/// A value set by a flag of `run` or by a file key: the flag wins. Returns the
/// name to blame in an error, and the value if either was set.
fn flag_or_key<'a>(
    flag: (&'static str, &'a Option<String>),
    key: (&'static str, &'a Option<String>),
) -> (&'static str, Option<&'a str>) {
    match flag.1 {
        Some(f) => (flag.0, Some(f.as_str())),
        None => (key.0, key.1.as_deref()),
    }
}

/// A listen address from [`flag_or_key`], or `default`.
fn listen_addr(
    (name, value): (&'static str, Option<&str>),
    default: ([u8; 4], u16),
) -> Result<SocketAddr, ConfigError> {
    match value {
        Some(text) => address(name, text),
        None => Ok(SocketAddr::from(default)),
    }
}

fn address(key: &'static str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        invalid(
            key,
            format!("invalid address {value:?} (write e.g. 127.0.0.1:1965 or [::1]:1965)"),
        )
    })
}

/// A level, or a `tracing` filter whose every directive ends in `=LEVEL` or is
/// a level. `EnvFilter` itself reads a lone word such as `verbose` as a target
/// name, which would silence every other line: a typo must not do that.
fn valid_log_filter(text: &str) -> bool {
    let level = |l: &str| {
        ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .any(|k| l.eq_ignore_ascii_case(k))
    };
    !text.trim().is_empty()
        && text.split(',').all(|directive| {
            let directive = directive.trim();
            match directive.rsplit_once('=') {
                Some((target, l)) => !target.is_empty() && level(l),
                None => level(directive),
            }
        })
        && tracing_subscriber::EnvFilter::try_new(text).is_ok()
}

/// Where state lives when neither the config nor `--state-dir` says.
fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("robots-proxy");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".local/state/robots-proxy"),
        None => PathBuf::from("robots-proxy-state"),
    }
}

impl RawConfig {
    /// Reads and parses a config file; unknown keys are errors.
    pub fn load(path: &Path) -> Result<RawConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        RawConfig::parse(&text).map_err(|message| ConfigError::Syntax {
            path: path.display().to_string(),
            message,
        })
    }

    pub fn parse(text: &str) -> Result<RawConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())
    }

    /// Applies the flags of `run` over the file and validates the result.
    pub fn resolve(self, flags: &RunArgs) -> Result<Config, ConfigError> {
        let l = &self.listen;
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
        let socks5_https_ports = match &self.socks5.https_ports {
            None => PortSet::parse(&["443", "8443"]).expect("the default parses"),
            Some(items) => PortSet::parse(items).map_err(|e| invalid("socks5.https_ports", e))?,
        };
        let mut socks5_users = Vec::new();
        for user in self.socks5.users.unwrap_or_default() {
            if user.name.is_empty() || user.name.len() > 255 || user.password.len() > 255 {
                return Err(invalid(
                    "socks5.users",
                    "names of 1 to 255 bytes, passwords of at most 255",
                ));
            }
            socks5_users.push((user.name, user.password));
        }
        let gopher_public_host = self.gopher.public_host.filter(|h| !h.is_empty());
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
        if self.gopher.public_port == Some(0) {
            return Err(invalid("gopher.public_port", "must be 1 to 65535"));
        }

        let agent = flags.agent.clone().or(self.bot.agent).unwrap_or_default();
        if !agent.is_empty() && !valid_product_token(&agent) {
            let key = if flags.agent.is_some() {
                "--agent"
            } else {
                "bot.agent"
            };
            return Err(invalid(
                key,
                format!("{agent:?} is not a product token (letters, digits, '_' and '-', optionally /VERSION)"),
            ));
        }
        let virtual_agents = if flags.virtual_agents.is_empty() {
            self.bot.virtual_agents.unwrap_or_default()
        } else {
            flags.virtual_agents.clone()
        };
        for v in &virtual_agents {
            if !valid_virtual_agent(v) {
                return Err(invalid(
                    "bot.virtual_agents",
                    format!("{v:?} is not one word"),
                ));
            }
        }
        let bot = virtual_agents
            .iter()
            .fold(BotProfile::new(&agent), |b, v| b.with_virtual_agent(v));

        let r = &self.robots;
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

        let l = &self.limits;
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

        let tls = TlsConfig {
            cert_and_key: match (self.tls.cert, self.tls.key) {
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
            hostnames: self
                .tls
                .hostnames
                .unwrap_or_else(|| vec!["localhost".to_string()]),
        };
        if tls.hostnames.is_empty() {
            return Err(invalid("tls.hostnames", "name at least one host"));
        }

        let p = &self.politeness;
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

        let (format_key, format_text) = flag_or_key(
            ("--log-format", &flags.log_format),
            ("log.format", &self.log.format),
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
        let log_level = self.log.level.unwrap_or_else(|| "info".to_string());
        if !valid_log_filter(&log_level) {
            return Err(invalid(
                "log.level",
                format!(
                    "{log_level:?} is not a level (off, error, warn, info, debug, trace) \
                     or a filter of TARGET=LEVEL directives"
                ),
            ));
        }

        let metrics_per_host = match (
            self.metrics.per_host.unwrap_or(false),
            self.metrics.per_host_limit,
        ) {
            (false, _) => None,
            (true, limit) => Some(count(
                "metrics.per_host_limit",
                limit,
                100,
                bound::PER_HOST_LIMIT,
            )?),
        };

        let state_dir = flags
            .state_dir
            .clone()
            .or(self.state_dir.map(PathBuf::from))
            .unwrap_or_else(default_state_dir);

        Ok(Config {
            state_dir,
            gemini_listen,
            gopher_listen,
            metrics_listen,
            socks5_listen,
            socks5_users,
            socks5_https_ports,
            gopher_public_host,
            gopher_public_port: self.gopher.public_port,
            selector_reading: if self.gopher.literal_selectors.unwrap_or(false) {
                SelectorReading::Literal
            } else {
                SelectorReading::Safe
            },
            bot,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formatted_durations_parse_back() {
        for text in ["0s", "500ms", "1500ms", "10s", "5m", "24h", "7d", "90s"] {
            let d = parse_duration(text).unwrap();
            assert_eq!(parse_duration(&format_duration(d)), Some(d), "{text}");
        }
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
    }

    #[test]
    fn durations() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("0s", Some(Duration::ZERO)),
            ("500ms", Some(Duration::from_millis(500))),
            ("10s", Some(Duration::from_secs(10))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("5m", Some(Duration::from_secs(300))),
            ("24h", Some(Duration::from_secs(86400))),
            ("7d", Some(Duration::from_secs(604800))),
            ("10", None),
            ("s", None),
            ("10x", None),
            ("-1s", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text), *want, "{text:?}");
        }
    }
}
