//! The politeness gate: per server, request starts at least `delay` apart and at
//! most `per_host_concurrency` requests in flight, waiting requests served first
//! come first served, and a request that would wait longer than `max_wait`
//! answered at once ("slow down") instead of held.
//!
//! A gate is keyed by the machine, not by how a request spells its name
//! (`[politeness] key = "address"`, the default): every address a name resolved
//! to (IPv4-mapped IPv6 read as IPv4) is an alias of one gate, whatever the port
//! and the protocol, so `127.0.0.1`, `localhost`, `[::ffff:127.0.0.1]` and
//! `127.1` share one, a name whose addresses include one already gated joins
//! that gate (the IPv4 and IPv6 of `localhost`), and a capsule mirrored over
//! Gemini, Gopher, Spartan and Nex sees one visitor. This is Heritrix's per-IP
//! politeness and what Kennedy does. `key = "host"` keys by name instead.
//!
//! A waiting request costs a queue entry and its connection, no thread: waiters
//! sleep on their own `Notify`, and only the head of a host's queue is woken
//! when its turn may have come. A waiter that goes away (its client hung up)
//! leaves the queue at once. Hosts with nothing queued, nothing in flight and
//! their spacing past are forgotten by [`Politeness::sweep`], so a crawl over a
//! million hosts stays bounded.
//!
//! Only `tokio::time` is used, so tests can pause and advance the clock.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::target::{HostKey, Server};

mod backoff;
mod fleet;
mod local;
mod places;
mod slowed;
mod sweep;
mod turns;
pub use backoff::{WebBackoff, MAX_JITTER as MAX_BACKOFF_JITTER};
pub use fleet::{fleet_tag, Fleet};
pub use local::Local;
pub use places::{Place, PlaceOf, KEPT_PER_BOT};
pub use sweep::{Sweep, SWEEP_SLICE};
pub use turns::Turns;

/// What one gate stands for (`[politeness] key`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GateBy {
    /// The machine: each resolved address, whatever the port (the default).
    #[default]
    Address,
    /// The host name as the request spells it (canonical form), whatever the port.
    Host,
}

impl GateBy {
    /// What gates a server of `scheme`: as its protocol's rules say (the
    /// web's by host name whatever `key` says: both schemes, every port, one
    /// site, one visitor), else as configured.
    pub fn for_scheme(self, scheme: crate::target::Scheme) -> GateBy {
        match crate::protocol::rules::of(scheme).gate {
            crate::protocol::rules::GateBy::HostName => GateBy::Host,
            crate::protocol::rules::GateBy::Configured => self,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GateBy::Address => "address",
            GateBy::Host => "host",
        }
    }
}

/// What a gate is found by: an address, or a canonical host name. Neither
/// has a port or a scheme: one machine is one visitor, over every protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Alias {
    Addr(IpAddr),
    Name(String),
}

impl std::fmt::Display for Alias {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Alias::Addr(ip) => write!(f, "{ip}"),
            Alias::Name(host) => f.write_str(host),
        }
    }
}

/// One gate, as a request holds on to it.
pub type GateId = u64;

#[derive(Clone, Debug)]
pub struct PolitenessConfig {
    /// Spacing when robots.txt gives no Crawl-delay for the bot.
    pub default_delay: Duration,
    pub min_delay: Duration,
    /// `None`: a host's Crawl-delay stands, however long.
    pub max_delay: Option<Duration>,
    pub per_host_concurrency: usize,
    /// A small-web request that would wait longer is answered "slow down"
    /// at once (unless its bot's `max_wait` says otherwise).
    pub max_wait: Duration,
    /// The same for the web, whose crawlers wait longer (Scrapy's download
    /// timeout is 180 s): [`WEB_MAX_WAIT`] unless set.
    pub web_max_wait: Duration,
    /// At most this many requests wait for a turn at once, over every
    /// gate ([`queued_for`] the listeners' connections): past it, a request
    /// that would wait is told "slow down" at once, so waiting crawlers
    /// cannot hold every connection and starve requests that go at once.
    pub max_queued: usize,
    /// A turn further away than a request's bound but within this is held
    /// until the bound, then answered "slow down" with the wait left (its
    /// place kept for the retry); one further away is answered at once
    /// (a budget spent for the day, a site closed for hours).
    pub horizon: Duration,
    /// The longest a server's own "slow down" holds it back: a Gemini
    /// `44 N`, the doubling of a `44` without a number (and, for the web,
    /// `Retry-After`). A hostile `44 999999999999` means this, not a century.
    pub max_slow_down: Duration,
    /// What a gate stands for.
    pub key: GateBy,
    /// The web's back-off on `429` and `503` without a `Retry-After`.
    pub web_backoff: WebBackoff,
}

/// `politeness.web_max_wait` unless set: within the common crawlers' own
/// patience (Scrapy's 180 s download timeout, with time left for the page
/// itself), longer than the small web's 60 s (docs/guide/running.md has the
/// table).
pub const WEB_MAX_WAIT: Duration = Duration::from_secs(150);

/// How many requests may wait for a turn at once when the listeners take
/// `max_connections`: three quarters of them (at least one).
pub fn queued_for(max_connections: usize) -> usize {
    (max_connections.saturating_mul(3) / 4).max(1)
}

/// `politeness.horizon` unless set.
pub const HORIZON: Duration = Duration::from_secs(600);

/// `politeness.max_slow_down` unless set.
pub const MAX_SLOW_DOWN: Duration = Duration::from_secs(24 * 3600);

impl PolitenessConfig {
    /// The longest a request asked now may wait: until `by` when it must be
    /// answered by then (its own bound, from admission), else `max_wait`.
    pub fn max_wait_by(&self, by: Option<Instant>) -> Duration {
        by.map_or(self.max_wait, |by| {
            by.saturating_duration_since(Instant::now())
        })
    }

    /// The longest a request of `bot_max_wait`'s bot for a server of
    /// `scheme` waits for its turn: its bot's `max_wait`, else its
    /// protocol's (the web's or the small web's).
    pub fn max_wait_for(
        &self,
        bot_max_wait: Option<Duration>,
        scheme: crate::target::Scheme,
    ) -> Duration {
        use crate::protocol::rules::{self, Wait};
        bot_max_wait.unwrap_or(match rules::of(scheme).wait {
            Wait::Web => self.web_max_wait,
            Wait::SmallWeb => self.max_wait,
        })
    }

    /// `clamp(crawl-delay, else default_delay, min_delay, max_delay)`.
    pub fn delay_for(&self, crawl_delay: Option<Duration>) -> Duration {
        self.delay_from(crawl_delay).0
    }

    /// [`delay_for`](Self::delay_for), and which of its terms gave it.
    pub fn delay_from(&self, crawl_delay: Option<Duration>) -> (Duration, SpacingFrom) {
        let mut d = match crawl_delay {
            Some(d) => (d, SpacingFrom::CrawlDelay),
            None => (self.default_delay, SpacingFrom::DefaultDelay),
        };
        if self.min_delay > d.0 {
            d = (self.min_delay, SpacingFrom::MinDelay);
        }
        match self.max_delay {
            Some(max) if max < d.0 => (max, SpacingFrom::MaxDelay),
            _ => d,
        }
    }
}

/// Which setting a bot's spacing at a server comes from (the status page
/// says it beside the spacing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpacingFrom {
    /// The Crawl-delay (or Request-rate) robots.txt gives the bot.
    CrawlDelay,
    /// `politeness.default_delay`: robots.txt gives the bot none.
    DefaultDelay,
    /// `politeness.min_delay`, the proxy's floor, is above what robots.txt asks.
    MinDelay,
    /// `politeness.max_delay`, the proxy's cap, is below what robots.txt asks.
    MaxDelay,
    /// The bot's own `min_delay` floor is above the rest.
    BotMinDelay,
    /// The host's `[[hosts]] min_delay` floor is above the rest.
    HostMinDelay,
}

impl SpacingFrom {
    /// The setting, as the configuration file names it.
    pub fn key(self) -> &'static str {
        match self {
            SpacingFrom::CrawlDelay => "robots.txt Crawl-delay",
            SpacingFrom::DefaultDelay => "politeness.default_delay",
            SpacingFrom::MinDelay => "politeness.min_delay",
            SpacingFrom::MaxDelay => "politeness.max_delay",
            SpacingFrom::BotMinDelay => "the bot's min_delay",
            SpacingFrom::HostMinDelay => "the host's min_delay ([[hosts]])",
        }
    }
}

/// The longest wait the gate schedules: about a century. A Crawl-delay of
/// 10^20 s or an upstream `44 18446744073709551615` means "not in our
/// lifetime", and must not overflow the clock (`Instant + Duration` panics).
/// (Defined by the store, whose scripts take every duration capped at it.)
pub use crate::store::NEVER;

/// `t + d`, with `d` capped at [`NEVER`]: time arithmetic on numbers that came
/// from outside saturates instead of panicking.
pub fn after(t: Instant, d: Duration) -> Instant {
    t + d.min(NEVER)
}

/// A request may not wait that long: answer "slow down, retry in N s".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowDown {
    pub retry_after: Duration,
}

/// The names a server goes by at the gate (`key`): each of its addresses
/// (IPv4-mapped read as IPv4), or its name when keyed by host, unresolved,
/// or on the web; never its port or scheme.
pub fn aliases(by: GateBy, server: &Server) -> Vec<Alias> {
    match by.for_scheme(server.name.scheme) {
        GateBy::Address if !server.addrs.is_empty() => server
            .addrs
            .iter()
            .map(|a| Alias::Addr(a.ip().to_canonical()))
            .collect(),
        _ => vec![Alias::Name(server.name.host.clone())],
    }
}

/// One gate as the status page shows it.
#[derive(Clone, Copy, Debug)]
pub struct GateView {
    /// Requests queued for their turn.
    pub waiting: usize,
    pub in_flight: usize,
    pub last_start: Option<Instant>,
    /// The earliest the next request to this server (at the last request's
    /// spacing, and its own slow-down) may start.
    pub next_start: Option<Instant>,
    /// 1, or this server's slow-down multiplier.
    pub backoff: u32,
}
/// The politeness gate as the rest of the proxy sees it. Where requests
/// take their turn, and the state that takes, belongs to its backend
/// ([`Turns`]): this process's gates ([`Local`]), or the fleet's shared gate
/// ([`Fleet`]) with this process's gates as its shadow.
pub struct Politeness {
    /// Chosen once, at start.
    turns: Box<dyn Turns>,
}

/// Holding one: a request to this server is in flight. Dropping it frees the
/// slot (in fleet mode, releases its lease).
pub struct Permit {
    gate: Arc<Local>,
    /// The local gate; 0 (no gate) when the shared gate admitted it.
    id: GateId,
    // Boxed: a fleet's lease and names would size every connection's
    // future (the permit is held in it while the answer streams).
    shared: Option<Box<fleet::Shared>>,
    /// When the gate let it start (the start the next one is spaced from).
    pub started: Instant,
    /// The requests still waiting at this proxy's gate when it started
    /// (0 when the fleet's gate admitted it).
    pub behind: usize,
}

impl Permit {
    /// The gate this request went through (for [`Politeness::slow_down`]).
    pub fn gate(&self) -> GateId {
        self.id
    }

    /// The upstream `server` answered "slow down" (Gemini `44`): with a
    /// number, nothing starts at this server before it has passed; without,
    /// its spacing doubles; either at most `max_slow_down`. In fleet mode,
    /// for every proxy.
    /// The fleet is told before the client hears the `44`, so a client
    /// that retries at once through another proxy is held too.
    /// A web server (`429`, `503`) without a usable `Retry-After` is held
    /// by the web's back-off ([`WebBackoff`]) instead of a doubled spacing,
    /// and the fleet is told the hold as if the server had named it.
    pub async fn slow_down(&self, server: &HostKey, seconds: Option<Duration>) {
        let held = self.gate.slow_down(self.id, server, seconds);
        if let Some(shared) = &self.shared {
            let config = self.gate.config.load();
            let cap = config.max_slow_down;
            let max_delay = Some(config.max_delay.map_or(cap, |m| m.min(cap)));
            shared
                .slow_down(seconds.or(held).map(|s| s.min(cap)), max_delay)
                .await;
        }
    }

    /// The upstream `server` answered normally: its back-off ends.
    pub async fn recovered(&self, server: &HostKey) {
        self.gate.recovered(self.id, server);
        if let Some(shared) = &self.shared {
            shared.recovered().await;
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.gate.release(self.id);
    }
}

impl Politeness {
    /// Gates kept by this process alone.
    pub fn new(config: PolitenessConfig) -> Arc<Politeness> {
        Politeness::kept_by(Box::new(Arc::new(Local::new(config))))
    }

    /// Requests take their turn where `turns` says (fleet mode: [`Fleet`]).
    pub fn kept_by(turns: Box<dyn Turns>) -> Arc<Politeness> {
        Arc::new(Politeness { turns })
    }

    /// This process's gates (in fleet mode, the shadow of the fleet's).
    fn here(&self) -> &Arc<Local> {
        self.turns.here()
    }

    pub fn config(&self) -> arc_swap::Guard<Arc<PolitenessConfig>> {
        self.here().config()
    }

    /// A reload's settings: spacing, concurrency and waits apply to the next
    /// admission; the gates and their history stay. (`key` is not changed by a
    /// reload: the gates are named by it.)
    pub fn set_config(&self, config: PolitenessConfig) {
        self.here().set_config(config)
    }

    /// Waits for this request's turn at `server`'s gate, spaced by `delay`
    /// (`None`: the spacing the gate already has, or `default_delay` for a new
    /// one); or says at once that it would wait longer than `max_wait`.
    pub async fn admit(
        &self,
        server: &Server,
        delay: Option<Duration>,
    ) -> Result<Permit, SlowDown> {
        self.admit_holding(server, delay, Duration::ZERO).await
    }

    /// When a request of `server`'s protocol asked now must be answered.
    fn bound(&self, server: &Server) -> Instant {
        let max_wait = self.config().max_wait_for(None, server.name.scheme);
        after(Instant::now(), max_wait)
    }

    /// [`Politeness::admit`] where other requests to this server may ask for a
    /// longer spacing (other bots' Crawl-delay): `hold` is the longest, and the
    /// gate is remembered at least that long after this request starts.
    pub async fn admit_holding(
        &self,
        server: &Server,
        delay: Option<Duration>,
        hold: Duration,
    ) -> Result<Permit, SlowDown> {
        // As long as a request of its protocol waits (a web site's
        // robots.txt as long as its pages).
        let by = self.bound(server);
        self.admit_by(server, (delay, hold), Some(by), None).await
    }

    /// [`Politeness::admit_holding`] for a request that may wait no later
    /// than `by` (what is left of its `max_wait` after the limits held it),
    /// its place kept under `place` if it leaves first: a turn past `by` is
    /// "slow down" then (at once past the horizon).
    pub async fn admit_by(
        &self,
        server: &Server,
        (delay, hold): (Option<Duration>, Duration),
        by: Option<Instant>,
        place: Option<PlaceOf<'_>>,
    ) -> Result<Permit, SlowDown> {
        self.turns.admit(server, (delay, hold), by, place).await
    }

    /// Places kept for a retry now, for tests and the status page.
    pub fn kept_places(&self) -> usize {
        self.here().kept_places()
    }

    /// The pages crawlers gave up since last asked (see [`Local::given_up`]).
    pub fn given_up(&self) -> Vec<HostKey> {
        self.here().given_up()
    }

    /// How long a request asking for `delay` at `server` would wait at
    /// this process's gate now (report mode: what robots.txt's spacing
    /// would have cost), without joining the queue or making a gate.
    pub fn would_wait(&self, server: &Server, delay: Duration) -> Duration {
        self.here().would_wait(server, delay)
    }

    /// An upstream `server` answered "slow down" to a request through
    /// `gate` (see [`Local::slow_down`]).
    pub fn slow_down(
        &self,
        gate: GateId,
        server: &HostKey,
        seconds: Option<Duration>,
    ) -> Option<Duration> {
        self.here().slow_down(gate, server, seconds)
    }

    /// An upstream `server` answered normally: its back-off ends.
    pub fn recovered(&self, gate: GateId, server: &HostKey) {
        self.here().recovered(gate, server)
    }

    /// What the gate of `server` holds now, without creating one (the
    /// status page): `None` when the proxy spaces nothing there.
    pub fn peek(&self, server: &Server) -> Option<GateView> {
        self.here().peek(server)
    }

    /// Hosts remembered and requests waiting, for metrics and tests.
    pub fn usage(&self) -> (usize, usize) {
        self.here().usage()
    }

    /// Forgets idle gates (see [`Local::sweep`]).
    pub fn sweep(&self) {
        self.here().sweep()
    }

    /// A sweep over the gates there are now, slice by slice.
    pub fn start_sweep(&self) -> Sweep<'_> {
        self.here().start_sweep()
    }

    /// Runs a sweep every `every` until `stop` (see [`Local::sweeper`]).
    pub async fn sweeper(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        self.here().clone().sweeper(every, stop).await
    }
}

#[cfg(test)]
mod tests;
