//! What a reload (SIGHUP) may change. Listeners, the state directory, the
//! store, the connection cap, the cache's byte budget, the per-host series,
//! logging and the politeness key are set at start: a reload that changes
//! them says so in the log and keeps the running values. The listeners come
//! from the listener table; the other keys are [`RESTART_ONLY`].

use super::Config;
use crate::listener::Listener;

/// A key whose new value needs a restart: its name in the file, and how a
/// new config is given the running value back (`true` when it differed).
pub struct RestartOnly {
    pub key: &'static str,
    keep: fn(new: &mut Config, running: &Config) -> bool,
}

/// Puts `running` back over `new` when they differ.
fn keep<T: PartialEq + Clone>(new: &mut T, running: &T) -> bool {
    let differs = new != running;
    if differs {
        *new = running.clone();
    }
    differs
}

/// Every restart-only key but the listeners'.
pub const RESTART_ONLY: &[RestartOnly] = &[
    RestartOnly {
        key: "state_dir",
        keep: |new, running| keep(&mut new.state_dir, &running.state_dir),
    },
    RestartOnly {
        key: "store",
        keep: |new, running| keep(&mut new.store, &running.store),
    },
    RestartOnly {
        key: "limits.max_connections",
        keep: |new, running| {
            keep(
                &mut new.limits.max_connections,
                &running.limits.max_connections,
            )
        },
    },
    RestartOnly {
        key: "limits.worker_threads",
        keep: |new, running| {
            keep(
                &mut new.limits.worker_threads,
                &running.limits.worker_threads,
            )
        },
    },
    RestartOnly {
        key: "robots.cache_bytes",
        keep: |new, running| keep(&mut new.robots.cache_bytes, &running.robots.cache_bytes),
    },
    RestartOnly {
        key: "metrics.per_host",
        keep: |new, running| keep(&mut new.metrics_per_host, &running.metrics_per_host),
    },
    RestartOnly {
        key: "log.format",
        keep: |new, running| keep(&mut new.log_format, &running.log_format),
    },
    RestartOnly {
        key: "log.level",
        keep: |new, running| keep(&mut new.log_level, &running.log_level),
    },
    RestartOnly {
        key: "politeness.key",
        keep: |new, running| keep(&mut new.politeness.key, &running.politeness.key),
    },
];

impl Config {
    /// The keys whose new value needs a restart, with the running value
    /// kept: `self` is the new config, `running` the one in use.
    pub fn keep_restart_only(&mut self, running: &Config) -> Vec<&'static str> {
        let mut kept = Vec::new();
        for &listener in Listener::ALL {
            if self.listen.get(listener) != running.listen.get(listener) {
                kept.push(listener.spec().key);
                self.listen.set(listener, running.listen.get(listener));
            }
        }
        for key in RESTART_ONLY {
            if (key.keep)(self, running) {
                kept.push(key.key);
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RawConfig;

    /// Each restart-only key, changed alone, is named and put back; a key a
    /// reload may change is not.
    #[test]
    fn each_restart_only_key_is_named_and_kept() {
        let running = RawConfig::default()
            .resolve(&crate::cli::RunArgs::default())
            .unwrap();
        type Change = (&'static str, fn(&mut Config));
        let changes: [Change; 10] = [
            ("state_dir", |c| c.state_dir.push("elsewhere")),
            ("store", |c| {
                c.store = Some(crate::store::StoreConfig {
                    url: "redis://127.0.0.1/".into(),
                    prefix: String::new(),
                    on_unavailable: crate::store::OnUnavailable::Refuse,
                    timeout: std::time::Duration::from_secs(1),
                    lease: std::time::Duration::from_secs(1),
                })
            }),
            ("limits.max_connections", |c| c.limits.max_connections += 1),
            ("limits.worker_threads", |c| {
                c.limits.worker_threads = Some(3)
            }),
            ("robots.cache_bytes", |c| c.robots.cache_bytes += 1),
            ("metrics.per_host", |c| c.metrics_per_host = Some(7)),
            ("log.format", |c| {
                c.log_format = crate::config::LogFormat::Json
            }),
            ("log.level", |c| c.log_level = "debug".into()),
            ("politeness.key", |c| {
                c.politeness.key = crate::politeness::GateBy::Host
            }),
            ("listen.socks5", |c| {
                c.listen
                    .set(Listener::Socks5, Some("127.0.0.1:1080".parse().unwrap()))
            }),
        ];
        for (key, change) in changes {
            let mut new = running.clone();
            change(&mut new);
            assert_eq!(new.keep_restart_only(&running), [key]);
            assert_eq!(format!("{new:?}"), format!("{running:?}"), "{key} put back");
        }
        let mut new = running.clone();
        new.politeness.default_delay *= 2;
        assert!(new.keep_restart_only(&running).is_empty());
        assert_ne!(format!("{new:?}"), format!("{running:?}"));
    }
}
