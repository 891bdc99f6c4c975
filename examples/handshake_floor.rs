//! The floor under a proxied Gemini request: the two handshakes it cannot
//! do without, with the proxy's own rustls configurations, in memory (no
//! sockets, no tasks): one full server handshake with a crawler (the proxy's
//! listener config and certificate: ECDSA P-256, X25519, a session ticket
//! sent) and one resumed client handshake with the capsule (the proxy's
//! upstream config, its session kept from the handshake before). Only the
//! proxy's side is timed: its `ServerConnection` and `ClientConnection`
//! reading, processing and writing; the crawler's and the capsule's sides run
//! in the same thread, untimed. One thread, CPU-bound, nothing else to wait
//! for: its wall time is its CPU time.
//!
//!   cargo run --release --example handshake_floor -- [--pairs 2000]
//!
//! Prints the median of 5 runs, in µs of CPU per pair (benches/relay.sh
//! divides the proxy's CPU per request by it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

/// Moves what `from` has to send into `to`; the time spent in the proxy's
/// side (`from` or `to`, as `proxy_sends` says) is added to `timed`.
fn pump(from: &mut Connection, to: &mut Connection, proxy_sends: bool, timed: &mut Duration) {
    let mut wire = Vec::new();
    let t = Instant::now();
    while from.wants_write() {
        from.write_tls(&mut wire).expect("write_tls");
    }
    if proxy_sends {
        *timed += t.elapsed();
    }
    if wire.is_empty() {
        return;
    }
    let t = Instant::now();
    let mut rest = &wire[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("read_tls");
        to.process_new_packets()
            .expect("a handshake that completes");
    }
    if !proxy_sends {
        *timed += t.elapsed();
    }
}

/// One handshake between `client` and `server`, to its end (tickets too);
/// the proxy's side timed into `timed`.
fn handshake(client: Connection, server: Connection, proxy_is_server: bool, timed: &mut Duration) {
    let (mut client, mut server) = (client, server);
    for _ in 0..16 {
        pump(&mut client, &mut server, !proxy_is_server, timed);
        pump(&mut server, &mut client, proxy_is_server, timed);
        if !client.is_handshaking()
            && !server.is_handshaking()
            && !client.wants_write()
            && !server.wants_write()
        {
            return;
        }
    }
    panic!("the handshake did not end");
}

struct Configs {
    /// The crawler: any certificate, never resuming (a full handshake each time).
    crawler: Arc<ClientConfig>,
    /// The proxy's listener.
    listener: Arc<ServerConfig>,
    /// The proxy towards capsules: resuming.
    upstream: Arc<ClientConfig>,
    /// The capsule.
    capsule: Arc<ServerConfig>,
}

fn configs(dir: &std::path::Path) -> Configs {
    use robots_proxy::tls;
    let names = ["localhost".to_string()];
    let listener = tls::server_config(tls::load_or_generate(&dir.join("proxy"), &names).unwrap())
        .expect("the listener's config");
    let capsule = tls::server_config(tls::load_or_generate(&dir.join("capsule"), &names).unwrap())
        .expect("the capsule's config");
    let mut crawler = (*tls::client_config().unwrap()).clone();
    crawler.resumption = rustls::client::Resumption::disabled();
    Configs {
        crawler: Arc::new(crawler),
        listener,
        upstream: tls::client_config().unwrap(),
        capsule,
    }
}

/// `pairs` pairs of handshakes: the proxy's CPU per pair.
fn run(c: &Configs, pairs: u32) -> Duration {
    let name = ServerName::try_from("localhost").unwrap();
    let mut timed = Duration::ZERO;
    for _ in 0..pairs {
        let crawler = ClientConnection::new(c.crawler.clone(), name.clone()).unwrap();
        let listener = ServerConnection::new(c.listener.clone()).unwrap();
        handshake(crawler.into(), listener.into(), true, &mut timed);
        let upstream = ClientConnection::new(c.upstream.clone(), name.clone()).unwrap();
        let capsule = ServerConnection::new(c.capsule.clone()).unwrap();
        handshake(upstream.into(), capsule.into(), false, &mut timed);
    }
    timed / pairs
}

fn main() {
    let mut pairs = 2000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pairs" => pairs = args.next().and_then(|n| n.parse().ok()).expect("--pairs N"),
            other => panic!("unknown argument {other}"),
        }
    }
    let dir = std::env::temp_dir().join(format!("handshake-floor-{}", std::process::id()));
    let c = configs(&dir);
    // Warm up; the upstream session is kept from here on, as the proxy keeps it.
    run(&c, 50);
    let resumed_check = {
        let name = ServerName::try_from("localhost").unwrap();
        let upstream = ClientConnection::new(c.upstream.clone(), name).unwrap();
        let capsule = ServerConnection::new(c.capsule.clone()).unwrap();
        let mut up: Connection = upstream.into();
        let mut cap: Connection = capsule.into();
        let mut t = Duration::ZERO;
        for _ in 0..16 {
            pump(&mut up, &mut cap, true, &mut t);
            pump(&mut cap, &mut up, false, &mut t);
            if !up.is_handshaking() && !cap.is_handshaking() {
                break;
            }
        }
        match up {
            Connection::Client(c) => c.handshake_kind(),
            Connection::Server(_) => unreachable!(),
        }
    };
    assert_eq!(
        resumed_check,
        Some(rustls::HandshakeKind::Resumed),
        "the upstream handshake resumes"
    );
    let mut runs: Vec<Duration> = (0..5).map(|_| run(&c, pairs)).collect();
    runs.sort();
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "handshake floor: {:.0} µs of CPU per pair (full server + resumed client handshake, the proxy's side; median of 5 runs of {pairs}, spread {:.0}–{:.0})",
        runs[2].as_secs_f64() * 1e6,
        runs[0].as_secs_f64() * 1e6,
        runs[4].as_secs_f64() * 1e6,
    );
}
