//! Configuration: the TOML file as written ([`RawConfig`], unknown keys are
//! errors) → flags applied → a validated [`Config`]. Every key has a default,
//! documented in `config/robots-proxy.toml`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;

use crate::cli::RunArgs;
use crate::politeness::PolitenessConfig;
use crate::robots::{valid_product_token, BotProfile};

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
    pub request_timeout: Option<String>,
    pub connect_timeout: Option<String>,
    pub idle_timeout: Option<String>,
    pub shutdown_grace: Option<String>,
    pub allow_private_upstreams: Option<bool>,
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
    /// Host and port rewritten Gopher menus point at; `None`: the listener's own.
    pub gopher_public_host: Option<String>,
    pub gopher_public_port: Option<u16>,
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
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub shutdown_grace: Duration,
    pub allow_private_upstreams: bool,
}

#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// PEM files of the listener's certificate chain and key; generated when unset.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// Names in a generated certificate.
    pub hostnames: Vec<String>,
}

/// Parses `500ms`, `10s`, `1.5s`, `5m`, `24h`, `7d`, `0s`.
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
    Duration::try_from_secs_f64(seconds).ok()
}

fn duration(
    key: &'static str,
    value: Option<&str>,
    default: Duration,
) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(text) => parse_duration(text).ok_or_else(|| {
            invalid(
                key,
                format!("invalid duration {text:?} (write e.g. 500ms, 10s, 5m, 24h, 7d)"),
            )
        }),
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
        let gemini_listen = match (&flags.gemini_listen, &self.listen.gemini) {
            (Some(flag), _) => address("--gemini-listen", flag)?,
            (None, Some(key)) => address("listen.gemini", key)?,
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 1965)),
        };

        let gopher_listen = match (&flags.gopher_listen, &self.listen.gopher) {
            (Some(flag), _) => address("--gopher-listen", flag)?,
            (None, Some(key)) => address("listen.gopher", key)?,
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 7070)),
        };
        let metrics_listen = match (&flags.metrics_listen, &self.listen.metrics) {
            (Some(flag), _) => address("--metrics-listen", flag)?,
            (None, Some(key)) => address("listen.metrics", key)?,
            (None, None) => SocketAddr::from(([127, 0, 0, 1], 9770)),
        };
        let socks5_listen = match (&flags.socks5_listen, &self.listen.socks5) {
            (Some(flag), _) => Some(address("--socks5-listen", flag)?),
            (None, Some(key)) if !key.is_empty() => Some(address("listen.socks5", key)?),
            _ => None,
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
            if v.is_empty()
                || !v
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
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
        let cache_bytes = r.cache_bytes.unwrap_or(64 * 1024 * 1024);
        if cache_bytes < 1024 * 1024 {
            return Err(invalid("robots.cache_bytes", "at least 1048576 (1 MiB)"));
        }
        let robots = RobotsConfig {
            ttl: duration(
                "robots.ttl",
                r.ttl.as_deref(),
                Duration::from_secs(24 * 3600),
            )?,
            cache_bytes,
            max_stale: duration(
                "robots.max_stale",
                r.max_stale.as_deref(),
                Duration::from_secs(7 * 86400),
            )?,
            unreachable_retry: duration(
                "robots.unreachable_retry",
                r.unreachable_retry.as_deref(),
                Duration::from_secs(60),
            )?,
            on_unreachable,
            fetch_timeout: duration(
                "robots.fetch_timeout",
                r.fetch_timeout.as_deref(),
                Duration::from_secs(15),
            )?,
            name_bot_in_request: r.name_bot_in_request.unwrap_or(false),
        };
        if robots.ttl.is_zero() {
            return Err(invalid("robots.ttl", "must be more than 0s"));
        }
        if robots.fetch_timeout.is_zero() {
            return Err(invalid("robots.fetch_timeout", "must be more than 0s"));
        }

        let l = &self.limits;
        let limits = Limits {
            max_connections: l.max_connections.unwrap_or(1024),
            request_timeout: duration(
                "limits.request_timeout",
                l.request_timeout.as_deref(),
                Duration::from_secs(10),
            )?,
            connect_timeout: duration(
                "limits.connect_timeout",
                l.connect_timeout.as_deref(),
                Duration::from_secs(10),
            )?,
            idle_timeout: duration(
                "limits.idle_timeout",
                l.idle_timeout.as_deref(),
                Duration::from_secs(60),
            )?,
            shutdown_grace: duration(
                "limits.shutdown_grace",
                l.shutdown_grace.as_deref(),
                Duration::from_secs(10),
            )?,
            allow_private_upstreams: flags.allow_private_upstreams
                || l.allow_private_upstreams.unwrap_or(false),
        };
        if limits.max_connections == 0 {
            return Err(invalid("limits.max_connections", "must be at least 1"));
        }
        for (key, d) in [
            ("limits.request_timeout", limits.request_timeout),
            ("limits.connect_timeout", limits.connect_timeout),
            ("limits.idle_timeout", limits.idle_timeout),
        ] {
            if d.is_zero() {
                return Err(invalid(key, "must be more than 0s"));
            }
        }

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
        let (default_key, default_text) = match &flags.default_delay {
            Some(f) => ("--default-delay", Some(f.as_str())),
            None => ("politeness.default_delay", p.default_delay.as_deref()),
        };
        let (wait_key, wait_text) = match &flags.max_wait {
            Some(f) => ("--max-wait", Some(f.as_str())),
            None => ("politeness.max_wait", p.max_wait.as_deref()),
        };
        let politeness = PolitenessConfig {
            default_delay: duration(default_key, default_text, Duration::from_secs(1))?,
            min_delay: duration(
                "politeness.min_delay",
                p.min_delay.as_deref(),
                Duration::ZERO,
            )?,
            max_delay: match p.max_delay.as_deref() {
                None | Some("") => None,
                Some(text) => Some(duration(
                    "politeness.max_delay",
                    Some(text),
                    Duration::ZERO,
                )?),
            },
            per_host_concurrency: p.per_host_concurrency.unwrap_or(1),
            max_wait: duration(wait_key, wait_text, Duration::from_secs(60))?,
        };
        if politeness.per_host_concurrency == 0 {
            return Err(invalid(
                "politeness.per_host_concurrency",
                "must be at least 1",
            ));
        }
        if let Some(max) = politeness.max_delay {
            if max < politeness.min_delay {
                return Err(invalid(
                    "politeness.max_delay",
                    "must not be less than politeness.min_delay",
                ));
            }
        }

        let (format_key, format_text) = match &flags.log_format {
            Some(f) => ("--log-format", Some(f.as_str())),
            None => ("log.format", self.log.format.as_deref()),
        };
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
        if tracing_subscriber::EnvFilter::try_new(&log_level).is_err() {
            return Err(invalid(
                "log.level",
                format!("{log_level:?} is not a level or filter (e.g. info, debug)"),
            ));
        }

        let metrics_per_host = match (
            self.metrics.per_host.unwrap_or(false),
            self.metrics.per_host_limit,
        ) {
            (false, _) => None,
            (true, Some(0)) => return Err(invalid("metrics.per_host_limit", "must be at least 1")),
            (true, limit) => Some(limit.unwrap_or(100)),
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
            gopher_public_host,
            gopher_public_port: self.gopher.public_port,
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

/// A duration the way the config file writes it: `0s`, `500ms`, `10s`, `24h`, `7d`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    for (unit, size) in [
        ("d", 86_400_000u128),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

impl Config {
    /// The effective configuration as a TOML file (what `run --check-config` prints).
    pub fn to_toml(&self) -> String {
        let d = format_duration;
        let quote = |s: &str| format!("{s:?}");
        let list = |items: &[String]| {
            format!(
                "[{}]",
                items
                    .iter()
                    .map(|s| quote(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let p = &self.politeness;
        let mut out = String::new();
        out.push_str(&format!(
            "state_dir = {}\n\n",
            quote(&self.state_dir.display().to_string())
        ));
        out.push_str(&format!(
            "[listen]\ngemini = {}\ngopher = {}\nmetrics = {}\n{}\n",
            quote(&self.gemini_listen.to_string()),
            quote(&self.gopher_listen.to_string()),
            quote(&self.metrics_listen.to_string()),
            match self.socks5_listen {
                Some(s) => format!("socks5 = {}\n", quote(&s.to_string())),
                None => "# socks5: off\n".to_string(),
            }
        ));
        if !self.socks5_users.is_empty() {
            out.push_str("[socks5]\nusers = [\n");
            for (name, password) in &self.socks5_users {
                out.push_str(&format!(
                    "  {{ name = {}, password = {} }},\n",
                    quote(name),
                    quote(password)
                ));
            }
            out.push_str("]\n\n");
        }
        out.push_str("[gopher]\n");
        match &self.gopher_public_host {
            Some(h) => out.push_str(&format!("public_host = {}\n", quote(h))),
            None => out.push_str("# public_host: the Gopher listener's address\n"),
        }
        match self.gopher_public_port {
            Some(port) => out.push_str(&format!("public_port = {port}\n\n")),
            None => out.push_str("# public_port: the Gopher listener's port\n\n"),
        }
        out.push_str(&format!(
            "[bot]\nagent = {}\nvirtual_agents = {}\n\n",
            quote(self.bot.token()),
            list(self.bot.virtual_agents())
        ));
        let r = &self.robots;
        out.push_str(&format!(
            "[robots]\nttl = {}\ncache_bytes = {}\nmax_stale = {}\nunreachable_retry = {}\non_unreachable = {}\nfetch_timeout = {}\nname_bot_in_request = {}\n\n",
            quote(&d(r.ttl)),
            r.cache_bytes,
            quote(&d(r.max_stale)),
            quote(&d(r.unreachable_retry)),
            quote(match r.on_unreachable {
                OnUnreachable::Disallow => "disallow",
                OnUnreachable::Allow => "allow",
            }),
            quote(&d(r.fetch_timeout)),
            r.name_bot_in_request
        ));
        out.push_str(&format!(
            "[politeness]\ndefault_delay = {}\nmin_delay = {}\n{}per_host_concurrency = {}\nmax_wait = {}\n\n",
            quote(&d(p.default_delay)),
            quote(&d(p.min_delay)),
            match p.max_delay {
                Some(m) => format!("max_delay = {}\n", quote(&d(m))),
                None => "# max_delay: unset, a Crawl-delay stands however long\n".into(),
            },
            p.per_host_concurrency,
            quote(&d(p.max_wait))
        ));
        out.push_str(&format!(
            "[log]\nformat = {}\nlevel = {}\n\n",
            quote(match self.log_format {
                LogFormat::Human => "human",
                LogFormat::Json => "json",
            }),
            quote(&self.log_level)
        ));
        match self.metrics_per_host {
            Some(limit) => out.push_str(&format!(
                "[metrics]\nper_host = true\nper_host_limit = {limit}\n\n"
            )),
            None => out.push_str("[metrics]\nper_host = false\n\n"),
        }
        let l = &self.limits;
        out.push_str(&format!(
            "[limits]\nmax_connections = {}\nrequest_timeout = {}\nconnect_timeout = {}\nidle_timeout = {}\nshutdown_grace = {}\nallow_private_upstreams = {}\n\n",
            l.max_connections,
            quote(&d(l.request_timeout)),
            quote(&d(l.connect_timeout)),
            quote(&d(l.idle_timeout)),
            quote(&d(l.shutdown_grace)),
            l.allow_private_upstreams
        ));
        out.push_str("[tls]\n");
        if let Some((cert, key)) = &self.tls.cert_and_key {
            out.push_str(&format!(
                "cert = {}\nkey = {}\n",
                quote(&cert.display().to_string()),
                quote(&key.display().to_string())
            ));
        }
        out.push_str(&format!("hostnames = {}\n", list(&self.tls.hostnames)));
        out
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
