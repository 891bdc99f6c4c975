//! What fleet mode costs, side by side in one run (these machines are noisy:
//! read the ratios).
//!
//!     cargo bench --bench fleet
//!     FLEET_BENCH=gate cargo bench --bench fleet    # or =rps: one half only
//!
//! Needs `redis-server` (Debian's). It is started here on a unix socket and on
//! a loopback TCP port, as a Redis Cluster (three masters, three replicas,
//! made by `redis-cli --cluster create`) and as a master, a replica and three
//! Sentinels (tests/common/redis_ha.rs: the same setups the tests fail over).
//!
//! 1. **The gate.** The time one request spends being admitted: the local gate
//!    against the shared one (its script's round trip) on each store, on a
//!    cold server each time (a crawl over many hosts), p50 and p99 of 3 × 2000
//!    admissions; beside them, one trivial script call (the floor).
//! 2. **Requests per second** through one proxy without a store, one with
//!    each store, and three sharing one store, all in this process against one
//!    in-process Gopher server (no Crawl-delay, concurrency 1024: the gate
//!    and the store are the only brakes), 32 clients for 3 s each.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_server::ha::free_port;
use robots_proxy::cli::RunArgs;
use robots_proxy::config::{Config, RawConfig};
use robots_proxy::listener::Listener;
use robots_proxy::metrics::Metrics;
use robots_proxy::politeness::{Fleet, Politeness};
use robots_proxy::server::Proxy;
use robots_proxy::store::{OnUnavailable, Store, StoreConfig};
use robots_proxy::target::{HostKey, Scheme, Server};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

// The tests' own real Cluster and Sentinel setups.
#[path = "../tests/common/redis.rs"]
mod redis_server;
mod common {
    /// A fresh directory for a server's files (the tests' helper, here).
    pub fn state_dir() -> std::path::PathBuf {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "robots-proxy-fleet-bench-ha-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }
}

/// Where each store listens.
struct Stores {
    unix: String,
    tcp: String,
    cluster: String,
    sentinel: String,
}

struct Redis(Child, PathBuf);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

/// redis-server on a unix socket and a loopback port; returns once it is ready.
fn redis() -> (Redis, String, String) {
    let dir = std::env::temp_dir().join(format!("robots-proxy-fleet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("redis.sock");
    let port = free_port();
    let mut child = Command::new("redis-server")
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--unixsocket",
        ])
        .arg(&socket)
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server (apt-get install redis-server)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        if line.unwrap().contains("ready to accept connections") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (
        Redis(child, dir),
        format!("unix://{}", socket.display()),
        format!("redis://127.0.0.1:{port}"),
    )
}

fn store_config(url: &str, prefix: &str) -> StoreConfig {
    StoreConfig {
        url: url.into(),
        prefix: prefix.into(),
        on_unavailable: OnUnavailable::Refuse,
        timeout: Duration::from_secs(1),
        lease: Duration::from_secs(30),
    }
}

fn config() -> Config {
    let dir = std::env::temp_dir().join(format!(
        "robots-proxy-fleet-bench-state-{}-{}",
        std::process::id(),
        free_port()
    ));
    let args = RunArgs {
        gemini_listen: Some("127.0.0.1:0".into()),
        gopher_listen: Some("127.0.0.1:0".into()),
        metrics_listen: Some("127.0.0.1:0".into()),
        allow_private_upstreams: true,
        state_dir: Some(dir),
        agent: Some("benchbot".into()),
        ..RunArgs::default()
    };
    let mut config = RawConfig::default().resolve(&args).unwrap();
    config.politeness.default_delay = Duration::ZERO;
    config.politeness.per_host_concurrency = 1024;
    config
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// `n` admissions, each to a server never seen before; their durations.
async fn admissions(gate: &Arc<Politeness>, round: usize, n: usize) -> Vec<Duration> {
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let port = 1 + (round * n + i) as u16;
        let server = Server {
            name: HostKey {
                scheme: Scheme::Gopher,
                host: "127.0.0.9".into(),
                port,
            },
            addrs: vec![SocketAddr::from(([127, 0, 0, 9], port))],
        };
        let started = Instant::now();
        let permit = gate.admit(&server, Some(Duration::ZERO)).await.unwrap();
        took.push(started.elapsed());
        drop(permit);
    }
    took
}

async fn gate_latency(stores: &Stores) {
    let stop = CancellationToken::new();
    let politeness = config().politeness;
    let local = Politeness::new(politeness.clone());
    let mut gates = vec![("local gate", local)];
    for (name, url) in [
        ("shared gate, unix socket", &stores.unix),
        ("shared gate, TCP loopback", &stores.tcp),
        ("shared gate, Cluster (TCP)", &stores.cluster),
        ("shared gate, Sentinel's master (TCP)", &stores.sentinel),
    ] {
        let store = Store::open(
            store_config(url, &format!("bench-{name}:")),
            Arc::new(Metrics::new()),
            stop.clone(),
        )
        .await
        .unwrap();
        gates.push((
            name,
            Politeness::kept_by(Box::new(Fleet::new(
                store,
                Arc::new(robots_proxy::politeness::Local::new(politeness.clone())),
            ))),
        ));
    }
    // The floor: one trivial script call on the crate's connection manager,
    // what any shared admission costs before the gate does anything.
    let client = redis::Client::open(stores.unix.as_str()).unwrap();
    let mut manager = redis::aio::ConnectionManager::new(client).await.unwrap();
    let trivial = redis::Script::new("return 1");
    let mut floor = Vec::new();
    for _ in 0..3 * 2000 {
        let started = Instant::now();
        let _: i64 = trivial.invoke_async(&mut manager).await.unwrap();
        floor.push(started.elapsed());
    }
    // Inside the store: every command's own time on the unix-socket server
    // (its slow log with no threshold), to tell the scripts' time from the
    // round trip's.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .arg("slowlog-max-len")
        .arg(100_000)
        .query_async(&mut manager)
        .await
        .unwrap();
    let _: () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async(&mut manager)
        .await
        .unwrap();
    let mut results: Vec<Vec<Duration>> = vec![Vec::new(); gates.len()];
    for round in 0..3 {
        for k in 0..gates.len() {
            // Rotate the order each round.
            let k = (k + round) % gates.len();
            results[k].extend(admissions(&gates[k].1, round, 2000).await);
        }
    }
    let inside = inside_store(&mut manager).await;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(10_000)
        .query_async(&mut manager)
        .await
        .unwrap();
    println!("| admission | p50 | p99 |");
    println!("| --- | --- | --- |");
    floor.sort();
    println!(
        "| one trivial script call, unix socket (the floor) | {:.1} µs | {:.1} µs |",
        percentile(&floor, 0.5).as_secs_f64() * 1e6,
        percentile(&floor, 0.99).as_secs_f64() * 1e6
    );
    for (k, (name, _)) in gates.iter().enumerate() {
        let mut r = results[k].clone();
        r.sort();
        println!(
            "| {name} | {:.1} µs | {:.1} µs |",
            percentile(&r, 0.5).as_secs_f64() * 1e6,
            percentile(&r, 0.99).as_secs_f64() * 1e6
        );
    }
    println!();
    println!("| inside the store (the unix and TCP server), per call | calls | p50 | p99 |");
    println!("| --- | --- | --- | --- |");
    for (name, mut took) in inside {
        took.sort();
        println!(
            "| {name} | {} | {} µs | {} µs |",
            took.len(),
            took[took.len() / 2],
            took[(took.len() - 1) * 99 / 100]
        );
    }
    stop.cancel();
}

/// The scripts' own times (µs) from the store's slow log, by script: told
/// apart by how many keys each takes (the reservation 4, a release 3, a
/// renewal or a cancel 2).
async fn inside_store(
    manager: &mut redis::aio::ConnectionManager,
) -> Vec<(&'static str, Vec<u64>)> {
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(manager)
        .await
        .unwrap();
    let mut by = vec![
        ("the reservation script", Vec::new()),
        ("the release script (a batch)", Vec::new()),
    ];
    for entry in log {
        let redis::Value::Array(fields) = entry else {
            continue;
        };
        let (Some(redis::Value::Int(micros)), Some(redis::Value::Array(args))) =
            (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let arg = |i: usize| match args.get(i) {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        if !arg(0).eq_ignore_ascii_case("evalsha") {
            continue;
        }
        match arg(2).as_str() {
            "4" => by[0].1.push(*micros as u64),
            "3" => by[1].1.push(*micros as u64),
            _ => {}
        }
    }
    by.retain(|(_, took)| !took.is_empty());
    by
}

/// A Gopher server answering every selector at once.
async fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut stream = tokio::io::BufReader::new(stream);
                let mut line = String::new();
                if stream.read_line(&mut line).await.is_err() {
                    return;
                }
                let body: &[u8] = if line.starts_with("robots.txt") {
                    b"User-agent: *\nAllow: /\n"
                } else {
                    b"page\r\n"
                };
                let _ = stream.get_mut().write_all(body).await;
            });
        }
    });
    addr
}

/// 32 clients for 3 s, round-robin over `proxies`; requests per second.
async fn throughput(proxies: &[SocketAddr], origin: SocketAddr) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..32)
        .map(|c| {
            let proxy = proxies[c % proxies.len()];
            let (done, stop) = (done.clone(), stop.clone());
            let line = format!("gopher://127.0.0.1:{}/0/p{c}\r\n", origin.port());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(proxy).await else {
                        continue;
                    };
                    let _ = s.write_all(line.as_bytes()).await;
                    let mut answer = Vec::new();
                    let _ = s.read_to_end(&mut answer).await;
                    if answer == b"page\r\n" {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    // Warm: the robots.txt fetch and the connections.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = done.load(Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rate = (done.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        let _ = c.await;
    }
    rate
}

/// `n` proxies on the store at `url` (none: without a store).
async fn proxies(n: usize, url: Option<&str>, prefix: &str) -> Vec<Proxy> {
    let mut all = Vec::new();
    for _ in 0..n {
        let mut c = config();
        c.store = url.map(|url| store_config(url, prefix));
        all.push(Proxy::start(c).await.unwrap());
    }
    all
}

async fn requests_per_second(stores: &Stores) {
    let origin = origin().await;
    let setups = [
        ("one proxy, no store", proxies(1, None, "").await),
        (
            "one proxy, shared store (TCP)",
            proxies(1, Some(&stores.tcp), "bench-one:").await,
        ),
        (
            "three proxies, one store (TCP)",
            proxies(3, Some(&stores.tcp), "bench-three:").await,
        ),
        (
            "one proxy, Cluster",
            proxies(1, Some(&stores.cluster), "bench-cluster:").await,
        ),
        (
            "three proxies, one Cluster",
            proxies(3, Some(&stores.cluster), "bench-cluster-three:").await,
        ),
        (
            "one proxy, Sentinel's master",
            proxies(1, Some(&stores.sentinel), "bench-sentinel:").await,
        ),
    ];
    let mut rates = vec![Vec::new(); setups.len()];
    for round in 0..3 {
        for k in 0..setups.len() {
            let k = (k + round) % setups.len();
            let addrs: Vec<SocketAddr> = setups[k]
                .1
                .iter()
                .map(|p| p.addr(Listener::Gopher))
                .collect();
            rates[k].push(throughput(&addrs, origin).await);
        }
    }
    let base = rates[0].iter().sum::<f64>() / 3.0;
    println!();
    println!("| setup | requests/s (mean of 3) | against one proxy without a store |");
    println!("| --- | --- | --- |");
    for (k, (name, _)) in setups.iter().enumerate() {
        let mean = rates[k].iter().sum::<f64>() / 3.0;
        println!("| {name} | {mean:.0} | {:.2} |", mean / base);
    }
}

fn main() {
    // `cargo bench` passes --bench; a plain `cargo test --benches` run passes
    // nothing and should not start servers.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let (_redis, unix, tcp) = redis();
    let cluster = redis_server::ha::RedisCluster::start();
    let sentinel = redis_server::ha::RedisSentinel::start();
    let stores = Stores {
        unix,
        tcp,
        cluster: cluster.url(),
        sentinel: sentinel.url(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // FLEET_BENCH=gate or =rps: one half only.
    let only = std::env::var("FLEET_BENCH").unwrap_or_default();
    runtime.block_on(async {
        if only != "rps" {
            gate_latency(&stores).await;
        }
        if only != "gate" {
            requests_per_second(&stores).await;
        }
    });
}
