//! Fleet mode on a Redis Cluster and on Sentinel, real servers on loopback
//! (tests/common/redis_ha.rs), from the side of a crawler that keeps asking
//! through a fleet while the store's master dies:
//! - the shared spacing holds across a Cluster whose servers' keys live on
//!   different masters;
//! - a master killed right after a start it had not yet passed on to its
//!   replica (the replica was stopped: asynchronous replication losing an
//!   acknowledged write, on purpose), the replica promoted: the server
//!   still never sees two starts closer than its Crawl-delay, and the
//!   proxies go on through the new master without a restart.
//!
//! Each test starts Debian's `redis-server` processes, so each is marked
//! `#[ignore = "needs redis-server"]` (`.ci/run` runs them, as root: the
//! lost write is made by an iptables rule on loopback for one connection).

use crate::redis_server;
use std::time::{Duration, Instant};

use crate::common::*;
use redis::Commands;
use redis_server::ha::{RedisCluster, RedisSentinel};
use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use robots_proxy::store::{OnUnavailable, StoreConfig};

/// A proxy on the store at `url`, refusing while it does not answer. The
/// deadline is short enough that a health check (every second) sees a
/// master gone before the failover promotes its replica.
async fn on_store(url: &str) -> Proxy {
    let mut config = test_config();
    config.store = Some(StoreConfig {
        url: url.to_string(),
        prefix: "test:".into(),
        on_unavailable: OnUnavailable::Refuse,
        timeout: Duration::from_millis(400),
        lease: Duration::from_secs(1),
    });
    start_proxy(config).await
}

/// The status page's JSON.
async fn status(proxy: &Proxy) -> serde_json::Value {
    let (code, body) = http_get(proxy.addr(Listener::Admin), "/api/status").await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// When each page (anything but robots.txt) reached `origin`.
fn page_starts(origin: &GopherOrigin) -> Vec<Instant> {
    let selectors = origin.selectors.lock().unwrap().clone();
    let arrivals = origin.arrivals.lock().unwrap().clone();
    selectors
        .iter()
        .zip(arrivals)
        .filter(|(s, _)| s.as_slice() != b"robots.txt")
        .map(|(_, at)| at)
        .collect()
}

fn gaps(starts: &[Instant]) -> Vec<f64> {
    starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect()
}

/// The gate's key for a server on `ip` (tests/store/fleet.rs: by machine).
fn gate_key(ip: std::net::IpAddr) -> String {
    format!("test:{{a/{ip}}}:gate")
}

/// Two servers whose keys live on two different masters, a crawler spread
/// over two proxies: each server sees the Crawl-delay between starts, and
/// each server's keys are on the master serving its hash tag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn the_spacing_holds_across_a_cluster() {
    let cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    // Machines whose gates hash to two different masters.
    let mut machines = Vec::new();
    for n in 1..=20u8 {
        let ip = machine(n).ip();
        let master = cluster.master_of(&gate_key(ip));
        if machines.iter().all(|&(_, m)| m != master) {
            machines.push((n, master));
        }
        if machines.len() == 2 {
            break;
        }
    }
    assert_eq!(machines.len(), 2, "two masters among 20 machines");
    let a = text_hole_on(machine(machines[0].0), "User-agent: *\nCrawl-delay: 0.3\n").await;
    let b = text_hole_on(machine(machines[1].0), "User-agent: *\nCrawl-delay: 0.3\n").await;
    let p1 = on_store(&cluster.url()).await;
    let p2 = on_store(&cluster.url()).await;
    let crawl_a = Crawl::start(&[&p1, &p2], &a, 4);
    let crawl_b = Crawl::start(&[&p2, &p1], &b, 4);
    wait_until("six pages from each server", || {
        page_starts(&a).len() >= 6 && page_starts(&b).len() >= 6
    })
    .await;
    crawl_a.stop().await;
    crawl_b.stop().await;
    assert_spaced(&gaps(&page_starts(&a)), 0.3);
    assert_spaced(&gaps(&page_starts(&b)), 0.3);
    for (origin, (_, master)) in [(&a, machines[0]), (&b, machines[1])] {
        let mut conn = cluster.node_connection(master);
        let key = gate_key(origin.addr.ip());
        assert!(
            conn.exists::<_, bool>(&key).unwrap(),
            "{key} on its master {master}"
        );
    }
    let status = status(&p1).await;
    assert_eq!(status["store"]["kind"], "cluster", "{status}");
    assert_eq!(
        status["store"]["masters"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );
}

/// Readies a server for a write the failover will lose: robots.txt known
/// through `proxy` (a request it refuses), then its gate on the master
/// (`conn`) set as if its last start were 9 s ago, longer than its
/// Crawl-delay, so the next page starts at once; that passed on to the
/// replica (`WAIT`) before the replica is cut off.
async fn ready_to_lose(proxy: &Proxy, origin: &GopherOrigin, conn: &mut redis::Connection) {
    let refused = gopher(proxy.addr(Listener::Gopher), origin.url("0/x").as_bytes()).await;
    assert!(
        first_line(&refused).starts_with('3'),
        "{}",
        first_line(&refused)
    );
    assert_eq!(origin.count(b"robots.txt"), 1);
    let (s, us): (u64, u64) = redis::cmd("TIME").query(conn).unwrap();
    let then = s * 1_000_000 + us - 9_000_000;
    let key = gate_key(origin.addr.ip());
    let _: () = conn
        .hset_multiple(&key, &[("last", then), ("st", then)])
        .unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(1).arg(5000).query(conn).unwrap();
    assert_eq!(acked, 1, "the replica has the gate");
}

/// Asks for one page through `proxy`, which starts at once: the write the
/// failover loses. Returns once the request's lease is released on the
/// master (`conn`), so no proxy holds it to re-assert in the new master:
/// the start is known to no one but the lost write.
async fn the_lost_start(proxy: &Proxy, origin: &GopherOrigin, conn: &mut redis::Connection) {
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/first").as_bytes(),
    )
    .await;
    assert_eq!(answer, b"text\r\n");
    let leases = format!("test:{{a/{}}}:leases", origin.addr.ip());
    let deadline = Instant::now() + Duration::from_secs(5);
    while conn.zcard::<_, i64>(&leases).unwrap() > 0 {
        assert!(
            Instant::now() < deadline,
            "the lease of the lost start released"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const ROBOTS: &str = "User-agent: *\nDisallow: /x\nCrawl-delay: 8\n";

/// After a failover: a page relayed through the new master (without
/// restarting the proxies), no two page starts closer than the
/// Crawl-delay, the failover counted and the new master on the status page.
async fn after_failover(crawl: Crawl, origin: &GopherOrigin, proxies: [&Proxy; 2], master: u16) {
    crawl.relayed_at_least(1, Duration::from_secs(30)).await;
    crawl.stop().await;
    assert_spaced(&gaps(&page_starts(origin)), 8.0);
    for p in proxies {
        let metrics = settled_metrics(p.addr(Listener::Admin)).await;
        let failovers = sample(
            &metrics,
            r#"robots_proxy_store_events_total{event="failover"}"#,
        );
        assert!(failovers >= Some(1.0), "{metrics}");
        let status = status(p).await;
        let masters = status["store"]["masters"].to_string();
        assert!(masters.contains(&format!(":{master}\"")), "{masters}");
    }
}

/// A Cluster master killed right after a start it never passed on (its
/// replica was cut off for that moment), its replica promoted: the server
/// still sees its Crawl-delay between every two starts, and both proxies
/// go on through the new master without being restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server, and root for iptables: cargo test -- --include-ignored"]
async fn a_cluster_master_killed_after_a_lost_write_keeps_the_spacing() {
    let mut cluster = tokio::task::spawn_blocking(RedisCluster::start)
        .await
        .unwrap();
    let origin = text_hole_on(machine(7), ROBOTS).await;
    let key = gate_key(origin.addr.ip());
    let master = cluster.master_of(&key);
    let replica = cluster.replica_of(master);
    let p1 = on_store(&cluster.url()).await;
    let p2 = on_store(&cluster.url()).await;
    let mut on_master = cluster.node_connection(master);
    ready_to_lose(&p1, &origin, &mut on_master).await;
    let cut = cluster.cut_off_replica(master);
    the_lost_start(&p1, &origin, &mut on_master).await;
    cluster.kill(master);
    let crawl = Crawl::start(&[&p1, &p2], &origin, 4);
    let (_cluster, now) = tokio::task::spawn_blocking(move || {
        let now = cluster.failed_over(&key, master);
        (cluster, now)
    })
    .await
    .unwrap();
    assert_eq!(now, replica);
    // Only now: the dead master's kernel still resends what it had queued.
    drop(cut);
    after_failover(crawl, &origin, [&p1, &p2], replica).await;
}

/// The same through Sentinel: the master killed after a start its replica
/// never saw, the Sentinels promote the replica, the proxies follow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server, and root for iptables: cargo test -- --include-ignored"]
async fn a_sentinel_failover_after_a_lost_write_keeps_the_spacing() {
    let mut sentinel = tokio::task::spawn_blocking(RedisSentinel::start)
        .await
        .unwrap();
    let origin = text_hole_on(machine(8), ROBOTS).await;
    let p1 = on_store(&sentinel.url()).await;
    let p2 = on_store(&sentinel.url()).await;
    let mut on_master = sentinel.connection(sentinel.master_port());
    ready_to_lose(&p1, &origin, &mut on_master).await;
    let cut = sentinel.cut_off_replica();
    the_lost_start(&p1, &origin, &mut on_master).await;
    sentinel.kill_master();
    let crawl = Crawl::start(&[&p1, &p2], &origin, 4);
    let replica = sentinel.replica_port();
    let _sentinel = tokio::task::spawn_blocking(move || {
        sentinel.failed_over();
        sentinel
    })
    .await
    .unwrap();
    drop(cut);
    after_failover(crawl, &origin, [&p1, &p2], replica).await;
    assert_eq!(status(&p1).await["store"]["kind"], "sentinel");
}

/// A Cluster that is down when the proxy starts: a request is told to slow
/// down and nothing reaches the server; once the Cluster is up on the seeds'
/// ports, the same proxy (not restarted) relays through it, spaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: cargo test -- --include-ignored"]
async fn a_cluster_down_at_start_is_used_once_it_is_up() {
    let ports = RedisCluster::free_ports();
    let origin = text_hole_on(machine(9), "User-agent: *\nCrawl-delay: 0.3\n").await;
    let proxy = on_store(&RedisCluster::url_of(&ports)).await;
    let refused = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/early").as_bytes(),
    )
    .await;
    assert!(
        first_line(&refused).starts_with('3'),
        "{}",
        first_line(&refused)
    );
    assert!(page_starts(&origin).is_empty());
    let before = status(&proxy).await;
    assert_eq!(before["store"]["up"], false, "{before}");
    let _cluster = tokio::task::spawn_blocking(move || RedisCluster::start_on(ports))
        .await
        .unwrap();
    let crawl = Crawl::start(&[&proxy], &origin, 3);
    crawl.relayed_at_least(4, Duration::from_secs(30)).await;
    crawl.stop().await;
    assert_spaced(&gaps(&page_starts(&origin)), 0.3);
    // Every master, though the proxy first met the Cluster while it formed
    // (its first map of the slots may lack one): by the next health check.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let after = status(&proxy).await;
        assert_eq!(after["store"]["up"], true, "{after}");
        if after["store"]["masters"].as_array().map(Vec::len) == Some(3) {
            break;
        }
        assert!(Instant::now() < deadline, "{after}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
