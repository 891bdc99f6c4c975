//! Configuration: the TOML file as written ([`RawConfig`], unknown keys are
//! errors) → flags applied → a validated [`Config`]. Every key has a default,
//! documented in `config/robots-proxy.toml`.

use std::path::PathBuf;
use std::time::Duration;

mod clients;
mod effective;
mod fleet;
mod listens;
mod raw;
mod reload;
mod resolve;
mod values;
pub use clients::{valid_bot_name, MAX_BOT_NAME};
pub use raw::*;
use thiserror::Error;
pub use values::{format_duration, parse_duration};

use crate::access::Access;
use crate::bots::Bots;
use crate::egress::PortSet;
use crate::listener::Listens;
use crate::politeness::PolitenessConfig;
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
    /// More than one of the above, each said on its own line.
    #[error("{} problems in the configuration:{}", .0.len(), list(.0))]
    Several(Vec<ConfigError>),
}

/// Each error on its own line, a message over several lines indented.
fn list(errors: &[ConfigError]) -> String {
    errors
        .iter()
        .map(|e| format!("\n  - {}", e.to_string().replace('\n', "\n    ")))
        .collect()
}

impl ConfigError {
    /// One error as itself, several as [`ConfigError::Several`].
    pub fn several(mut errors: Vec<ConfigError>) -> ConfigError {
        match errors.len() {
            1 => errors.remove(0),
            _ => ConfigError::Several(errors),
        }
    }

    /// The errors it holds, one by one.
    pub fn into_list(self) -> Vec<ConfigError> {
        match self {
            ConfigError::Several(errors) => errors,
            e => vec![e],
        }
    }
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines (coloured on a terminal).
    Human,
    /// One JSON object per line.
    Json,
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
    /// What chose `state_dir`: `--state-dir`, `state_dir`, `$XDG_STATE_HOME`
    /// or `$HOME`, for errors about it.
    pub state_dir_origin: &'static str,
    /// Where each listener is bound; `None` where it is off (SOCKS5 and
    /// transparent unless configured).
    pub listen: Listens,
    /// Username/password pairs (RFC 1929); empty: no authentication.
    pub socks5_users: Vec<(String, String)>,
    /// Deprecated keys the file set, each with what to write instead
    /// (warned at start).
    pub deprecated: Vec<(&'static str, &'static str)>,
    /// `[ports]`: the protocol each destination port speaks (SOCKS5, transparent).
    pub ports: crate::protocol::PortTable,
    /// Host and port rewritten Gopher menus point at; `None`: the listener's own.
    pub gopher_public_host: Option<String>,
    pub gopher_public_port: Option<u16>,
    /// How Gopher selectors are read: every common server's spelling (safe), or
    /// the proposal's letter (`gopher.literal_selectors`).
    pub selector_reading: SelectorReading,
    /// Every bot, and the default one (`[bot]`).
    pub bots: Bots,
    /// `[[hosts]]`: limits at particular hosts, for every bot.
    pub hosts: std::sync::Arc<crate::hosts::HostRules>,
    /// Who may use the proxy listeners.
    pub access: Access,
    pub robots: RobotsConfig,
    pub politeness: PolitenessConfig,
    pub log_format: LogFormat,
    /// `Some(limit)`: a per-host request series for up to `limit` hosts.
    pub metrics_per_host: Option<usize>,
    /// A `tracing` filter (`info`, `robots_proxy=debug`); `RUST_LOG` overrides it.
    pub log_level: String,
    pub limits: Limits,
    pub tls: TlsConfig,
    /// `[http]`: the web's settings.
    pub http: HttpConfig,
    /// Fleet mode (`[store]`): off unless a URL is set.
    pub store: Option<crate::store::StoreConfig>,
    /// `[admin]`: who may use the admin listener (its token, clients, names).
    pub admin: crate::access::AdminAccess,
    /// Where the time of day comes from (quiet hours, daily budgets): the
    /// system's clock; no file key (tests and embedders set another).
    pub wall_clock: crate::bots::limits::WallClock,
}

impl Config {
    /// What an operator should hear of before the proxy runs on this
    /// configuration (it still runs): deprecated keys, and bots without a
    /// product token, who follow only robots.txt's `*` groups.
    pub fn warnings(&self) -> Vec<String> {
        let mut said: Vec<String> = self
            .deprecated
            .iter()
            .map(|(key, instead)| {
                format!("{key} is deprecated: write {instead} instead (read as it for now)")
            })
            .collect();
        for bot in self.bots.all() {
            if bot.profile.token().is_empty() {
                let key = match self.bots.default_bot().map(|d| &self.bots.all()[d]) {
                    Some(default) if std::ptr::eq(default, bot) => "bot.agent (or --agent)",
                    _ => "bots.agent",
                };
                said.push(format!(
                    "bot {:?} has no agent: robots.txt groups naming your crawler are not followed, only `User-agent: *`{}; set {key} to your crawler's product token (e.g. agent = \"examplebot\")",
                    bot.name,
                    match bot.profile.virtual_agents().is_empty() {
                        true => "",
                        false => " and its virtual agents",
                    }
                ));
            }
        }
        said
    }

    /// What `run` (or a reload, or `transparent-rules`) uses: the file the
    /// flags name, or the embedded defaults, with the flags applied over it.
    /// Every problem is reported, not only the first: each key that cannot
    /// be read, and each section whose values are wrong.
    pub fn load(flags: &crate::cli::RunArgs) -> Result<Config, ConfigError> {
        let (raw, mut errors) = RawConfig::for_flags_all(flags)?;
        let Some(raw) = raw else {
            return Err(ConfigError::several(errors));
        };
        match raw.resolve(flags) {
            Ok(config) if errors.is_empty() => Ok(config),
            Ok(_) => Err(ConfigError::several(errors)),
            Err(e) => {
                errors.extend(e.into_list());
                Err(ConfigError::several(errors))
            }
        }
    }
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
    /// (bot, server) pairs the daily budgets count at once, every bot's
    /// together; a request that would count one more is "slow down".
    pub max_budget_pairs: usize,
    /// Threads that serve connections; `None`: one per core.
    pub worker_threads: Option<usize>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub idle_timeout: Duration,
    pub shutdown_grace: Duration,
    pub allow_private_upstreams: bool,
    /// Ports upstream connections may go to.
    pub upstream_ports: PortSet,
    /// Hosts never contacted (`deny_hosts`).
    pub deny_hosts: crate::egress::DenyHosts,
    /// `SO_MARK` on every upstream socket, so firewall rules can let the
    /// proxy's own connections pass (transparent mode).
    pub upstream_mark: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct TlsConfig {
    /// PEM files of the listener's certificate chain and key; generated when unset.
    pub cert_and_key: Option<(PathBuf, PathBuf)>,
    /// Names in a generated certificate.
    pub hostnames: Vec<String>,
}

/// `[http]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    /// PEM files of root certificates an HTTPS server may chain to, beside
    /// the system's (a local CA, a company's): `http.extra_roots`.
    pub extra_roots: Vec<PathBuf>,
    /// The same, given by `--extra-roots` (after the key's).
    pub extra_roots_flags: Vec<PathBuf>,
    /// The `User-Agent` of the proxy's own robots.txt fetches.
    pub robots_user_agent: String,
}

impl HttpConfig {
    /// Every extra roots file, the key's then the flag's, with the key or
    /// flag that names it.
    pub fn extra_roots_named(&self) -> impl Iterator<Item = (&'static str, &PathBuf)> {
        let keyed = self.extra_roots.iter().map(|f| ("http.extra_roots", f));
        keyed.chain(self.extra_roots_flags.iter().map(|f| ("--extra-roots", f)))
    }

    /// Every extra roots file.
    pub fn all_extra_roots(&self) -> Vec<PathBuf> {
        self.extra_roots_named().map(|(_, f)| f.clone()).collect()
    }
}

/// `http.robots_user_agent` unless set.
pub fn default_robots_user_agent() -> String {
    format!("robots-proxy/{}", env!("CARGO_PKG_VERSION"))
}

/// The most `http.extra_roots` files.
pub const MAX_EXTRA_ROOTS: usize = 64;

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
