//! Floods from the crawler's side: one client opening connections by the
//! hundred and leaving them silent, or waiting minutes for a slow site's turn,
//! on the HTTP listener and on the Web Bot Auth key directory. Each listener caps what one client holds, and what
//! it holds is closed at its deadline; meanwhile another client is served
//! there, and the admin and other listeners answer.

use std::net::SocketAddr;
use std::time::Duration;

use robots_proxy::listener::Listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::web::{web_config_with, WebClient, WebOrigin};
use crate::common::*;

/// `n` connections from `from` to `to`, each left silent; those the
/// proxy has not closed at once (a connection past a cap may be reset as
/// soon as it opens).
async fn silent(from: &str, to: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind(SocketAddr::new(from.parse().unwrap(), 0))
            .unwrap();
        if let Ok(stream) = socket.connect(to).await {
            held.push(stream);
        }
    }
    held
}

/// How many of `streams` the proxy has not closed.
fn still_open(streams: &[TcpStream]) -> usize {
    let mut buf = [0u8; 1];
    streams
        .iter()
        .filter(|s| {
            matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count()
}

/// A site on another host (a web site is its host name, every port) whose
/// every page is text.
async fn other_site(on: SocketAddr) -> WebOrigin {
    WebOrigin::start_on(on, |path, _| {
        (
            200,
            vec![("content-type", "text/plain".into())],
            format!("page {path}").into(),
        )
    })
    .await
}

/// A web proxy whose requests wait as long as the web's do by default.
fn patient_web_config() -> robots_proxy::config::Config {
    let mut config = web_config_with("[bot]\nagent = \"examplebot\"\n");
    config.politeness.web_max_wait = robots_proxy::politeness::WEB_MAX_WAIT;
    config
}

/// One request from `from` to the HTTP listener: its status.
async fn web_get_from(proxy: SocketAddr, from: &str, url: &str) -> String {
    let tcp = tcp_from(from, proxy).await;
    let ask = format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    crate::common::web::raw_over(tcp, None, &ask)
        .await
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// The HTTP listener under 300 silent connections from one client: that
/// client holds its share (`max_connections_per_client`), the rest are
/// closed at once; another client's request is served, the admin
/// listener and the Gemini listener answer; and the silent ones are closed
/// at `request_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_by_the_hundred_do_not_keep_others_out() {
    let origin = WebOrigin::site("User-agent: *\nAllow: /\n").await;
    let capsule = capsule(text("51 none", ""), text("20 text/gemini", "page")).await;
    let mut config = web_config_with("[bot]\nagent = \"examplebot\"\n");
    config.limits.max_connections = 64;
    config.limits.max_connections_per_client = 8;
    config.limits.request_timeout = Duration::from_secs(3);
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    let flood = silent("127.0.0.1", http, 300).await;
    let started = std::time::Instant::now();
    assert_eq!(
        web_get_from(http, "127.0.0.2", &origin.url("/page")).await,
        "HTTP/1.1 200 OK"
    );
    let (status, _) = http_get(proxy.addr(Listener::Admin), "/healthz").await;
    assert_eq!(status, 200);
    let (header, _) = gemini_as(
        proxy.addr(Listener::Gemini),
        &capsule.url("/"),
        "127.0.0.3",
        None,
    )
    .await;
    assert_eq!(header, "20 text/gemini");
    let open = still_open(&flood);
    assert!(
        (1..=8).contains(&open),
        "the flooding client holds its share: {open}"
    );
    let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    let capped = r#"robots_proxy_connections_rejected_total{listener="http",reason="client-cap"}"#;
    assert!(
        sample(&metrics, capped).unwrap_or(0.0) >= 290.0,
        "{metrics}"
    );
    // The share it holds is closed at the deadline for a request's head.
    wait_until("the silent connections closed", || still_open(&flood) == 0).await;
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

/// The web now waits minutes for a turn (`web_max_wait`, 150 s): one client
/// asking for 40 pages at once of a site whose `Crawl-delay` is 100 s holds
/// only its share of connections while they wait (the rest are turned away
/// at once), and another client's request to another site (another host:
/// a site is its host name) is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_minutes_do_not_keep_others_out() {
    let slow = WebOrigin::site("User-agent: *\nCrawl-delay: 100\n").await;
    let other = other_site(machine(2)).await;
    let mut config = patient_web_config();
    config.limits.max_connections = 64;
    config.limits.max_connections_per_client = 8;
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    let mut waiting = silent("127.0.0.1", http, 40).await;
    for (i, tcp) in waiting.iter_mut().enumerate() {
        let ask = format!(
            "GET {} HTTP/1.1\r\nHost: x\r\n\r\n",
            slow.url(&format!("/page{i}"))
        );
        let _ = tcp.write_all(ask.as_bytes()).await;
    }
    let politeness = proxy.context().admission.politeness.clone();
    wait_until("requests wait for the slow site's turn", || {
        politeness.usage().1 >= 1
    })
    .await;
    assert_eq!(
        web_get_from(http, "127.0.0.2", &other.url("/page")).await,
        "HTTP/1.1 200 OK"
    );
    let open = still_open(&waiting);
    assert!(
        (1..=8).contains(&open),
        "the waiting client holds its share: {open}"
    );
    let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    let capped = r#"robots_proxy_connections_rejected_total{listener="http",reason="client-cap"}"#;
    assert!(sample(&metrics, capped).unwrap_or(0.0) >= 32.0, "{metrics}");
    assert!(
        slow.targets().iter().all(|t| t == "/robots.txt"),
        "{:?}",
        slow.targets()
    );
}

/// Crawlers on several addresses, each asking a slow site (`Crawl-delay`
/// 60 s) for as many pages as its per-client share allows, cannot hold
/// every connection with waiting requests: three quarters of the listeners'
/// connections may wait (`politeness::queued_for`), the requests past that
/// are told "slow down" at once (and close), and another client's request
/// for another site, whose turn is now, is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_crawlers_on_many_addresses_leave_room_for_others() {
    let slow = WebOrigin::site("User-agent: *\nCrawl-delay: 60\n").await;
    let other = other_site(machine(9)).await;
    let mut config = patient_web_config();
    config.limits.max_connections = 16;
    config.limits.max_connections_per_client = 4;
    config.politeness.max_queued = robots_proxy::politeness::queued_for(16);
    // Every turn (60 s to 16 minutes away) is waited for, not told at once.
    config.politeness.horizon = Duration::from_secs(3600);
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    // Four clients, four connections each: all sixteen.
    let mut asked = Vec::new();
    for client in 2..6 {
        let from = format!("127.0.0.{client}");
        for (i, mut tcp) in silent(&from, http, 4).await.into_iter().enumerate() {
            let ask = format!(
                "GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                slow.url(&format!("/c{client}/p{i}"))
            );
            let _ = tcp.write_all(ask.as_bytes()).await;
            asked.push(tcp);
        }
    }
    let politeness = proxy.context().admission.politeness.clone();
    wait_until("twelve requests wait", || politeness.usage().1 == 12).await;
    wait_until("the rest were told and closed", || still_open(&asked) == 12).await;
    assert_eq!(
        web_get_from(http, "127.0.0.7", &other.url("/page")).await,
        "HTTP/1.1 200 OK"
    );
    assert_eq!(politeness.usage().1, 12, "still waiting");
    assert!(
        slow.targets().iter().all(|t| t == "/robots.txt"),
        "{:?}",
        slow.targets()
    );
}

/// The key directory under 300 silent connections from one client: it
/// holds a few, and another client still gets the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_directory_is_not_crowded_out_by_one_client() {
    let mut config = web_config_with(
        "[bot]\nagent = \"examplebot\"\nweb_bot_auth = \"always\"\nsignature_agent = \"https://bots.example\"\n",
    );
    config
        .listen
        .set(Listener::KeyDirectory, Some("127.0.0.1:0".parse().unwrap()));
    let proxy = start_proxy(config).await;
    let directory = proxy.addr(Listener::KeyDirectory);
    let flood = silent("127.0.0.1", directory, 300).await;
    let mut tcp = tcp_from("127.0.0.2", directory).await;
    tcp.write_all(
        b"GET /.well-known/http-message-signatures-directory HTTP/1.1\r\nHost: bots.example\r\n\r\n",
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let open = still_open(&flood);
    assert!(open <= 8, "one client holds a few: {open}");
    let (status, _) = http_get(proxy.addr(Listener::Admin), "/healthz").await;
    assert_eq!(status, 200);
}

/// What a hostile HTTP/2 origin does once a request's `HEADERS` came.
#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// 100,000 empty `SETTINGS` (each asks for an acknowledgement), then
    /// the answer.
    Settings,
    /// 100,000 `PING`s, then the answer.
    Pings,
    /// 100,000 `WINDOW_UPDATE`s of 1 on the connection, then the answer.
    WindowUpdates,
    /// A window of 0 for the client's streams (a body can never be sent),
    /// and no answer.
    ZeroWindow,
    /// `RST_STREAM` on streams never opened, by the thousand.
    Resets,
    /// The answer's head and part of its body, then `GOAWAY` and the
    /// connection closed.
    GoawayMidAnswer,
}

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut out = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `HEADERS` for `:status: 200` (HPACK static index 8), ending the headers.
fn ok_headers(stream: u32) -> Vec<u8> {
    frame(1, 0x4, stream, &[0x88])
}

/// An HTTPS origin for 127.0.0.1 speaking HTTP/2 as `mode` says to a client
/// that chose `h2`, and HTTP/1.1 `404` to any other (robots.txt); counts the
/// HTTP/2 connections it accepted.
async fn hostile_h2(
    ca: &crate::common::web::LocalCa,
    mode: Hostile,
) -> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let acceptor = ca.acceptor_offering(&["127.0.0.1"], &[b"h2", b"http/1.1"]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, counted) = (acceptor.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if tls.get_ref().1.alpn_protocol() != Some(b"h2") {
                    let mut head = [0u8; 1024];
                    let _ = tls.read(&mut head).await;
                    let _ = tls
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    let _ = tls.shutdown().await;
                    return;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let mut preface = [0u8; 24];
                if tls.read_exact(&mut preface).await.is_err() {
                    return;
                }
                let settings = match mode {
                    // SETTINGS_INITIAL_WINDOW_SIZE (4) = 0.
                    Hostile::ZeroWindow => frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]),
                    _ => frame(4, 0, 0, &[]),
                };
                let _ = tls.write_all(&settings).await;
                // Frames from the client until a request's HEADERS.
                let stream = loop {
                    let mut head = [0u8; 9];
                    if tls.read_exact(&mut head).await.is_err() {
                        return;
                    }
                    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                    let mut payload = vec![0u8; len];
                    if tls.read_exact(&mut payload).await.is_err() {
                        return;
                    }
                    let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                    match head[3] {
                        // Its SETTINGS: acknowledged.
                        4 if head[4] & 1 == 0 => {
                            let _ = tls.write_all(&frame(4, 1, 0, &[])).await;
                        }
                        1 => break id,
                        _ => {}
                    }
                };
                let flood = |one: Vec<u8>, n: usize| one.repeat(n);
                let out = match mode {
                    Hostile::Settings => [
                        flood(frame(4, 0, 0, &[]), 100_000),
                        ok_headers(stream),
                        frame(0, 1, stream, b"page"),
                    ]
                    .concat(),
                    Hostile::Pings => [
                        flood(frame(6, 0, 0, &[7; 8]), 100_000),
                        ok_headers(stream),
                        frame(0, 1, stream, b"page"),
                    ]
                    .concat(),
                    Hostile::WindowUpdates => [
                        flood(frame(8, 0, 0, &1u32.to_be_bytes()), 100_000),
                        ok_headers(stream),
                        frame(0, 1, stream, b"page"),
                    ]
                    .concat(),
                    Hostile::ZeroWindow => Vec::new(),
                    Hostile::Resets => (0..5_000u32)
                        .flat_map(|i| frame(3, 0, stream + 2 * (i + 1), &8u32.to_be_bytes()))
                        .collect(),
                    Hostile::GoawayMidAnswer => [
                        ok_headers(stream),
                        frame(0, 0, stream, b"part of the page"),
                        frame(7, 0, 0, &[0, 0, 0, 0, 0, 0, 0, 0]),
                    ]
                    .concat(),
                };
                let _ = tls.write_all(&out).await;
                let _ = tls.flush().await;
                if matches!(mode, Hostile::GoawayMidAnswer) {
                    let _ = tls.shutdown().await;
                    return;
                }
                // Read (and drop) whatever else comes, until the proxy closes.
                let mut sink = vec![0u8; 1 << 16];
                while matches!(
                    tokio::time::timeout(Duration::from_secs(20), tls.read(&mut sink)).await,
                    Ok(Ok(n)) if n > 0
                ) {}
            });
        }
    });
    (addr, connections)
}

/// HTTP/2 origins that flood or stall, from the origin's side: `SETTINGS`,
/// `PING` and `WINDOW_UPDATE` floods, a zero window under a request's body,
/// `RST_STREAM` storms, a `GOAWAY` mid-answer. Each time the crawler is
/// answered within the proxy's deadlines (the answer, or a `502`/`504`, or
/// its body cut), the proxy goes on serving others, and the next request to
/// that origin does not ride the broken connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_http2_origins_are_bounded_and_not_reused() {
    let bystander = WebOrigin::site("User-agent: *\nAllow: /\n").await;
    for mode in [
        Hostile::Settings,
        Hostile::Pings,
        Hostile::WindowUpdates,
        Hostile::ZeroWindow,
        Hostile::Resets,
        Hostile::GoawayMidAnswer,
    ] {
        let ca = crate::common::web::LocalCa::new();
        let (origin, connections) = hostile_h2(&ca, mode).await;
        let mut config = web_config_with(
            "[bot]\nagent = \"examplebot\"\nhttp_methods = [\"GET\", \"HEAD\", \"POST\"]\n",
        );
        config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
        let proxy = start_proxy(config).await;
        let http = proxy.addr(Listener::Http);
        let tls =
            crate::common::web::trusting(&proxy.ca_cert_path.clone().unwrap(), &[b"http/1.1"]);
        let started = std::time::Instant::now();
        let mut client = crate::common::web::tunnel(
            http,
            ("127.0.0.1", origin.port()),
            tls.clone(),
            "127.0.0.1",
        )
        .await
        .expect("a tunnel");
        let url = format!("https://127.0.0.1:{}/page", origin.port());
        let method = match mode {
            Hostile::ZeroWindow => "POST",
            _ => "GET",
        };
        let answer = tokio::time::timeout(
            Duration::from_secs(15),
            client.send(method, &url, &[("content-length", "0")]),
        )
        .await
        .unwrap_or_else(|_| panic!("{mode:?}: no answer within 15 s"));
        let took = started.elapsed();
        let row = format!("{mode:?}: {answer:?} in {took:?}");
        match mode {
            Hostile::Settings | Hostile::Pings | Hostile::WindowUpdates => {
                let answer = answer.expect(&row);
                assert!([200, 502].contains(&answer.status), "{row}");
            }
            Hostile::GoawayMidAnswer => {
                // The head came, and the body was cut: the crawler can tell.
                assert!(
                    answer.is_none_or(|a| a.status == 200 && a.body != "page"),
                    "{row}"
                );
            }
            _ => {
                let answer = answer.expect(&row);
                assert!([502, 504].contains(&answer.status), "{row}");
            }
        }
        // The proxy serves others meanwhile and after.
        let mut other = WebClient::connect(http).await;
        assert_eq!(
            other.get(&bystander.url("/p"), &[]).await.status,
            200,
            "{mode:?}"
        );
        // The next request does not ride the broken connection.
        let before = connections.load(std::sync::atomic::Ordering::SeqCst);
        if let Ok(mut again) =
            crate::common::web::tunnel(http, ("127.0.0.1", origin.port()), tls, "127.0.0.1").await
        {
            let _ =
                tokio::time::timeout(Duration::from_secs(15), again.send("GET", &url, &[])).await;
        }
        let after = connections.load(std::sync::atomic::Ordering::SeqCst);
        match mode {
            Hostile::Settings | Hostile::Pings | Hostile::WindowUpdates => {}
            _ => assert_eq!(
                after,
                before + 1,
                "{mode:?}: a new connection, not the broken one"
            ),
        }
        proxy.shutdown();
    }
}
