//! Gopher latency and throughput, side by side in one run: straight to the
//! server, through a plain relay (e.g. `socat`; leave `--relay` out to skip
//! it), and through robots-proxy.
//!
//! ```sh
//! cargo run --release --example gopher_load -- \
//!     --direct 127.0.0.1:70 --relay 127.0.0.1:7071 --proxy 127.0.0.1:7070 \
//!     --small /hello.txt --big /docs/blob.bin [--requests 300] [--big-requests 30] [--rounds 3] \
//!     [--baseline 127.0.0.1:OTHER_PROXY] [--proxy-pid PID] [--relay-pid PID]
//! ```
//!
//! `--proxy-pid`, `--relay-pid`: the CPU each spent on a small request (over
//! the interleaved latency phase) and the proxy's per GB relayed.
//!
//! `--baseline`: another robots-proxy (an older build: `benches/compare.sh`),
//! sent what the proxy is sent.
//!
//! Latency: `--requests` × `--rounds` requests for the small selector, one
//! connection each, the ways interleaved request by request; p50, p99
//! and the median of the pairwise difference to the direct request sent beside
//! it. Throughput: `--rounds` × `--big-requests` sequential fetches of the big
//! selector per way, rotating the order; bytes per second. The proxy is sent
//! the selector as a Gopher URL of the direct server, as a crawler would.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    direct: SocketAddr,
    relay: Option<SocketAddr>,
    baseline: Option<SocketAddr>,
    proxy: SocketAddr,
    small: String,
    big: String,
    requests: usize,
    big_requests: usize,
    proxy_pid: Option<u32>,
    relay_pid: Option<u32>,
    rounds: usize,
}

fn args() -> Args {
    let mut a = Args {
        direct: "127.0.0.1:70".parse().unwrap(),
        relay: None,
        baseline: None,
        proxy: "127.0.0.1:7070".parse().unwrap(),
        small: "/".into(),
        big: "/".into(),
        requests: 300,
        big_requests: 30,
        proxy_pid: None,
        relay_pid: None,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--direct" => a.direct = v.parse().expect("--direct ADDR"),
            "--relay" => a.relay = Some(v.parse().expect("--relay ADDR")),
            "--baseline" => a.baseline = Some(v.parse().expect("--baseline ADDR")),
            "--proxy" => a.proxy = v.parse().expect("--proxy ADDR"),
            "--small" => a.small = v,
            "--big" => a.big = v,
            "--requests" => a.requests = v.parse().expect("--requests N"),
            "--big-requests" => a.big_requests = v.parse().expect("--big-requests N"),
            "--rounds" => a.rounds = v.parse().expect("--rounds N"),
            "--proxy-pid" => a.proxy_pid = Some(v.parse().expect("--proxy-pid PID")),
            "--relay-pid" => a.relay_pid = Some(v.parse().expect("--relay-pid PID")),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Direct,
    Relay,
    Baseline,
    Proxy,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Relay => "relay",
            Way::Baseline => "baseline",
            Way::Proxy => "proxied",
        }
    }
}

/// One request; the answer's size.
async fn fetch(a: &Args, way: Way, selector: &str) -> std::io::Result<usize> {
    let (addr, line) = match way {
        Way::Direct => (a.direct, selector.to_string()),
        Way::Relay => (a.relay.expect("a relay"), selector.to_string()),
        Way::Baseline => (
            a.baseline.expect("a baseline"),
            format!("gopher://{}/0{selector}", a.direct),
        ),
        Way::Proxy => (a.proxy, format!("gopher://{}/0{selector}", a.direct)),
    };
    let mut s = TcpStream::connect(addr).await?;
    s.set_nodelay(true)?;
    s.write_all(format!("{line}\r\n").as_bytes()).await?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await?;
    if answer.starts_with(b"3") {
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&answer[..answer.len().min(100)]).into_owned(),
        ));
    }
    Ok(answer.len())
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = args();
    let ways: Vec<Way> = [Way::Direct, Way::Relay, Way::Baseline, Way::Proxy]
        .into_iter()
        .filter(|w| *w != Way::Relay || a.relay.is_some())
        .filter(|w| *w != Way::Baseline || a.baseline.is_some())
        .collect();
    let n = ways.len();
    for &way in &ways {
        fetch(&a, way, &a.small)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", way.name()));
    }
    // Latency: the ways interleaved request by request (in rotating order), so
    // a drift in the machine's speed falls on all alike, and the added latency
    // is also taken pairwise: each proxied request against the direct one sent
    // right beside it.
    let mut lat = vec![Vec::<Duration>::new(); n];
    let mut added = vec![Vec::<f64>::new(); n];
    // CPU per small request: each process's CPU over the whole interleaved
    // phase (it idles while the other ways are sent theirs).
    let cpu_before = [a.proxy_pid, a.relay_pid].map(|pid| pid.map(cpu_seconds));
    for i in 0..a.requests * a.rounds {
        let mut took = vec![Duration::ZERO; n];
        for k in 0..n {
            let w = (k + i) % n;
            let t = Instant::now();
            fetch(&a, ways[w], &a.small).await.expect("small fetch");
            took[w] = t.elapsed();
        }
        for w in 0..n {
            lat[w].push(took[w]);
            added[w].push((took[w].as_secs_f64() - took[0].as_secs_f64()) * 1e3);
        }
    }
    let small = (a.requests * a.rounds) as f64;
    let cpu_small = [0, 1].map(|k| {
        let pid = [a.proxy_pid, a.relay_pid][k]?;
        Some((cpu_seconds(pid) - cpu_before[k]?) * 1e6 / small)
    });
    // Throughput: rounds of big fetches, rotating which way goes first; the
    // proxy's CPU time over its share, where its pid is given.
    let mut mbps = vec![0.0f64; n];
    let (mut proxy_cpu, mut proxy_bytes) = (0.0f64, 0usize);
    for round in 0..a.rounds {
        for k in 0..n {
            let w = (k + round) % n;
            let t = Instant::now();
            let cpu = a.proxy_pid.map(cpu_seconds);
            let mut bytes = 0usize;
            for _ in 0..a.big_requests {
                bytes += fetch(&a, ways[w], &a.big).await.expect("big fetch");
            }
            if let (Way::Proxy, Some(before)) = (ways[w], cpu) {
                proxy_cpu += cpu_seconds(a.proxy_pid.unwrap()) - before;
                proxy_bytes += bytes;
            }
            mbps[w] += bytes as f64 / t.elapsed().as_secs_f64() / 1e6 / a.rounds as f64;
        }
    }
    println!(
        "{} requests each, interleaved; {} rounds of {} big fetches each:",
        a.requests * a.rounds,
        a.rounds,
        a.big_requests
    );
    for w in 0..n {
        lat[w].sort();
        added[w].sort_by(f64::total_cmp);
        let median_added = added[w][added[w].len() / 2];
        let relayed = if a.big_requests == 0 {
            String::new() // --big-requests 0: latency only
        } else {
            format!("  {:8.1} MB/s ({:.2}x direct)", mbps[w], mbps[w] / mbps[0])
        };
        println!(
            "{:8} p50 {:6.3} ms  p99 {:6.3} ms  added (median of pairs) {median_added:+6.3} ms{relayed}",
            ways[w].name(),
            pct(&lat[w], 0.5),
            pct(&lat[w], 0.99),
        );
    }
    if let [Some(proxy), relay] = cpu_small {
        let relay = relay.map_or(String::new(), |r| {
            format!("; relay {r:.0} µs (proxied / relay: {:.2})", proxy / r)
        });
        println!(
            "CPU per small request (user + system, 10 ms ticks): proxied {proxy:.0} µs{relay}"
        );
    }
    if proxy_bytes > 0 {
        println!(
            "proxy CPU: {:.2} s per GB relayed (user + system)",
            proxy_cpu / (proxy_bytes as f64 / 1e9)
        );
    }
}

/// A process's user + system CPU time so far, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // Fields after the command name (which may hold spaces) close with ')'.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0 // USER_HZ: 100 on Linux
}
