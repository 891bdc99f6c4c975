//! Admission: from a canonical target and the bot asking, to "go"
//! ([`Admitted`]) or a [`Refusal`]. The same steps for every protocol, in
//! order, each its own function:
//!
//! 1. [`where_to`]: the host resolved and the proxy's address rules (a host
//!    it must not connect to is not even asked for its robots.txt);
//! 2. `robots_entry` and `robots_decide`: the host's robots.txt (cached,
//!    fetched once) decides for this bot;
//! 3. [`Limits`]: each limit the operator set, in order: a new limiter is one
//!    more [`Limit`] (docs/architecture.md, "Adding a limit");
//! 4. [`turn`]: the host's turn at its gate, spaced by the bot's Crawl-delay.
//!
//! A bot in report mode (`mode = "report"`) goes through the same steps,
//! but what robots.txt or its limits would refuse or delay is noted in its
//! [`Report`] and the request goes on at once (`crate::report`).
//!
//! The steps count in the metrics what only they see (cache hits, the wait);
//! the status page and the log line observe the result ([`Refused::server`],
//! [`Admitted::server`]), never a step.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::bots::limits::Mode;
use crate::bots::BotId;
use crate::cache::{AllowedBy, Entry, Evidence, Lookup, RobotsCache, Rules};
use crate::config::{Config, OnUnreachable};
use crate::metrics::Metrics;
use crate::politeness::{Permit, PlaceOf, Politeness, SpacingFrom};
use crate::refusal::{
    Busy, Disallowed, Malformed, ProxyRule, Refusal, RobotsUnreachable, Rule, SlowDown,
};
use crate::report::{Report, Would};
use crate::robots::Decision;
use crate::target::{HostKey, Server, Target};
use crate::upstream::Upstream;

pub mod limit;
pub use limit::{Asked, Held, Hold, Holds, Left, Limit, Limits, Usage};

/// What admitting a request asks, built by each config generation: the
/// bots and `[ports]` (its config), resolution and egress (its upstream),
/// robots.txt, the politeness gate, the bots' limits, the metrics it counts
/// in, and the shutdown it gives up on. Shared with the connections through
/// `Context` (the same objects), it knows no listener and no protocol.
pub struct Admission {
    pub config: Arc<Config>,
    pub upstream: Arc<Upstream>,
    pub robots: Arc<RobotsCache>,
    pub politeness: Arc<Politeness>,
    pub metrics: Arc<Metrics>,
    /// The limits asked beyond robots.txt, in order.
    pub limits: Limits,
    /// Which config this is: cached robots.txt is compiled for one
    /// generation's bots.
    pub generation: u64,
    pub shutdown: tokio_util::sync::CancellationToken,
}

/// A request the proxy may send now: where to (the addresses that were checked
/// and gated), and its politeness slot (held until the answer has been relayed).
pub struct Admitted {
    pub server: Server,
    pub permit: Permit,
    /// The spacing its start kept from the last start there (its bot's).
    pub spacing: Duration,
    /// How long it waited for its turn.
    pub waited: Duration,
    /// What the bot's limits keep for it (a slot in flight) until it ends.
    pub holds: Holds,
    /// Report mode: what robots.txt and the limits would have done instead.
    pub report: Report,
    /// The robots.txt it was decided with, and what in it allowed it.
    pub robots: Option<Evidence>,
}

/// A request turned away, and the server it named when that was known
/// (resolved and allowed by the address rules): the status page shows it.
pub struct Refused {
    pub refusal: Refusal,
    pub server: Option<Server>,
    /// The robots.txt in force when it was refused, if it got that far.
    pub robots: Option<Evidence>,
    /// How long it waited on its bot's limits and its turn before it was
    /// refused (told "slow down" at its bound: that bound).
    pub waited: Duration,
}

/// The checks every protocol makes before contacting the upstream, in order,
/// for a request of the protocol's one kind (a Gemini, Gopher, Spartan or
/// Nex request; a web `GET`: [`admit_method`]).
pub async fn admit(ctx: &Admission, bot: BotId, target: &Target) -> Result<Admitted, Refused> {
    admit_method(ctx, (bot, ""), target).await
}

/// [`admit`] for a request with a `method` (the web's; `""` for a protocol
/// with one kind of request): a request that leaves before its turn keeps
/// its place in line under (bot, method, canonical URL) for its retry.
pub async fn admit_method(
    ctx: &Admission,
    (bot, method): (BotId, &str),
    target: &Target,
) -> Result<Admitted, Refused> {
    let server = where_to(ctx, target).await.map_err(|refusal| Refused {
        refusal,
        server: None,
        robots: None,
        waited: Duration::ZERO,
    })?;
    let reporting = ctx.config.bots.get(bot).limits.mode == Mode::Report;
    let mut report = Report::default();
    let entry = robots_entry(ctx, &server, bot).await;
    let mut robots = entry.evidence();
    let refused = |refusal, server, robots| Refused {
        refusal,
        server: Some(server),
        robots,
        waited: Duration::ZERO,
    };
    match robots_decide(ctx, &server, bot, target, &entry) {
        Ok(decision) => {
            if let Some(evidence) = &mut robots {
                evidence.allowed_by = decision.map(|decision| AllowedBy {
                    entry: entry.clone(),
                    bot,
                    decision,
                });
            }
        }
        Err(refusal) if reporting && crate::report::reportable(&refusal) => {
            report.add(Would::Refuse(refusal))
        }
        Err(refusal) => return Err(refused(refusal, server, robots)),
    }
    let asked_at = Instant::now();
    // Its crawler's patience: its bot's `max_wait`, else its protocol's.
    let bot_max_wait = ctx.config.bots.get(bot).limits.max_wait;
    let max_wait = ctx
        .politeness
        .config()
        .max_wait_for(bot_max_wait, target.scheme);
    let asked = Asked {
        bot,
        target,
        server: &server,
        robots: &entry,
        // Report mode waits for nothing: a limit that would hold it says so.
        deadline: match reporting {
            true => asked_at,
            false => crate::politeness::after(asked_at, max_wait),
        },
    };
    let limits_report = reporting.then_some((&mut report, max_wait));
    let waited = |refused: Refused| Refused {
        waited: asked_at.elapsed(),
        ..refused
    };
    let mut holds = match ctx.limits.check(&asked, limits_report).await {
        Ok(holds) => holds,
        Err(refusal) => return Err(waited(refused(refusal, server, robots))),
    };
    let spacing = spacing(ctx, bot, &entry, &server.name.host);
    let place = PlaceOf::Target {
        bot: &ctx.config.bots.get(bot).name,
        method,
        target,
    };
    let turn = match reporting {
        // What is left of the same deadline: a limit's wait and the gate's
        // together stay within max_wait.
        false => turn(ctx, &server, spacing, (asked.deadline, Some(place))).await,
        // Boxed: rare, and inline it would size every waiting request.
        true => {
            Box::pin(turn_reported(
                ctx,
                &server,
                bot,
                (&entry, spacing),
                &mut report,
            ))
            .await
        }
    };
    let permit = match turn {
        Ok((permit, _)) => permit,
        Err(refusal) => return Err(waited(refused(refusal, server, robots))),
    };
    // What robots.txt says may have changed while it waited: the copy
    // cached now decides again (never fetched for this). Only a copy no
    // longer fresh can have been fetched again meanwhile: a request whose
    // copy is still fresh (most) looks nothing up. Boxed: the cache's
    // lookup would size every waiting request.
    if Instant::now() >= entry.fresh_until() {
        if let Err(refusal) = Box::pin(robots_again(ctx, (&server, bot, target), &entry)).await {
            match reporting && crate::report::reportable(&refusal) {
                true => report.add(Would::Refuse(refusal)),
                false => return Err(refused(refusal, server, robots)),
            }
        }
    }
    holds.started();
    Ok(Admitted {
        server,
        permit,
        spacing: spacing.0,
        waited: asked_at.elapsed(),
        holds,
        report,
        robots,
    })
}

/// Step 1: the host's addresses, each allowed by the proxy's address rules;
/// a port `[ports]` gives another protocol than the target's scheme is
/// refused before anything is resolved or asked, whichever way the request
/// came in (a `gopher://` URL on the Gemini listener, SOCKS5, transparent).
pub async fn where_to(ctx: &Admission, target: &Target) -> Result<Server, Refusal> {
    if let Some(speaks) = ctx.config.ports.protocol_of(target.port) {
        if speaks.scheme() != target.scheme.robots_scheme() {
            return Err(Refusal::ProxyRule(ProxyRule::PortSpeaks {
                scheme: target.scheme.as_str(),
                port: target.port,
                speaks: speaks.as_str(),
            }));
        }
    }
    let addrs = ctx.upstream.resolve(&target.host, target.port).await?;
    Ok(Server {
        name: HostKey {
            scheme: target.scheme.robots_scheme(),
            host: target.host.clone(),
            port: target.port,
        },
        addrs,
    })
}

/// Step 2, first half: the host's robots.txt entry (cached, fetched once;
/// its Crawl-delays are the gate's), compiled for this request's
/// configuration.
async fn robots_entry(ctx: &Admission, server: &Server, bot: BotId) -> Arc<Entry> {
    // Boxed, as the relay: a robots.txt fetch's future (connect, TLS) is
    // large, and inline it would size every waiting connection's future.
    let (mut entry, lookup) = Box::pin(ctx.robots.rules(server, bot)).await;
    if entry.generation() != ctx.generation {
        // A reload changed the bots while this connection kept the config it
        // started with: its own bots' policies, compiled for this request.
        entry = entry.for_generation(ctx.generation, &ctx.config.bots.profiles());
    }
    match lookup {
        Lookup::Hit => ctx.metrics.cache_hits.inc(),
        Lookup::Miss => ctx.metrics.cache_misses.inc(),
    }
    entry
}

/// Step 2, second half: what the entry says of this target for this bot:
/// allowed (with the decision, when a robots.txt was found), or why not.
fn robots_decide(
    ctx: &Admission,
    server: &Server,
    bot: BotId,
    target: &Target,
    entry: &Entry,
) -> Result<Option<Decision>, Refusal> {
    let key = &server.name;
    match &entry.rules {
        Rules::Found { policies, stale } => {
            let policy = &policies[bot];
            let paths = crate::protocol::rules::of(target.scheme).paths;
            let decision = target
                .decide(policy, (paths, ctx.config.selector_reading))
                .map_err(|e| Refusal::Malformed(Malformed::Target(e)))?;
            if !decision.allowed() {
                let token = ctx.config.bots.get(bot).profile.token();
                let why = policy.explain(&decision);
                let rule = why.rule.map(|r| Rule {
                    kind: r.kind,
                    pattern: r.pattern.to_string(),
                    line: r.line,
                });
                return Err(Refusal::Disallowed(Disallowed {
                    host: key.host.clone(),
                    port: key.port,
                    bot: match token {
                        "" => "this bot".to_string(),
                        token => token.to_string(),
                    },
                    rule,
                    usage: why.usage,
                    stale: stale.is_some(),
                }));
            }
            return Ok(Some(decision));
        }
        Rules::Missing(_) => {}
        Rules::StoreDown => return Err(store_down(ctx)),
        Rules::Unreachable { why, retry_at } => {
            if ctx.robots.on_unreachable() == OnUnreachable::Disallow {
                return Err(Refusal::RobotsUnreachable(RobotsUnreachable {
                    host: key.host.clone(),
                    port: key.port,
                    why: why.to_string(),
                    retry_in: retry_at.saturating_duration_since(Instant::now()),
                }));
            }
        }
    }
    Ok(None)
}

/// After the turn: the robots.txt cached for the host now, if another than
/// `decided` (refreshed while the request waited: it became unreachable, or
/// says otherwise), decides again; read from the cache, never fetched.
async fn robots_again(
    ctx: &Admission,
    (server, bot, target): (&Server, BotId, &Target),
    decided: &Arc<Entry>,
) -> Result<(), Refusal> {
    let Some(mut now) = ctx.robots.peek(&server.name).await else {
        return Ok(());
    };
    if Arc::ptr_eq(&now, decided) || now.fresh_until() == decided.fresh_until() {
        return Ok(());
    }
    if now.generation() != ctx.generation {
        now = now.for_generation(ctx.generation, &ctx.config.bots.profiles());
    }
    robots_decide(ctx, server, bot, target, &now).map(drop)
}

/// Step 4: the host's turn. Spaced by `delay`, this bot's spacing
/// ([`spacing_in_force`]), from the last start by any bot; the gate remembers
/// the server for `hold`, the longest of its bots' spacings
/// (docs/architecture.md, "Several bots").
pub async fn turn(
    ctx: &Admission,
    server: &Server,
    (delay, hold): (Duration, Duration),
    (by, place): (Instant, Option<PlaceOf<'_>>),
) -> Result<(Permit, Duration), Refusal> {
    let asked = Instant::now();
    // A shutdown answers a request still waiting (its place in the queue is
    // given back), rather than leave it to be cut at the end of the grace; a
    // turn that is already there is taken.
    let turn = tokio::select! {
        biased;
        turn = ctx.politeness.admit_by(server, (Some(delay), hold), Some(by), place) => turn,
        () = ctx.shutdown.cancelled() => {
            return Err(Refusal::SlowDown(SlowDown {
                retry_after: delay.max(Duration::from_secs(1)),
                why: Busy::ShuttingDown,
            }))
        }
    };
    let waited = asked.elapsed();
    ctx.metrics.politeness_wait.observe(waited.as_secs_f64());
    match turn {
        Ok(permit) => Ok((permit, waited)),
        Err(slow) => Err(Refusal::SlowDown(SlowDown {
            retry_after: slow.retry_after,
            why: Busy::Turn,
        })),
    }
}

/// This bot's spacing at the host (its Crawl-delay, at least its
/// `min_delay`), and the longest of every bot's there (how long the gate
/// remembers a start).
fn spacing(ctx: &Admission, bot: BotId, entry: &Entry, host: &str) -> (Duration, Duration) {
    let spacing = ctx.politeness.config();
    // Each bot's floor (`min_delay`) under what robots.txt asks of it, and
    // the host's (`[[hosts]] min_delay`) under every bot's.
    let bots = ctx.config.bots.all();
    let host_floor = host_min_delay(ctx, host);
    let floor = |id: BotId| {
        bots.get(id)
            .map_or(Duration::ZERO, |b| b.limits.min_delay)
            .max(host_floor)
    };
    let (delay, _) = spacing_under(ctx, bot, entry, host_floor);
    let hold = entry
        .crawl_delays()
        .enumerate()
        .map(|(id, d)| spacing.delay_for(d).max(floor(id)))
        .chain(bots.iter().map(|b| b.limits.min_delay))
        .fold(delay, Duration::max);
    (delay, hold)
}

/// `[[hosts]] min_delay` at `host`, or zero.
fn host_min_delay(ctx: &Admission, host: &str) -> Duration {
    ctx.config
        .hosts
        .for_host(host)
        .map_or(Duration::ZERO, |r| r.min_delay)
}

/// This bot's spacing at the host: its Crawl-delay there clamped by the
/// proxy's `politeness` settings, at least its own `min_delay`; and which
/// of those gave it.
pub fn spacing_in_force(
    ctx: &Admission,
    bot: BotId,
    entry: &Entry,
    host: &str,
) -> (Duration, SpacingFrom) {
    spacing_under(ctx, bot, entry, host_min_delay(ctx, host))
}

/// [`spacing_in_force`] under the host's floor, looked up once.
fn spacing_under(
    ctx: &Admission,
    bot: BotId,
    entry: &Entry,
    host_floor: Duration,
) -> (Duration, SpacingFrom) {
    let (delay, from) = ctx.politeness.config().delay_from(entry.crawl_delay(bot));
    let floor = ctx
        .config
        .bots
        .all()
        .get(bot)
        .map_or(Duration::ZERO, |b| b.limits.min_delay);
    match (floor > delay, host_floor > delay.max(floor)) {
        (_, true) => (host_floor, SpacingFrom::HostMinDelay),
        (true, false) => (floor, SpacingFrom::BotMinDelay),
        (false, false) => (delay, from),
    }
}

/// Step 4 in report mode. Report mode relaxes robots.txt, not the server
/// nor the operator: the turn is taken at the gate as any bot's is (the
/// server's slow-down, `per_host_concurrency`, `max_wait`, shutdown), spaced
/// by the proxy's own spacing (`politeness.default_delay` within
/// `min_delay` and `max_delay`, never more than robots.txt asks) instead of
/// robots.txt's Crawl-delay or the bot's `min_delay`; the wait those would
/// have added goes in the report.
async fn turn_reported(
    ctx: &Admission,
    server: &Server,
    bot: BotId,
    (entry, (delay, hold)): (&Entry, (Duration, Duration)),
    report: &mut Report,
) -> Result<(Permit, Duration), Refusal> {
    let politeness = ctx.politeness.config();
    let bot_max_wait = ctx.config.bots.get(bot).limits.max_wait;
    let max_wait = politeness.max_wait_for(bot_max_wait, server.name.scheme);
    let by = crate::politeness::after(Instant::now(), max_wait);
    let own = politeness
        .delay_for(None)
        .min(politeness.delay_for(entry.crawl_delay(bot)));
    let relaxed = own.min(delay);
    let robots_asks = politeness.delay_for(entry.crawl_delay(bot));
    drop(politeness);
    let would_wait = ctx.politeness.would_wait(server, delay);
    let (permit, waited) = turn(ctx, server, (relaxed, hold), (by, None)).await?;
    if would_wait > waited {
        let why = match delay > robots_asks {
            true => "min_delay",
            false => "crawl_delay",
        };
        report.turn(would_wait, max_wait, why);
    }
    Ok((permit, waited))
}

/// Fleet mode with the store down and `on_unavailable = "refuse"`: "slow
/// down" rather than risk a server getting each proxy's rate.
fn store_down(ctx: &Admission) -> Refusal {
    let retry_after = ctx
        .politeness
        .config()
        .delay_for(None)
        .max(Duration::from_secs(1));
    Refusal::SlowDown(SlowDown {
        retry_after,
        why: Busy::StoreDown,
    })
}
