//! Gopher latency and throughput, three ways side by side in one run: straight to
//! the server, through a plain relay (e.g. `socat`), and through robots-proxy.
//!
//! ```sh
//! cargo run --release --example gopher_load -- \
//!     --direct 127.0.0.1:70 --relay 127.0.0.1:7071 --proxy 127.0.0.1:7070 \
//!     --small /hello.txt --big /docs/blob.bin [--requests 300] [--big-requests 30] [--rounds 3]
//! ```
//!
//! Latency: `--requests` sequential requests for the small selector, one
//! connection each; p50 and p99. Throughput: `--big-requests` sequential fetches
//! of the big selector; bytes per second. The proxy is sent the selector as a
//! Gopher URL of the direct server, as a crawler would. Rounds rotate the order.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    direct: SocketAddr,
    relay: SocketAddr,
    proxy: SocketAddr,
    small: String,
    big: String,
    requests: usize,
    big_requests: usize,
    rounds: usize,
}

fn args() -> Args {
    let mut a = Args {
        direct: "127.0.0.1:70".parse().unwrap(),
        relay: "127.0.0.1:7071".parse().unwrap(),
        proxy: "127.0.0.1:7070".parse().unwrap(),
        small: "/".into(),
        big: "/".into(),
        requests: 300,
        big_requests: 30,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--direct" => a.direct = v.parse().expect("--direct ADDR"),
            "--relay" => a.relay = v.parse().expect("--relay ADDR"),
            "--proxy" => a.proxy = v.parse().expect("--proxy ADDR"),
            "--small" => a.small = v,
            "--big" => a.big = v,
            "--requests" => a.requests = v.parse().expect("--requests N"),
            "--big-requests" => a.big_requests = v.parse().expect("--big-requests N"),
            "--rounds" => a.rounds = v.parse().expect("--rounds N"),
            other => panic!("unknown flag {other}"),
        }
    }
    a
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Direct,
    Relay,
    Proxy,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Direct => "direct",
            Way::Relay => "socat",
            Way::Proxy => "proxied",
        }
    }
}

/// One request; the answer's size.
async fn fetch(a: &Args, way: Way, selector: &str) -> std::io::Result<usize> {
    let (addr, line) = match way {
        Way::Direct => (a.direct, selector.to_string()),
        Way::Relay => (a.relay, selector.to_string()),
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
    for way in [Way::Direct, Way::Relay, Way::Proxy] {
        fetch(&a, way, &a.small)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", way.name()));
    }
    println!(
        "latency: {} sequential requests of {}; throughput: {} fetches of {}",
        a.requests, a.small, a.big_requests, a.big
    );
    let ways = [Way::Direct, Way::Relay, Way::Proxy];
    let mut totals = [(0.0f64, 0.0f64, 0.0f64); 3];
    for round in 0..a.rounds {
        for k in 0..3 {
            let way = ways[(k + round) % 3];
            let mut lat = Vec::with_capacity(a.requests);
            for _ in 0..a.requests {
                let t = Instant::now();
                fetch(&a, way, &a.small).await.expect("small fetch");
                lat.push(t.elapsed());
            }
            lat.sort();
            let t = Instant::now();
            let mut bytes = 0usize;
            for _ in 0..a.big_requests {
                bytes += fetch(&a, way, &a.big).await.expect("big fetch");
            }
            let mbps = bytes as f64 / t.elapsed().as_secs_f64() / 1e6;
            let (p50, p99) = (pct(&lat, 0.5), pct(&lat, 0.99));
            println!(
                "{:8} p50 {p50:6.2} ms  p99 {p99:6.2} ms  {mbps:8.1} MB/s",
                way.name()
            );
            let i = ways.iter().position(|w| *w == way).unwrap();
            totals[i].0 += p50;
            totals[i].1 += p99;
            totals[i].2 += mbps;
        }
    }
    let n = a.rounds as f64;
    println!("mean of {} rounds:", a.rounds);
    for (i, way) in ways.iter().enumerate() {
        let (p50, p99, mbps) = (totals[i].0 / n, totals[i].1 / n, totals[i].2 / n);
        println!(
            "{:8} p50 {p50:6.2} ms  p99 {p99:6.2} ms  {mbps:8.1} MB/s  (p50 +{:.2} ms over direct)",
            way.name(),
            p50 - totals[0].0 / n
        );
    }
}
