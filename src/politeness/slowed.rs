//! A server's own slow-down (an upstream `44`, a web site's `429` or
//! `503`): kept for whom it holds ([`Site`]) on the gate, so one capsule's
//! `44` holds back that capsule and not its neighbours, a web site's `429`
//! holds the whole site (both schemes, every port, as its gate), and bounded
//! by `politeness.max_slow_down`.

use std::time::Duration;

use tokio::time::Instant;

use super::{after, PolitenessConfig};
use crate::protocol::rules::{self, SiteBy};
use crate::target::HostKey;

/// Whom a slow-down holds, keyed like the gate: on the web, a site (its
/// host name: `http://H:P1` and `https://H:P2` are one site, one visitor);
/// on the small web, one server (host and port) on its machine's gate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Site {
    host: String,
    /// `None`: every port, both of the web's schemes.
    port: Option<u16>,
}

impl Site {
    /// Whom a slow-down `server` answered holds.
    pub fn of(server: &HostKey) -> Site {
        Site {
            host: server.host.clone(),
            port: match rules::of(server.scheme).site {
                SiteBy::Host => None,
                SiteBy::HostAndPort => Some(server.port),
            },
        }
    }

    /// Whether a request to `server` is held by this site's slow-down.
    pub fn holds(&self, server: &HostKey) -> bool {
        self.host == server.host
            && match (self.port, rules::of(server.scheme).site) {
                (None, SiteBy::Host) => true,
                (Some(port), SiteBy::HostAndPort) => port == server.port,
                _ => false,
            }
    }
}

/// As the fleet's gate names it: `host` for a web site, `host:port` for a
/// server of the small web.
impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            None => f.write_str(&self.host),
            Some(port) => write!(f, "{}:{port}", self.host),
        }
    }
}

/// A site on a gate's machine that asked to be slowed down. Its slow-down
/// holds back requests to it, not to the other virtual hosts sharing its
/// address: spacing is per machine, a slow-down per site that asked (one
/// capsule's `44` must not stop its neighbours).
pub(super) struct Slowed {
    pub(super) site: Site,
    /// 1, 2, 4, …: an upstream `44` without a number doubles its spacing.
    pub(super) backoff: u32,
    /// An upstream `44 N`: nothing starts there before this.
    pub(super) not_before: Option<Instant>,
    /// When the last request to it started (its back-off is spaced from it).
    pub(super) last_start: Instant,
}

impl Slowed {
    pub(super) fn is(&self, server: &HostKey) -> bool {
        self.site.holds(server)
    }

    /// When a request to it asking for `delay` may start, as far as its
    /// slow-down goes; `None`: no slow-down holds it.
    pub(super) fn ready_at(&self, delay: Duration, config: &PolitenessConfig) -> Option<Instant> {
        let backed = (self.backoff > 1).then(|| {
            after(
                self.last_start,
                backoff_spacing(delay, self.backoff, config),
            )
        });
        match (backed, self.not_before) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// Its slow-down is over at `now`: it may be forgotten.
    pub(super) fn over(&self, delay: Duration, config: &PolitenessConfig, now: Instant) -> bool {
        self.backoff <= 1 && self.ready_at(delay, config).is_none_or(|t| t <= now)
    }
}

/// The spacing of a server backed off `backoff` times over its `delay`:
/// doubled from at least 1 s (doubling nothing backs off nothing), at most
/// `max_delay` (when set) and `max_slow_down`, never below `delay` itself.
pub(super) fn backoff_spacing(
    delay: Duration,
    backoff: u32,
    config: &PolitenessConfig,
) -> Duration {
    let d = delay.max(Duration::from_secs(1)).saturating_mul(backoff);
    let d = match config.max_delay {
        Some(max) => d.min(max.max(delay)),
        None => d,
    };
    d.min(config.max_slow_down.max(delay))
}
