//! What the proxy saw of each server lately, for the status page: requests,
//! refusals and the last refusal with its rule, the addresses the name
//! resolved to. Bounded: at most [`MAX_HOSTS`], forgotten a day after they
//! were last seen, least recently seen first when full.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::fate::Fate;
use crate::target::HostKey;

/// The most hosts remembered.
pub const MAX_HOSTS: u64 = 1000;

/// How long a host is remembered after it was last seen.
const IDLE: Duration = Duration::from_secs(86_400);

/// One host's recent history.
#[derive(Clone, Debug, Default)]
pub struct Activity {
    /// The addresses its name resolved to, last time.
    pub addrs: Vec<SocketAddr>,
    pub requests: u64,
    /// Requests not relayed (the client leaving is not counted).
    pub refusals: u64,
    pub last_seen: Option<SystemTime>,
    /// When, and why (the rule, for a robots.txt refusal).
    pub last_refusal: Option<(SystemTime, &'static str, String)>,
    /// The SHA-256 of the robots.txt the last refusal was decided with.
    pub last_refusal_robots: Option<Arc<str>>,
}

pub struct Recent {
    hosts: moka::sync::Cache<HostKey, Arc<Mutex<Activity>>>,
}

impl Default for Recent {
    fn default() -> Recent {
        Recent::new()
    }
}

impl Recent {
    pub fn new() -> Recent {
        Recent {
            hosts: moka::sync::Cache::builder()
                .max_capacity(MAX_HOSTS)
                .time_to_idle(IDLE)
                .build(),
        }
    }

    fn entry(&self, key: &HostKey) -> Arc<Mutex<Activity>> {
        self.hosts.get_with_by_ref(key, Default::default)
    }

    /// The addresses `key` resolved to for a request.
    pub fn resolved(&self, key: &HostKey, addrs: &[SocketAddr]) {
        let entry = self.entry(key);
        let mut a = entry.lock().unwrap_or_else(|e| e.into_inner());
        if a.addrs != addrs {
            a.addrs = addrs.to_vec();
        }
    }

    /// A finished request to `key`.
    pub fn finished(&self, key: &HostKey, fate: Fate, detail: &str, robots: Option<Arc<str>>) {
        let entry = self.entry(key);
        let mut a = entry.lock().unwrap_or_else(|e| e.into_inner());
        let now = SystemTime::now();
        a.requests += 1;
        a.last_seen = Some(now);
        if !matches!(fate, Fate::Relayed | Fate::ClientLeft) {
            a.refusals += 1;
            let detail: String = detail.chars().take(300).collect();
            a.last_refusal = Some((now, fate.as_str(), detail));
            a.last_refusal_robots = robots;
        }
    }

    /// Every host remembered, most recently seen first.
    pub fn snapshot(&self) -> Vec<(HostKey, Activity)> {
        let mut all: Vec<(HostKey, Activity)> = self
            .hosts
            .iter()
            .map(|(k, v)| {
                let a = v.lock().unwrap_or_else(|e| e.into_inner()).clone();
                ((*k).clone(), a)
            })
            .collect();
        all.sort_by_key(|(_, a)| std::cmp::Reverse(a.last_seen));
        all
    }

    /// One host's history.
    pub fn get(&self, key: &HostKey) -> Option<Activity> {
        self.hosts
            .get(key)
            .map(|a| a.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Scheme;

    fn key(i: usize) -> HostKey {
        HostKey {
            scheme: Scheme::Gemini,
            host: format!("h{i}.example"),
            port: 1965,
        }
    }

    #[test]
    fn counts_requests_refusals_and_the_last_rule() {
        let recent = Recent::new();
        recent.finished(&key(1), Fate::Relayed, "", None);
        recent.finished(
            &key(1),
            Fate::Disallowed,
            "rule Disallow: /a (line 2)",
            None,
        );
        recent.finished(&key(1), Fate::ClientLeft, "left", None);
        let a = recent.get(&key(1)).unwrap();
        assert_eq!((a.requests, a.refusals), (3, 1));
        let (_, outcome, why) = a.last_refusal.unwrap();
        assert_eq!(
            (outcome, why.as_str()),
            ("disallowed", "rule Disallow: /a (line 2)")
        );
    }

    /// A crawler visiting endless hosts cannot grow the table past its bound.
    #[test]
    fn the_table_is_bounded() {
        let recent = Recent::new();
        for i in 0..(MAX_HOSTS as usize * 3) {
            recent.finished(&key(i), Fate::Relayed, "", None);
        }
        recent.hosts.run_pending_tasks();
        assert!(recent.hosts.entry_count() <= MAX_HOSTS);
    }
}
