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

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::target::{HostKey, Server};

use slowed::{backoff_spacing, Slowed};

mod fleet;
mod slowed;
mod sweep;
mod turns;
pub use fleet::{fleet_tag, Fleet};
pub use sweep::{Sweep, SWEEP_SLICE};
pub use turns::{Local, Turns};

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
    /// A request that would wait longer is answered "slow down" at once.
    pub max_wait: Duration,
    /// The longest a server's own "slow down" holds it back: a Gemini
    /// `44 N`, the doubling of a `44` without a number (and, for the web,
    /// `Retry-After`). A hostile `44 999999999999` means this, not a century.
    pub max_slow_down: Duration,
    /// What a gate stands for.
    pub key: GateBy,
}

/// `politeness.max_slow_down` unless set.
pub const MAX_SLOW_DOWN: Duration = Duration::from_secs(24 * 3600);

impl PolitenessConfig {
    /// The longest a request asked now may wait: `max_wait`, or less when
    /// it must be answered by `by`.
    pub fn max_wait_by(&self, by: Option<Instant>) -> Duration {
        by.map_or(self.max_wait, |by| {
            self.max_wait
                .min(by.saturating_duration_since(Instant::now()))
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

struct Waiter {
    ticket: u64,
    wake: Arc<Notify>,
    /// This request's own spacing (its bot's Crawl-delay), measured from the
    /// last start at this server by any request.
    delay: Duration,
}

struct Host {
    /// When the last request to this host started.
    last_start: Option<Instant>,
    /// The spacing of the latest request started (its Crawl-delay-derived value).
    delay: Duration,
    /// The longest spacing any request here asked for (every bot's
    /// Crawl-delay at this server): the gate is kept that long after its last
    /// start, so no bot's spacing is forgotten by a sweep.
    hold: Duration,
    /// The servers on this machine that asked to be slowed down (few: a
    /// list).
    slowed: Vec<Slowed>,
    in_flight: usize,
    queue: VecDeque<Waiter>,
    /// The addresses or names that find this gate (forgotten with it).
    aliases: Vec<Alias>,
}

impl Host {
    fn new(delay: Duration) -> Host {
        Host {
            aliases: Vec::new(),
            last_start: None,
            delay,
            hold: Duration::ZERO,
            slowed: Vec::new(),
            in_flight: 0,
            queue: VecDeque::new(),
        }
    }

    /// When a request asking for `delay` may start, as far as the machine's
    /// spacing goes.
    fn next_start(&self, delay: Duration) -> Option<Instant> {
        self.last_start.map(|t| after(t, delay))
    }

    /// The slow-down of `server`, if it asked for one.
    fn slowed(&self, server: &HostKey) -> Option<&Slowed> {
        self.slowed.iter().find(|s| s.is(server))
    }

    /// Estimated wait of a request asking for `delay`: until this host's
    /// next start, then one spacing for each request ahead, shared among the
    /// concurrent slots.
    fn estimate(&self, config: &PolitenessConfig, delay: Duration) -> Duration {
        let now = Instant::now();
        let spacing = delay;
        let until_next = self
            .next_start(delay)
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        let ahead = (self.queue.len()
            + self
                .in_flight
                .saturating_sub(config.per_host_concurrency - 1)) as u32;
        if self.queue.is_empty() && self.in_flight < config.per_host_concurrency {
            until_next
        } else {
            until_next.saturating_add(
                spacing.saturating_mul(ahead / config.per_host_concurrency.max(1) as u32),
            )
        }
    }

    fn wake_head(&self) {
        if let Some(head) = self.queue.front() {
            head.wake.notify_one();
        }
    }
}

/// The names a server goes by at the gate (`key`): each of its addresses
/// (IPv4-mapped read as IPv4), or its name when keyed by host or unresolved;
/// never its port or scheme.
pub fn aliases(by: GateBy, server: &Server) -> Vec<Alias> {
    match by {
        GateBy::Address if !server.addrs.is_empty() => server
            .addrs
            .iter()
            .map(|a| Alias::Addr(a.ip().to_canonical()))
            .collect(),
        _ => vec![Alias::Name(server.name.host.clone())],
    }
}

/// The gates and the aliases that find them, under one lock.
#[derive(Default)]
struct Gates {
    hosts: HashMap<GateId, Host>,
    aliases: HashMap<Alias, GateId>,
    next: GateId,
    /// Every gate once, in the order the sweep visits them: a sweep takes
    /// gates from the front and puts the ones it keeps at the back, so it can
    /// stop after any slice and go on later.
    sweep_order: VecDeque<GateId>,
}

impl Gates {
    /// The gate of `server`, if one of its aliases has one (none is made).
    fn find(&self, key: GateBy, server: &Server) -> Option<&Host> {
        aliases(key, server)
            .iter()
            .find_map(|a| self.aliases.get(a))
            .and_then(|id| self.hosts.get(id))
    }

    /// The gate for `server` (created if none of its aliases has one); its
    /// aliases not yet known are added to it.
    fn gate_for(&mut self, by: GateBy, server: &Server, default_delay: Duration) -> GateId {
        let aliases = aliases(by, server);
        let found = aliases.iter().find_map(|a| self.aliases.get(a).copied());
        let id = found.unwrap_or_else(|| {
            self.next += 1;
            self.hosts.insert(self.next, Host::new(default_delay));
            self.sweep_order.push_back(self.next);
            self.next
        });
        for alias in aliases {
            if let std::collections::hash_map::Entry::Vacant(v) = self.aliases.entry(alias) {
                if let Some(host) = self.hosts.get_mut(&id) {
                    host.aliases.push(v.key().clone());
                }
                v.insert(id);
            }
        }
        id
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

pub struct Politeness {
    /// Swapped by a reload (`set_config`); requests read it as they go.
    config: arc_swap::ArcSwap<PolitenessConfig>,
    gates: Mutex<Gates>,
    tickets: std::sync::atomic::AtomicU64,
    /// Where requests take their turn (chosen once, at start).
    turns: Box<dyn Turns>,
}

/// Holding one: a request to this server is in flight. Dropping it frees the
/// slot (in fleet mode, releases its lease).
pub struct Permit {
    gate: Arc<Politeness>,
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
    pub async fn slow_down(&self, server: &HostKey, seconds: Option<Duration>) {
        self.gate.slow_down(self.id, server, seconds);
        if let Some(shared) = &self.shared {
            let config = self.gate.config.load();
            let cap = config.max_slow_down;
            let max_delay = Some(config.max_delay.map_or(cap, |m| m.min(cap)));
            shared
                .slow_down(seconds.map(|s| s.min(cap)), max_delay)
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
        let mut gates = self.gate.lock();
        if let Some(host) = gates.hosts.get_mut(&self.id) {
            host.in_flight = host.in_flight.saturating_sub(1);
            host.wake_head();
        }
    }
}

/// Where a request stands after asking to join a server's queue.
enum Queued {
    /// In the queue of this gate.
    Joined(GateId),
    /// Not in it: the server's own slow-down lets it start no sooner.
    SlowedUntil(Instant),
}

/// What a queued request waits for before it looks again.
enum Wait {
    /// Its turn's time.
    Until(Instant),
    /// Being woken: the head left, or a slot freed.
    Woken,
    /// Its gate is gone.
    Gone,
}

/// Removes a waiter that gives up (or whose client went away) from its queue.
struct InQueue<'a> {
    gate: &'a Politeness,
    id: GateId,
    ticket: u64,
    admitted: bool,
}

impl Drop for InQueue<'_> {
    fn drop(&mut self) {
        if self.admitted {
            return;
        }
        let mut gates = self.gate.lock();
        if let Some(host) = gates.hosts.get_mut(&self.id) {
            let was_head = host.queue.front().is_some_and(|w| w.ticket == self.ticket);
            host.queue.retain(|w| w.ticket != self.ticket);
            if was_head {
                host.wake_head();
            }
        }
    }
}

impl Politeness {
    /// Gates kept by this process alone.
    pub fn new(config: PolitenessConfig) -> Arc<Politeness> {
        Politeness::with_turns(config, Box::new(Local))
    }

    /// Requests take their turn where `turns` says (fleet mode: [`Fleet`]).
    pub fn with_turns(config: PolitenessConfig, turns: Box<dyn Turns>) -> Arc<Politeness> {
        Arc::new(Politeness {
            config: arc_swap::ArcSwap::from_pointee(config),
            gates: Mutex::new(Gates::default()),
            tickets: std::sync::atomic::AtomicU64::new(0),
            turns,
        })
    }

    pub fn config(&self) -> arc_swap::Guard<Arc<PolitenessConfig>> {
        self.config.load()
    }

    /// A reload's settings: spacing, concurrency and waits apply to the next
    /// admission; the gates and their history stay. (`key` is not changed by a
    /// reload: the gates are named by it.)
    pub fn set_config(&self, mut config: PolitenessConfig) {
        config.key = self.config.load().key;
        self.config.store(Arc::new(config));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Gates> {
        self.gates.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for this request's turn at `server`'s gate, spaced by `delay`
    /// (`None`: the spacing the gate already has, or `default_delay` for a new
    /// one); or says at once that it would wait longer than `max_wait`.
    pub async fn admit(
        self: &Arc<Self>,
        server: &Server,
        delay: Option<Duration>,
    ) -> Result<Permit, SlowDown> {
        self.admit_holding(server, delay, Duration::ZERO).await
    }

    /// [`Politeness::admit`] where other requests to this server may ask for a
    /// longer spacing (other bots' Crawl-delay): `hold` is the longest, and the
    /// gate is remembered at least that long after this request starts.
    pub async fn admit_holding(
        self: &Arc<Self>,
        server: &Server,
        delay: Option<Duration>,
        hold: Duration,
    ) -> Result<Permit, SlowDown> {
        self.admit_by(server, delay, hold, None).await
    }

    /// [`Politeness::admit_holding`] for a request that may wait no later
    /// than `by` (what is left of its `max_wait` after the limits held it):
    /// a turn past it is "slow down" at once, as one past `max_wait` is.
    pub async fn admit_by(
        self: &Arc<Self>,
        server: &Server,
        delay: Option<Duration>,
        hold: Duration,
        by: Option<Instant>,
    ) -> Result<Permit, SlowDown> {
        self.turns.admit(self, server, (delay, hold), by).await
    }

    /// How long a request asking for `delay` at `server` would wait at
    /// this process's gate now (report mode: what robots.txt's spacing
    /// would have cost), without joining the queue or making a gate.
    pub fn would_wait(&self, server: &Server, delay: Duration) -> Duration {
        let config = self.config.load();
        self.lock()
            .find(config.key, server)
            .map_or(Duration::ZERO, |host| host.estimate(&config, delay))
    }

    /// A start the fleet's gate let through, noted at this process's gate
    /// too (spacing `delay`, remembered for `hold`): the waits report mode
    /// states are counted from it, and a store that goes down with
    /// `on_unavailable = "local"` spaces from it.
    pub(super) fn seen_start(
        &self,
        started: Instant,
        server: &Server,
        delay: Duration,
        hold: Duration,
    ) {
        let config = self.config.load();
        let mut gates = self.lock();
        let id = gates.gate_for(config.key, server, config.default_delay);
        if let Some(host) = gates.hosts.get_mut(&id) {
            host.hold = host.hold.max(hold).max(delay);
            host.last_start = Some(started);
            host.delay = delay;
        }
    }

    /// The turn at this process's gate for `server`: queued behind the
    /// requests ahead, or "slow down" at once when the wait would pass
    /// `max_wait`.
    pub(crate) async fn admit_here(
        self: &Arc<Self>,
        server: &Server,
        (delay, hold): (Option<Duration>, Duration),
        by: Option<Instant>,
    ) -> Result<Permit, SlowDown> {
        // One admission, one config, whatever a reload does meanwhile.
        let config = self.config.load_full();
        let ticket = self
            .tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        let max_wait = config.max_wait_by(by);
        let deadline = after(Instant::now(), max_wait);
        // A server that asked to be slowed down is waited for before its
        // request joins the machine's queue, so it never holds up the other
        // servers on that machine from the head of the queue.
        let id = loop {
            let max_wait = deadline.saturating_duration_since(Instant::now());
            match self.enqueue(&config, server, (delay, hold), (ticket, max_wait), &wake)? {
                Queued::Joined(id) => break id,
                Queued::SlowedUntil(ready) if ready > deadline => {
                    return Err(SlowDown {
                        retry_after: ready.saturating_duration_since(Instant::now()),
                    });
                }
                // Boxed: rare, and inline its timer would size every admission.
                Queued::SlowedUntil(ready) => Box::pin(tokio::time::sleep_until(ready)).await,
            }
        };
        let mut place = InQueue {
            gate: self,
            id,
            ticket,
            admitted: false,
        };
        loop {
            let sleep_until = match self.try_start(&config, id, ticket, &server.name) {
                Ok((started, behind)) => {
                    place.admitted = true;
                    return Ok(Permit {
                        gate: self.clone(),
                        id,
                        shared: None,
                        started,
                        behind,
                    });
                }
                Err(Wait::Gone) => {
                    return Err(SlowDown {
                        retry_after: Duration::from_secs(1),
                    })
                }
                Err(Wait::Until(t)) => Some(t),
                Err(Wait::Woken) => None,
            };
            let woken = async {
                match sleep_until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => wake.notified().await,
                }
            };
            // The estimate said the turn comes within max_wait; if a slow request
            // ahead held the slot longer, give up then rather than hold forever.
            if tokio::time::timeout_at(deadline.max(Instant::now()), woken)
                .await
                .is_err()
            {
                let retry_after = self
                    .config
                    .load()
                    .delay_for(None)
                    .max(Duration::from_secs(1));
                return Err(SlowDown { retry_after });
            }
        }
    }

    /// Joins the queue of `server`'s gate (made if new) and returns the gate;
    /// or when the server's own slow-down lets a request asking for `delay`
    /// start, if that is later than now (it has not joined then); or "slow
    /// down" when the estimated wait passes `max_wait`.
    fn enqueue(
        &self,
        config: &PolitenessConfig,
        server: &Server,
        (delay, hold): (Option<Duration>, Duration),
        (ticket, max_wait): (u64, Duration),
        wake: &Arc<Notify>,
    ) -> Result<Queued, SlowDown> {
        let mut gates = self.lock();
        let id = gates.gate_for(config.key, server, config.default_delay);
        let Some(host) = gates.hosts.get_mut(&id) else {
            return Err(SlowDown {
                retry_after: Duration::from_secs(1),
            });
        };
        let delay = delay.unwrap_or(host.delay);
        let slowed = host.slowed(&server.name);
        if let Some(ready) = slowed.and_then(|s| s.ready_at(delay, config)) {
            if ready > Instant::now() {
                return Ok(Queued::SlowedUntil(ready));
            }
        }
        host.hold = host.hold.max(hold).max(delay);
        let estimate = host.estimate(config, delay);
        if estimate > max_wait {
            return Err(SlowDown {
                retry_after: estimate,
            });
        }
        host.queue.push_back(Waiter {
            ticket,
            wake: wake.clone(),
            delay,
        });
        Ok(Queued::Joined(id))
    }

    /// Starts `ticket`'s request if its turn has come (at the head of the
    /// queue, a slot free, the spacing past), and says when and how many
    /// wait behind it; else what to wait for.
    fn try_start(
        &self,
        config: &PolitenessConfig,
        id: GateId,
        ticket: u64,
        server: &HostKey,
    ) -> Result<(Instant, usize), Wait> {
        let mut gates = self.lock();
        // Swept while we waited cannot happen (the queue was not empty);
        // give up defensively.
        let host = gates.hosts.get_mut(&id).ok_or(Wait::Gone)?;
        let head = host.queue.front().filter(|w| w.ticket == ticket);
        let at_head = head.is_some();
        let delay = head.map_or(host.delay, |w| w.delay);
        let now = Instant::now();
        let next = host.next_start(delay);
        let slot_free = host.in_flight < config.per_host_concurrency;
        if at_head && slot_free && next.is_none_or(|t| t <= now) {
            host.queue.pop_front();
            host.in_flight += 1;
            host.last_start = Some(now);
            host.delay = delay;
            host.slowed.retain_mut(|s| {
                if s.is(server) {
                    s.last_start = now;
                }
                !s.over(delay, config, now)
            });
            // The next in line may be able to go too (concurrency > 1, no delay).
            host.wake_head();
            return Ok((now, host.queue.len()));
        }
        // At the head, waiting only for time: sleep until then. Otherwise
        // wait to be woken (the head left, or a slot freed).
        match next {
            Some(t) if at_head && slot_free => Err(Wait::Until(t)),
            _ => Err(Wait::Woken),
        }
    }

    /// An upstream `server` answered "slow down" (Gemini `44`) to a request
    /// through `gate`: nothing starts there before `seconds` have passed when
    /// given, else its spacing doubles; either at most `max_slow_down`. The
    /// other servers on its machine keep their turns.
    pub fn slow_down(&self, gate: GateId, server: &HostKey, seconds: Option<Duration>) {
        let config = self.config.load();
        let mut gates = self.lock();
        let Some(host) = gates.hosts.get_mut(&gate) else {
            return;
        };
        let now = Instant::now();
        let at = match host.slowed.iter().position(|s| s.is(server)) {
            Some(at) => at,
            None => {
                host.slowed.push(Slowed {
                    host: server.host.clone(),
                    port: server.port,
                    backoff: 1,
                    not_before: None,
                    last_start: host.last_start.unwrap_or(now),
                });
                host.slowed.len() - 1
            }
        };
        let delay = host.delay;
        let slowed = &mut host.slowed[at];
        match seconds {
            Some(s) => {
                let until = after(now, s.min(config.max_slow_down));
                slowed.not_before = Some(slowed.not_before.map_or(until, |t| t.max(until)));
            }
            None => {
                let at_cap = backoff_spacing(delay, slowed.backoff, &config)
                    >= backoff_spacing(delay, u32::MAX, &config);
                if !at_cap {
                    slowed.backoff = slowed.backoff.saturating_mul(2);
                }
            }
        }
    }

    /// An upstream `server` answered normally: its exponential back-off ends.
    pub fn recovered(&self, gate: GateId, server: &HostKey) {
        let config = self.config.load();
        if let Some(host) = self.lock().hosts.get_mut(&gate) {
            let (delay, now) = (host.delay, Instant::now());
            host.slowed.retain_mut(|s| {
                if s.is(server) {
                    s.backoff = 1;
                }
                !s.over(delay, &config, now)
            });
        }
    }

    /// What the gate of `server` holds now, without creating one (the
    /// status page): `None` when the proxy spaces nothing there.
    pub fn peek(&self, server: &Server) -> Option<GateView> {
        let config = self.config.load();
        let gates = self.lock();
        let host = gates.find(config.key, server)?;
        let slowed = host.slowed(&server.name);
        let next_start = match (
            host.next_start(host.delay),
            slowed.and_then(|s| s.ready_at(host.delay, &config)),
        ) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Some(GateView {
            waiting: host.queue.len(),
            in_flight: host.in_flight,
            last_start: host.last_start,
            next_start,
            backoff: slowed.map_or(1, |s| s.backoff),
        })
    }

    /// Hosts remembered and requests waiting, for metrics and tests.
    pub fn usage(&self) -> (usize, usize) {
        let gates = self.lock();
        (
            gates.hosts.len(),
            gates.hosts.values().map(|h| h.queue.len()).sum(),
        )
    }
}

#[cfg(test)]
mod tests;
