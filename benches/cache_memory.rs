//! Does `robots.cache_bytes` hold? Fills the robots.txt cache with 100 000
//! hosts through the same path a request takes (`RobotsCache::rules` with a
//! fetcher that answers at once), then compares what the cache says it weighs
//! with how much the process's resident memory grew.
//!
//!     cargo bench --bench cache_memory
//!
//! Hosts cycle through the shapes a crawl meets: no robots.txt, unreachable,
//! a small robots.txt, and the 50-rule benchmark file. The ratio
//! RSS growth / weighed bytes should stay within 0.75–1.25.

use std::sync::Arc;
use std::time::Duration;

#[path = "common/shapes.rs"]
mod shapes;

use robots_proxy::cache::RobotsCache;
use robots_proxy::config::{OnUnreachable, RobotsConfig};
use robots_proxy::robots::BotProfile;
use robots_proxy::target::{HostKey, Scheme, Server};
use shapes::{resident_bytes, Shapes};

const HOSTS: usize = 100_000;

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = RobotsConfig {
            ttl: Duration::from_secs(86_400),
            cache_bytes: 1 << 40,
            max_stale: Duration::from_secs(7 * 86_400),
            unreachable_retry: Duration::from_secs(60),
            on_unreachable: OnUnreachable::Disallow,
            fetch_timeout: Duration::from_secs(15),
            name_bot_in_request: false,
        };
        let server = |i: usize| Server {
            name: HostKey {
                scheme: Scheme::Gemini,
                host: format!("h{i}.capsule.example"),
                port: 1965,
            },
            addrs: Vec::new(),
        };
        println!(
            "{:<22} {:>8} {:>16} {:>16} {:>8}",
            "hosts", "count", "weighed B/host", "RSS B/host", "ratio"
        );
        // Each shape in a cache of its own, all kept alive, so memory freed by
        // one is not reused by the next; then all shapes mixed.
        let mut caches = Vec::new();
        for (name, shape) in [
            ("no robots.txt", Some(0)),
            ("unreachable", Some(1)),
            ("3-line robots.txt", Some(2)),
            ("50-rule robots.txt", Some(3)),
            ("mixed", None),
        ] {
            let cache = RobotsCache::new(
                Arc::new(Shapes),
                config.clone(),
                vec![BotProfile::new("examplebot")],
            );
            let hosts = if shape.is_some() { HOSTS / 4 } else { HOSTS };
            let index = |i: usize| match shape {
                Some(s) => 4 * i + s,
                None => i,
            };
            // Warm up the allocator's arenas, then measure from here.
            for i in 0..500 {
                cache.rules(&server(index(HOSTS + i)), 0).await;
            }
            let (_, weighed_before) = cache.usage().await;
            let before = resident_bytes();
            for i in 0..hosts {
                cache.rules(&server(index(i)), 0).await;
            }
            let (_, weighed) = cache.usage().await;
            let grown = resident_bytes().saturating_sub(before);
            let weighed = weighed - weighed_before;
            println!(
                "{name:<22} {hosts:>8} {:>16} {:>16} {:>8.2}",
                weighed / hosts as u64,
                grown / hosts as u64,
                grown as f64 / weighed as f64
            );
            caches.push(cache);
        }
    });
}
