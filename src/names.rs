//! Hosts as operators list them (`[limits] deny_hosts`, `[[hosts]]`): a
//! name (`example.com`, or an address), or a name and everything under it
//! (`*.example.com`), each made canonical as requests' hosts are (lower
//! case, IDNA, no trailing dot); and a map from such patterns to values,
//! looked up with a request's canonical host, the most specific pattern
//! holding. Pure: no I/O.

use std::collections::HashMap;
use std::fmt;

/// One listed host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// This host alone (a name or an address).
    Name(String),
    /// This name and every name under it (`*.name`).
    Tree(String),
}

impl Pattern {
    /// A pattern as written: `name`, `*.name` or an address; `None` when it
    /// names no host (an address under `*.` names none).
    pub fn parse(text: &str) -> Option<Pattern> {
        let text = text.trim();
        let (tree, name) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let name = crate::target::canonical_host(name).ok()?;
        match (tree, crate::addr::ip_literal(&name).is_some()) {
            (true, true) => None,
            (true, false) => Some(Pattern::Tree(name)),
            (false, _) => Some(Pattern::Name(name)),
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Name(name) => f.write_str(name),
            Pattern::Tree(name) => write!(f, "*.{name}"),
        }
    }
}

/// Values by [`Pattern`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ByName<T> {
    names: HashMap<String, T>,
    trees: HashMap<String, T>,
}

impl<T> Default for ByName<T> {
    fn default() -> ByName<T> {
        ByName {
            names: HashMap::new(),
            trees: HashMap::new(),
        }
    }
}

/// What a lookup found: the pattern that held (borrowed) and its value.
pub struct Found<'a, T> {
    pub tree: bool,
    pub name: &'a str,
    pub value: &'a T,
}

impl<T> fmt::Display for Found<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tree {
            true => write!(f, "*.{}", self.name),
            false => f.write_str(self.name),
        }
    }
}

impl<T> ByName<T> {
    /// Adds `value` for `pattern`; `Err(value)` when the pattern is there already.
    pub fn insert(&mut self, pattern: Pattern, value: T) -> Result<(), T> {
        let (map, name) = match pattern {
            Pattern::Name(name) => (&mut self.names, name),
            Pattern::Tree(name) => (&mut self.trees, name),
        };
        if map.contains_key(&name) {
            return Err(value);
        }
        map.insert(name, value);
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.trees.is_empty()
    }

    /// Every value, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.names.values().chain(self.trees.values())
    }

    /// The value for `host` (canonical): its own, else that of the nearest
    /// name above it listed with `*.` (`*.name` covers `name` too). An
    /// address is only ever its own.
    pub fn get(&self, host: &str) -> Option<Found<'_, T>> {
        if self.is_empty() {
            return None;
        }
        if let Some((name, value)) = self.names.get_key_value(host) {
            return Some(Found {
                tree: false,
                name,
                value,
            });
        }
        if self.trees.is_empty() || crate::addr::ip_literal(host).is_some() {
            return None;
        }
        let mut rest = host;
        loop {
            if let Some((name, value)) = self.trees.get_key_value(rest) {
                return Some(Found {
                    tree: true,
                    name,
                    value,
                });
            }
            rest = rest.split_once('.')?.1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_are_canonical_and_an_address_has_no_tree() {
        assert_eq!(
            Pattern::parse("Quiet.Example."),
            Some(Pattern::Name("quiet.example".into()))
        );
        assert_eq!(
            Pattern::parse("*.BÜCHER.example").unwrap().to_string(),
            "*.xn--bcher-kva.example"
        );
        assert_eq!(Pattern::parse("[::1]"), Some(Pattern::Name("[::1]".into())));
        for bad in ["", "*.", "a..b", "*.10.0.0.1", "exa mple.com", "*.*.a"] {
            assert_eq!(Pattern::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_most_specific_pattern_holds() {
        let mut by = ByName::default();
        for (p, v) in [
            ("*.example", 1),
            ("*.big.example", 2),
            ("www.big.example", 3),
            ("127.0.0.1", 4),
        ] {
            by.insert(Pattern::parse(p).unwrap(), v).unwrap();
        }
        let at = |h: &str| by.get(h).map(|f| (*f.value, f.to_string()));
        assert_eq!(at("www.big.example"), Some((3, "www.big.example".into())));
        assert_eq!(at("big.example"), Some((2, "*.big.example".into())));
        assert_eq!(at("a.b.big.example"), Some((2, "*.big.example".into())));
        assert_eq!(at("small.example"), Some((1, "*.example".into())));
        assert_eq!(at("example.org"), None);
        assert_eq!(at("127.0.0.1"), Some((4, "127.0.0.1".into())));
        assert_eq!(at("127.0.0.2"), None);
        assert!(by.insert(Pattern::parse("*.EXAMPLE").unwrap(), 9).is_err());
    }
}
