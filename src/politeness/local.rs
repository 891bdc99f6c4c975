//! This process's own gates: per gate, the queue, the slots in flight, the
//! last start and the servers that asked to be slowed down. A [`Local`] is
//! the whole state of the gate when the proxy runs alone, and in fleet mode
//! the shadow the fleet's backend notes its starts on (report mode's waits,
//! the status page) and falls back to (`on_unavailable = "local"`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::places::{Kept, PlaceOf, Places};
use super::slowed::{backoff_spacing, Site, Slowed};
use super::{
    after, aliases, Alias, GateBy, GateId, GateView, Permit, PolitenessConfig, SlowDown, Turns,
};
use crate::protocol::rules::{self, Unsaid};
use crate::target::{HostKey, Server};

pub(super) struct Waiter {
    ticket: u64,
    wake: Arc<Notify>,
    /// This request's own spacing (its bot's Crawl-delay), measured from the
    /// last start at this server by any request.
    delay: Duration,
}

pub(super) struct Host {
    /// When the last request to this host started.
    pub(super) last_start: Option<Instant>,
    /// The spacing of the latest request started (its Crawl-delay-derived value).
    pub(super) delay: Duration,
    /// The longest spacing any request here asked for (every bot's
    /// Crawl-delay at this server): the gate is kept that long after its last
    /// start, so no bot's spacing is forgotten by a sweep.
    pub(super) hold: Duration,
    /// The servers on this machine that asked to be slowed down (few: a
    /// list).
    pub(super) slowed: Vec<Slowed>,
    pub(super) in_flight: usize,
    pub(super) queue: VecDeque<Waiter>,
    /// The addresses or names that find this gate (forgotten with it).
    pub(super) aliases: Vec<Alias>,
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
    pub(super) fn next_start(&self, delay: Duration) -> Option<Instant> {
        self.last_start.map(|t| after(t, delay))
    }

    /// The slow-down of `server`, if it asked for one.
    fn slowed(&self, server: &HostKey) -> Option<&Slowed> {
        self.slowed.iter().find(|s| s.is(server))
    }

    /// Estimated wait of a request asking for `delay` with `ticket` (a new
    /// one: `u64::MAX`): until this host's next start, then one spacing for
    /// each request ahead of it, shared among the concurrent slots.
    fn estimate(&self, config: &PolitenessConfig, delay: Duration, ticket: u64) -> Duration {
        let now = Instant::now();
        let spacing = delay;
        let until_next = self
            .next_start(delay)
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now));
        let queued = self.ahead_of(ticket);
        let ahead = (queued
            + self
                .in_flight
                .saturating_sub(config.per_host_concurrency - 1)) as u32;
        if queued == 0 && self.in_flight < config.per_host_concurrency {
            until_next
        } else {
            until_next.saturating_add(
                spacing.saturating_mul(ahead / config.per_host_concurrency.max(1) as u32),
            )
        }
    }

    /// Waiters ahead of `ticket`: the queue is in ticket order (a kept
    /// place re-enters where it stood).
    fn ahead_of(&self, ticket: u64) -> usize {
        self.queue.partition_point(|w| w.ticket < ticket)
    }

    fn wake_head(&self) {
        if let Some(head) = self.queue.front() {
            head.wake.notify_one();
        }
    }
}

/// The gates and the aliases that find them, under one lock.
#[derive(Default)]
pub(super) struct Gates {
    pub(super) hosts: HashMap<GateId, Host>,
    pub(super) aliases: HashMap<Alias, GateId>,
    pub(super) next: GateId,
    /// Every gate once, in the order the sweep visits them: a sweep takes
    /// gates from the front and puts the ones it keeps at the back, so it can
    /// stop after any slice and go on later.
    pub(super) sweep_order: VecDeque<GateId>,
    /// Places left in line, kept for a retry.
    pub(super) places: Places,
    /// Requests in every gate's queue.
    pub(super) queued: usize,
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
    /// Its server asked to be slowed down while it waited: it has left the
    /// queue (so the other servers on the machine keep their turns), and
    /// may join again no sooner than this.
    Slowed(Instant),
}

/// Removes a waiter that gives up (or whose client went away) from its queue.
struct InQueue<'a> {
    gate: &'a Local,
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
        let Gates { hosts, queued, .. } = &mut *gates;
        if let Some(host) = hosts.get_mut(&self.id) {
            let was_head = host.queue.front().is_some_and(|w| w.ticket == self.ticket);
            let before = host.queue.len();
            host.queue.retain(|w| w.ticket != self.ticket);
            *queued -= before - host.queue.len();
            if was_head {
                host.wake_head();
            }
        }
    }
}

/// A request's place in line, kept for its retry when it leaves before
/// its turn (its client hung up, or its bound passed): dropped, it keeps
/// the place unless its turn came or its site closed.
struct Keeper<'a> {
    gate: &'a Local,
    place: Option<PlaceOf<'a>>,
    server: &'a Server,
    /// Where it stands: its gate and ticket, once it joined a queue.
    at: Option<(GateId, u64)>,
    /// How long the place is kept once left: its bound.
    keep_for: Duration,
}

impl Keeper<'_> {
    /// Nothing to keep: its turn came, or its site closed.
    fn disarm(&mut self) {
        self.place = None;
    }
}

impl Drop for Keeper<'_> {
    fn drop(&mut self) {
        let (Some(place), Some((gate, ticket))) = (self.place, self.at) else {
            return;
        };
        let place = place.place();
        let now = Instant::now();
        let kept = Kept {
            gate,
            ticket,
            until: after(now, self.keep_for),
            server: self.server.name.clone(),
        };
        self.gate.lock().places.keep(place, kept, now);
    }
}

/// This process's gates, with the settings they run under.
pub struct Local {
    /// Swapped by a reload (`set_config`); requests read it as they go.
    pub(super) config: arc_swap::ArcSwap<PolitenessConfig>,
    pub(super) gates: Mutex<Gates>,
    tickets: std::sync::atomic::AtomicU64,
    /// The web's back-off levels, by site.
    web_levels: Mutex<super::backoff::Levels>,
}

impl Local {
    pub fn new(config: PolitenessConfig) -> Local {
        Local {
            config: arc_swap::ArcSwap::from_pointee(config),
            gates: Mutex::new(Gates::default()),
            tickets: std::sync::atomic::AtomicU64::new(0),
            web_levels: Mutex::new(Default::default()),
        }
    }

    /// A request through gate `id` is done: its slot is free, and the next
    /// in line may go.
    pub(super) fn release(&self, id: GateId) {
        let mut gates = self.lock();
        if let Some(host) = gates.hosts.get_mut(&id) {
            host.in_flight = host.in_flight.saturating_sub(1);
            host.wake_head();
        }
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

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, Gates> {
        self.gates.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How long a request asking for `delay` at `server` would wait at
    /// this process's gate now (report mode: what robots.txt's spacing
    /// would have cost), without joining the queue or making a gate.
    pub fn would_wait(&self, server: &Server, delay: Duration) -> Duration {
        let config = self.config.load();
        self.lock()
            .find(config.key, server)
            .map_or(Duration::ZERO, |host| {
                host.estimate(&config, delay, u64::MAX)
            })
    }

    /// A start the fleet's gate let through, noted at this process's gate
    /// too (spacing `delay`, remembered for `hold`): the waits report mode
    /// states are counted from it, and a store that goes down with
    /// `on_unavailable = "local"` spaces from it.
    pub fn seen_start(&self, started: Instant, server: &Server, delay: Duration, hold: Duration) {
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
    /// requests ahead (where `place` stood, if it left a place in line not
    /// long ago), or "slow down". A turn past the request's bound (`by`, else
    /// `max_wait`) but within `horizon` holds it in line until the bound and
    /// then answers "slow down" with the wait left, its place kept for its
    /// retry; a turn past the horizon is answered at once.
    pub async fn admit(
        self: &Arc<Self>,
        server: &Server,
        (delay, hold): (Option<Duration>, Duration),
        by: Option<Instant>,
        place: Option<PlaceOf<'_>>,
    ) -> Result<Permit, SlowDown> {
        // One admission, one config, whatever a reload does meanwhile.
        let config = self.config.load_full();
        let mut ticket = self
            .tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let wake = Arc::new(Notify::new());
        let max_wait = config.max_wait_by(by);
        let deadline = after(Instant::now(), max_wait);
        let mut keeper = Keeper {
            gate: self,
            place,
            server,
            at: None,
            keep_for: max_wait,
        };
        // A server that asked to be slowed down is waited for before its
        // request joins the machine's queue, so it never holds up the other
        // servers on that machine from the head of the queue; and looked at
        // again when the request's turn comes (a `44`, a `429` that came
        // while it waited): it leaves the queue then, and joins again (in
        // its place) when that slow-down has passed, within what is left of
        // its own bound.
        loop {
            let joined = self
                .join(
                    &config,
                    server,
                    (delay, hold),
                    (&mut ticket, deadline),
                    &wake,
                    &mut keeper,
                )
                .await;
            let id = match joined {
                Ok(id) => id,
                Err(slow) => return Err(slow),
            };
            keeper.at = Some((id, ticket));
            let mut place = InQueue {
                gate: self,
                id,
                ticket,
                admitted: false,
            };
            let ready = loop {
                let sleep_until = match self.try_start(&config, id, ticket, &server.name) {
                    Ok((started, behind)) => {
                        place.admitted = true;
                        keeper.disarm();
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
                    Err(Wait::Slowed(ready)) => break ready,
                    Err(Wait::Until(t)) => Some(t),
                    Err(Wait::Woken) => None,
                };
                let woken = async {
                    match sleep_until {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => wake.notified().await,
                    }
                };
                // Its bound: the turn did not come by then (it was further
                // than the bound, or a slow request ahead held the slot
                // longer). It answers then, with the wait left from its
                // place, which is kept for its retry.
                if tokio::time::timeout_at(deadline.max(Instant::now()), woken)
                    .await
                    .is_err()
                {
                    let retry_after = self.wait_left(&config, id, ticket, delay);
                    return Err(SlowDown { retry_after });
                }
            };
            drop(place);
            Self::wait_out(&config, ready, deadline, &mut keeper).await?;
        }
    }

    /// What is left of the wait of `ticket`'s request at gate `id` (at
    /// least 1 s): the `Retry-After` of one answered at its bound.
    fn wait_left(
        &self,
        config: &PolitenessConfig,
        id: GateId,
        ticket: u64,
        delay: Option<Duration>,
    ) -> Duration {
        let gates = self.lock();
        let left = gates.hosts.get(&id).map_or(Duration::ZERO, |host| {
            host.estimate(config, delay.unwrap_or(host.delay), ticket)
        });
        left.max(Duration::from_secs(1))
    }

    /// Joins `server`'s queue, first waiting out its own slow-down (no later
    /// than `deadline`). On its first join, a place `keeper` kept for it
    /// at this gate gives it its old ticket.
    async fn join(
        &self,
        config: &PolitenessConfig,
        server: &Server,
        spacing: (Option<Duration>, Duration),
        (ticket, deadline): (&mut u64, Instant),
        wake: &Arc<Notify>,
        keeper: &mut Keeper<'_>,
    ) -> Result<GateId, SlowDown> {
        loop {
            let max_wait = deadline.saturating_duration_since(Instant::now());
            let reclaim = keeper.at.is_none().then_some(keeper.place).flatten();
            match self.enqueue(config, server, spacing, (ticket, max_wait, reclaim), wake) {
                Ok(Queued::Joined(id)) => return Ok(id),
                Ok(Queued::SlowedUntil(ready)) => {
                    Self::wait_out(config, ready, deadline, keeper).await?
                }
                Err(slow) => {
                    // Past the horizon: nothing worth keeping.
                    keeper.disarm();
                    return Err(slow);
                }
            }
        }
    }

    /// Sleeps until a server's slow-down has passed at `ready`. Past
    /// `deadline`, "slow down": at once when `ready` is past the horizon (the
    /// site is closed: its kept places are dropped, this one is not kept),
    /// else at the deadline, its place kept.
    async fn wait_out(
        config: &PolitenessConfig,
        ready: Instant,
        deadline: Instant,
        keeper: &mut Keeper<'_>,
    ) -> Result<(), SlowDown> {
        // Boxed: rare, and inline its timer would size every admission.
        if ready > deadline {
            let retry_after = ready.saturating_duration_since(Instant::now());
            if retry_after > config.horizon {
                keeper.disarm();
            } else {
                Box::pin(tokio::time::sleep_until(deadline)).await;
            }
            return Err(SlowDown {
                retry_after: ready.saturating_duration_since(Instant::now()),
            });
        }
        Box::pin(tokio::time::sleep_until(ready)).await;
        Ok(())
    }

    /// Joins the queue of `server`'s gate (made if new) in `ticket`'s order
    /// (`reclaim`: the ticket kept for this request there, if any, becomes
    /// its ticket) and returns the gate; or when the server's own slow-down
    /// lets a request asking for `delay` start, if that is later than now
    /// (it has not joined then); or "slow down" when the estimated wait
    /// passes both `max_wait` and the horizon.
    fn enqueue(
        &self,
        config: &PolitenessConfig,
        server: &Server,
        (delay, hold): (Option<Duration>, Duration),
        (ticket, max_wait, reclaim): (&mut u64, Duration, Option<PlaceOf<'_>>),
        wake: &Arc<Notify>,
    ) -> Result<Queued, SlowDown> {
        let now = Instant::now();
        let mut gates = self.lock();
        let id = gates.gate_for(config.key, server, config.default_delay);
        // Hashed only when some place is kept.
        let reclaim = reclaim.filter(|_| !gates.places.is_empty());
        if let Some(kept) = reclaim.and_then(|p| gates.places.take(p.place(), id, now)) {
            *ticket = kept;
        }
        let Gates { hosts, queued, .. } = &mut *gates;
        let Some(host) = hosts.get_mut(&id) else {
            return Err(SlowDown {
                retry_after: Duration::from_secs(1),
            });
        };
        let delay = delay.unwrap_or(host.delay);
        let slowed = host.slowed(&server.name);
        if let Some(ready) = slowed.and_then(|s| s.ready_at(delay, config)) {
            if ready > now {
                return Ok(Queued::SlowedUntil(ready));
            }
        }
        host.hold = host.hold.max(hold).max(delay);
        let estimate = host.estimate(config, delay, *ticket);
        // Past the horizon; or a wait when as many requests wait as the
        // connections allow: told at once, holding nothing.
        let crowded = !estimate.is_zero() && *queued >= config.max_queued;
        if (estimate > max_wait && estimate > config.horizon) || crowded {
            return Err(SlowDown {
                retry_after: estimate,
            });
        }
        *queued += 1;
        let at = host.ahead_of(*ticket);
        host.queue.insert(
            at,
            Waiter {
                ticket: *ticket,
                wake: wake.clone(),
                delay,
            },
        );
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
        let Gates { hosts, queued, .. } = &mut *gates;
        // Swept while we waited cannot happen (the queue was not empty);
        // give up defensively.
        let host = hosts.get_mut(&id).ok_or(Wait::Gone)?;
        let head = host.queue.front().filter(|w| w.ticket == ticket);
        let at_head = head.is_some();
        let delay = head.map_or(host.delay, |w| w.delay);
        let now = Instant::now();
        // Its server's own slow-down, looked at again now: one that came
        // while it waited sends it out of the queue until it has passed.
        if at_head {
            let ready = host.slowed(server).and_then(|s| s.ready_at(delay, config));
            if let Some(ready) = ready.filter(|t| *t > now) {
                host.queue.pop_front();
                *queued -= 1;
                host.wake_head();
                return Err(Wait::Slowed(ready));
            }
        }
        let next = host.next_start(delay);
        let slot_free = host.in_flight < config.per_host_concurrency;
        if at_head && slot_free && next.is_none_or(|t| t <= now) {
            host.queue.pop_front();
            *queued -= 1;
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

    /// An upstream `server` answered "slow down" (Gemini `44`, the web's
    /// `429` or `503`) to a request through `gate`: nothing starts there
    /// before `seconds` have passed when given; else a web server is held by
    /// the web's back-off (the hold is returned, for the fleet), and a
    /// Gemini server's spacing doubles; each at most `max_slow_down`. The
    /// other servers on its machine keep their turns.
    pub fn slow_down(
        &self,
        gate: GateId,
        server: &HostKey,
        seconds: Option<Duration>,
    ) -> Option<Duration> {
        let config = self.config.load();
        let now = Instant::now();
        // The web without a usable Retry-After: the back-off's hold, counted
        // by site whether or not this process's gate admitted the request.
        let (seconds, held) = match seconds {
            None if rules::of(server.scheme).unsaid == Unsaid::BackOff => {
                let level = self
                    .web_levels
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .next(Site::of(server), &config.web_backoff, now);
                let hold =
                    config
                        .web_backoff
                        .hold(level, config.max_slow_down, super::backoff::noise());
                (Some(hold), Some(hold))
            }
            seconds => (seconds, None),
        };
        let mut gates = self.lock();
        let Gates { hosts, places, .. } = &mut *gates;
        let Some(host) = hosts.get_mut(&gate) else {
            return held;
        };
        let at = match host.slowed.iter().position(|s| s.is(server)) {
            Some(at) => at,
            None => {
                host.slowed.push(Slowed {
                    site: Site::of(server),
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
                let s = s.min(config.max_slow_down);
                let until = after(now, s);
                slowed.not_before = Some(slowed.not_before.map_or(until, |t| t.max(until)));
                // Closed past the horizon: its kept places mean nothing now
                // (the requests waiting there are answered as they look).
                if s > config.horizon {
                    places.drop_site(gate, &slowed.site);
                }
            }
            None => {
                let at_cap = backoff_spacing(delay, slowed.backoff, &config)
                    >= backoff_spacing(delay, u32::MAX, &config);
                if !at_cap {
                    slowed.backoff = slowed.backoff.saturating_mul(2);
                }
            }
        }
        held
    }

    /// An upstream `server` answered normally: a Gemini server's doubled
    /// spacing ends (a web server's back-off is forgiven only after
    /// `web_backoff_forgive` without another `429` or `503`).
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

    /// Places kept for a retry now (see [`super::places`]).
    pub fn kept_places(&self) -> usize {
        self.lock().places.len()
    }

    /// The pages crawlers gave up since last asked: places left in line
    /// and not come back for within their bound, by server.
    pub fn given_up(&self) -> Vec<HostKey> {
        self.lock().places.given_up(Instant::now())
    }

    /// Hosts remembered and requests waiting, for metrics and tests.
    pub fn usage(&self) -> (usize, usize) {
        let gates = self.lock();
        debug_assert_eq!(
            gates.queued,
            gates.hosts.values().map(|h| h.queue.len()).sum::<usize>()
        );
        (gates.hosts.len(), gates.queued)
    }
}

/// Turns taken at this process's own gates.
impl Turns for Arc<Local> {
    fn admit<'a>(
        &'a self,
        server: &'a Server,
        spacing: (Option<Duration>, Duration),
        by: Option<Instant>,
        place: Option<PlaceOf<'a>>,
    ) -> BoxFuture<'a, Result<Permit, SlowDown>> {
        Box::pin(Local::admit(self, server, spacing, by, place))
    }

    fn here(&self) -> &Arc<Local> {
        self
    }
}
