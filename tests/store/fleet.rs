//! Fleet mode (`[store]`): proxies in one process sharing a real redis-server
//! on a unix socket, from the other side: a crawler spreading its requests over
//! the fleet to get N times a server's rate, an upstream's `44` dodged by asking
//! another proxy, a proxy that dies holding a lease, a capsule whose
//! certificate changes behind one proxy's back, the store killed under load.
//!
//! Each test starts Debian's `redis-server`, so each is marked
//! `#[ignore = "needs redis-server"]`: a plain `cargo test` says it left them
//! out; `cargo test -- --include-ignored` (what `.ci/run` does, after
//! installing it) runs them.

use crate::redis_server;
use std::time::Duration;

use crate::common::*;
use redis_server::RedisServer;
use robots_proxy::config::Config;
use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use robots_proxy::store::{OnUnavailable, StoreConfig};

fn fleet_config(redis: &RedisServer, on_unavailable: OnUnavailable) -> Config {
    with_store(test_config(), redis, on_unavailable)
}

pub(crate) fn with_store(
    mut config: Config,
    redis: &RedisServer,
    on_unavailable: OnUnavailable,
) -> Config {
    config.store = Some(StoreConfig {
        url: redis.url(),
        prefix: "test:".into(),
        on_unavailable,
        // Generous: on a loaded 2-core CI machine a 300 ms deadline was once
        // missed, and the proxy rightly fell back to its own fetch.
        timeout: Duration::from_secs(1),
        lease: Duration::from_secs(1),
    });
    config
}

async fn fleet(redis: &RedisServer, n: usize, on_unavailable: OnUnavailable) -> Vec<Proxy> {
    let mut proxies = Vec::new();
    for _ in 0..n {
        proxies.push(start_proxy(fleet_config(redis, on_unavailable)).await);
    }
    proxies
}

/// `n` requests at once for `0/p0`, `0/p1`, … at `origin`, spread over the
/// proxies in turn; their answers.
async fn spread(proxies: &[Proxy], origin: &GopherOrigin, n: usize) -> Vec<Vec<u8>> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let proxy = proxies[i % proxies.len()].addr(Listener::Gopher);
            let url = origin.url(&format!("0/p{i}"));
            tokio::spawn(async move { gopher(proxy, url.as_bytes()).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

fn first(answer: &[u8]) -> String {
    first_line(answer)
}

/// A Gopher server that allows everything and answers every page `text`
/// after `takes`.
async fn slow_hole(takes: Duration) -> GopherOrigin {
    hole(
        Reply::Bytes(b"User-agent: *\nAllow: /\n".to_vec()),
        Reply::Delayed(takes, b"text\r\n".to_vec()),
    )
    .await
}

/// A Gopher server whose robots.txt is `robots` and every page `text`.
async fn text_hole(robots: &str) -> GopherOrigin {
    text_hole_on(machine(1), robots).await
}

/// A crawler that spreads its requests over two proxies still gets the
/// Crawl-delay once: the server sees starts spaced by it, and robots.txt
/// fetched once for the fleet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn two_proxies_share_one_spacing_and_one_robots_fetch() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 0.25\n").await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    for answer in spread(&proxies, &origin, 6).await {
        assert_eq!(answer, b"text\r\n");
    }
    assert_eq!(origin.count(b"robots.txt"), 1, "{:?}", origin.all());
    let gaps = origin.gaps();
    assert_eq!(gaps.len(), 6);
    // The robots.txt fetch has no Crawl-delay of its own (default_delay 0
    // here); every page start is 250 ms after the one before, whichever proxy.
    assert_spaced(&gaps[1..], 0.25);
    // The status page says what the store is: one server, up, never broken.
    let (code, body) = http_get(proxies[0].addr(Listener::Admin), "/api/status").await;
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let store = &status["store"];
    assert_eq!(
        (
            &store["kind"],
            &store["up"],
            &store["on_unavailable"],
            &store["broken_seconds_ago"]
        ),
        (
            &"single".into(),
            &true.into(),
            &"refuse".into(),
            &serde_json::Value::Null
        ),
        "{store}"
    );
    assert_eq!(
        store["masters"].as_array().map(Vec::len),
        Some(1),
        "{store}"
    );
    // The page shows it too, and the host page says whose starts it draws.
    let (_, page) = http_get(proxies[0].addr(Listener::Admin), "/").await;
    assert!(
        page.contains("fleet store <span class=\"up\">up</span>"),
        "{page}"
    );
    assert!(page.contains("<h2>Fleet store</h2>"), "{page}");
    assert!(
        page.contains("<tr><th>kind</th><td>single</td></tr>"),
        "{page}"
    );
    assert!(page.contains("on_unavailable = \"refuse\""), "{page}");
    let (_, host) = http_get(
        proxies[0].addr(Listener::Admin),
        &format!("/host/127.0.0.1:{}", origin.addr.port()),
    )
    .await;
    assert!(
        host.contains("Fleet mode: the starts and the queue shown are this proxy's."),
        "{host}"
    );
}

/// A proxy that died holding a lease (its renewals stopped) holds the cap
/// only until the lease expires: then the fleet goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_vanished_proxys_lease_expires() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nAllow: /\n").await;
    let proxies = fleet(&redis, 1, OnUnavailable::Refuse).await;
    let proxy = proxies[0].addr(Listener::Gopher);
    // Warm: robots.txt known, the gate exists.
    assert_eq!(
        gopher(proxy, origin.url("0/a").as_bytes()).await,
        b"text\r\n"
    );
    // What a proxy killed mid-request leaves: a lease 1 s long, never renewed.
    let mut conn = redis.connection().await;
    let leases = "test:{a/127.0.0.1}:leases";
    let now: (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let expiry = now.0 * 1_000_000 + now.1 + 1_000_000;
    let _: i64 = redis::cmd("ZADD")
        .arg(leases)
        .arg(expiry)
        .arg("ghost")
        .query_async(&mut conn)
        .await
        .unwrap();
    let started = std::time::Instant::now();
    assert_eq!(
        gopher(proxy, origin.url("0/b").as_bytes()).await,
        b"text\r\n"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(800) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    // Every key the gate wrote expires on its own.
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("test:*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!keys.is_empty());
    for key in keys {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        // -1: no time to live; -2: gone since KEYS (a lease set emptied).
        assert_ne!(ttl, -1, "{key} has no time to live");
    }
}

/// An upstream `44 2` through one proxy holds the server for the whole
/// fleet: retrying at once through the other proxy waits the 2 s too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn an_upstream_slow_down_is_seen_by_every_proxy() {
    let redis = RedisServer::start();
    let origin = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            text("20 text/plain", "User-agent: *\nAllow: /\n")
        } else if url.ends_with("/busy") {
            text("44 2", "")
        } else {
            text("20 text/gemini", "page")
        }
    })
    .await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    assert_eq!(
        gemini(proxies[0].addr(Listener::Gemini), &origin.url("/busy"))
            .await
            .0,
        "44 2"
    );
    let started = std::time::Instant::now();
    assert_eq!(
        gemini(proxies[1].addr(Listener::Gemini), &origin.url("/page"))
            .await
            .0,
        "20 text/gemini"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    // robots.txt once for both.
    assert_eq!(origin.count("/robots.txt"), 1, "{:?}", origin.all());
}

/// Three capsules on one machine (127.0.0.1, three ports), two proxies. One
/// capsule answers `44 999999999999`, another a bare `44`: through the
/// other proxy, each is held back (a day at most, `max_slow_down`; the
/// doubled spacing), and the third capsule, their neighbour, is served at
/// once: a slow-down holds the server that asked, not its machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_capsules_slow_down_holds_only_that_capsule_across_the_fleet() {
    let redis = RedisServer::start();
    let answering = |slow: &'static str| {
        move |url: &str| match url {
            u if u.ends_with("/robots.txt") => text("20 text/plain", ""),
            u if u.ends_with("/slow") => text(slow, ""),
            _ => text("20 text/gemini", "page"),
        }
    };
    let century = Origin::start(answering("44 999999999999")).await;
    let bare = Origin::start(answering("44")).await;
    let neighbour = Origin::start(answering("20 text/gemini")).await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    let (first, second) = (
        proxies[0].addr(Listener::Gemini),
        proxies[1].addr(Listener::Gemini),
    );
    // (A young store holds a machine's first start a little: waited here.)
    assert_eq!(
        gemini(first, &neighbour.url("/warm")).await.0,
        "20 text/gemini"
    );
    let (header, _) = gemini(first, &century.url("/slow")).await;
    assert!(header.starts_with("44 "), "{header}");
    assert_eq!(gemini(first, &bare.url("/slow")).await.0, "44");
    let started = std::time::Instant::now();
    assert_eq!(
        gemini(second, &neighbour.url("/page")).await.0,
        "20 text/gemini"
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    let (header, _) = gemini(second, &century.url("/again")).await;
    let secs: u64 = header
        .strip_prefix("44 ")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("{header}"));
    assert!((24 * 3600 - 60..=24 * 3600).contains(&secs), "{header}");
    assert_eq!(century.count("/again"), 0);
    // The bare 44's back-off: 2 s from its start (its spacing doubled from
    // the 1 s floor), for this capsule only.
    let (header, _) = gemini(second, &bare.url("/again")).await;
    assert_eq!(header, "20 text/gemini");
    assert!(
        started.elapsed() >= Duration::from_millis(1800),
        "{:?}",
        started.elapsed()
    );
    let started = std::time::Instant::now();
    assert_eq!(
        gemini(second, &neighbour.url("/more")).await.0,
        "20 text/gemini"
    );
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}

/// Trust on first use for the fleet: a capsule that changes its certificate
/// after one proxy met it is refused by another proxy that never met it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn certificate_pins_are_shared() {
    let redis = RedisServer::start();
    let first = capsule(text("51 none", ""), text("20 text/gemini", "first")).await;
    let addr = first.addr;
    let url = first.url("/");
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    assert_eq!(
        gemini(proxies[0].addr(Listener::Gemini), &url).await.0,
        "20 text/gemini"
    );
    first.stop().await;
    let _second = Origin::start_on(addr, |_| text("20 text/gemini", "second")).await;
    let (header, body) = gemini(proxies[1].addr(Listener::Gemini), &url).await;
    assert!(header.starts_with("43 "), "{header}");
    assert!(header.contains("trust on first use"), "{header}");
    assert!(body.is_empty());
}

/// Clients hammering two proxies while the store is killed and started
/// again: with `refuse`, nothing is relayed while it is down (every answer is
/// a relay or a slow-down, never an error); once it is back, requests are
/// relayed again without a restart, and the errors were counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn the_store_killed_and_restarted_under_load_refuse() {
    let relayed_while_down = store_outage(OnUnavailable::Refuse).await;
    assert_eq!(relayed_while_down, 0);
}

/// The same outage with `local`: each proxy carries on with its own gate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn the_store_killed_and_restarted_under_load_local() {
    let relayed_while_down = store_outage(OnUnavailable::Local).await;
    assert!(relayed_while_down > 0);
}

/// Runs the outage; how many requests were relayed while the store was down.
async fn store_outage(mode: OnUnavailable) -> usize {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;

    let mut redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nAllow: /\n").await;
    let proxies = fleet(&redis, 2, mode).await;
    let down = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let relayed_while_down = Arc::new(AtomicUsize::new(0));
    let (relayed, slowed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let proxy = proxies[i % 2].addr(Listener::Gopher);
            let url = origin.url(&format!("0/c{i}"));
            let (down, stop, while_down) = (down.clone(), stop.clone(), relayed_while_down.clone());
            let (relayed, slowed) = (relayed.clone(), slowed.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let answer = gopher(proxy, url.as_bytes()).await;
                    let was_down = down.load(Ordering::Relaxed);
                    if answer == b"text\r\n" {
                        relayed.fetch_add(1, Ordering::Relaxed);
                        if was_down {
                            while_down.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        let line = first(&answer);
                        assert!(line.starts_with("3503 "), "{line}");
                        slowed.fetch_add(1, Ordering::Relaxed);
                        // A slowed client waits a little, as a polite one would.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            })
        })
        .collect();
    let served = |n: usize| {
        let relayed = relayed.clone();
        move || relayed.load(Ordering::Relaxed) >= n
    };
    wait_until("requests relayed before the outage", served(20)).await;
    redis.kill();
    // Requests in flight when it died may still finish; the next ones see it down.
    wait_until("a proxy notices the store is down", || {
        proxies.iter().all(|p| p.store_is_up() == Some(false))
    })
    .await;
    down.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(500)).await;
    down.store(false, Ordering::Relaxed);
    let while_down = relayed_while_down.load(Ordering::Relaxed);
    redis.restart();
    let before = relayed.load(Ordering::Relaxed);
    wait_until("both proxies use the store again", || {
        proxies.iter().all(|p| p.store_is_up() == Some(true))
    })
    .await;
    wait_until("requests relayed after the outage", served(before + 20)).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let metrics = settled_metrics(proxies[0].addr(Listener::Admin)).await;
    assert_eq!(sample(&metrics, "robots_proxy_store_up"), Some(1.0));
    let errors: f64 = ["gate", "robots", "ping"]
        .iter()
        .filter_map(|op| {
            sample(
                &metrics,
                &format!("robots_proxy_store_errors_total{{op=\"{op}\"}}"),
            )
        })
        .sum();
    assert!(errors >= 1.0, "{metrics}");
    if mode == OnUnavailable::Refuse {
        assert!(slowed.load(Ordering::Relaxed) > 0);
    }
    while_down
}

/// Hostile numbers reach the store's scripts as capped microseconds: a
/// Crawl-delay of 10^20 s and an upstream `44 18446744073709551615` give
/// slow-down answers, the scripts never fail, and other hosts are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn hostile_numbers_do_not_break_the_shared_gate() {
    let redis = RedisServer::start();
    let huge = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            text(
                "20 text/plain",
                "User-agent: *\nCrawl-delay: 100000000000000000000\n",
            )
        } else {
            text("20 text/gemini", "page")
        }
    })
    .await;
    let forever = Origin::start_on(machine(2), |url| {
        if url.ends_with("/robots.txt") {
            text("20 text/plain", "User-agent: *\nAllow: /\n")
        } else {
            text("44 18446744073709551615", "")
        }
    })
    .await;
    let (robots, page) = (text("51 none", ""), text("20 text/gemini", "fine"));
    let normal = Origin::start_on(machine(3), move |url| match url.ends_with("/robots.txt") {
        true => robots.clone(),
        false => page.clone(),
    })
    .await;
    let mut config = fleet_config(&redis, OnUnavailable::Refuse);
    config.politeness.max_delay = None;
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &huge.url("/a")).await;
    assert!(header.starts_with("44 "), "{header}");
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &forever.url("/a")).await;
    assert_eq!(header, "44 18446744073709551615");
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &forever.url("/b")).await;
    assert!(header.starts_with("44 "), "{header}");
    assert_eq!(forever.count("/b"), 0, "held off by the 44");
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &normal.url("/"))
            .await
            .0,
        "20 text/gemini"
    );
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    for op in ["gate", "slow-down", "robots"] {
        let series = format!("robots_proxy_store_errors_total{{op=\"{op}\"}}");
        assert_eq!(sample(&metrics, &series), Some(0.0), "{op}");
    }
}

/// A crawler that starts a robots.txt fetch through one proxy and hangs up
/// does not hold the fleet's fetch lock until it expires: the fetch is given
/// up, the lock let go, and a request through another proxy fetches at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_fetch_given_up_lets_go_of_the_fleet_lock() {
    use rustls::pki_types::ServerName;
    use tokio::io::AsyncWriteExt;
    let redis = RedisServer::start();
    // robots.txt takes 1 s to come; the lock would last max_wait (10 s) +
    // fetch_timeout (1.5 s) + 1 s.
    let origin = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            Reply::Delayed(
                Duration::from_secs(1),
                b"20 text/plain\r\nUser-agent: *\nAllow: /\n".to_vec(),
            )
        } else {
            text("20 text/gemini", "page")
        }
    })
    .await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    let tcp = tokio::net::TcpStream::connect(proxies[0].addr(Listener::Gemini))
        .await
        .unwrap();
    let connector = tokio_rustls::TlsConnector::from(robots_proxy::tls::client_config().unwrap());
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(format!("{}\r\n", origin.url("/first")).as_bytes())
        .await
        .unwrap();
    let arrived = origin.arrivals.clone();
    wait_until("the robots.txt fetch started", || {
        !arrived.lock().unwrap().is_empty()
    })
    .await;
    tls.shutdown().await.unwrap();
    drop(tls);
    let started = std::time::Instant::now();
    let (header, _) = gemini(proxies[1].addr(Listener::Gemini), &origin.url("/second")).await;
    assert_eq!(header, "20 text/gemini");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited the lock out: {:?}",
        started.elapsed()
    );
    assert_eq!(origin.count("/first"), 0);
}

/// Forgetting a robots.txt through one proxy's admin listener forgets the
/// fleet's copy too: the next proxy asked fetches it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn forgetting_robots_txt_forgets_the_fleets_copy() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nDisallow: /private\n").await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    let get = |i: usize, sel: &str| {
        let (proxy, url) = (proxies[i].addr(Listener::Gopher), origin.url(sel));
        async move { gopher(proxy, url.as_bytes()).await }
    };
    assert_eq!(get(0, "0/a").await, b"text\r\n");
    assert_eq!(get(1, "0/b").await, b"text\r\n");
    assert_eq!(origin.count(b"robots.txt"), 1, "{:?}", origin.all());
    let form = format!("host=127.0.0.1&port={}", origin.addr.port());
    let (status, body) = http(
        proxies[0].addr(Listener::Admin),
        "POST",
        "/api/robots/forget",
        &[],
        &form,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Proxy 1 never forgot its own copy, but it is fresh only locally: proxy 0,
    // which forgot both, asks the store, finds nothing, and fetches.
    assert_eq!(get(0, "0/c").await, b"text\r\n");
    assert_eq!(origin.count(b"robots.txt"), 2, "{:?}", origin.all());
}

/// How many selectors starting with `prefix` reached `origin`.
fn arrived(origin: &GopherOrigin, prefix: &str) -> usize {
    origin
        .all()
        .iter()
        .filter(|s| s.starts_with(prefix))
        .count()
}

/// The gate's key for the origin on `addr` (by address: the machine, whatever the port).
fn gate_key(addr: std::net::SocketAddr) -> String {
    format!("test:{{a/{}}}:gate", addr.ip())
}

/// The leases of the gate of a server at `addr` (by machine, as `gate_key`).
fn leases_key(addr: std::net::SocketAddr) -> String {
    format!("test:{{a/{}}}:leases", addr.ip())
}

/// The store killed and restarted empty (no persistence) right after a
/// request started, with requests of two proxies queued at a server that
/// asks for 1 s between starts: the server never sees two starts closer
/// than that. Reservations made in the lost store are not started on
/// (their proxies ask again), and the new store holds each server's first
/// start until the spacing since its birth has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_store_restarted_empty_mid_burst_keeps_every_spacing() {
    let mut redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 1\n").await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    let crawl = Crawl::start(&[&proxies[0], &proxies[1]], &origin, 4);
    // Three page starts, then the store dies right after the third, with
    // later starts reserved in it.
    wait_until("three pages relayed", || arrived(&origin, "/c") >= 3).await;
    redis.restart();
    let after = crawl.relayed();
    wait_until("four more pages after the restart", || {
        crawl.relayed() >= after + 4
    })
    .await;
    crawl.stop().await;
    let gaps = origin.gaps();
    // The robots.txt fetch has no Crawl-delay of its own; every start after
    // the first page is 1 s after the one before, across the restart.
    assert_spaced(&gaps[2..], 1.0);
    let metrics = settled_metrics(proxies[0].addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            r#"robots_proxy_store_events_total{event="restart"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
}

/// Writes into the store behind the proxies' back: `[command, key, a, b]`.
async fn plant(conn: &mut redis::aio::MultiplexedConnection, [cmd, key, a, b]: [&str; 4]) {
    let _: i64 = redis::cmd(cmd)
        .arg(key)
        .arg(a)
        .arg(b)
        .query_async(conn)
        .await
        .unwrap();
}

/// Polls until the store holds `n` leases at `leases`.
async fn wait_for_leases(conn: &mut redis::aio::MultiplexedConnection, leases: &str, n: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let held: i64 = redis::cmd("ZCARD")
            .arg(leases)
            .query_async(conn)
            .await
            .unwrap();
        if held == n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{held} leases, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A start that ran late (a busy proxy, a store reconnecting) is not passed
/// on: a request reserved after it, asleep, starts at least the spacing
/// after that real start, not after the reserved one. The late start is
/// played by writing the server's latest real start (`st`) while the next
/// request sleeps; junk written there fails closed the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_start_that_ran_late_is_not_passed_on() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 1\n").await;
    let proxy = start_proxy(fleet_config(&redis, OnUnavailable::Refuse)).await;
    let gate = gate_key(origin.addr);
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    for (i, plant) in ["now", "nan"].into_iter().enumerate() {
        assert_eq!(
            gopher(
                proxy.addr(Listener::Gopher),
                origin.url(&format!("0/a{i}")).as_bytes()
            )
            .await,
            b"text\r\n"
        );
        // The first request has let go of its lease; then the next one
        // reserves its start (its lease) and sleeps until then.
        wait_for_leases(&mut conn, &leases, 0).await;
        let next = {
            let (addr, url) = (proxy.addr(Listener::Gopher), origin.url(&format!("0/b{i}")));
            tokio::spawn(async move { gopher(addr, url.as_bytes()).await })
        };
        wait_for_leases(&mut conn, &leases, 1).await;
        // Planted mid-sleep: without the check the request would start
        // 0.7 s after it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (secs, us): (String, String) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        let value = match plant {
            "now" => format!("{secs}{us:0>6}"),
            junk => junk.to_string(),
        };
        let planted = std::time::Instant::now();
        let _: i64 = redis::cmd("HSET")
            .arg(&gate)
            .arg("st")
            .arg(&value)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(next.await.unwrap(), b"text\r\n", "{plant}");
        let started = *origin.arrivals.lock().unwrap().last().unwrap();
        let after = started.duration_since(planted).as_secs_f64();
        assert!(
            after >= 0.99,
            "{plant}: started {after} s after the late start"
        );
    }
}

/// A client that leaves while its request sleeps on a reservation at the
/// fleet's gate (or a proxy shutting down answers it) gives the reservation
/// back at once: no lease is left to hold the server's cap until it expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_client_that_leaves_a_fleet_reservation_gives_it_back() {
    use tokio::io::AsyncWriteExt;

    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 30\n").await;
    let mut config = fleet_config(&redis, OnUnavailable::Refuse);
    config.politeness.max_wait = Duration::from_secs(60);
    let proxy = start_proxy(config).await;
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    let mut client = tokio::net::TcpStream::connect(proxy.addr(Listener::Gopher))
        .await
        .unwrap();
    client
        .write_all(format!("{}\r\n", origin.url("0/b")).as_bytes())
        .await
        .unwrap();
    // The robots.txt fetch took the first turn: the page's start is 30 s
    // away, and it sleeps on its lease (which, left alone, would be kept
    // until 1 s past that start; the fetch's own lease is short).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (secs, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        let far: i64 = redis::cmd("ZCOUNT")
            .arg(&leases)
            .arg((secs + 20) * 1_000_000)
            .arg("+inf")
            .query_async(&mut conn)
            .await
            .unwrap();
        if far == 1 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no reservation");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Gone with a reset (a Gopher client may half-close and still read).
    client.set_zero_linger().unwrap();
    drop(client);
    // Given back now (within the 10 s this waits at most), not in 31 s.
    wait_for_leases(&mut conn, &leases, 0).await;
    assert_eq!(arrived(&origin, "/b"), 0);
}

/// A reservation whose call passed its deadline (the store paused, then
/// running it late) leaves no lease behind: the next request is served as
/// soon as the spacing allows, not after the lease's 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_reservation_given_up_on_leaves_no_lease() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nAllow: /\n").await;
    let mut config = fleet_config(&redis, OnUnavailable::Refuse);
    config.store.as_mut().unwrap().lease = Duration::from_secs(30);
    config.store.as_mut().unwrap().timeout = Duration::from_millis(300);
    let proxy = start_proxy(config).await;
    // Served once (robots.txt fetched and kept).
    assert_eq!(
        gopher(proxy.addr(Listener::Gopher), origin.url("0/a").as_bytes()).await,
        b"text\r\n"
    );
    let mut conn = redis.connection().await;
    // Every client's commands wait 1.5 s: the next reservation passes its
    // deadline in the proxy and runs in the store afterwards.
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1500)
        .arg("ALL")
        .query_async(&mut conn)
        .await
        .unwrap();
    let answer = gopher(proxy.addr(Listener::Gopher), origin.url("0/b").as_bytes()).await;
    assert!(first(&answer).starts_with("3503 "), "{}", first(&answer));
    // Once the store answers again, nothing holds the server's one place.
    let leases = leases_key(origin.addr);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        // While the pause lasts this call may time out: ask again.
        let n: i64 = redis::cmd("ZCARD")
            .arg(&leases)
            .query_async(&mut conn)
            .await
            .unwrap_or(-1);
        if n == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a lease left behind: {n} {:?}",
            redis::cmd("ZRANGE")
                .arg(&leases)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query_async::<Vec<String>>(&mut conn)
                .await
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if gopher(proxy.addr(Listener::Gopher), origin.url("0/c").as_bytes()).await == b"text\r\n" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the server's place stayed taken"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            r#"robots_proxy_store_events_total{event="cancelled"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
}

/// Values another client wrote into the gate (`nan`, `inf`, `-inf`, text, a
/// lease that never expires) never let a request start early: each gets
/// "slow down", is counted as junk, and the gate is reset to "a start just
/// now", so the next request is spaced from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn junk_in_the_gate_fails_closed() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 0.5\n").await;
    let proxy = start_proxy(fleet_config(&redis, OnUnavailable::Refuse)).await;
    assert_eq!(
        gopher(proxy.addr(Listener::Gopher), origin.url("0/a").as_bytes()).await,
        b"text\r\n"
    );
    let gate = gate_key(origin.addr);
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    let plants: [(&str, &str, &str); 8] = [
        ("HSET", "last", "nan"),
        ("HSET", "st", "nan"),
        ("HSET", "last", "-inf"),
        ("HSET", "last", "inf"),
        ("HSET", "last", "soon"),
        ("HSET", "bo", "nan"),
        ("HSET", "nb", "-1"),
        ("ZADD", "+inf", "forever"),
    ];
    for (i, (cmd, a, b)) in plants.iter().enumerate() {
        // The request before has let go of its lease (its release runs
        // after the answer and rewrites `last`, which would mend the plant).
        wait_for_leases(&mut conn, &leases, 0).await;
        let key = if *cmd == "ZADD" { &leases } else { &gate };
        plant(&mut conn, [cmd, key, a, b]).await;
        let before = arrived(&origin, "/p");
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            origin.url(&format!("0/p{i}")).as_bytes(),
        )
        .await;
        assert!(
            first(&answer).starts_with("3503 "),
            "{cmd} {a} {b}: {}",
            first(&answer)
        );
        assert_eq!(
            arrived(&origin, "/p"),
            before,
            "{cmd} {a} {b}: nothing started"
        );
        // The gate is sound again: the next request is relayed, spaced.
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            origin.url(&format!("0/q{i}")).as_bytes(),
        )
        .await;
        assert_eq!(answer, b"text\r\n", "{cmd} {a} {b}");
    }
    assert_spaced(&origin.gaps()[1..], 0.5);
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(&metrics, r#"robots_proxy_store_events_total{event="junk"}"#),
        Some(8.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, r#"robots_proxy_store_errors_total{op="gate"}"#),
        Some(0.0)
    );
}

/// A robots.txt record another client made "fresh for ever" (`until` far
/// past anything the proxy writes) or whose good copy was "fetched" in the
/// future is read as stale: the next proxy fetches robots.txt again instead
/// of trusting it, and counts the junk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn junk_times_in_a_robots_record_read_as_stale() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nDisallow: /private\n").await;
    let first_proxy = start_proxy(fleet_config(&redis, OnUnavailable::Refuse)).await;
    let answer = gopher(
        first_proxy.addr(Listener::Gopher),
        origin.url("0/a").as_bytes(),
    )
    .await;
    assert_eq!(answer, b"text\r\n");
    assert_eq!(origin.count(b"robots.txt"), 1);
    let key = format!(
        "test:{{r/gopher://127.0.0.1:{}}}:robots",
        origin.addr.port()
    );
    let mut conn = redis.connection().await;
    let _: i64 = redis::cmd("HSET")
        .arg(&key)
        .arg("until")
        .arg("99999999999999999999")
        .arg("good_at")
        .arg("99999999999999999")
        .query_async(&mut conn)
        .await
        .unwrap();
    let second = start_proxy(fleet_config(&redis, OnUnavailable::Refuse)).await;
    let answer = gopher(
        second.addr(Listener::Gopher),
        origin.url("0/private/x").as_bytes(),
    )
    .await;
    assert!(first(&answer).starts_with("3403 "), "{}", first(&answer));
    assert_eq!(origin.count(b"robots.txt"), 2, "{:?}", origin.all());
    let metrics = settled_metrics(second.addr(Listener::Admin)).await;
    // Counted on each read of the record (before and after taking the lock).
    let junk = sample(&metrics, r#"robots_proxy_store_events_total{event="junk"}"#);
    assert!(junk >= Some(1.0), "{metrics}");
}

/// A bot in report mode on one proxy goes without robots.txt's Crawl-delay
/// (the test's `default_delay` is 0), and its starts count at the fleet's
/// gate: a bot that enforces, on another proxy, keeps its Crawl-delay after
/// them. Each of its three requests is reported, the first one too: the
/// robots.txt fetch the fleet's gate let through is a start like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_reporting_bots_starts_space_the_fleets_enforcing_bots() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 0.5\n").await;
    let mut watched = test_config_with("[bot]\nagent = \"examplebot\"\nmode = \"report\"\n");
    watched.store = fleet_config(&redis, OnUnavailable::Refuse).store;
    let watched = start_proxy(watched).await;
    let enforcing = start_proxy(fleet_config(&redis, OnUnavailable::Refuse)).await;
    for i in 0..3 {
        let url = origin.url(&format!("0/w{i}"));
        assert_eq!(
            gopher(watched.addr(Listener::Gopher), url.as_bytes()).await,
            b"text\r\n"
        );
    }
    let url = origin.url("0/e");
    assert_eq!(
        gopher(enforcing.addr(Listener::Gopher), url.as_bytes()).await,
        b"text\r\n"
    );
    let gaps = origin.gaps();
    // robots.txt, w0, w1, w2 at once (report mode); e 0.5 s after w2.
    assert_eq!(gaps.len(), 4, "{:?}", origin.all());
    assert!(gaps[..3].iter().all(|g| *g < 0.3), "{gaps:?}");
    assert!(gaps[3] >= 0.5 - 0.1, "{gaps:?}");
    let m = settled_metrics(watched.addr(Listener::Admin)).await;
    let reported = "robots_proxy_report_only_total{bot=\"default\",reason=\"crawl_delay\"}";
    assert_eq!(sample(&m, reported), Some(3.0), "{m}");
}

/// Proxies in the fleet whose default bot has these limits (TOML keys of
/// `[bot]`); the gate lets four requests run at a server, so what holds
/// them is the bot's limits.
async fn limited_fleet(redis: &RedisServer, n: usize, limits: &str) -> Vec<Proxy> {
    let mut proxies = Vec::new();
    for _ in 0..n {
        let mut config = test_config_with(&format!("[bot]\nagent = \"examplebot\"\n{limits}\n"));
        config.politeness.per_host_concurrency = 4;
        proxies.push(start_proxy(with_store(config, redis, OnUnavailable::Refuse)).await);
    }
    proxies
}

/// A crawler spreading its requests over the fleet, and over a proxy that
/// joins it later with no state of its own, gets its daily budget at a
/// server once: the fleet's count, not each proxy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_daily_budget_holds_across_the_fleet() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nAllow: /\n").await;
    let other = text_hole_on(machine(2), "User-agent: *\nAllow: /\n").await;
    let limits = "daily_requests_per_server = 3";
    let mut proxies = limited_fleet(&redis, 2, limits).await;
    let mut relayed = 0;
    for i in 0..6 {
        let proxy = proxies[i % 2].addr(Listener::Gopher);
        let answer = gopher(proxy, origin.url(&format!("0/p{i}")).as_bytes()).await;
        if answer == b"text\r\n" {
            relayed += 1;
        } else {
            let line = first(&answer);
            assert!(line.starts_with('3'), "{line}");
            assert!(line.contains("daily_requests_per_server = 3"), "{line}");
        }
    }
    assert_eq!(relayed, 3);
    // A proxy that joins later (fresh state) is no way around it.
    proxies.extend(limited_fleet(&redis, 1, limits).await);
    let late = proxies[2].addr(Listener::Gopher);
    let answer = gopher(late, origin.url("0/late").as_bytes()).await;
    assert!(
        first(&answer).contains("daily_requests_per_server = 3"),
        "{}",
        first(&answer)
    );
    assert_eq!(arrived(&origin, "/p"), 3, "{:?}", origin.all());
    assert_eq!(origin.count(b"/late"), 0);
    // Another server has its own budget.
    assert_eq!(gopher(late, other.url("0/o").as_bytes()).await, b"text\r\n");
}

/// Parallel requests through two proxies at one server: with
/// `concurrency = 1`, the server never has two of the bot's requests at once
/// (each answer takes 400 ms: the next start is at least that long after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn the_bots_concurrency_holds_across_the_fleet() {
    let redis = RedisServer::start();
    let origin = slow_hole(Duration::from_millis(400)).await;
    let proxies = limited_fleet(&redis, 2, "concurrency = 1").await;
    // robots.txt first, so the requests meet only the limit.
    let warm = origin.url("0/warm");
    let proxy = proxies[0].addr(Listener::Gopher);
    assert_eq!(gopher(proxy, warm.as_bytes()).await, b"text\r\n");
    for answer in spread(&proxies, &origin, 4).await {
        assert_eq!(answer, b"text\r\n");
    }
    let gaps = origin.gaps();
    assert_eq!(gaps.len(), 5, "{:?}", origin.all());
    assert_spaced(&gaps[1..], 0.4);
}

/// A bot spreading its requests over two proxies and two servers gets its
/// `rate` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn the_bots_rate_holds_across_the_fleet_and_its_servers() {
    let redis = RedisServer::start();
    let holes = [
        text_hole("User-agent: *\nAllow: /\n").await,
        text_hole_on(machine(2), "User-agent: *\nAllow: /\n").await,
    ];
    let proxies = limited_fleet(&redis, 2, "rate = \"2/min\"").await;
    let mut relayed = 0;
    for i in 0..6 {
        let proxy = proxies[i % 2].addr(Listener::Gopher);
        let url = holes[(i / 2) % 2].url(&format!("0/p{i}"));
        let answer = gopher(proxy, url.as_bytes()).await;
        if answer == b"text\r\n" {
            relayed += 1;
        } else {
            let line = first(&answer);
            assert!(line.contains("rate = 2/min"), "{line}");
        }
    }
    assert_eq!(relayed, 2);
    assert_eq!(arrived(&holes[0], "/p") + arrived(&holes[1], "/p"), 2);
}

/// The store down: with `refuse`, a bot's counted request is told to slow
/// down; with `local`, each proxy's own count still holds (it was kept all
/// along), and the fleet's count is back with the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_budget_outlives_the_store_going_down() {
    let mut redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nAllow: /\n").await;
    let config = test_config_with("[bot]\nagent = \"examplebot\"\ndaily_requests_per_server = 2\n");
    let local = start_proxy(with_store(config, &redis, OnUnavailable::Local)).await;
    let refusing = limited_fleet(&redis, 1, "daily_requests_per_server = 2").await;
    let (local, refusing) = (
        local.addr(Listener::Gopher),
        refusing[0].addr(Listener::Gopher),
    );
    assert_eq!(
        gopher(local, origin.url("0/a").as_bytes()).await,
        b"text\r\n"
    );
    assert_eq!(
        gopher(local, origin.url("0/b").as_bytes()).await,
        b"text\r\n"
    );
    redis.kill();
    // Asked until the proxy has seen the store go (its health check).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let line = first(&gopher(refusing, origin.url("0/r").as_bytes()).await);
        assert!(line.starts_with('3'), "{line}");
        if line.contains("does not answer") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{line}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let line = first(&gopher(local, origin.url("0/c").as_bytes()).await);
    assert!(line.contains("daily_requests_per_server = 2"), "{line}");
    assert_eq!(arrived(&origin, "/"), 2, "{:?}", origin.all());
}

/// Junk another client wrote into a bot's counts (a bucket or a count that is
/// no number in bounds, a lease that never expires) is removed; the request
/// that found it slows down, and the count is sound again: the budget is
/// neither lost nor stuck.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn junk_in_a_bots_count_fails_closed_once() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nAllow: /\n").await;
    let proxies = limited_fleet(&redis, 1, "daily_requests_per_server = 3").await;
    let proxy = proxies[0].addr(Listener::Gopher);
    assert_eq!(
        gopher(proxy, origin.url("0/a").as_bytes()).await,
        b"text\r\n"
    );
    let tag = format!("test:{{bd/default/a/{}}}", origin.addr.ip());
    let (held, starts) = (format!("{tag}:held"), format!("{tag}:starts"));
    let mut conn = redis.connection().await;
    let plants: [(&str, &str, &str, &str); 5] = [
        ("HSET", &starts, "nan", "1"),
        ("HSET", &starts, "99999999999", "1"),
        ("HSET", &starts, "10", "-5"),
        ("HSET", &starts, "5000000", "lots"),
        ("ZADD", &held, "+inf", "forever"),
    ];
    for (i, (cmd, key, a, b)) in plants.iter().enumerate() {
        plant(&mut conn, [cmd, key, a, b]).await;
        let line = first(&gopher(proxy, origin.url(&format!("0/j{i}")).as_bytes()).await);
        assert!(line.starts_with('3'), "{cmd} {a} {b}: {line}");
    }
    assert_eq!(arrived(&origin, "/j"), 0);
    // The one start counted is still there: two more, then the budget.
    for page in ["0/b", "0/c"] {
        assert_eq!(
            gopher(proxy, origin.url(page).as_bytes()).await,
            b"text\r\n"
        );
    }
    let line = first(&gopher(proxy, origin.url("0/d").as_bytes()).await);
    assert!(line.contains("daily_requests_per_server = 3"), "{line}");
    let metrics = settled_metrics(proxies[0].addr(Listener::Admin)).await;
    assert_eq!(
        sample(&metrics, r#"robots_proxy_store_events_total{event="junk"}"#),
        Some(5.0),
        "{metrics}"
    );
}

/// The script calls the store has run so far (`EVALSHA` and `EVAL`).
async fn script_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// A burst at one server costs the store less than one script call per
/// request: reservations that arrive while one is out ride together in the
/// next call, and the leases the requests give back when they end go in
/// batches. 40 requests at once: at most 20 calls (5 or 6 here), where a call per
/// reservation made 40 and a few, and a call per release too made 80.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_burst_costs_the_store_less_than_one_call_per_request() {
    let redis = RedisServer::start();
    let origin = slow_hole(Duration::from_millis(300)).await;
    let mut config = fleet_config(&redis, OnUnavailable::Refuse);
    config.politeness.per_host_concurrency = 64;
    let proxy = start_proxy(config).await;
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    // robots.txt first: the burst meets only the gate.
    let warm = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/warm").as_bytes(),
    )
    .await;
    assert_eq!(warm, b"text\r\n");
    wait_for_leases(&mut conn, &leases, 0).await;
    let before = script_calls(&mut conn).await;
    for answer in spread(std::slice::from_ref(&proxy), &origin, 40).await {
        assert_eq!(answer, b"text\r\n");
    }
    wait_for_leases(&mut conn, &leases, 0).await;
    let calls = script_calls(&mut conn).await - before;
    assert!(calls <= 20, "{calls} script calls for 40 requests");
}

/// A full cap at a server opens for a request waiting on another proxy as
/// soon as the request holding it ends (its release wakes the fleet, even
/// batched), not at the waiter's recheck 2 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_release_wakes_a_waiter_on_another_proxy() {
    let redis = RedisServer::start();
    let origin = slow_hole(Duration::from_millis(300)).await;
    // Leases that outlive the test: only a release frees the cap.
    let (first_proxy, _, _) = warmed(&redis, &origin, 1, Duration::from_secs(1)).await;
    let second_proxy = start_proxy(capped(&redis, 1, Duration::from_secs(1))).await;
    let proxies = [first_proxy, second_proxy];
    let (a, b) = (
        proxies[0].addr(Listener::Gopher),
        proxies[1].addr(Listener::Gopher),
    );
    let url = origin.url("0/first");
    let first = tokio::spawn(async move { gopher(a, url.as_bytes()).await });
    wait_until("the first request started", || origin.count(b"/first") == 1).await;
    let second = gopher(b, origin.url("0/second").as_bytes()).await;
    assert_eq!(second, b"text\r\n");
    assert_eq!(first.await.unwrap(), b"text\r\n");
    let gaps = origin.gaps();
    let last = gaps[gaps.len() - 1];
    assert!(
        (0.3..1.0).contains(&last),
        "the second started {last} s after the first"
    );
}

/// Fleet mode on `redis` with a cap of `cap` per server, 30 s leases and
/// the store deadline `timeout`.
fn capped(redis: &RedisServer, cap: usize, timeout: Duration) -> Config {
    let mut config = fleet_config(redis, OnUnavailable::Refuse);
    config.politeness.per_host_concurrency = cap;
    let store = config.store.as_mut().unwrap();
    store.lease = Duration::from_secs(30);
    store.timeout = timeout;
    config
}

/// A proxy on `redis` with a cap of `cap` per server, 30 s leases and the
/// store deadline `timeout`, past its first request to `origin` (robots.txt
/// known, that request's lease given back): the proxy, the server's leases
/// key, and a connection to look at the store.
async fn warmed(
    redis: &RedisServer,
    origin: &GopherOrigin,
    cap: usize,
    timeout: Duration,
) -> (Proxy, String, redis::aio::MultiplexedConnection) {
    let proxy = start_proxy(capped(redis, cap, timeout)).await;
    let warm = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/warm").as_bytes(),
    )
    .await;
    assert_eq!(warm, b"text\r\n");
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    wait_for_leases(&mut conn, &leases, 0).await;
    (proxy, leases, conn)
}

/// A lease given back while the store takes no call is given back once it
/// does, not left to fill the server's cap until it expires: with a cap of 1
/// and 30 s leases, a request that ended while the store refused every
/// script (an ACL: the release never ran, as on a master that died before
/// reading it) leaves no lease behind once the store takes them again, and
/// the next request starts at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_release_the_store_missed_is_sent_again() {
    let redis = RedisServer::start();
    let origin = slow_hole(Duration::from_millis(300)).await;
    let (proxy, leases, mut conn) = warmed(&redis, &origin, 1, Duration::from_secs(1)).await;
    let at = proxy.addr(Listener::Gopher);
    let url = origin.url("0/first");
    let first = tokio::spawn(async move { gopher(at, url.as_bytes()).await });
    wait_until("the first request started", || origin.count(b"/first") == 1).await;
    wait_for_leases(&mut conn, &leases, 1).await;
    let scripts = |allow: &'static str| {
        let mut acl = redis::cmd("ACL");
        acl.arg("SETUSER").arg("default").arg(allow).arg("+acl");
        acl
    };
    let _: () = scripts("-@scripting").query_async(&mut conn).await.unwrap();
    assert_eq!(first.await.unwrap(), b"text\r\n");
    // Its release was sent, and the store refused it.
    let errors = r#"robots_proxy_store_errors_total{op="gate"}"#;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while sample(&settled_metrics(proxy.addr(Listener::Admin)).await, errors) < Some(1.0) {
        assert!(std::time::Instant::now() < deadline, "the release refused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        redis::cmd("ZCARD")
            .arg(&leases)
            .query_async::<i64>(&mut conn)
            .await
            .unwrap(),
        1
    );
    let _: () = scripts("+@scripting").query_async(&mut conn).await.unwrap();
    wait_for_leases(&mut conn, &leases, 0).await;
    let second = gopher(at, origin.url("0/second").as_bytes()).await;
    assert_eq!(second, b"text\r\n");
}

/// A gate that holds only the server's latest real start (`st`): the next
/// start is spaced from it. So is a start recorded on a gate that expired
/// while its request slept (a request held past its plan by the rule after a
/// store break): it is kept with a time to live and seen by the next
/// reservation. Played by planting the gate in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_gate_that_knows_only_the_latest_real_start_spaces_from_it() {
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 1\n").await;
    let proxy = start_proxy(fleet_config(&redis, OnUnavailable::Refuse)).await;
    let at = proxy.addr(Listener::Gopher);
    let gate = gate_key(origin.addr);
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    assert_eq!(gopher(at, origin.url("0/a").as_bytes()).await, b"text\r\n");
    wait_for_leases(&mut conn, &leases, 0).await;
    // Only `st` (and a `nb` long past, so the gate does not read as new).
    let (secs, us): (String, String) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let planted = std::time::Instant::now();
    let _: () = redis::pipe()
        .cmd("DEL")
        .arg(&gate)
        .ignore()
        .cmd("HSET")
        .arg(&gate)
        .arg("st")
        .arg(format!("{secs}{us:0>6}"))
        .arg("nb")
        .arg(0)
        .ignore()
        .cmd("PEXPIRE")
        .arg(&gate)
        .arg(10_000)
        .ignore()
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(gopher(at, origin.url("0/b").as_bytes()).await, b"text\r\n");
    let started = *origin.arrivals.lock().unwrap().last().unwrap();
    let after = started.duration_since(planted).as_secs_f64();
    assert!(after >= 0.99, "started {after} s after the planted start");
    // A reservation sleeps; its gate vanishes meanwhile (expired); its start
    // is recorded with a time to live, and the next start is spaced from it.
    wait_for_leases(&mut conn, &leases, 0).await;
    let (addr, url) = (at, origin.url("0/c"));
    let sleeper = tokio::spawn(async move { gopher(addr, url.as_bytes()).await });
    wait_for_leases(&mut conn, &leases, 1).await;
    let _: i64 = redis::cmd("DEL")
        .arg(&gate)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(sleeper.await.unwrap(), b"text\r\n");
    let first = *origin.arrivals.lock().unwrap().last().unwrap();
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&gate)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 0, "the gate's time to live after a start: {ttl}");
    assert_eq!(gopher(at, origin.url("0/d").as_bytes()).await, b"text\r\n");
    let second = *origin.arrivals.lock().unwrap().last().unwrap();
    let gap = second.duration_since(first).as_secs_f64();
    assert!(gap >= 0.99, "started {gap} s after the one before");
}

/// A client that leaves while its reservation waits behind another's call
/// at the same gate (riding, `store/ride.rs`) gets it taken back once it is
/// made: no lease is left to hold the server's cap for `lease` (30 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_client_that_leaves_while_its_reservation_rides_gives_it_back() {
    one_leaves_while_the_store_is_paused(Leaves::Rider).await;
}

/// A client that leaves while its own reservation call is out (it found no
/// other call at its gate, so it made one itself, `store/ride.rs`) gets it
/// taken back too, and a request that queued behind it is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_client_that_leaves_while_its_own_reservation_is_out_gives_it_back() {
    one_leaves_while_the_store_is_paused(Leaves::Leader).await;
}

/// Which of two requests at one gate leaves.
enum Leaves {
    /// The first: its own call is out.
    Leader,
    /// The second: queued behind the first's call.
    Rider,
}

/// With the store paused (SIGSTOP, shorter than the deadline), A's call
/// goes out first, B asks while it is out, then `leaves` goes (a reset)
/// and the store resumes: the other is answered, and the leaver's
/// reservation, made after it left, is given back, not held 30 s.
async fn one_leaves_while_the_store_is_paused(leaves: Leaves) {
    use tokio::io::AsyncWriteExt;

    let redis = RedisServer::start();
    let origin = slow_hole(Duration::from_millis(100)).await;
    let (proxy, leases, mut conn) = warmed(&redis, &origin, 4, Duration::from_secs(3)).await;
    let at = proxy.addr(Listener::Gopher);
    redis.pause();
    let (gone, stays) = match leaves {
        Leaves::Leader => ("0/a", "0/b"),
        Leaves::Rider => ("0/b", "0/a"),
    };
    let ask = |selector: &str| format!("{}\r\n", origin.url(selector));
    let stay = |line: String| tokio::spawn(async move { gopher(at, line.as_bytes()).await });
    let mut leaver = None;
    let mut stayer = None;
    // The order of events in a paused store, not anyone's readiness.
    for selector in ["0/a", "0/b"] {
        if selector == gone {
            let mut client = tokio::net::TcpStream::connect(at).await.unwrap();
            client.write_all(ask(gone).as_bytes()).await.unwrap();
            leaver = Some(client);
        } else {
            stayer = Some(stay(ask(stays)));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let leaver = leaver.unwrap();
    leaver.set_zero_linger().unwrap();
    drop(leaver);
    tokio::time::sleep(Duration::from_millis(300)).await;
    redis.resume();
    assert_eq!(stayer.unwrap().await.unwrap(), b"text\r\n");
    wait_for_leases(&mut conn, &leases, 0).await;
    assert_eq!(arrived(&origin, &gone[1..]), 0);
}

/// A request that runs longer than its lease keeps it: renewed while it runs
/// (`store/renew.rs`), its lease never lapses, so the server's one place
/// stays taken for the whole request and no second start slips in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_request_longer_than_its_lease_keeps_it() {
    let redis = RedisServer::start();
    // Within the proxy's 1.5 s wait for a first byte.
    let origin = slow_hole(Duration::from_millis(1400)).await;
    // Leases of 1 s; the server's cap is 1.
    let mut config = fleet_config(&redis, OnUnavailable::Refuse);
    config.politeness.per_host_concurrency = 1;
    assert_eq!(config.store.as_ref().unwrap().lease, Duration::from_secs(1));
    let proxy = start_proxy(config).await;
    let at = proxy.addr(Listener::Gopher);
    assert_eq!(
        gopher(at, origin.url("0/warm").as_bytes()).await,
        b"text\r\n"
    );
    let leases = leases_key(origin.addr);
    let mut conn = redis.connection().await;
    wait_for_leases(&mut conn, &leases, 0).await;
    let url = origin.url("0/long");
    let long = tokio::spawn(async move { gopher(at, url.as_bytes()).await });
    wait_for_leases(&mut conn, &leases, 1).await;
    let started = std::time::Instant::now();
    // Past the 1 s the lease was taken for, it is still live.
    while started.elapsed() < Duration::from_millis(1300) {
        let (secs, us): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        let live: i64 = redis::cmd("ZCOUNT")
            .arg(&leases)
            .arg(format!("({}", secs * 1_000_000 + us))
            .arg("+inf")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(live, 1, "{:?} into the request", started.elapsed());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(long.await.unwrap(), b"text\r\n");
    wait_for_leases(&mut conn, &leases, 0).await;
}

/// Two proxies of a fleet with HTTP listeners, waiting at most 10 s (past
/// a fresh store's warm-up); `default_delay` when given.
pub(crate) async fn web_fleet(
    redis: &RedisServer,
    default_delay: Option<Duration>,
) -> Vec<robots_proxy::server::Proxy> {
    let mut proxies = Vec::new();
    for _ in 0..2 {
        let mut config = fleet_config(redis, OnUnavailable::Refuse);
        config
            .listen
            .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
        if let Some(delay) = default_delay {
            config.politeness.default_delay = delay;
        }
        config.politeness.max_wait = Duration::from_secs(10);
        proxies.push(start_proxy(config).await);
    }
    proxies
}

/// The web in a fleet: one robots.txt fetch for the site, one spacing
/// across proxies (a site is gated by its name, `h/host`, on the web).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_web_site_is_one_visitor_across_the_fleet() {
    use crate::common::web::{WebClient, WebOrigin};
    let redis = RedisServer::start();
    let origin = WebOrigin::site("User-agent: *\nCrawl-delay: 30\n").await;
    // Past the store's warm-up (a store just started holds first starts a
    // few seconds), short of the Crawl-delay.
    let proxies = web_fleet(&redis, None).await;
    // The first proxy fetches robots.txt: that start is the site's turn.
    let mut one = WebClient::connect(proxies[0].addr(Listener::Http)).await;
    let first = one.get(&origin.url("/1"), &[]).await;
    assert_eq!(first.status, 429, "{first:?}");
    // The second has its robots.txt from the fleet, and waits its turn too.
    let mut two = WebClient::connect(proxies[1].addr(Listener::Http)).await;
    let held = two.get(&origin.url("/1"), &[]).await;
    assert_eq!(held.status, 429, "{held:?}");
    let retry: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((15..=30).contains(&retry), "{retry}");
    assert_eq!(origin.targets(), ["/robots.txt"]);
}

/// A site's `429` without `Retry-After`, seen by one proxy of the fleet,
/// holds it for the web's back-off at every proxy: the other must wait too,
/// and the site hears nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn one_proxy_s_429_holds_the_site_for_the_whole_fleet() {
    use crate::common::web::{WebClient, WebOrigin};
    let redis = RedisServer::start();
    let origin = WebOrigin::start(|path| match path {
        "/robots.txt" => (404, vec![], vec![]),
        "/busy" => (429, vec![], b"busy".to_vec()),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    // Past the store's warm-up, short of the back-off.
    let proxies = web_fleet(&redis, Some(Duration::ZERO)).await;
    let mut one = WebClient::connect(proxies[0].addr(Listener::Http)).await;
    let busy = one.get(&origin.url("/busy"), &[]).await;
    assert_eq!(busy.status, 429, "{busy:?}");
    let mut two = WebClient::connect(proxies[1].addr(Listener::Http)).await;
    let held = two.get(&origin.url("/page"), &[]).await;
    assert_eq!(held.status, 429, "{held:?}");
    let retry: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((40..=66).contains(&retry), "{retry}");
    assert!(
        held.header("proxy-status").is_some(),
        "the proxy's own answer"
    );
    assert_eq!(origin.targets(), ["/robots.txt", "/busy"]);
}

/// The fleet's copy of a web robots.txt keeps its `ETag`: once it is stale,
/// a proxy that never fetched it itself asks the site conditionally, and a
/// `304` renews the fleet's copy, whose rules still decide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_stale_fleet_copy_is_asked_for_again_conditionally() {
    use crate::common::web::{WebClient, WebOrigin};
    let redis = RedisServer::start();
    let origin = WebOrigin::start_asked(|path, asked| match path {
        "/robots.txt" if asked.get("if-none-match").is_some_and(|v| v == "\"v1\"") => {
            (304, vec![("etag", "\"v1\"".into())], vec![])
        }
        "/robots.txt" => (
            200,
            vec![("etag", "\"v1\"".into())],
            b"User-agent: *\nDisallow: /private/\n".to_vec(),
        ),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let proxies = web_fleet(&redis, Some(Duration::ZERO)).await;
    let mut one = WebClient::connect(proxies[0].addr(Listener::Http)).await;
    assert_eq!(one.get(&origin.url("/a"), &[]).await.status, 200);
    // The fleet's copy, made stale as time would.
    let mut conn = redis.connection().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("test:{r/*}:robots")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(keys.len(), 1, "{keys:?}");
    let etag: Option<String> = redis::cmd("HGET")
        .arg(&keys[0])
        .arg("etag")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        etag.as_deref(),
        Some("\"v1\""),
        "the fleet keeps the validator"
    );
    let _: i64 = redis::cmd("HSET")
        .arg(&keys[0])
        .arg("until")
        .arg("0")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut two = WebClient::connect(proxies[1].addr(Listener::Http)).await;
    let refused = two.get(&origin.url("/private/x"), &[]).await;
    assert_eq!(refused.status, 403, "the renewed copy's rules: {refused:?}");
    assert_eq!(two.get(&origin.url("/b"), &[]).await.status, 200);
    let robots: Vec<_> = origin
        .seen()
        .into_iter()
        .filter(|s| s.target == "/robots.txt")
        .collect();
    assert_eq!(robots.len(), 2, "{:?}", origin.targets());
    assert!(robots[0].headers.get("if-none-match").is_none());
    assert_eq!(robots[1].headers["if-none-match"], "\"v1\"");
    assert_eq!(origin.targets(), ["/robots.txt", "/a", "/robots.txt", "/b"]);
}

/// Waiters at a full gate are served in the order they came, across the
/// fleet: a crawler's pages asked one after another, alternately through
/// two proxies, reach the server in that order, each a Crawl-delay apart.
/// A page whose client hung up while it waited keeps its place in the
/// fleet's line: asked again through the other proxy, it goes in it, ahead
/// of the pages asked after it, and the line lets the next go meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn the_fleets_waiters_keep_their_order_and_their_places() {
    use tokio::io::AsyncWriteExt;
    let redis = RedisServer::start();
    let origin = text_hole("User-agent: *\nCrawl-delay: 0.3\n").await;
    let proxies = fleet(&redis, 2, OnUnavailable::Refuse).await;
    let addrs = [
        proxies[0].addr(Listener::Gopher),
        proxies[1].addr(Listener::Gopher),
    ];
    let via = move |i: usize| addrs[i % 2];
    // robots.txt known to both proxies first: what follows queues at the gate.
    for (i, warm) in ["0/w0", "0/w1"].into_iter().enumerate() {
        assert_eq!(
            gopher(via(i), origin.url(warm).as_bytes()).await,
            b"text\r\n"
        );
    }
    let mut pages = Vec::new();
    for i in 0..8 {
        let (proxy, url) = (via(i), origin.url(&format!("0/p{i}")));
        pages.push(tokio::spawn(async move {
            if i == 2 {
                // Hangs up (a reset: Gopher's way of leaving) while it waits,
                // and asks again through the other proxy after p5 was asked.
                let mut tcp = tokio::net::TcpStream::connect(proxy).await.unwrap();
                tcp.write_all(format!("{url}\r\n").as_bytes())
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
                tcp.set_zero_linger().unwrap();
                drop(tcp);
                tokio::time::sleep(Duration::from_millis(250)).await;
                return gopher(via(3), url.as_bytes()).await;
            }
            gopher(proxy, url.as_bytes()).await
        }));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for page in pages {
        assert_eq!(page.await.unwrap(), b"text\r\n");
    }
    let seen: Vec<String> = origin.all().into_iter().skip(3).collect();
    let expected: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
    let seen_pages: Vec<String> = seen
        .iter()
        .map(|s| {
            s.trim_start_matches("0/")
                .trim_start_matches('/')
                .to_string()
        })
        .collect();
    assert_eq!(seen_pages, expected, "{:?}", origin.all());
    assert_spaced(&origin.gaps()[1..], 0.3);
}
