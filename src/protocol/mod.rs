//! The protocols the proxy serves to crawlers, each a unit of its own
//! ([`crate::gemini`], [`crate::gopher`], [`crate::spartan`], [`crate::nex`]:
//! wire format, serving, robots.txt), named here once: the `protocol` label
//! and the URL scheme. What is shared below them: the line reader ([`line`]),
//! which protocol a port speaks ([`ports`]) and what first bytes say
//! ([`sniff`]). Pure, but for the line reader.

use crate::target::Scheme;

pub mod line;
pub mod ports;
pub mod sniff;

pub use line::{read_line, LineError};
pub use ports::PortTable;

label_set! {
    /// A protocol the proxy serves (and its `protocol` label).
    pub enum Protocol {
        Gemini => "gemini",
        Gopher => "gopher",
        Spartan => "spartan",
        Nex => "nex",
    }
}

impl Protocol {
    /// The URL scheme that names it.
    pub fn scheme(self) -> Scheme {
        match self {
            Protocol::Gemini => Scheme::Gemini,
            Protocol::Gopher => Scheme::Gopher,
            Protocol::Spartan => Scheme::Spartan,
            Protocol::Nex => Scheme::Nex,
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
