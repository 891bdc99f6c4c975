//! `[[hosts]]`: the operator's limits at particular hosts, for every bot,
//! beyond robots.txt and the bots' own (a site whose owner asked for a
//! slower crawl, a small server). A host is a name (`big.example`) or a name
//! and everything under it (`*.big.example`), matched on the canonical name
//! a request asks for; the most specific entry holds. Reloadable. Pure: no
//! I/O.

use std::collections::HashMap;
use std::time::Duration;

/// The most `[[hosts]]` entries.
pub const MAX_HOSTS: usize = 10_000;

/// One `[[hosts]]` entry, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    /// As written (`big.example`, `*.big.example`), canonical.
    pub host: String,
    /// A floor under every bot's spacing there (`min_delay`).
    pub min_delay: Duration,
    /// Every bot's starts there in any 24 hours, at most
    /// (`daily_requests_per_server`): the smaller of this and the bot's own.
    pub daily_requests_per_server: Option<u32>,
}

/// Every entry, by the name it is for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostRules {
    exact: HashMap<String, HostRule>,
    /// `*.name` entries, by `name`.
    trees: HashMap<String, HostRule>,
}

impl HostRules {
    /// The rules; `Err(host)` names an entry given twice.
    pub fn new(rules: Vec<HostRule>) -> Result<HostRules, String> {
        let mut out = HostRules::default();
        for rule in rules {
            let (map, name) = match rule.host.strip_prefix("*.") {
                Some(name) => (&mut out.trees, name.to_string()),
                None => (&mut out.exact, rule.host.clone()),
            };
            if map.contains_key(&name) {
                return Err(rule.host);
            }
            map.insert(name, rule);
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.trees.is_empty()
    }

    /// Every entry, in no particular order.
    pub fn all(&self) -> impl Iterator<Item = &HostRule> {
        self.exact.values().chain(self.trees.values())
    }

    /// Whether some entry sets a daily budget.
    pub fn any_budget(&self) -> bool {
        self.all().any(|r| r.daily_requests_per_server.is_some())
    }

    /// The entry for `host` (canonical): its own, else that of the nearest
    /// name above it listed with `*.` (`*.name` covers `name` itself too).
    pub fn for_host(&self, host: &str) -> Option<&HostRule> {
        if self.is_empty() {
            return None;
        }
        if let Some(rule) = self.exact.get(host) {
            return Some(rule);
        }
        if crate::addr::ip_literal(host).is_some() {
            return None;
        }
        let mut rest = host;
        loop {
            if let Some(rule) = self.trees.get(rest) {
                return Some(rule);
            }
            rest = rest.split_once('.')?.1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(host: &str, secs: u64) -> HostRule {
        HostRule {
            host: host.into(),
            min_delay: Duration::from_secs(secs),
            daily_requests_per_server: None,
        }
    }

    #[test]
    fn the_most_specific_entry_holds() {
        let rules = HostRules::new(vec![
            rule("*.example", 1),
            rule("*.big.example", 2),
            rule("www.big.example", 3),
            rule("127.0.0.1", 4),
        ])
        .unwrap();
        let delay = |h: &str| rules.for_host(h).map(|r| r.min_delay.as_secs());
        assert_eq!(delay("www.big.example"), Some(3));
        assert_eq!(delay("big.example"), Some(2));
        assert_eq!(delay("a.b.big.example"), Some(2));
        assert_eq!(delay("small.example"), Some(1));
        assert_eq!(delay("example.org"), None);
        assert_eq!(delay("127.0.0.1"), Some(4));
        assert_eq!(delay("127.0.0.2"), None);
        assert!(HostRules::new(vec![rule("a.example", 1), rule("a.example", 2)]).is_err());
    }
}
