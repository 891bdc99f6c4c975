//! A million hosts: what the robots.txt cache and the politeness table cost
//! per host, and whether looking one up stays flat as they grow.
//!
//!     cargo bench --bench scale              # 1,000,000 hosts (about 3 GiB of RAM)
//!     cargo bench --bench scale -- 200000    # fewer
//!
//! Synthetic and in process, through the same calls a request makes:
//! `Politeness::admit` and `RobotsCache::rules` (with a fetcher that answers
//! at once, in the four shapes of `benches/cache_memory.rs`). First the
//! politeness table: at 1 k, 100 k and 1 M servers, resident memory per
//! server, the time of a new server's admission and of 100,000 lookups of
//! servers already there (random order); then one sweep over the full table
//! with nothing to forget and with everything to forget, slice by slice as the
//! sweeper does it (its whole time, and the longest hold of the lock). Then a cache bounded by `robots.cache_bytes` asked for every host:
//! its resident memory against the bound. Last, an unbounded cache at 1 k,
//! 100 k and 1 M hosts: memory per host and hit lookups.

use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "common/shapes.rs"]
mod shapes;

use robots_proxy::cache::RobotsCache;
use robots_proxy::config::{OnUnreachable, RobotsConfig};
use robots_proxy::politeness::{GateBy, Politeness, PolitenessConfig, SWEEP_SLICE};
use robots_proxy::robots::BotProfile;
use robots_proxy::target::{HostKey, Scheme, Server};
use shapes::{resident_bytes, Shapes};

fn server(i: usize) -> Server {
    Server {
        name: HostKey {
            scheme: Scheme::Gemini,
            host: format!("h{i}.capsule.example"),
            port: 1965,
        },
        addrs: vec![std::net::SocketAddr::from((
            [10, (i >> 16) as u8, (i >> 8) as u8, i as u8],
            1965,
        ))],
    }
}

/// A fixed pseudo-random order of `n` indices below `below` (xorshift).
fn sample(n: usize, below: usize) -> Vec<usize> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % below as u64) as usize
        })
        .collect()
}

fn robots_config(cache_bytes: u64) -> RobotsConfig {
    RobotsConfig {
        ttl: Duration::from_secs(86_400),
        cache_bytes,
        max_stale: Duration::from_secs(7 * 86_400),
        unreachable_retry: Duration::from_secs(86_400),
        on_unreachable: OnUnreachable::Disallow,
        fetch_timeout: Duration::from_secs(15),
        name_bot_in_request: false,
    }
}

const LOOKUPS: usize = 100_000;

const PARTS: [&str; 3] = ["politeness", "bounded", "cache"];

/// Each part runs in a process of its own, so memory one frees cannot be
/// reused by the next and hide its growth.
/// One sweep as the sweeper does it, slice by slice: its whole time and the
/// holds of the lock (one per slice): median, 99th percentile and longest,
/// in milliseconds.
fn sweep_in_slices(politeness: &Politeness) -> (f64, [f64; 3]) {
    let mut sweep = politeness.start_sweep();
    let mut holds = Vec::new();
    loop {
        let t = Instant::now();
        if !sweep.next_slice() {
            break;
        }
        holds.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let total = holds.iter().sum();
    holds.sort_by(f64::total_cmp);
    let at = |q: f64| {
        holds
            .get((q * holds.len() as f64) as usize)
            .or(holds.last())
            .copied()
    };
    let holds = [at(0.5), at(0.99), holds.last().copied()].map(|h| h.unwrap_or(0.0));
    (total, holds)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let total: usize = args
        .iter()
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let Some(part) = args.iter().find(|a| PARTS.contains(&a.as_str())) else {
        for part in PARTS {
            let status = std::process::Command::new(std::env::current_exe().unwrap())
                .args([part.to_string(), total.to_string()])
                .status()
                .unwrap();
            assert!(status.success(), "{part}");
        }
        return;
    };
    run(part, total);
}

fn run(part: &str, total: usize) {
    let checkpoints: Vec<usize> = [1_000, 100_000, 1_000_000]
        .into_iter()
        .filter(|&c| c <= total)
        .collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        if part == "politeness" {
        // The gates' clock stands still while the table fills (2 s or more at
        // 1 M), so no gate is idle at the first sweep; the sleep before the
        // second moves it past every gate's spacing.
        tokio::time::pause();
        println!("politeness table, one gate per server:");
        println!(
            "{:>10} {:>14} {:>18} {:>18}",
            "servers", "RSS B/server", "new admission ns", "peek ns"
        );
        let politeness = Politeness::new(PolitenessConfig {
            default_delay: Duration::from_secs(1),
            min_delay: Duration::ZERO,
            max_delay: None,
            per_host_concurrency: 1,
            max_wait: Duration::from_secs(60),
            web_max_wait: robots_proxy::politeness::WEB_MAX_WAIT,
            horizon: robots_proxy::politeness::HORIZON,
            max_queued: robots_proxy::politeness::queued_for(1024),
            max_slow_down: robots_proxy::politeness::MAX_SLOW_DOWN,
            key: GateBy::Address,
            web_backoff: Default::default(),
        });
        let before = resident_bytes();
        let mut filled = 0;
        for &at in &checkpoints {
            let servers: Vec<Server> = (filled..at).map(server).collect();
            let t = Instant::now();
            for s in &servers {
                drop(politeness.admit(s, None).await.expect("a new gate admits at once"));
            }
            let admit = t.elapsed().as_nanos() as f64 / servers.len() as f64;
            drop(servers);
            filled = at;
            let grown = resident_bytes().saturating_sub(before);
            let keys: Vec<Server> = sample(LOOKUPS, at).into_iter().map(server).collect();
            let t = Instant::now();
            for k in &keys {
                std::hint::black_box(politeness.peek(k));
            }
            let peek = t.elapsed().as_nanos() as f64 / LOOKUPS as f64;
            println!(
                "{at:>10} {:>14} {admit:>18.0} {peek:>18.0}",
                grown / at as u64
            );
        }
        let (total, [p50, p99, max]) = sweep_in_slices(&politeness);
        let kept = politeness.usage().0;
        println!(
            "sweep over {filled} gates, none idle yet: {total:.1} ms; lock held per slice of {SWEEP_SLICE}: \
             p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms ({kept} kept)"
        );
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let (total, [p50, p99, max]) = sweep_in_slices(&politeness);
        println!(
            "sweep over {filled} gates, all idle: {total:.1} ms; lock held per slice of {SWEEP_SLICE}: \
             p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms ({} kept)",
            politeness.usage().0
        );

        }
        if part == "bounded" {
        let bound: u64 = 64 << 20;
        let bounded = RobotsCache::new(
            Arc::new(Shapes),
            robots_config(bound),
            vec![BotProfile::new("examplebot")],
        );
        let before = resident_bytes();
        for i in 0..total {
            bounded.rules(&server(total + i), 0).await;
        }
        let (entries, weighed) = bounded.usage().await;
        let grown = resident_bytes().saturating_sub(before);
        println!(
            "\ncache_bytes = {} MiB, {total} hosts asked: {entries} kept, weighed {:.1} MiB, RSS grew {:.1} MiB",
            bound >> 20,
            weighed as f64 / (1 << 20) as f64,
            grown as f64 / (1 << 20) as f64
        );
        println!();
        }
        if part == "cache" {
        println!("robots.txt cache (unbounded), hosts in four shapes:");
        println!(
            "{:>10} {:>14} {:>16} {:>18}",
            "hosts", "RSS B/host", "weighed B/host", "hit lookup ns"
        );
        let cache = RobotsCache::new(
            Arc::new(Shapes),
            robots_config(1 << 40),
            vec![BotProfile::new("examplebot")],
        );
        let before = resident_bytes();
        let mut filled = 0;
        for &at in &checkpoints {
            for i in filled..at {
                cache.rules(&server(i), 0).await;
            }
            filled = at;
            let grown = resident_bytes().saturating_sub(before);
            let (_, weighed) = cache.usage().await;
            let keys: Vec<Server> = sample(LOOKUPS, at).into_iter().map(server).collect();
            let t = Instant::now();
            for k in &keys {
                std::hint::black_box(cache.rules(k, 0).await);
            }
            let per = t.elapsed().as_nanos() as f64 / LOOKUPS as f64;
            println!(
                "{at:>10} {:>14} {:>16} {per:>18.0}",
                grown / at as u64,
                weighed / at as u64
            );
        }

        }
    });
}
