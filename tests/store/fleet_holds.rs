//! A server's "slow down" in a fleet, from the server's side and the
//! crawler's: requests already waiting at any proxy (their start reserved
//! in the store, asleep until it) are held by a slow-down that came while
//! they slept; a web site's hold is the site's (every port, both schemes)
//! at every proxy; and a proxy of the previous version sharing the store,
//! which names a web site's hold `host:port`, is read and written for.

use std::time::Duration;

use crate::common::web::{trusting, tunnel, WebClient, WebOrigin};
use crate::common::*;
use crate::fleet::{web_fleet, with_store};
use crate::redis_server::RedisServer;
use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use robots_proxy::store::OnUnavailable;

/// `urls` asked at once, spread over `proxies` in turn, a client each:
/// each answer's status and whether the proxy wrote it.
async fn spread_web(proxies: &[Proxy], urls: Vec<String>) -> Vec<(u16, bool)> {
    let tasks: Vec<_> = urls
        .into_iter()
        .enumerate()
        .map(|(i, url)| {
            let http = proxies[i % proxies.len()].addr(Listener::Http);
            tokio::spawn(async move {
                let answer = WebClient::connect(http).await.get(&url, &[]).await;
                (answer.status, answer.header("proxy-status").is_some())
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

/// Two proxies of a fleet listening for the web, each letting
/// `concurrency` requests be in flight at a server (so that as many starts
/// are reserved at once, each asleep until its own).
async fn fleet_of(redis: &RedisServer, concurrency: usize) -> Vec<Proxy> {
    let mut proxies = Vec::new();
    for _ in 0..2 {
        let mut config = with_store(test_config(), redis, OnUnavailable::Refuse);
        config
            .listen
            .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
        config.politeness.per_host_concurrency = concurrency;
        config.politeness.max_wait = Duration::from_secs(10);
        proxies.push(start_proxy(config).await);
    }
    proxies
}

/// Hole 1 in a fleet, the web: four pages at once over two proxies, at a
/// site with `Crawl-delay: 1` whose every page says "slow down" (`429`,
/// `503`, with a `Retry-After` or without): one reaches it, the three whose
/// starts were reserved behind it (`per_host_concurrency = 4`: each holds
/// a lease, asleep until its start) are told to slow down by the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn requests_reserved_at_the_fleet_s_gate_are_held_by_a_site_s_slow_down() {
    let redis = RedisServer::start();
    for (n, (status, retry_after)) in [
        (429, Some("3600")),
        (429, None),
        (503, Some("3600")),
        (503, None),
    ]
    .into_iter()
    .enumerate()
    {
        let fields: Vec<(&'static str, String)> = retry_after
            .map(|v| vec![("retry-after", v.to_string())])
            .unwrap_or_default();
        // A site of its own per row: 127.0.0.1, 127.0.0.2, … are other hosts.
        let host = format!("127.0.0.{}", n + 1);
        let origin = WebOrigin::start_on(
            format!("{host}:0").parse().unwrap(),
            move |path, _: &hyper::HeaderMap| match path {
                "/robots.txt" => (200, vec![], b"User-agent: *\nCrawl-delay: 1\n".to_vec()),
                "/warm" => (200, vec![], b"page".to_vec()),
                _ => (status, fields.clone(), b"busy".to_vec()),
            },
        )
        .await;
        let proxies = fleet_of(&redis, 4).await;
        // Each proxy knows the site's robots.txt, and the store is warm:
        // the four below are reserved at once, a second apart.
        let warm = vec![origin.url("/warm"), origin.url("/warm")];
        assert_eq!(
            spread_web(&proxies, warm).await,
            [(200, false), (200, false)]
        );
        let urls = (0..4).map(|i| origin.url(&format!("/p{i}"))).collect();
        let answers = spread_web(&proxies, urls).await;
        let row = format!(
            "{status} {retry_after:?}: {answers:?} {:?}",
            origin.targets()
        );
        let pages = origin
            .targets()
            .iter()
            .filter(|t| t.starts_with("/p"))
            .count();
        assert_eq!(pages, 1, "{row}");
        assert_eq!(answers.iter().filter(|a| a.1).count(), 3, "{row}");
        assert!(answers.iter().filter(|a| a.1).all(|a| a.0 == 429), "{row}");
    }
}

/// Hole 1 in a fleet, the small web: six Gemini clients at once over two
/// proxies against a capsule whose every page answers a slow-down: no two
/// of its pages are asked within 2 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn gemini_requests_reserved_at_the_fleet_s_gate_are_held_by_a_44() {
    let redis = RedisServer::start();
    for answer in ["44 2", "44 3600", "44 Slow down"] {
        let origin = slowing_capsule(answer).await;
        let mut proxies = Vec::new();
        for _ in 0..2 {
            let mut config = with_store(test_config(), &redis, OnUnavailable::Refuse);
            config.politeness.max_wait = Duration::from_secs(5);
            config.politeness.per_host_concurrency = 6;
            proxies.push(start_proxy(config).await);
        }
        // Each proxy knows the capsule's robots.txt, and the store is warm.
        for proxy in &proxies {
            let warm = gemini(proxy.addr(Listener::Gemini), &origin.url("/warm")).await;
            assert_eq!(warm.0, "20 text/gemini");
        }
        let listeners: Vec<_> = proxies.iter().map(|p| p.addr(Listener::Gemini)).collect();
        six_at_once_are_held(&origin, &listeners, answer).await;
    }
}

/// Hole 2 in a fleet: a `429 Retry-After: 600` from `http://127.0.0.1:P1`
/// through one proxy holds the site at the other, on another port and over
/// `CONNECT` to its HTTPS port: told to come back then, nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_429_at_one_proxy_holds_the_site_on_every_port_at_the_other() {
    let redis = RedisServer::start();
    let (busy, plain, secure, ca) = crate::common::web::one_site_on_three_ports().await;
    let mut proxies = Vec::new();
    for _ in 0..2 {
        let mut config = with_store(test_config(), &redis, OnUnavailable::Refuse);
        config
            .listen
            .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
        config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
        proxies.push(start_proxy(config).await);
    }
    let mut one = WebClient::connect(proxies[0].addr(Listener::Http)).await;
    assert_eq!(one.get(&busy.url("/a"), &[]).await.status, 429);
    let http = proxies[1].addr(Listener::Http);
    for url in [busy.url("/b"), plain.url("/b")] {
        let held = WebClient::connect(http).await.get(&url, &[]).await;
        let retry: u64 = held.header("retry-after").unwrap().parse().unwrap();
        assert!(held.header("proxy-status").is_some(), "{url}: {held:?}");
        assert!((500..=600).contains(&retry), "{url}: {held:?}");
    }
    let ca_pem = proxies[1].ca_cert_path.clone().unwrap();
    let port = secure.addr.port();
    let mut client = tunnel(
        http,
        ("127.0.0.1", port),
        trusting(&ca_pem, &[b"http/1.1"]),
        "127.0.0.1",
    )
    .await
    .expect("a tunnel");
    let held = client
        .get(&format!("https://127.0.0.1:{port}/b"), &[])
        .await;
    assert!(held.header("proxy-status").is_some(), "{held:?}");
    assert_eq!(busy.targets(), ["/robots.txt", "/a"]);
    assert!(plain.targets().is_empty(), "{:?}", plain.targets());
    assert!(secure.targets().is_empty(), "{:?}", secure.targets());
}

/// A fleet mid-upgrade: a proxy of the previous version kept a web site's
/// hold under `host:port` in the gate's fields (`nb/127.0.0.1:P`). This
/// version holds a request for that port by it; and a hold this version
/// writes (`nb/127.0.0.1`, the site's) is written under `host:port` too,
/// where a proxy of the previous version at that port reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_site_s_hold_is_read_and_written_for_proxies_of_the_previous_version() {
    let redis = RedisServer::start();
    let origin = WebOrigin::start_on(
        "127.0.0.7:0".parse().unwrap(),
        |path, _: &hyper::HeaderMap| match path {
            "/robots.txt" => (404, vec![], vec![]),
            "/busy" => (503, vec![("retry-after", "300".into())], b"busy".to_vec()),
            _ => (200, vec![], b"page".to_vec()),
        },
    )
    .await;
    let proxies = web_fleet(&redis, Some(Duration::ZERO)).await;
    let mut conn = redis.connection().await;
    let gate = "test:{h/127.0.0.7}:gate";
    let mut client = WebClient::connect(proxies[0].addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/first"), &[]).await.status, 200);
    // What a proxy of the previous version wrote after a `Retry-After: 120`
    // at this port: not before, in the store's microseconds.
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let until = (secs + 120) * 1_000_000 + micros;
    let old_field = format!("nb/{}", origin.addr);
    let _: i64 = redis::cmd("HSET")
        .arg(gate)
        .arg(&old_field)
        .arg(until.to_string())
        .query_async(&mut conn)
        .await
        .unwrap();
    let held = client.get(&origin.url("/second"), &[]).await;
    assert_eq!(held.status, 429, "{held:?}");
    let retry: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((100..=120).contains(&retry), "{held:?}");
    assert_eq!(origin.targets(), ["/robots.txt", "/first"]);
    // This version's hold, under both names.
    let _: i64 = redis::cmd("HDEL")
        .arg(gate)
        .arg(&old_field)
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut other = WebClient::connect(proxies[1].addr(Listener::Http)).await;
    assert_eq!(other.get(&origin.url("/busy"), &[]).await.status, 503);
    for field in ["nb/127.0.0.7".to_string(), old_field] {
        let nb: Option<u64> = redis::cmd("HGET")
            .arg(gate)
            .arg(&field)
            .query_async(&mut conn)
            .await
            .unwrap();
        let (now, _): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        let left = nb.unwrap_or_else(|| panic!("{field} not written")) / 1_000_000 - now;
        assert!((290..=300).contains(&left), "{field}: {left}");
    }
}

/// Hole 1's robots.txt row in a fleet: a request waiting on its bot's rate
/// while the site's robots.txt became unreachable (fetched again through
/// its proxy for another bot, `503`, no good copy) is decided again when
/// its turn comes at the fleet's gate: refused, and not sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_request_waiting_when_robots_txt_becomes_unreachable_is_refused_in_a_fleet() {
    let redis = RedisServer::start();
    crate::common::web::robots_txt_unreachable_while_waiting(|config| {
        start_proxy(with_store(config, &redis, OnUnavailable::Refuse))
    })
    .await;
}
