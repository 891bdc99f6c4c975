//! What the status page and `/api/…` show, gathered from the running proxy
//! without sending anything anywhere: the recent hosts table, a host's cached
//! robots.txt with the lines each bot follows, and "explain" for a URL.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use std::collections::{BTreeMap, HashMap};

use tokio::time::Instant;

use super::model::{
    self, BudgetRow, Budgets, ErrorCount, Explained, Followed, HostEntry, HostPage, HostRow,
    LastRefusal, Left, Minute, PerBot, QueuePoint, RecentRefusal, Robots, Spacing, StartMark,
    Status, Store, StoreNode, Timeline, Verdict,
};
use crate::bots::limits::{BotLimits, Mode};
use crate::bots::BotId;
use crate::cache::{Entry, Rules};
use crate::context::Context;
use crate::fate::{Class, Fate, Lost};
use crate::politeness::SpacingFrom;
use crate::protocol::Protocol;
use crate::recent::{Activity, PerClass, Series};
use crate::robots::{Policy, Selected};
use crate::target::{HostKey, Server, Target};

/// Seconds, rounded to milliseconds.
fn secs(d: std::time::Duration) -> f64 {
    (d.as_millis() as f64) / 1000.0
}

fn ago(t: SystemTime) -> f64 {
    secs(SystemTime::now().duration_since(t).unwrap_or_default())
}

/// How many of the latest refusals the status page lists.
pub const RECENT_REFUSALS: usize = 20;

/// `/api/status`: the proxy, its bots and listeners, counts, recent hosts.
pub async fn status(ctx: &Context, filter: Option<&str>) -> Status {
    let per_minute: HashMap<Arc<str>, Vec<Minute>> = ctx
        .recent
        .bot_minutes()
        .into_iter()
        .map(|(name, minutes)| (name, minute_rows(&minutes)))
        .collect();
    let limits = &ctx.admission.limits;
    let bots = ctx
        .admission
        .config
        .bots
        .all()
        .iter()
        .map(|b| {
            let budgets = budgets(ctx, b);
            model::Bot {
                name: b.name.clone(),
                agent: b.profile.token().to_string(),
                virtual_agents: b.profile.virtual_agents().to_vec(),
                mode: b.limits.mode.as_str().into(),
                content_usage: b.profile.uses().iter().map(|u| u.as_str().into()).collect(),
                limits: limits_set(&b.limits),
                left: left(limits.left(&b.name, &b.limits), budgets.as_ref()),
                budgets,
                per_minute: per_minute.get(b.name.as_str()).cloned().unwrap_or_default(),
            }
        })
        .collect();
    let listeners = ctx
        .listens
        .iter()
        .map(|(l, addr)| (l.spec().page.to_string(), addr.to_string()))
        .collect();
    let requests = ctx
        .admission
        .metrics
        .requests_by_decision()
        .into_iter()
        .map(|(d, n)| (d.to_string(), n))
        .collect();
    let mut hosts = Vec::new();
    for (key, activity) in ctx.recent.snapshot() {
        if filter.is_some_and(|f| !key.to_string().contains(f)) {
            continue;
        }
        hosts.push(host_row(ctx, &key, &activity).await);
    }
    let mut recent_refusals: Vec<RecentRefusal> = hosts
        .iter()
        .filter_map(|h| {
            let last = h.last_refusal.as_ref()?;
            Some(RecentRefusal {
                key: h.key.clone(),
                host_port: host_port(&h.host, h.port),
                refusal: LastRefusal {
                    seconds_ago: last.seconds_ago,
                    outcome: last.outcome.clone(),
                    detail: last.detail.clone(),
                    robots_sha256: last.robots_sha256.clone(),
                },
            })
        })
        .collect();
    recent_refusals.sort_by(|a, b| a.refusal.seconds_ago.total_cmp(&b.refusal.seconds_ago));
    recent_refusals.truncate(RECENT_REFUSALS);
    Status {
        version: env!("CARGO_PKG_VERSION").into(),
        uptime_seconds: ctx.started.elapsed().as_secs(),
        config_generation: ctx.admission.generation,
        bots,
        listeners,
        requests,
        pins: ctx.admission.upstream.pins().len(),
        store: ctx.store.as_ref().map(|s| store(&s.topology())),
        hosts,
        recent_refusals,
    }
}

/// `HOST:PORT`, as the host page's path has it (a canonical IPv6 host is
/// in brackets already).
pub(super) fn host_port(host: &str, port: u16) -> String {
    format!("{host}:{port}")
}

/// Fleet mode's store: its shape, the masters the health check last saw,
/// the restarts and failovers seen, how long since it was last found broken.
fn store(t: &crate::store::Topology) -> Store {
    Store {
        kind: t.kind.into(),
        url: t.shown.clone(),
        up: t.up,
        on_unavailable: t.on_unavailable.into(),
        masters: t
            .masters
            .iter()
            .map(|n| StoreNode {
                addr: n.addr.clone(),
                run_id: n.run_id.clone(),
            })
            .collect(),
        restarts_and_failovers: t.restarts,
        broken_seconds_ago: t.since_break.map(secs),
    }
}

/// A bot's requests per minute, oldest first.
fn minute_rows(minutes: &[(u64, PerClass)]) -> Vec<Minute> {
    minutes
        .iter()
        .map(|(ago, counts)| Minute {
            minutes_ago: *ago,
            allowed: counts[Class::Allowed.index()],
            disallowed: counts[Class::Disallowed.index()],
            slowed: counts[Class::Slowed.index()],
            error: counts[Class::Error.index()],
        })
        .collect()
}

/// A bot's limits as the status page shows them: those set, by their keys.
fn limits_set(l: &BotLimits) -> model::Limits {
    model::Limits {
        min_delay_seconds: (!l.min_delay.is_zero()).then(|| secs(l.min_delay)),
        max_wait_seconds: l.max_wait.map(secs),
        concurrency: l.concurrency,
        rate: l.rate.map(|r| r.to_string()),
        daily_requests_per_server: l.daily_requests_per_server,
        quiet_hours: l.quiet_hours.iter().map(|w| w.to_string()).collect(),
    }
}

/// What is left of each limit a bot sets, now.
fn left(counted: crate::admission::Left, budgets: Option<&Budgets>) -> Left {
    Left {
        concurrency: counted.concurrency,
        rate: counted.rate,
        daily_requests_per_server: budgets.map(|b| {
            b.servers
                .iter()
                .map(|s| s.left)
                .min()
                .unwrap_or(b.per_server)
        }),
        quiet_for_seconds: counted.quiet_for.map(secs),
    }
}

/// How many servers' budgets the status page lists per bot.
const BUDGET_ROWS: usize = 100;

/// A bot's daily budget per server: used in the last 24 hours, and left.
fn budgets(ctx: &Context, bot: &crate::bots::Bot) -> Option<Budgets> {
    let limit = bot.limits.daily_requests_per_server?;
    let servers = ctx
        .admission
        .limits
        .budget_used(&bot.name, BUDGET_ROWS)
        .into_iter()
        .map(|(server, used)| BudgetRow {
            server,
            used,
            left: limit.saturating_sub(used),
        })
        .collect();
    Some(Budgets {
        per_server: limit,
        enforced: bot.limits.mode == Mode::Enforce,
        servers,
    })
}

/// One row of the hosts table.
async fn host_row(ctx: &Context, key: &HostKey, activity: &Activity) -> HostRow {
    let entry = ctx.admission.robots.peek(key).await;
    let server = Server {
        name: key.clone(),
        addrs: activity.addrs.clone(),
    };
    let gate = ctx.admission.politeness.peek(&server);
    let now = Instant::now();
    HostRow {
        key: key.to_string(),
        scheme: key.scheme.as_str().into(),
        host: key.host.clone(),
        port: key.port,
        robots: robots_state(entry.as_deref()),
        crawl_delay: crawl_delays(ctx, entry.as_ref()),
        spacing: spacings(ctx, entry.as_ref(), &key.host),
        queue: gate.map_or(0, |g| g.waiting),
        in_flight: gate.map_or(0, |g| g.in_flight),
        next_start_in_seconds: gate
            .and_then(|g| g.next_start)
            .map(|t| secs(t.saturating_duration_since(now))),
        slow_down_factor: gate.map_or(1, |g| g.backoff),
        requests: activity.requests,
        refusals: activity.refusals,
        errors: errors(activity),
        lost: lost(activity),
        last_seen_seconds_ago: activity.last_seen.map(ago),
        last_refusal: activity
            .last_refusal
            .as_ref()
            .map(|(at, outcome, detail)| LastRefusal {
                seconds_ago: ago(*at),
                outcome: outcome.to_string(),
                detail: detail.clone(),
                robots_sha256: activity.last_refusal_robots.as_deref().map(String::from),
            }),
    }
}

fn robots_state(entry: Option<&Entry>) -> Robots {
    let Some(entry) = entry else {
        return Robots {
            state: "not cached".into(),
            sha256: None,
            fetched_unix: None,
            age_seconds: None,
            fresh_for_seconds: None,
            detail: None,
        };
    };
    let now = Instant::now();
    Robots {
        state: entry.state().into(),
        sha256: entry.evidence().map(|e| e.sha256.to_string()),
        fetched_unix: entry.evidence().map(|e| e.fetched_unix()),
        age_seconds: entry
            .robots()
            .map(|(_, _, at)| secs(now.saturating_duration_since(at))),
        fresh_for_seconds: Some(secs(entry.fresh_until().saturating_duration_since(now))),
        detail: entry.detail().map(String::from),
    }
}

/// The entry's policies for the context's bots (compiled again when a
/// reload changed the bots since it was cached).
fn policies(ctx: &Context, entry: &Arc<Entry>) -> Option<Vec<Policy>> {
    let entry = entry.for_generation(
        ctx.admission.generation,
        &ctx.admission.config.bots.profiles(),
    );
    match &entry.rules {
        Rules::Found { policies, .. } => Some(policies.to_vec()),
        _ => None,
    }
}

/// A value per bot, by its name.
fn per_bot<T>(ctx: &Context, value: impl Fn(BotId) -> T) -> PerBot<T> {
    PerBot(
        ctx.admission
            .config
            .bots
            .all()
            .iter()
            .enumerate()
            .map(|(i, b)| (b.name.clone(), value(i)))
            .collect(),
    )
}

fn crawl_delays(ctx: &Context, entry: Option<&Arc<Entry>>) -> PerBot<Option<f64>> {
    let policies = entry.and_then(|e| policies(ctx, e)).unwrap_or_default();
    per_bot(ctx, |i| policies.get(i).and_then(|p| p.crawl_delay_secs()))
}

/// Each bot's spacing at the host, and what it comes from: the setting,
/// and the robots.txt line for a Crawl-delay.
fn spacings(ctx: &Context, entry: Option<&Arc<Entry>>, host: &str) -> Option<PerBot<Spacing>> {
    let entry = entry.map(|e| {
        e.for_generation(
            ctx.admission.generation,
            &ctx.admission.config.bots.profiles(),
        )
    })?;
    let policies = policies(ctx, &entry).unwrap_or_default();
    Some(per_bot(ctx, |i| {
        let (delay, from) = crate::admission::spacing_in_force(&ctx.admission, i, &entry, host);
        let policy = policies.get(i);
        let line = match from {
            SpacingFrom::CrawlDelay => policy.and_then(|p| p.crawl_delay_line()),
            _ => None,
        };
        Spacing {
            seconds: secs(delay),
            from: from.key().into(),
            line,
            crawl_delay: policy.and_then(|p| p.crawl_delay_secs()),
        }
    }))
}

/// The pages crawlers lost at a host, by why.
fn lost(activity: &Activity) -> BTreeMap<String, u64> {
    Lost::ALL
        .iter()
        .filter(|l| activity.lost[l.index()] > 0)
        .map(|l| (l.as_str().to_string(), activity.lost[l.index()]))
        .collect()
}

/// The requests to a host that ended in an error, by outcome (its cause).
fn errors(activity: &Activity) -> BTreeMap<String, ErrorCount> {
    Fate::ALL
        .iter()
        .filter(|f| f.class() == Class::Error && activity.by_fate[f.index()] > 0)
        .map(|f| {
            let count = activity.by_fate[f.index()];
            (
                f.as_str().to_string(),
                ErrorCount {
                    count,
                    cause: f.cause().as_str().into(),
                },
            )
        })
        .collect()
}

/// A server's recent starts against their spacing and its queue lengths,
/// as the host page draws them: times in seconds before now; the queue over
/// a window of at least ten seconds and at most
/// [`WINDOW`](crate::recent::series::WINDOW) that holds its points. An
/// enforced start is measured from the enforced start before it (a bot in
/// report mode is not held, and holds no one back); a reported start from
/// any start before it.
fn timeline(series: &Series) -> Timeline {
    let now = Instant::now();
    let ago = |t: Instant| secs(now.saturating_duration_since(t));
    let window = series
        .queue
        .front()
        .map_or(Duration::ZERO, |(t, _)| now.saturating_duration_since(*t))
        .clamp(Duration::from_secs(10), crate::recent::series::WINDOW);
    let mut any_before: Option<Instant> = None;
    let mut enforced_before: Option<Instant> = None;
    let starts = series
        .starts
        .iter()
        .map(|s| {
            let before = match s.reported {
                true => any_before,
                false => enforced_before,
            };
            let gap = before.map(|b| s.at.saturating_duration_since(b));
            any_before = Some(s.at);
            if !s.reported {
                enforced_before = Some(s.at);
            }
            StartMark {
                seconds_ago: ago(s.at),
                bot: s.bot.to_string(),
                spacing_seconds: secs(s.spacing),
                gap_seconds: gap.map(secs),
                early: gap.is_some_and(|g| g < s.spacing),
                reported: s.reported,
            }
        })
        .collect();
    let queue = series
        .queue
        .iter()
        .map(|(t, n)| QueuePoint {
            seconds_ago: ago(*t),
            waiting: *n,
        })
        .collect();
    Timeline {
        window_seconds: secs(window),
        starts,
        queue,
    }
}

/// `HOST:PORT` (IPv6 in brackets) as the status page's paths write it.
pub fn parse_host_port(text: &str) -> Option<(String, u16)> {
    let (host, port) = text.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = crate::target::canonical_host(host).ok()?;
    Some((host, port))
}

/// `/api/host/HOST:PORT`: each scheme's cached robots.txt there, its lines,
/// and which lines each bot follows.
pub async fn host(ctx: &Context, host: &str, port: u16) -> HostPage {
    let mut entries = Vec::new();
    for scheme in Protocol::ALL.iter().map(|p| p.scheme()) {
        let key = HostKey {
            scheme,
            host: host.to_string(),
            port,
        };
        let entry = ctx.admission.robots.peek(&key).await;
        let activity = ctx.recent.get(&key);
        if entry.is_none() && activity.is_none() {
            continue;
        }
        let summary = host_row(ctx, &key, &activity.unwrap_or_default()).await;
        let robots_txt = entry
            .as_deref()
            .and_then(|e| e.robots())
            .map(|(_, body, _)| {
                String::from_utf8_lossy(body)
                    .lines()
                    .map(|l| l.to_string())
                    .collect::<Vec<_>>()
            });
        let bots = match entry.as_ref().and_then(|e| policies(ctx, e)) {
            Some(ps) => ctx
                .admission
                .config
                .bots
                .all()
                .iter()
                .zip(ps.iter())
                .map(|(b, p)| Followed {
                    bot: b.name.clone(),
                    lines: p.source_lines(),
                    groups: selected(p.selected()).into(),
                    crawl_delay_line: p.crawl_delay_line(),
                })
                .collect(),
            None => Vec::new(),
        };
        let series = ctx.recent.series(&key).unwrap_or_default();
        entries.push(HostEntry {
            summary,
            robots_txt,
            bots,
            timeline: timeline(&series),
        });
    }
    HostPage {
        host: host.to_string(),
        port,
        bots: ctx
            .admission
            .config
            .bots
            .names()
            .into_iter()
            .map(String::from)
            .collect(),
        fleet: ctx.store.is_some(),
        entries,
    }
}

fn selected(s: Selected) -> &'static str {
    match s {
        Selected::OwnToken => "its own product token",
        Selected::VirtualAgents => "its virtual agents",
        Selected::Star => "*",
        Selected::Nothing => "none (everything allowed)",
    }
}

/// "Explain": what the proxy would decide for `url`, per bot, from the
/// robots.txt it has cached (nothing is fetched): the verdict, the group and
/// the rule, as `robots-proxy check --explain` prints them.
pub async fn explain(ctx: &Context, url: &str) -> Explained {
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(e) => {
            return Explained {
                url: url.to_string(),
                error: Some(format!("not a target the proxy serves: {e}")),
                canonical: None,
                key: None,
                robots: None,
                bots: Vec::new(),
            }
        }
    };
    let key = HostKey {
        scheme: target.scheme,
        host: target.host.clone(),
        port: target.port,
    };
    let entry = ctx.admission.robots.peek(&key).await;
    let bots = ctx.admission.config.bots.all();
    let verdict = |b: &crate::bots::Bot, decision: &'static str, explanation: String| Verdict {
        bot: b.name.clone(),
        decision: decision.into(),
        explanation,
    };
    // As the target's servers read a path.
    let paths = crate::protocol::rules::of(target.scheme).paths;
    let verdicts: Vec<Verdict> = match entry.as_ref() {
        None => bots
            .iter()
            .map(|b| {
                verdict(
                    b,
                    "unknown",
                    format!("robots.txt of {key} is not cached: the next request fetches it"),
                )
            })
            .collect(),
        Some(e) => match policies(ctx, e) {
            Some(ps) => bots
                .iter()
                .zip(ps.iter())
                .map(|(b, p)| {
                    match target.decide(p, (paths, ctx.admission.config.selector_reading)) {
                        Ok(d) => verdict(
                            b,
                            if d.allowed() { "allow" } else { "disallow" },
                            p.explain(&d).to_string().replace('\t', "; "),
                        ),
                        Err(err) => verdict(b, "error", err.to_string()),
                    }
                })
                .collect(),
            None => {
                let (decision, why) = match e.state() {
                    "missing" => ("allow", format!("no robots.txt at {key}: everything is allowed")),
                    "unreachable" => match ctx.admission.robots.on_unreachable() {
                        crate::config::OnUnreachable::Allow => ("allow", format!("robots.txt of {key} is unreachable; robots.on_unreachable = \"allow\"")),
                        crate::config::OnUnreachable::Disallow => ("disallow", format!("robots.txt of {key} is unreachable and there is no good copy")),
                    },
                    other => ("unknown", format!("robots.txt state: {other}")),
                };
                bots.iter()
                    .map(|b| verdict(b, decision, why.clone()))
                    .collect()
            }
        },
    };
    Explained {
        url: url.to_string(),
        error: None,
        canonical: Some(target.url()),
        key: Some(key.to_string()),
        robots: Some(robots_state(entry.as_deref())),
        bots: verdicts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host page's path reads back as the host and port it names, an
    /// IPv6 host too (once bracketed, not twice).
    #[test]
    fn a_host_page_path_reads_back() {
        for (host, port) in [("capsule.example", 1965), ("127.0.0.1", 70), ("[::1]", 443)] {
            let canonical = crate::target::canonical_host(host).unwrap();
            let path = host_port(&canonical, port);
            assert_eq!(parse_host_port(&path), Some((canonical, port)), "{path}");
        }
    }
}
