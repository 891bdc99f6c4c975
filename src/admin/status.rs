//! What the status page and `/api/…` show, gathered from the running proxy
//! without sending anything anywhere: the recent hosts table, a host's cached
//! robots.txt with the lines each bot follows, and "explain" for a URL.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio::time::Instant;

use crate::bots::BotId;
use crate::cache::{Entry, Rules};
use crate::context::Context;
use crate::fate::{Class, Fate};
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

/// `/api/status`: the proxy, its bots and listeners, counts, recent hosts.
pub async fn status(ctx: &Context, filter: Option<&str>) -> Value {
    let per_minute: std::collections::HashMap<Arc<str>, Value> = ctx
        .recent
        .bot_minutes()
        .into_iter()
        .map(|(name, minutes)| (name, minutes_json(&minutes)))
        .collect();
    let bots: Vec<Value> = ctx
        .admission
        .config
        .bots
        .all()
        .iter()
        .map(|b| {
            json!({
                "name": b.name,
                "agent": b.profile.token(),
                "virtual_agents": b.profile.virtual_agents(),
                "mode": b.limits.mode.as_str(),
                "content_usage": b.profile.uses().iter().map(|u| u.as_str()).collect::<Vec<_>>(),
                "limits": limits_in_force(&b.limits),
                "budgets": budgets(ctx, b),
                "per_minute": per_minute.get(b.name.as_str()).cloned().unwrap_or_default(),
            })
        })
        .collect();
    let listeners: serde_json::Map<String, Value> = ctx
        .listens
        .iter()
        .map(|(l, addr)| (l.spec().page.to_string(), json!(addr.to_string())))
        .collect();
    let counts: serde_json::Map<String, Value> = ctx
        .admission
        .metrics
        .requests_by_decision()
        .into_iter()
        .map(|(d, n)| (d.to_string(), json!(n)))
        .collect();
    let mut hosts = Vec::new();
    for (key, activity) in ctx.recent.snapshot() {
        if filter.is_some_and(|f| !key.to_string().contains(f)) {
            continue;
        }
        hosts.push(host_row(ctx, &key, &activity).await);
    }
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_seconds": ctx.started.elapsed().as_secs(),
        "config_generation": ctx.admission.generation,
        "bots": bots,
        "listeners": listeners,
        "requests": counts,
        "pins": ctx.admission.upstream.pins().len(),
        "store": ctx.store.as_ref().map(|s| store(&s.topology())),
        "hosts": hosts,
    })
}

/// Fleet mode's store: its shape, the masters the health check last saw,
/// the restarts and failovers seen, how long since it was last found broken.
fn store(t: &crate::store::Topology) -> Value {
    json!({
        "kind": t.kind,
        "url": t.shown,
        "up": t.up,
        "on_unavailable": t.on_unavailable,
        "masters": t.masters.iter().map(|n| json!({"addr": n.addr, "run_id": n.run_id})).collect::<Vec<_>>(),
        "restarts_and_failovers": t.restarts,
        "broken_seconds_ago": t.since_break.map(secs),
    })
}

/// A bot's requests per minute, oldest first: `minutes_ago` and a count
/// per decision.
fn minutes_json(minutes: &[(u64, PerClass)]) -> Value {
    let rows: Vec<Value> = minutes
        .iter()
        .map(|(ago, counts)| {
            let mut row = serde_json::Map::new();
            row.insert("minutes_ago".into(), json!(ago));
            for class in Class::ALL {
                row.insert(class.as_str().into(), json!(counts[class.index()]));
            }
            Value::Object(row)
        })
        .collect();
    Value::Array(rows)
}

/// A bot's limits as the status page shows them: those set, by their keys.
fn limits_in_force(l: &crate::bots::limits::BotLimits) -> Value {
    let mut set = serde_json::Map::new();
    if !l.min_delay.is_zero() {
        set.insert("min_delay_seconds".into(), json!(secs(l.min_delay)));
    }
    if let Some(n) = l.concurrency {
        set.insert("concurrency".into(), json!(n));
    }
    if let Some(rate) = l.rate {
        set.insert("rate".into(), json!(rate.to_string()));
    }
    if let Some(n) = l.daily_requests_per_server {
        set.insert("daily_requests_per_server".into(), json!(n));
    }
    if !l.quiet_hours.is_empty() {
        let windows: Vec<String> = l.quiet_hours.iter().map(|w| w.to_string()).collect();
        set.insert("quiet_hours".into(), json!(windows));
    }
    Value::Object(set)
}

/// How many servers' budgets the status page lists per bot.
const BUDGET_ROWS: usize = 100;

/// A bot's daily budget per server: used in the last 24 hours, and left.
fn budgets(ctx: &Context, bot: &crate::bots::Bot) -> Value {
    let Some(limit) = bot.limits.daily_requests_per_server else {
        return Value::Null;
    };
    let rows: Vec<Value> = ctx
        .admission
        .limits
        .budget_used(&bot.name, BUDGET_ROWS)
        .into_iter()
        .map(|(server, used)| {
            json!({ "server": server, "used": used, "left": limit.saturating_sub(used) })
        })
        .collect();
    json!({ "per_server": limit, "servers": rows })
}

/// One row of the hosts table.
async fn host_row(ctx: &Context, key: &HostKey, activity: &Activity) -> Value {
    let entry = ctx.admission.robots.peek(key).await;
    let server = Server {
        name: key.clone(),
        addrs: activity.addrs.clone(),
    };
    let gate = ctx.admission.politeness.peek(&server);
    let now = Instant::now();
    json!({
        "key": key.to_string(),
        "scheme": key.scheme.as_str(),
        "host": key.host,
        "port": key.port,
        "robots": robots_state(entry.as_deref()),
        "crawl_delay": crawl_delays(ctx, entry.as_ref()),
        "spacing": spacings(ctx, entry.as_ref()),
        "queue": gate.map_or(0, |g| g.waiting),
        "in_flight": gate.map_or(0, |g| g.in_flight),
        "next_start_in_seconds": gate
            .and_then(|g| g.next_start)
            .map(|t| secs(t.saturating_duration_since(now))),
        "slow_down_factor": gate.map_or(1, |g| g.backoff),
        "requests": activity.requests,
        "refusals": activity.refusals,
        "errors": errors(activity),
        "last_seen_seconds_ago": activity.last_seen.map(ago),
        "last_refusal": activity.last_refusal.as_ref().map(|(at, outcome, detail)| json!({
            "seconds_ago": ago(*at),
            "outcome": outcome,
            "detail": detail,
            "robots_sha256": activity.last_refusal_robots.as_deref(),
        })),
    })
}

fn robots_state(entry: Option<&Entry>) -> Value {
    let Some(entry) = entry else {
        return json!({ "state": "not cached" });
    };
    let now = Instant::now();
    json!({
        "state": entry.state(),
        "sha256": entry.evidence().map(|e| e.sha256.to_string()),
        "fetched_unix": entry.evidence().map(|e| e.fetched_unix()),
        "age_seconds": entry.robots().map(|(_, _, at)| secs(now.saturating_duration_since(at))),
        "fresh_for_seconds": secs(entry.fresh_until().saturating_duration_since(now)),
        "detail": entry.detail(),
    })
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
fn per_bot(ctx: &Context, value: impl Fn(BotId) -> Value) -> Value {
    let map: serde_json::Map<String, Value> = ctx
        .admission
        .config
        .bots
        .all()
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.clone(), value(i)))
        .collect();
    Value::Object(map)
}

fn crawl_delays(ctx: &Context, entry: Option<&Arc<Entry>>) -> Value {
    let policies = entry.and_then(|e| policies(ctx, e)).unwrap_or_default();
    per_bot(ctx, |i| {
        json!(policies.get(i).and_then(|p| p.crawl_delay_secs()))
    })
}

/// Each bot's spacing at the host, and what it comes from: the setting,
/// and the robots.txt line for a Crawl-delay.
fn spacings(ctx: &Context, entry: Option<&Arc<Entry>>) -> Value {
    let Some(entry) = entry.map(|e| {
        e.for_generation(
            ctx.admission.generation,
            &ctx.admission.config.bots.profiles(),
        )
    }) else {
        return Value::Null;
    };
    let policies = policies(ctx, &entry).unwrap_or_default();
    per_bot(ctx, |i| {
        let (delay, from) = crate::admission::spacing_in_force(&ctx.admission, i, &entry);
        let policy = policies.get(i);
        let line = match from {
            SpacingFrom::CrawlDelay => policy.and_then(|p| p.crawl_delay_line()),
            _ => None,
        };
        let asked = policy.and_then(|p| p.crawl_delay_secs());
        json!({ "seconds": secs(delay), "from": from.key(), "line": line, "crawl_delay": asked })
    })
}

/// The requests to a host that ended in an error, by outcome (its cause).
fn errors(activity: &Activity) -> Value {
    let map: serde_json::Map<String, Value> = Fate::ALL
        .iter()
        .filter(|f| f.class() == Class::Error && activity.by_fate[f.index()] > 0)
        .map(|f| {
            let n = activity.by_fate[f.index()];
            (
                f.as_str().to_string(),
                json!({ "count": n, "cause": f.cause().as_str() }),
            )
        })
        .collect();
    Value::Object(map)
}

/// A server's recent starts against their spacing and its queue lengths,
/// as the host page draws them: times in seconds before now; the queue over
/// a window of at least ten seconds and at most
/// [`WINDOW`](crate::recent::series::WINDOW) that holds its points.
fn timeline(series: &Series) -> Value {
    let now = Instant::now();
    let ago = |t: Instant| secs(now.saturating_duration_since(t));
    let window = series
        .queue
        .front()
        .map_or(Duration::ZERO, |(t, _)| now.saturating_duration_since(*t))
        .clamp(Duration::from_secs(10), crate::recent::series::WINDOW);
    let mut before: Option<Instant> = None;
    let starts: Vec<Value> = series
        .starts
        .iter()
        .map(|s| {
            let gap = before.map(|b| s.at.saturating_duration_since(b));
            before = Some(s.at);
            json!({
                "seconds_ago": ago(s.at),
                "bot": &*s.bot,
                "spacing_seconds": secs(s.spacing),
                "gap_seconds": gap.map(secs),
                // Sooner than its spacing after the start before it.
                "early": gap.is_some_and(|g| g < s.spacing),
                "reported": s.reported,
            })
        })
        .collect();
    let queue: Vec<Value> = series
        .queue
        .iter()
        .map(|(t, n)| json!({ "seconds_ago": ago(*t), "waiting": n }))
        .collect();
    json!({ "window_seconds": secs(window), "starts": starts, "queue": queue })
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
pub async fn host(ctx: &Context, host: &str, port: u16) -> Value {
    let mut schemes = Vec::new();
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
        let row = match &activity {
            Some(a) => host_row(ctx, &key, a).await,
            None => json!({ "key": key.to_string(), "robots": robots_state(entry.as_deref()) }),
        };
        let text = entry
            .as_deref()
            .and_then(|e| e.robots())
            .map(|(_, body, _)| {
                String::from_utf8_lossy(body)
                    .lines()
                    .map(|l| l.to_string())
                    .collect::<Vec<_>>()
            });
        let followed: Vec<Value> = match entry.as_ref().and_then(|e| policies(ctx, e)) {
            Some(ps) => ctx
                .admission.config
                .bots
                .all()
                .iter()
                .zip(ps.iter())
                .map(|(b, p)| json!({ "bot": b.name, "lines": p.source_lines(), "groups": selected(p.selected()), "crawl_delay_line": p.crawl_delay_line() }))
                .collect(),
            None => Vec::new(),
        };
        let series = ctx.recent.series(&key).unwrap_or_default();
        schemes.push(json!({
            "summary": row,
            "robots_txt": text,
            "bots": followed,
            "timeline": timeline(&series),
        }));
    }
    let bots = ctx.admission.config.bots.names();
    json!({ "host": host, "port": port, "bots": bots, "entries": schemes })
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
pub async fn explain(ctx: &Context, url: &str) -> Value {
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(e) => {
            return json!({ "url": url, "error": format!("not a target the proxy serves: {e}") })
        }
    };
    let key = HostKey {
        scheme: target.scheme,
        host: target.host.clone(),
        port: target.port,
    };
    let entry = ctx.admission.robots.peek(&key).await;
    let state = robots_state(entry.as_deref());
    let bots = ctx.admission.config.bots.all();
    let verdicts: Vec<Value> = match entry.as_ref() {
        None => bots
            .iter()
            .map(|b| json!({ "bot": b.name, "decision": "unknown", "explanation": format!("robots.txt of {key} is not cached: the next request fetches it") }))
            .collect(),
        Some(e) => match policies(ctx, e) {
            Some(ps) => bots
                .iter()
                .zip(ps.iter())
                .map(|(b, p)| match target.decide(p, ctx.admission.config.selector_reading) {
                    Ok(d) => json!({
                        "bot": b.name,
                        "decision": if d.allowed() { "allow" } else { "disallow" },
                        "explanation": p.explain(&d).to_string().replace('\t', "; "),
                    }),
                    Err(err) => json!({ "bot": b.name, "decision": "error", "explanation": err.to_string() }),
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
                    .map(|b| json!({ "bot": b.name, "decision": decision, "explanation": why }))
                    .collect()
            }
        },
    };
    json!({
        "url": url,
        "canonical": target.url(),
        "key": key.to_string(),
        "robots": state,
        "bots": verdicts,
    })
}
