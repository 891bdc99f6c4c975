//! A small Gemini load driver: requests per second and latency of one URL,
//! sent straight to its server and through robots-proxy, side by side.
//!
//! ```sh
//! cargo run --release --example gemini_load -- \
//!     --direct 127.0.0.1:PORT --proxy 127.0.0.1:1965 --url gemini://localhost:PORT/ \
//!     [--relay 127.0.0.1:HAPROXY_PORT] [--minimal 127.0.0.1:RELAY_FLOOR_PORT] \
//!     [--baseline 127.0.0.1:OTHER_PROXY] [--clients 16] [--seconds 5] [--rounds 3] [--resume] \
//!     [--proxy-pid PID] [--relay-pid PID] [--minimal-pid PID] [--baseline-pid PID] \
//!     [--floor-us MICROSECONDS]
//! ```
//!
//! `--proxy-pid`, `--relay-pid`, `--minimal-pid`, `--baseline-pid`: the CPU each process spent (user + system,
//! from `/proc/PID/stat`, in the kernel's 10 ms ticks) during its own runs,
//! divided by the requests it served: CPU per request, side by side.
//! `--floor-us`: the floor of a proxied request's CPU
//! (`examples/handshake_floor.rs`), to say the proxy's CPU against it.
//!
//! `--minimal`: `examples/relay_floor.rs`, the least a relay with the proxy's
//! TLS does (sent what the relay is sent).
//!
//! `--baseline`: another robots-proxy (an older build: `benches/compare.sh`),
//! sent what the proxy is sent.
//!
//! Each round runs the direct, the relayed (a TLS-terminating, re-encrypting
//! relay such as HAProxy, when `--relay` is given) and the proxied load one
//! after the other for the same time; the rounds rotate which goes first, so
//! drift in the machine's speed falls on all. Every request is a new TLS
//! connection, as in Gemini; the clients do not resume TLS sessions (most
//! crawlers don't) unless `--resume` is given.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

struct Args {
    direct: SocketAddr,
    proxy: SocketAddr,
    url: String,
    clients: usize,
    seconds: u64,
    rounds: usize,
    relay: Option<SocketAddr>,
    minimal: Option<SocketAddr>,
    baseline: Option<SocketAddr>,
    resume: bool,
    proxy_pid: Option<u32>,
    relay_pid: Option<u32>,
    minimal_pid: Option<u32>,
    baseline_pid: Option<u32>,
    floor_us: Option<f64>,
}

/// The CPU time `pid` has used, in user space and in the kernel, from
/// `/proc/PID/stat`: its fields 14 and 15, in USER_HZ ticks (100 a second on
/// Linux).
#[derive(Clone, Copy, Default)]
struct Cpu {
    user: Duration,
    system: Duration,
}

impl Cpu {
    fn total(self) -> Duration {
        self.user + self.system
    }

    fn since(self, before: Cpu) -> Cpu {
        Cpu {
            user: self.user.saturating_sub(before.user),
            system: self.system.saturating_sub(before.system),
        }
    }

    fn add(&mut self, other: Cpu) {
        self.user += other.user;
        self.system += other.system;
    }
}

fn cpu_of(pid: u32) -> Cpu {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // After the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    // `rest` starts at field 3 (the state): utime is field 14, stime 15.
    let ticks = |i: usize| Duration::from_millis(fields[i].parse::<u64>().unwrap() * 10);
    Cpu {
        user: ticks(11),
        system: ticks(12),
    }
}

fn args() -> Args {
    let mut a = Args {
        direct: "127.0.0.1:1966".parse().unwrap(),
        proxy: "127.0.0.1:1965".parse().unwrap(),
        url: String::new(),
        clients: 16,
        seconds: 5,
        rounds: 3,
        relay: None,
        minimal: None,
        baseline: None,
        resume: false,
        proxy_pid: None,
        relay_pid: None,
        minimal_pid: None,
        baseline_pid: None,
        floor_us: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--resume" {
            a.resume = true;
            continue;
        }
        let value = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--direct" => a.direct = value.parse().expect("--direct ADDR"),
            "--proxy" => a.proxy = value.parse().expect("--proxy ADDR"),
            "--url" => a.url = value,
            "--clients" => a.clients = value.parse().expect("--clients N"),
            "--seconds" => a.seconds = value.parse().expect("--seconds N"),
            "--rounds" => a.rounds = value.parse().expect("--rounds N"),
            "--relay" => a.relay = Some(value.parse().expect("--relay ADDR")),
            "--minimal" => a.minimal = Some(value.parse().expect("--minimal ADDR")),
            "--baseline" => a.baseline = Some(value.parse().expect("--baseline ADDR")),
            "--proxy-pid" => a.proxy_pid = Some(value.parse().expect("--proxy-pid PID")),
            "--relay-pid" => a.relay_pid = Some(value.parse().expect("--relay-pid PID")),
            "--minimal-pid" => a.minimal_pid = Some(value.parse().expect("--minimal-pid PID")),
            "--baseline-pid" => a.baseline_pid = Some(value.parse().expect("--baseline-pid PID")),
            "--floor-us" => a.floor_us = Some(value.parse().expect("--floor-us MICROSECONDS")),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        a.url.starts_with("gemini://"),
        "--url gemini://HOST:PORT/PATH"
    );
    a
}

/// One request on a new connection; the answer's length.
async fn request(connector: &TlsConnector, addr: SocketAddr, url: &str) -> std::io::Result<usize> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost").expect("static name");
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(format!("{url}\r\n").as_bytes()).await?;
    let mut answer = Vec::new();
    match tls.read_to_end(&mut answer).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !answer.is_empty() => {}
        Err(e) => return Err(e),
    }
    if !answer.starts_with(b"2") {
        return Err(std::io::Error::other(format!(
            "answer: {}",
            String::from_utf8_lossy(&answer[..answer.len().min(80)])
        )));
    }
    Ok(answer.len())
}

struct Run {
    done: usize,
    errors: usize,
    latencies: Vec<Duration>,
    elapsed: Duration,
}

async fn load(
    connector: Arc<TlsConnector>,
    addr: SocketAddr,
    url: Arc<String>,
    clients: usize,
    for_: Duration,
) -> Run {
    let start = Instant::now();
    let end = start + for_;
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (connector, url) = (connector.clone(), url.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = 0;
                while Instant::now() < end {
                    let t = Instant::now();
                    match request(&connector, addr, &url).await {
                        Ok(_) => latencies.push(t.elapsed()),
                        Err(_) => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut run = Run {
        done: 0,
        errors: 0,
        latencies: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for t in tasks {
        let (latencies, errors) = t.await.expect("client task");
        run.done += latencies.len();
        run.errors += errors;
        run.latencies.extend(latencies);
    }
    run.elapsed = start.elapsed();
    run.latencies.sort();
    run
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn report(name: &str, r: &Run) -> f64 {
    let rps = r.done as f64 / r.elapsed.as_secs_f64();
    println!(
        "{name:8} {rps:9.0} req/s  p50 {:7.2} ms  p99 {:7.2} ms  ({} requests, {} errors)",
        percentile(&r.latencies, 0.50).as_secs_f64() * 1e3,
        percentile(&r.latencies, 0.99).as_secs_f64() * 1e3,
        r.done,
        r.errors
    );
    rps
}

#[tokio::main]
async fn main() {
    let a = args();
    let mut config = robots_proxy::tls::client_config().expect("TLS client config");
    if !a.resume {
        let mut c = (*config).clone();
        c.resumption = rustls::client::Resumption::disabled();
        config = Arc::new(c);
    }
    let connector = Arc::new(TlsConnector::from(config));
    let url = Arc::new(a.url.clone());
    let for_ = Duration::from_secs(a.seconds);
    let mut ways = vec![("direct", a.direct)];
    if let Some(relay) = a.relay {
        ways.push(("relay", relay));
    }
    if let Some(minimal) = a.minimal {
        ways.push(("minimal", minimal));
    }
    if let Some(baseline) = a.baseline {
        ways.push(("baseline", baseline));
    }
    ways.push(("proxied", a.proxy));
    // Warm the proxy's robots.txt cache and the servers' session state.
    for (_, addr) in &ways {
        request(&connector, *addr, &url)
            .await
            .expect("a first request succeeds");
    }
    println!(
        "{} clients, {} s per run, new TLS connection per request ({}): {}",
        a.clients,
        a.seconds,
        match a.resume {
            true => "clients resume sessions",
            false => "full handshakes",
        },
        a.url
    );
    let mut totals = vec![0.0; ways.len()];
    let mut spread = vec![(f64::MAX, 0.0f64); ways.len()];
    // Per way: its process, the CPU it used in its runs, the requests it served.
    let pids: Vec<Option<u32>> = ways
        .iter()
        .map(|(name, _)| match *name {
            "proxied" => a.proxy_pid,
            "relay" => a.relay_pid,
            "minimal" => a.minimal_pid,
            "baseline" => a.baseline_pid,
            _ => None,
        })
        .collect();
    let mut cpu = vec![(Cpu::default(), 0usize); ways.len()];
    for round in 0..a.rounds {
        for k in 0..ways.len() {
            let w = (k + round) % ways.len();
            let (name, addr) = ways[w];
            let before = pids[w].map(cpu_of);
            let r = load(connector.clone(), addr, url.clone(), a.clients, for_).await;
            if let (Some(pid), Some(before)) = (pids[w], before) {
                cpu[w].0.add(cpu_of(pid).since(before));
                cpu[w].1 += r.done;
            }
            let rps = report(name, &r);
            totals[w] += rps / a.rounds as f64;
            spread[w] = (spread[w].0.min(rps), spread[w].1.max(rps));
        }
    }
    println!("means of {} rounds:", a.rounds);
    let proxied = totals[ways.len() - 1];
    for (w, (name, _)) in ways.iter().enumerate() {
        let ratio = match w == ways.len() - 1 {
            true => String::new(),
            false => format!("  proxied / {name}: {:.2}", proxied / totals[w]),
        };
        println!(
            "{name:8} {:9.0} req/s  (rounds {:.0}–{:.0}){ratio}",
            totals[w], spread[w].0, spread[w].1,
        );
    }
    let per_request = |w: usize, part: fn(Cpu) -> Duration| {
        let (used, served) = cpu[w];
        (served > 0).then(|| part(used).as_secs_f64() * 1e6 / served as f64)
    };
    let mine = per_request(ways.len() - 1, Cpu::total);
    for (w, (name, _)) in ways.iter().enumerate() {
        if let Some(us) = per_request(w, Cpu::total) {
            let user = per_request(w, |c| c.user).unwrap_or_default();
            let system = per_request(w, |c| c.system).unwrap_or_default();
            println!(
                "CPU per request: {name:8} {us:6.0} µs = user {user:4.0} + kernel {system:4.0} ({:.2} s over {} requests)",
                cpu[w].0.total().as_secs_f64(),
                cpu[w].1
            );
        }
    }
    for other in ["relay", "minimal", "baseline"] {
        let w = ways.iter().position(|(name, _)| *name == other);
        if let (Some(mine), Some(theirs)) = (mine, w.and_then(|w| per_request(w, Cpu::total))) {
            println!("CPU per request, proxied / {other}: {:.2}", mine / theirs);
        }
    }
    if let (Some(mine), Some(floor)) = (mine, a.floor_us) {
        // The floor is user-space work (no sockets): against the proxy's
        // whole CPU, and against its user-space part alone.
        let user = per_request(ways.len() - 1, |c| c.user).unwrap_or_default();
        println!(
            "CPU per request, proxied / floor ({floor:.0} µs): {:.2}; user space only: {:.2}",
            mine / floor,
            user / floor
        );
    }
}
