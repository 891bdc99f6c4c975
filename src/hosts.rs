//! `[[hosts]]`: the operator's limits at particular hosts, for every bot,
//! beyond robots.txt and the bots' own (a site whose owner asked for a
//! slower crawl, a small server). A host is a name (`big.example`) or a name
//! and everything under it (`*.big.example`), matched on the canonical name
//! a request asks for; the most specific entry holds. Reloadable. Pure: no
//! I/O.

use std::time::Duration;

use crate::names::{ByName, Pattern};

/// The most `[[hosts]]` entries.
pub const MAX_HOSTS: usize = 10_000;

/// One `[[hosts]]` entry, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRule {
    /// As written (`big.example`, `*.big.example`), canonical.
    pub host: Pattern,
    /// A floor under every bot's spacing there (`min_delay`).
    pub min_delay: Duration,
    /// Every bot's starts there in any 24 hours, at most
    /// (`daily_requests_per_server`): the smaller of this and the bot's own.
    pub daily_requests_per_server: Option<u32>,
}

/// Every entry, by the host it is for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostRules(ByName<HostRule>);

impl HostRules {
    /// The rules; `Err(host)` names an entry given twice.
    pub fn new(rules: Vec<HostRule>) -> Result<HostRules, Pattern> {
        let mut out = ByName::default();
        for rule in rules {
            out.insert(rule.host.clone(), rule)
                .map_err(|rule| rule.host)?;
        }
        Ok(HostRules(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every entry, in no particular order.
    pub fn all(&self) -> impl Iterator<Item = &HostRule> {
        self.0.values()
    }

    /// Whether some entry sets a daily budget.
    pub fn any_budget(&self) -> bool {
        self.all().any(|r| r.daily_requests_per_server.is_some())
    }

    /// The entry for `host` (canonical): its own, else that of the nearest
    /// name above it listed with `*.` (`*.name` covers `name` itself too).
    pub fn for_host(&self, host: &str) -> Option<&HostRule> {
        self.0.get(host).map(|found| found.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(host: &str, secs: u64) -> HostRule {
        HostRule {
            host: Pattern::parse(host).unwrap(),
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
