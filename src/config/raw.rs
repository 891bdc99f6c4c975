//! The configuration file as written: one struct per section, every key
//! optional, unknown keys errors (serde). Nothing here is validated; see
//! [`super::resolve`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::listener::Listener;

use super::ConfigError;

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    // Sections in the order `--check-config` prints them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
    #[serde(default)]
    pub listen: RawListen,
    #[serde(default)]
    pub socks5: RawSocks5,
    #[serde(default, skip_serializing_if = "RawPorts::is_empty")]
    pub ports: RawPorts,
    #[serde(default)]
    pub gopher: RawGopher,
    #[serde(default)]
    pub access: RawAccess,
    /// `None`: no `[bot]` section (with `[[bots]]`, no default bot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bot: Option<RawBot>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bots: Vec<RawNamedBot>,
    /// `[[hosts]]`: limits at particular hosts, for every bot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<RawHost>,
    #[serde(default)]
    pub robots: RawRobots,
    #[serde(default)]
    pub politeness: RawPoliteness,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub store: RawStore,
    #[serde(default)]
    pub admin: RawAdmin,
    #[serde(default)]
    pub tls: RawTls,
    #[serde(default)]
    pub http: RawHttp,
}

/// `[admin]`: who may use the admin listener.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_from: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
}

/// `[store]`: fleet mode.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_unavailable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<DurationText>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_host: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_host_limit: Option<usize>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawPoliteness {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_delay: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delay: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_delay: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_host_concurrency: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_max_wait: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub horizon: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_slow_down: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_backoff: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_backoff_forgive: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_backoff_jitter: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// `[listen]`: each listener's address, or `"off"` (also `false` or `""`).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawListen {
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub gemini: Option<String>,
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub gopher: Option<String>,
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub metrics: Option<String>,
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub socks5: Option<String>,
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub transparent: Option<String>,
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub http: Option<String>,
    #[serde(
        default,
        deserialize_with = "listen_value",
        skip_serializing_if = "Option::is_none"
    )]
    pub key_directory: Option<String>,
}

/// What turns a listener off, in `[listen]` and its `--*-listen` flag.
pub const OFF: &str = "off";

/// A listener's key: an address, `"off"`, or `false` (read as `"off"`).
fn listen_value<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Text(String),
        On(bool),
    }
    match Value::deserialize(d)? {
        Value::Text(text) => Ok(Some(text)),
        Value::On(false) => Ok(Some(OFF.into())),
        Value::On(true) => Err(serde::de::Error::custom(
            "true: give an address (\"127.0.0.1:1965\"), or false (\"off\") to turn it off",
        )),
    }
}

impl RawListen {
    /// The key of one listener of the table.
    pub fn get(&self, listener: Listener) -> &Option<String> {
        match listener {
            Listener::Gemini => &self.gemini,
            Listener::Gopher => &self.gopher,
            Listener::Socks5 => &self.socks5,
            Listener::Transparent => &self.transparent,
            Listener::Http => &self.http,
            Listener::Admin => &self.metrics,
            Listener::KeyDirectory => &self.key_directory,
        }
    }

    pub fn get_mut(&mut self, listener: Listener) -> &mut Option<String> {
        match listener {
            Listener::Gemini => &mut self.gemini,
            Listener::Gopher => &mut self.gopher,
            Listener::Socks5 => &mut self.socks5,
            Listener::Transparent => &mut self.transparent,
            Listener::Http => &mut self.http,
            Listener::Admin => &mut self.metrics,
            Listener::KeyDirectory => &mut self.key_directory,
        }
    }
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSocks5 {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<RawSocksUser>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub https_ports: Option<Vec<String>>,
}

/// `[ports]`: the protocol each destination port speaks (SOCKS5, transparent),
/// keyed by the protocol's name (`gemini = [1965]`): a protocol added to
/// [`crate::protocol::Protocol`] has its key with nothing written here. A
/// name that is no protocol is an error when the section is resolved.
pub type RawPorts = std::collections::BTreeMap<String, Vec<u16>>;

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawSocksUser {
    pub name: String,
    pub password: String,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawGopher {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub literal_selectors: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawBot {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_agents: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delay: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_requests_per_server: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet_hours: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_usage: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uploads: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_methods: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_bot_auth: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_agent: Option<String>,
}

/// One `[[hosts]]` entry.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawHost {
    pub host: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delay: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_requests_per_server: Option<u32>,
}

/// One `[[bots]]` entry.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawNamedBot {
    pub name: String,
    pub agent: String,
    #[serde(default)]
    pub virtual_agents: Vec<String>,
    #[serde(default)]
    pub socks5_users: Vec<String>,
    #[serde(default)]
    pub client_certs: Vec<String>,
    #[serde(default)]
    pub clients: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_delay: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub daily_requests_per_server: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiet_hours: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_usage: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uploads: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_methods: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub web_bot_auth: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature_agent: Option<String>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccess {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_from: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub require_client_cert: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawRobots {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_stale: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_retry: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_unreachable: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetch_timeout: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_bot_in_request: Option<bool>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections_per_client: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_budget_pairs: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker_threads: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_timeout: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_grace: Option<DurationText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allow_private_upstreams: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_ports: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_hosts: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_mark: Option<i64>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostnames: Option<Vec<String>>,
}

/// `[http]`: the web's settings.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_roots: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub robots_user_agent: Option<String>,
}

impl RawConfig {
    /// Reads and parses a config file; unknown keys are errors.
    pub fn load(path: &Path) -> Result<RawConfig, ConfigError> {
        let (raw, errors) = RawConfig::load_all(path)?;
        match (raw, errors.is_empty()) {
            (Some(raw), true) => Ok(raw),
            _ => Err(ConfigError::several(errors)),
        }
    }

    /// Reads and parses a config file, finding every key that cannot be
    /// read (not only the first): what could be read of it, and an error
    /// for each key that could not. A file that cannot be read is the one
    /// error.
    pub fn load_all(path: &Path) -> Result<(Option<RawConfig>, Vec<ConfigError>), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let (raw, messages) = RawConfig::parse_all(&text);
        let errors = messages
            .into_iter()
            .map(|message| ConfigError::Syntax {
                path: path.display().to_string(),
                message,
            })
            .collect();
        Ok((raw, errors))
    }

    /// The file `flags` name (`--config`), or the embedded defaults without
    /// one, as [`load_all`](Self::load_all) reads it.
    pub fn for_flags_all(
        flags: &crate::cli::RunArgs,
    ) -> Result<(Option<RawConfig>, Vec<ConfigError>), ConfigError> {
        match &flags.config {
            Some(path) => RawConfig::load_all(path),
            None => Ok((Some(RawConfig::default()), Vec::new())),
        }
    }

    /// The file `flags` name (`--config`), or the embedded defaults without one.
    pub fn for_flags(flags: &crate::cli::RunArgs) -> Result<RawConfig, ConfigError> {
        match &flags.config {
            Some(path) => RawConfig::load(path),
            None => Ok(RawConfig::default()),
        }
    }

    pub fn parse(text: &str) -> Result<RawConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())
    }

    /// Parses `text`, and where a key cannot be read (unknown, of the wrong
    /// type, out of range) notes the error, sets the line aside (commented
    /// out, so the lines keep their numbers) and reads the rest again: every
    /// such error, each with its line, and what the rest says. A syntax
    /// error, or one over several lines, ends the reading: what follows it
    /// cannot be told apart from it.
    pub fn parse_all(text: &str) -> (Option<RawConfig>, Vec<String>) {
        let mut lines: Vec<String> = text.split('\n').map(String::from).collect();
        let mut errors = Vec::new();
        for _ in 0..MAX_ERRORS {
            let current = lines.join("\n");
            let e = match toml::from_str::<RawConfig>(&current) {
                Ok(raw) => return (Some(raw), errors),
                Err(e) => e,
            };
            errors.push(e.to_string().trim_end().to_string());
            let Some(span) = e.span() else {
                return (None, errors);
            };
            let first = current[..span.start.min(current.len())]
                .matches('\n')
                .count();
            let last = current[..span.end.min(current.len())].matches('\n').count();
            let set_aside = first == last
                && !lines[first].trim_start().starts_with('[')
                && !lines[first].trim_start().starts_with('#');
            if !set_aside || toml::from_str::<toml::Table>(&current).is_err() {
                return (None, errors);
            }
            lines[first] = format!("# {}", lines[first]);
            // A value over several lines (its first line set aside) leaves
            // the rest unreadable: nothing more is said of it.
            if toml::from_str::<toml::Table>(&lines.join("\n")).is_err() {
                return (None, errors);
            }
        }
        (None, errors)
    }
}

/// The most errors one reading of a file reports.
const MAX_ERRORS: usize = 50;

/// A bot's limits as the file writes them, in `[bot]` or a `[[bots]]` entry
/// (the same keys in both; serde's `flatten` cannot deny unknown keys).
pub struct RawBotLimits<'a> {
    pub min_delay: Option<&'a str>,
    pub max_wait: Option<&'a str>,
    pub concurrency: Option<usize>,
    pub rate: Option<&'a str>,
    pub daily_requests_per_server: Option<u32>,
    pub quiet_hours: Option<&'a [String]>,
    pub mode: Option<&'a str>,
    pub content_usage: Option<&'a [String]>,
    pub uploads: Option<bool>,
    pub user_agent: Option<&'a str>,
    pub http_methods: Option<&'a [String]>,
    pub web_bot_auth: Option<&'a str>,
    pub signature_agent: Option<&'a str>,
}

macro_rules! raw_bot_limits {
    ($t:ty) => {
        impl $t {
            pub fn limits(&self) -> RawBotLimits<'_> {
                RawBotLimits {
                    min_delay: self.min_delay.as_deref(),
                    max_wait: self.max_wait.as_deref(),
                    concurrency: self.concurrency,
                    rate: self.rate.as_deref(),
                    daily_requests_per_server: self.daily_requests_per_server,
                    quiet_hours: self.quiet_hours.as_deref(),
                    mode: self.mode.as_deref(),
                    content_usage: self.content_usage.as_deref(),
                    uploads: self.uploads,
                    user_agent: self.user_agent.as_deref(),
                    http_methods: self.http_methods.as_deref(),
                    web_bot_auth: self.web_bot_auth.as_deref(),
                    signature_agent: self.signature_agent.as_deref(),
                }
            }
        }
    };
}
raw_bot_limits!(RawBot);
raw_bot_limits!(RawNamedBot);

/// A duration as written in the file (`"2s"`, `"500ms"`, `"1m"`), read by
/// [`super::values::parse_duration`]. A bare number has no unit, so it is
/// refused with the spelling to write instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct DurationText(pub String);

impl std::ops::Deref for DurationText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for DurationText {
    fn from(text: String) -> Self {
        DurationText(text)
    }
}

impl<'de> Deserialize<'de> for DurationText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = DurationText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration with its unit, as a string (\"2s\", \"500ms\", \"1m\")")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DurationText, E> {
                Ok(DurationText(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<DurationText, E> {
                Err(E::custom(unitless(&v.to_string())))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<DurationText, E> {
                Err(E::custom(unitless(&v.to_string())))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<DurationText, E> {
                Err(E::custom(unitless(&v.to_string())))
            }
        }
        deserializer.deserialize_any(Text)
    }
}

/// The message for a duration written as a bare number.
fn unitless(number: &str) -> String {
    format!(
        "a duration needs its unit, as a string: write \"{number}s\" (or \"500ms\", \"1m\"), as the flags take it"
    )
}
