//! Holds N requests waiting on one slow host and measures what that costs the
//! proxy: its resident memory while they wait, and how late each is admitted
//! when its turn comes. Run it with `benches/hold-10k.sh` (which raises the
//! open-file limit and builds the release binary).
//!
//! The host is a Gopher server in this process whose robots.txt asks for
//! `Crawl-delay: D`; the proxy (the release binary, a child process) must start
//! the N requests D apart, one at a time. The server notes when each arrives:
//! `gap - D` is the lateness of an admission.

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

fn flag(name: &str, default: &str) -> String {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string())
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::main]
async fn main() {
    let n: usize = flag("--requests", "10000").parse().expect("--requests N");
    let delay_ms: u64 = flag("--delay-ms", "2").parse().expect("--delay-ms MS");
    let binary = flag("--binary", "target/release/robots-proxy");

    // The slow host: robots.txt with the Crawl-delay, every page "ok".
    let origin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin_port = origin.local_addr().unwrap().port();
    let arrivals: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let seen = arrivals.clone();
    let robots = format!(
        "User-agent: *\r\nCrawl-delay: {}\r\n",
        delay_ms as f64 / 1000.0
    );
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = origin.accept().await else {
                return;
            };
            let (seen, robots) = (seen.clone(), robots.clone());
            tokio::spawn(async move {
                let mut stream = BufReader::new(stream);
                let mut line = String::new();
                if stream.read_line(&mut line).await.is_err() {
                    return;
                }
                let answer = if line.trim_end() == "robots.txt" {
                    robots.into_bytes()
                } else {
                    seen.lock().unwrap().push(Instant::now());
                    b"ok\r\n".to_vec()
                };
                let _ = stream.get_mut().write_all(&answer).await;
            });
        }
    });

    // The proxy, with room for N connections and waits long enough for all.
    let dir = std::env::temp_dir().join(format!("hold-10k-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        // One client holds every request: its per-client cap must allow them.
        format!(
            "[limits]\nmax_connections = {}\nmax_connections_per_client = {}\n",
            n + 100,
            n + 100
        ),
    )
    .unwrap();
    let gopher_port = free_port();
    let max_wait = format!("{}s", (n as u64 * delay_ms) / 1000 + 60);
    let mut proxy = Command::new(&binary)
        .args(["run", "--config", config.to_str().unwrap()])
        .args(["--gemini-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--gopher-listen", &format!("127.0.0.1:{gopher_port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--allow-private-upstreams", "--max-wait", &max_wait])
        .args(["--state-dir", dir.to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("start the proxy (build it with cargo build --release)");
    let pid = proxy.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", gopher_port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the proxy did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let idle_rss = rss_kib(pid).unwrap_or(0);

    // N clients, all for the one host.
    let started = Instant::now();
    let clients: Vec<_> = (0..n)
        .map(|i| {
            tokio::spawn(async move {
                let mut s = loop {
                    match TcpStream::connect(("127.0.0.1", gopher_port)).await {
                        Ok(s) => break s,
                        Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
                    }
                };
                let line = format!("gopher://127.0.0.1:{origin_port}/0/page{i}\r\n");
                s.write_all(line.as_bytes()).await.ok()?;
                let mut answer = Vec::new();
                s.read_to_end(&mut answer).await.ok()?;
                Some(answer == b"ok\r\n")
            })
        })
        .collect();

    // Sample the proxy's memory while the queue drains.
    let sampler = tokio::spawn(async move {
        let mut peak = 0;
        while let Some(kib) = rss_kib(pid) {
            peak = peak.max(kib);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        peak
    });
    let mut ok = 0;
    for c in clients {
        if c.await.ok().flatten() == Some(true) {
            ok += 1;
        }
    }
    let elapsed = started.elapsed();
    let _ = proxy.kill();
    let _ = proxy.wait();
    let peak = sampler.await.unwrap_or(0);
    let _ = std::fs::remove_dir_all(&dir);

    let mut times = arrivals.lock().unwrap().clone();
    times.sort();
    let delay = Duration::from_millis(delay_ms);
    let mut late: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).saturating_sub(delay).as_secs_f64() * 1e3)
        .collect();
    late.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        late.get(((late.len().max(1) - 1) as f64 * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let short = times.windows(2).filter(|w| w[1] - w[0] < delay).count();
    let min_gap = times
        .windows(2)
        .map(|w| w[1] - w[0])
        .min()
        .unwrap_or_default();
    println!(
        "{n} requests held on one host with Crawl-delay {delay_ms} ms; {ok} answered in {:.1} s",
        elapsed.as_secs_f64()
    );
    println!(
        "proxy RSS: idle {:.1} MiB, peak {:.1} MiB ({:.1} KiB per held request)",
        idle_rss as f64 / 1024.0,
        peak as f64 / 1024.0,
        (peak.saturating_sub(idle_rss)) as f64 / n as f64
    );
    println!(
        "admission lateness (gap minus Crawl-delay): p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        pct(0.5),
        pct(0.99),
        late.last().copied().unwrap_or(0.0)
    );
    // Gaps are seen where the requests arrive, after a connect each: connection
    // jitter can make one arrival gap a little shorter than the admission gap.
    println!(
        "arrival gaps shorter than the delay: {short} of {}, the shortest {:.3} ms",
        times.len().saturating_sub(1),
        min_gap.as_secs_f64() * 1e3
    );
    assert_eq!(ok, n, "every request answered");
}
