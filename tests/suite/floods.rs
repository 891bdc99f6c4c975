//! Floods from the crawler's side: one client opening connections by the
//! hundred and leaving them silent, on the HTTP listener and on the Web Bot
//! Auth key directory. Each listener caps what one client holds, and what
//! it holds is closed at its deadline; meanwhile another client is served
//! there, and the admin and other listeners answer.

use std::net::SocketAddr;
use std::time::Duration;

use robots_proxy::listener::Listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::web::{web_config_with, WebOrigin};
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

/// One request from `from` to the HTTP listener: its status.
async fn web_get_from(proxy: SocketAddr, from: &str, url: &str) -> String {
    let mut tcp = tcp_from(from, proxy).await;
    let ask = format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    tcp.write_all(ask.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer)
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
