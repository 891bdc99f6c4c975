//! The protocols the proxy serves to crawlers, each a unit of its own
//! ([`crate::gemini`], [`crate::gopher`]: wire format, serving, robots.txt),
//! named here once: the `protocol` label and the URL scheme. What is
//! shared below them: the line reader ([`line`]) and what first bytes say
//! ([`sniff`]). Pure, but for the line reader.

use crate::target::Scheme;

pub mod line;
pub mod sniff;

pub use line::{read_line, LineError};

label_set! {
    /// A protocol the proxy serves (and its `protocol` label).
    pub enum Protocol {
        Gemini => "gemini",
        Gopher => "gopher",
    }
}

impl Protocol {
    /// The URL scheme that names it.
    pub fn scheme(self) -> Scheme {
        match self {
            Protocol::Gemini => Scheme::Gemini,
            Protocol::Gopher => Scheme::Gopher,
        }
    }

    /// The protocol a scheme names, if the proxy serves it (it does not serve
    /// HTTP: `check` reads such URLs, the listeners never take them).
    pub fn of(scheme: Scheme) -> Option<Protocol> {
        Protocol::ALL.iter().copied().find(|p| p.scheme() == scheme)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_is_its_scheme() {
        for &p in Protocol::ALL {
            assert_eq!(Protocol::of(p.scheme()), Some(p));
            assert_eq!(p.as_str(), p.scheme().as_str());
        }
        assert_eq!(Protocol::of(Scheme::Http), None);
        assert_eq!(Protocol::of(Scheme::Https), None);
    }
}
