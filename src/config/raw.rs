//! The configuration file as written: one struct per section, every key
//! optional, unknown keys errors (serde). Nothing here is validated; see
//! [`super::resolve`].

use std::path::Path;

use serde::Deserialize;

use crate::listener::Listener;

use super::ConfigError;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub state_dir: Option<String>,
    #[serde(default)]
    pub listen: RawListen,
    /// `None`: no `[bot]` section (with `[[bots]]`, no default bot).
    pub bot: Option<RawBot>,
    #[serde(default)]
    pub bots: Vec<RawNamedBot>,
    #[serde(default)]
    pub access: RawAccess,
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
    #[serde(default)]
    pub store: RawStore,
    #[serde(default)]
    pub admin: RawAdmin,
}

/// `[admin]`: who may use the admin listener.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub token: Option<String>,
    pub allow_from: Option<Vec<String>>,
    pub hosts: Option<Vec<String>>,
}

/// `[store]`: fleet mode.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub url: Option<String>,
    pub prefix: Option<String>,
    pub on_unavailable: Option<String>,
    pub timeout: Option<String>,
    pub lease: Option<String>,
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
    pub transparent: Option<String>,
}

impl RawListen {
    /// The key of one listener of the table.
    pub fn get(&self, listener: Listener) -> &Option<String> {
        match listener {
            Listener::Gemini => &self.gemini,
            Listener::Gopher => &self.gopher,
            Listener::Socks5 => &self.socks5,
            Listener::Transparent => &self.transparent,
            Listener::Admin => &self.metrics,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSocks5 {
    pub users: Option<Vec<RawSocksUser>>,
    pub https_ports: Option<Vec<String>>,
}

#[derive(Clone, Debug, Deserialize)]
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
    pub name: Option<String>,
    pub agent: Option<String>,
    pub virtual_agents: Option<Vec<String>>,
}

/// One `[[bots]]` entry.
#[derive(Debug, Default, Deserialize)]
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAccess {
    pub allow_from: Option<Vec<String>>,
    pub require_client_cert: Option<bool>,
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
    pub upstream_mark: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub hostnames: Option<Vec<String>>,
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
}
