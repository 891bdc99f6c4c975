//! `[limits] deny_hosts`: hosts the proxy never contacts, whatever robots.txt
//! says (an owner who asked by email): host names (`example.com`), a name
//! and everything under it (`*.example.com`), and address ranges
//! (`192.0.2.0/24`, `2001:db8::/32`, one address). A name is matched as
//! requests are read (canonical: lower case, IDNA, no trailing dot), before
//! anything is looked up or fetched, robots.txt included; a range is matched
//! against an address literal and against every address a name resolves
//! to. Pure: no I/O.

use std::net::IpAddr;

use crate::addr::{unmapped, Prefix};
use crate::names::{ByName, Pattern};

/// The most entries `deny_hosts` may list.
pub const MAX_ENTRIES: usize = 100_000;

/// The most address ranges among them (each is looked at for every address).
pub const MAX_RANGES: usize = 1_000;

/// The hosts never contacted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DenyHosts {
    /// Names, and names with everything under them.
    names: ByName<()>,
    ranges: Vec<Prefix>,
    /// The list as written, for `--check-config`.
    items: Vec<String>,
}

impl DenyHosts {
    /// The list as the config writes it; each entry's error names it.
    pub fn parse(items: &[String]) -> Result<DenyHosts, String> {
        if items.len() > MAX_ENTRIES {
            return Err(format!("at most {MAX_ENTRIES} entries"));
        }
        let mut deny = DenyHosts {
            items: items.to_vec(),
            ..DenyHosts::default()
        };
        for item in items {
            let text = item.trim();
            if text.contains('/') || crate::addr::ip_literal(text).is_some() {
                let prefix = Prefix::parse(text).map_err(|e| format!("{item:?}: {e}"))?;
                if deny.ranges.len() == MAX_RANGES {
                    return Err(format!("at most {MAX_RANGES} address ranges"));
                }
                deny.ranges.push(prefix);
                continue;
            }
            let pattern = Pattern::parse(text).ok_or_else(|| {
                format!(
                    "{item:?}: a host name (example.com), a name and everything under it \
                     (*.example.com), or an address range (192.0.2.0/24)"
                )
            })?;
            // The same host twice denies it once.
            let _ = deny.names.insert(pattern, ());
        }
        Ok(deny)
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The list as written.
    pub fn items(&self) -> &[String] {
        &self.items
    }

    /// The entry that denies the host named `host` (canonical), if any: its
    /// name, any name above it listed with `*.`, or (an address literal) a
    /// range holding it.
    pub fn name(&self, host: &str) -> Option<String> {
        if self.items.is_empty() {
            return None;
        }
        if let Some(ip) = crate::addr::ip_literal(host) {
            return self.address(ip);
        }
        self.names.get(host).map(|found| found.to_string())
    }

    /// The range that denies `ip` (an IPv4-mapped address as the IPv4
    /// address it is), if any.
    pub fn address(&self, ip: IpAddr) -> Option<String> {
        if self.ranges.is_empty() {
            return None;
        }
        let ip = unmapped(ip);
        self.ranges
            .iter()
            .find(|r| r.contains(ip))
            .map(|r| r.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deny(items: &[&str]) -> DenyHosts {
        DenyHosts::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn names_trees_and_ranges() {
        let d = deny(&[
            "Quiet.Example.",
            "*.private.example",
            "192.0.2.0/24",
            "2001:db8::1",
        ]);
        assert_eq!(d.name("quiet.example").as_deref(), Some("quiet.example"));
        assert_eq!(d.name("www.quiet.example"), None, "an exact name only");
        assert_eq!(
            d.name("private.example").as_deref(),
            Some("*.private.example")
        );
        assert_eq!(
            d.name("a.b.private.example").as_deref(),
            Some("*.private.example")
        );
        assert_eq!(d.name("notprivate.example"), None);
        assert_eq!(d.name("192.0.2.7").as_deref(), Some("192.0.2.0/24"));
        assert_eq!(d.name("[2001:db8::1]").as_deref(), Some("2001:db8::1/128"));
        let mapped: IpAddr = "::ffff:192.0.2.9".parse().unwrap();
        assert_eq!(d.address(mapped).as_deref(), Some("192.0.2.0/24"));
        assert_eq!(d.name("198.51.100.1"), None);
    }

    #[test]
    fn internationalised_names_are_matched_as_requests_spell_them() {
        let d = deny(&["*.bücher.example"]);
        let asked = crate::target::canonical_host("WWW.BÜCHER.example.").unwrap();
        assert_eq!(d.name(&asked).as_deref(), Some("*.xn--bcher-kva.example"));
    }

    #[test]
    fn nonsense_is_refused_naming_the_entry() {
        for bad in [
            "",
            "*.",
            "a..b",
            "10.0.0.1/8",
            "*.10.0.0.1",
            "exa mple.com",
            "::/129",
        ] {
            let err = DenyHosts::parse(&[bad.to_string()]).unwrap_err();
            assert!(
                err.contains(&format!("{bad:?}")) || err.contains("prefix"),
                "{bad}: {err}"
            );
        }
        let many: Vec<String> = (0..=MAX_RANGES)
            .map(|i| format!("10.{}.{}.0/24", i / 256, i % 256))
            .collect();
        assert!(DenyHosts::parse(&many).is_err());
    }
}
