//! One behaviour, two backends: the gate's turns, the robots.txt outcomes and
//! the certificate pins each have a local implementation and one on the
//! fleet's store (`Backends` in `server/generation.rs` picks one at start).
//! Each contract below is written once and run against both, so the fleet's
//! backend cannot drift from what a single proxy does.
//!
//! The store runs are marked `#[ignore = "needs redis-server"]`: a plain
//! `cargo test` runs the local ones; `cargo test -- --include-ignored` (what
//! `.ci/run` does, after installing redis-server) runs both.

use crate::redis_server;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis_server::RedisServer;
use robots_proxy::cache::{self, Lookup, RobotsCache, Rules};
use robots_proxy::config::RobotsConfig;
use robots_proxy::fetch::{FetchFuture, FetchOutcome, RobotsFetcher};
use robots_proxy::metrics::Metrics;
use robots_proxy::pins::{self, Mismatch, Pins};
use robots_proxy::politeness::{self, GateBy, Politeness, PolitenessConfig};
use robots_proxy::robots::BotProfile;
use robots_proxy::store::{OnUnavailable, Store, StoreConfig};
use robots_proxy::target::{HostKey, Scheme, Server};
use tokio_util::sync::CancellationToken;

/// Where a contract runs: this process alone, or a store.
enum Backend {
    Local,
    Fleet(Arc<Store>),
}

impl Backend {
    fn turns(&self, config: PolitenessConfig) -> Box<dyn politeness::Turns> {
        let here = Arc::new(politeness::Local::new(config));
        match self {
            Backend::Local => Box::new(here),
            Backend::Fleet(store) => Box::new(politeness::Fleet::new(store.clone(), here)),
        }
    }

    fn outcomes(&self) -> Box<dyn cache::Outcomes> {
        match self {
            Backend::Local => Box::<cache::Local>::default(),
            Backend::Fleet(store) => Box::new(cache::Fleet::new(store.clone())),
        }
    }

    fn pins(&self) -> Box<dyn pins::Keeper> {
        let book = pins::Book::in_memory();
        match self {
            Backend::Local => Box::new(pins::Local(book)),
            Backend::Fleet(store) => Box::new(pins::Fleet::new(store.clone(), book)),
        }
    }
}

async fn fleet(redis: &RedisServer) -> Backend {
    let config = StoreConfig {
        url: redis.url(),
        prefix: "contract:".into(),
        on_unavailable: OnUnavailable::Refuse,
        // A store that has just started holds a new gate for the health
        // check's second plus two deadlines (it may have lost the gate in a
        // restart): short deadlines keep that wait short here.
        timeout: Duration::from_millis(200),
        lease: Duration::from_secs(5),
    };
    let store = Store::open(config, Arc::new(Metrics::new()), CancellationToken::new())
        .await
        .expect("the store opens");
    Backend::Fleet(store)
}

fn server(host: &str) -> Server {
    Server {
        name: HostKey {
            scheme: Scheme::Gopher,
            host: host.into(),
            port: 70,
        },
        addrs: vec!["127.0.0.1:70".parse().unwrap()],
    }
}

/// The gate: a request at a new gate goes (a store that has just started
/// may hold it up to 1.4 s: see `fleet`); the next one, asking for a 30 s
/// spacing, is told to slow down for no longer than that; an upstream's
/// "slow down 600" holds the server that long; another server has its own
/// gate.
async fn gate_contract(backend: Backend) {
    let gate = Politeness::kept_by(backend.turns(gate_config()));
    let (soon, spaced) = (
        Some(Duration::from_millis(1)),
        Some(Duration::from_secs(30)),
    );
    let a = server("gate.example");
    drop(gate.admit(&a, soon).await.expect("a new gate admits"));
    let refused = gate
        .admit(&a, spaced)
        .await
        .err()
        .expect("inside the spacing");
    assert!(
        refused.retry_after > Duration::from_secs(20)
            && refused.retry_after <= Duration::from_secs(30),
        "{:?}",
        refused.retry_after
    );
    let b = server("other.example");
    let permit = gate.admit(&b, soon).await.expect("another server goes");
    permit
        .slow_down(&b.name, Some(Duration::from_secs(600)))
        .await;
    drop(permit);
    let held = gate.admit(&b, soon).await.err().expect("held by the 44");
    assert!(
        held.retry_after > Duration::from_secs(500),
        "{:?}",
        held.retry_after
    );
}

fn gate_config() -> PolitenessConfig {
    PolitenessConfig {
        default_delay: Duration::from_secs(30),
        min_delay: Duration::ZERO,
        max_delay: None,
        per_host_concurrency: 1,
        max_wait: Duration::from_secs(5),
        web_max_wait: Duration::from_secs(5),
        horizon: robots_proxy::politeness::HORIZON,
        max_queued: robots_proxy::politeness::queued_for(1024),
        max_slow_down: robots_proxy::politeness::MAX_SLOW_DOWN,
        key: GateBy::Host,
        web_backoff: Default::default(),
    }
}

/// Answers `Disallow: /p` and counts its fetches.
struct Counting(AtomicUsize);

impl RobotsFetcher for Counting {
    fn fetch<'a>(&'a self, _server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { FetchOutcome::Found(b"User-agent: *\nDisallow: /p\n".to_vec()) })
    }
}

fn robots_config() -> RobotsConfig {
    crate::common::test_config().robots
}

/// Robots.txt outcomes: a miss fetches once and the rules hold; the next
/// lookup is a hit; forgetting the host makes the next lookup fetch again.
async fn outcomes_contract(backend: Backend) {
    let fetcher = Arc::new(Counting(AtomicUsize::new(0)));
    let cache = RobotsCache::new(
        fetcher.clone(),
        robots_config(),
        vec![BotProfile::new("bot")],
    )
    .with_outcomes(backend.outcomes(), Duration::from_secs(1));
    let s = server("robots.example");
    let (entry, how) = cache.rules(&s, 0).await;
    assert_eq!(how, Lookup::Miss);
    let Rules::Found { policies, .. } = &entry.rules else {
        panic!("{:?}", entry.rules)
    };
    assert!(!policies[0].decide("/p").allowed());
    assert!(policies[0].decide("/q").allowed());
    assert_eq!(cache.rules(&s, 0).await.1, Lookup::Hit);
    assert_eq!(fetcher.0.load(Ordering::SeqCst), 1);
    assert!(cache.forget(&s.name).await, "it was cached");
    assert_eq!(cache.rules(&s, 0).await.1, Lookup::Miss);
    assert_eq!(
        fetcher.0.load(Ordering::SeqCst),
        2,
        "forgotten everywhere: fetched again"
    );
}

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/// Pins: the first certificate is pinned; it passes again, another is
/// refused with the pinned one named; forgetting lets the next one in.
async fn pins_contract(backend: Backend) {
    let pins = Pins::kept_by(backend.pins());
    assert_eq!(pins.check("pin.example", 1965, A).await, Ok(()));
    assert_eq!(pins.check("pin.example", 1965, A).await, Ok(()));
    assert_eq!(
        pins.check("pin.example", 1965, B).await,
        Err(Mismatch { pinned: A.into() })
    );
    assert_eq!(pins.check("pin.example", 1966, B).await, Ok(()), "per port");
    assert!(pins.forget("pin.example", 1965).await);
    assert_eq!(pins.check("pin.example", 1965, B).await, Ok(()));
    assert_eq!(pins.get("pin.example", 1965).as_deref(), Some(B));
}

#[tokio::test]
async fn gate_here() {
    gate_contract(Backend::Local).await;
}

#[tokio::test]
async fn outcomes_here() {
    outcomes_contract(Backend::Local).await;
}

#[tokio::test]
async fn pins_here() {
    pins_contract(Backend::Local).await;
}

#[tokio::test]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn gate_in_the_store() {
    let redis = RedisServer::start();
    gate_contract(fleet(&redis).await).await;
}

#[tokio::test]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn outcomes_in_the_store() {
    let redis = RedisServer::start();
    outcomes_contract(fleet(&redis).await).await;
}

#[tokio::test]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn pins_in_the_store() {
    let redis = RedisServer::start();
    pins_contract(fleet(&redis).await).await;
}

/// What makes the store the fleet's: a second proxy's backends see what the
/// first one's did (one pin, one fetch, one spacing).
#[tokio::test]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_second_proxy_sees_the_first_ones_state() {
    let redis = RedisServer::start();
    let (one, two) = (fleet(&redis).await, fleet(&redis).await);
    let (p1, p2) = (Pins::kept_by(one.pins()), Pins::kept_by(two.pins()));
    assert_eq!(p1.check("shared.example", 1965, A).await, Ok(()));
    assert_eq!(
        p2.check("shared.example", 1965, B).await,
        Err(Mismatch { pinned: A.into() })
    );
    let fetcher = Arc::new(Counting(AtomicUsize::new(0)));
    let caches = [&one, &two].map(|b| {
        RobotsCache::new(
            fetcher.clone(),
            robots_config(),
            vec![BotProfile::new("bot")],
        )
        .with_outcomes(b.outcomes(), Duration::from_secs(1))
    });
    let s = server("shared.example");
    for cache in &caches {
        assert_eq!(cache.rules(&s, 0).await.1, Lookup::Miss);
    }
    assert_eq!(
        fetcher.0.load(Ordering::SeqCst),
        1,
        "one fetch for the fleet"
    );
    let g1 = Politeness::kept_by(one.turns(gate_config()));
    let g2 = Politeness::kept_by(two.turns(gate_config()));
    drop(
        g1.admit(&s, Some(Duration::from_millis(1)))
            .await
            .expect("the first goes"),
    );
    let spaced = Some(Duration::from_secs(30));
    assert!(
        g2.admit(&s, spaced).await.is_err(),
        "one spacing for the fleet"
    );
}
