//! What the modules every protocol shares (politeness, the robots.txt cache,
//! deciding a path) ask of a protocol, answered once per protocol here: its
//! [`Rules`]. They are data on [`Protocol`], below those modules, so that they
//! read them without importing the protocols' folders above them, and a new
//! protocol is a new row here, not a branch in each of them.

use super::Protocol;
use crate::spelling::PathReading;
use crate::target::Scheme;

/// What one site of a protocol is: what a server's slow-down holds, and
/// what its back-off is counted by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteBy {
    /// The host name: every port, and both of the web's schemes (one site,
    /// one visitor).
    Host,
    /// The host and port: one server.
    HostAndPort,
}

/// What gates a protocol's servers' turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateBy {
    /// Their host name, whatever `[politeness] key` says.
    HostName,
    /// As `[politeness] key` says (the machine's addresses, or the host name).
    Configured,
}

/// What a server's slow-down without a time ("slow down", no seconds) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsaid {
    /// Holds the site by the back-off's next level (`[politeness]
    /// web_backoff`), counted by site.
    BackOff,
    /// Doubles the server's spacing.
    DoubleSpacing,
}

/// How long a protocol's requests wait for their turn, unless their bot says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// `politeness.web_max_wait`: web crawlers wait minutes.
    Web,
    /// `politeness.max_wait`.
    SmallWeb,
}

/// How a protocol's robots.txt names a bot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// By its product token alone (RFC 9309).
    ProductToken,
    /// By its product token and its virtual agents (the small web's
    /// `researcher`, `indexer`, …).
    WithVirtualAgents,
}

/// A protocol's rules, as the shared modules ask them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    pub site: SiteBy,
    pub gate: GateBy,
    pub unsaid: Unsaid,
    pub wait: Wait,
    pub naming: Naming,
    /// How its servers read a path, when deciding one.
    pub paths: PathReading,
}

/// The web's: one site per host name, RFC 9309's naming, its back-off.
const WEB: Rules = Rules {
    site: SiteBy::Host,
    gate: GateBy::HostName,
    unsaid: Unsaid::BackOff,
    wait: Wait::Web,
    naming: Naming::ProductToken,
    paths: PathReading::Web,
};

/// The small web's: one server per host and port, gated as configured.
const SMALL_WEB: Rules = Rules {
    site: SiteBy::HostAndPort,
    gate: GateBy::Configured,
    unsaid: Unsaid::DoubleSpacing,
    wait: Wait::SmallWeb,
    naming: Naming::WithVirtualAgents,
    paths: PathReading::Decoded,
};

impl Protocol {
    /// Its rules.
    pub const fn rules(self) -> Rules {
        match self {
            Protocol::Gemini | Protocol::Gopher | Protocol::Spartan | Protocol::Nex => SMALL_WEB,
            Protocol::Http | Protocol::Https => WEB,
        }
    }

    /// The protocol whose rules a URL of `scheme` follows: its own, a
    /// Titan upload Gemini's.
    pub fn ruling(scheme: Scheme) -> Protocol {
        Protocol::of(scheme.robots_scheme()).unwrap_or(Protocol::Gemini)
    }
}

/// The rules a URL of `scheme` follows.
pub fn of(scheme: Scheme) -> Rules {
    Protocol::ruling(scheme).rules()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_has_a_protocol_ruling_it() {
        for scheme in [
            Scheme::Gemini,
            Scheme::Titan,
            Scheme::Gopher,
            Scheme::Spartan,
            Scheme::Nex,
            Scheme::Http,
            Scheme::Https,
        ] {
            assert_eq!(
                Some(Protocol::ruling(scheme)),
                Protocol::of(scheme.robots_scheme())
            );
        }
        assert_eq!(of(Scheme::Https), of(Scheme::Http));
        assert_eq!(of(Scheme::Titan), of(Scheme::Gemini));
    }
}
