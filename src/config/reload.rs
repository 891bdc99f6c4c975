//! What a reload (SIGHUP) may change. Listeners, the state directory, the
//! store, the connection cap, the cache's byte budget, the per-host series,
//! logging and the politeness key are set at start: a reload that changes
//! them says so in the log and keeps the running values.

use super::Config;
use crate::listener::Listener;

impl Config {
    /// The keys whose new value needs a restart, with the running value
    /// kept: `self` is the new config, `running` the one in use.
    pub fn keep_restart_only(&mut self, running: &Config) -> Vec<&'static str> {
        let mut kept = Vec::new();
        macro_rules! keep {
            ($key:literal, $($field:ident).+) => {
                if format!("{:?}", self.$($field).+) != format!("{:?}", running.$($field).+) {
                    kept.push($key);
                    self.$($field).+ = running.$($field).+.clone();
                }
            };
        }
        for &listener in Listener::ALL {
            if self.listen.get(listener) != running.listen.get(listener) {
                kept.push(listener.spec().key);
                self.listen.set(listener, running.listen.get(listener));
            }
        }
        keep!("state_dir", state_dir);
        keep!("store", store);
        keep!("limits.max_connections", limits.max_connections);
        keep!("robots.cache_bytes", robots.cache_bytes);
        keep!("metrics.per_host", metrics_per_host);
        keep!("log.format", log_format);
        keep!("log.level", log_level);
        keep!("politeness.key", politeness.key);
        kept
    }
}
