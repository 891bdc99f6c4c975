//! Upstream connections kept and reused (HTTP/1.1 keep-alive), from the
//! server's side: requests of several clients and bots to one server ride
//! one connection, each still spaced by the gate; a connection is never
//! lent to another server, nor kept after an answer that was not read
//! whole or said `close`; a server that closes a kept connection costs the
//! next request nothing.

use std::collections::HashSet;
use std::time::Duration;

use robots_proxy::listener::Listener;

use crate::common::web::{basic, web_config_with, WebClient, WebOrigin};
use crate::common::*;

/// The distinct connections `origin` was asked on, robots.txt's aside (the
/// proxy's own fetch, on a connection of its own).
fn connections(origin: &WebOrigin) -> HashSet<std::net::SocketAddr> {
    origin
        .seen()
        .iter()
        .filter(|s| s.target != "/robots.txt")
        .map(|s| s.peer)
        .collect()
}

#[tokio::test]
async fn requests_of_several_clients_and_bots_ride_one_connection_still_spaced() {
    let origin = WebOrigin::site("User-agent: *\nDisallow: /private/\n").await;
    let mut config = web_config_with(
        r#"
[socks5]
users = [{ name = "a", password = "a-pass" }, { name = "o", password = "o-pass" }]
[bot]
name = "anon"
agent = "anonbot"
[[bots]]
name = "one"
agent = "onebot"
socks5_users = ["a"]
[[bots]]
name = "other"
agent = "otherbot"
socks5_users = ["o"]
"#,
    );
    config.politeness.default_delay = Duration::from_millis(150);
    let proxy = start_proxy(config).await;
    let (one, other) = (basic("a", "a-pass"), basic("o", "o-pass"));
    for i in 0..4 {
        // A new client connection each time, the bots taking turns.
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let headers: &[(&str, &str)] = match i % 2 {
            0 => &[("proxy-authorization", &one)],
            _ => &[("proxy-authorization", &other)],
        };
        let answer = client.get(&origin.url(&format!("/p{i}")), headers).await;
        assert_eq!(answer.status, 200);
    }
    assert_eq!(connections(&origin).len(), 1, "{:?}", origin.seen());
    let starts: Vec<_> = origin
        .seen()
        .iter()
        .filter(|s| s.target.starts_with("/p"))
        .map(|s| s.at)
        .collect();
    for pair in starts.windows(2) {
        assert!(
            pair[1] - pair[0] >= Duration::from_millis(140),
            "the gate still spaces them"
        );
    }
    assert_eq!(proxy.context().kept.len(), 1);
}

#[tokio::test]
async fn a_connection_is_never_lent_to_another_server() {
    let a = WebOrigin::site("").await;
    let b = WebOrigin::site("").await;
    let proxy = start_proxy(web_config_with("")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for _ in 0..2 {
        assert_eq!(client.get(&a.url("/a"), &[]).await.status, 200);
        assert_eq!(client.get(&b.url("/b"), &[]).await.status, 200);
    }
    assert_eq!(connections(&a).len(), 1);
    assert_eq!(connections(&b).len(), 1);
    assert!(a.targets().iter().all(|t| t != "/b"));
    assert!(b.targets().iter().all(|t| t != "/a"));
    assert_eq!(proxy.context().kept.len(), 2);
}

#[tokio::test]
async fn an_answer_that_says_close_or_was_not_read_whole_is_not_kept() {
    let origin = WebOrigin::start(|path| match path {
        "/robots.txt" => (404, vec![], vec![]),
        "/close" => (200, vec![("connection", "close".into())], b"bye".to_vec()),
        "/big" => (200, vec![], vec![b'x'; 4 << 20]),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let proxy = start_proxy(web_config_with("")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/close"), &[]).await.status, 200);
    assert_eq!(
        client.get(&origin.url("/after-close"), &[]).await.status,
        200
    );
    let seen = origin.seen();
    let peer = |t: &str| seen.iter().find(|s| s.target == t).unwrap().peer;
    assert_ne!(peer("/close"), peer("/after-close"));
    // A client that leaves mid-answer: that connection is closed, not kept.
    let before = proxy.context().kept.len();
    let host = origin.addr;
    let ask = format!("GET http://{host}/big HTTP/1.1\r\nHost: {host}\r\n\r\n");
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(proxy.addr(Listener::Http))
            .await
            .unwrap();
        tcp.write_all(ask.as_bytes()).await.unwrap();
        let mut some = [0u8; 1024];
        let _ = tcp.read(&mut some).await.unwrap();
    }
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/last"), &[]).await.status, 200);
    let seen = origin.seen();
    let peer = |t: &str| seen.iter().find(|s| s.target == t).unwrap().peer;
    assert_ne!(
        peer("/big"),
        peer("/last"),
        "the cut answer's connection was not reused"
    );
    assert!(proxy.context().kept.len() <= before + 1);
}

/// A server that closes its side of a kept connection (its own idle
/// timeout): the next request goes on a new one, and the crawler sees
/// nothing of it.
#[tokio::test]
async fn a_kept_connection_the_server_closed_costs_the_next_request_nothing() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Answers one request per connection, keep-alive promised, then closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tcp.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head);
                let answer = match text.starts_with("GET /robots.txt") {
                    true => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
                    false => "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                };
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = tcp.write_all(answer.as_bytes()).await;
                // Closed without a word: the proxy may have kept it.
            });
        }
    });
    let proxy = start_proxy(web_config_with("")).await;
    for i in 0..3 {
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let answer = client.get(&format!("http://{addr}/x{i}"), &[]).await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (200, "ok"),
            "request {i}"
        );
    }
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 4);
}

/// An HTTPS site offering HTTP/2 and HTTP/1.1, its CA trusted, and a proxy
/// for the web.
async fn h2_site(per_host_concurrency: usize) -> (WebOrigin, robots_proxy::server::Proxy) {
    let ca = crate::common::web::LocalCa::new();
    let origin = WebOrigin::start_tls(
        |path| match path {
            "/robots.txt" => (
                200,
                vec![],
                b"User-agent: *\nDisallow: /private/\n".to_vec(),
            ),
            // A head larger than the proxy reads (64 KiB).
            "/huge-head" => (200, vec![("x-huge", "h".repeat(100 * 1024))], b"x".to_vec()),
            p => (200, vec![], format!("secure page {p}").into_bytes()),
        },
        ca.acceptor_offering(&["localhost"], &[b"h2", b"http/1.1"]),
    )
    .await;
    let mut config = web_config_with("");
    config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
    config.politeness.default_delay = Duration::ZERO;
    config.politeness.per_host_concurrency = per_host_concurrency;
    (origin, start_proxy(config).await)
}

/// A server that offers HTTP/2 by ALPN is asked in it, the crawler still
/// answered in HTTP/1.1 (`Via: 2` saying how the answer came); one
/// connection carries every request, whatever client asked.
#[tokio::test]
async fn a_server_offering_http2_is_asked_in_it_over_one_shared_connection() {
    let (origin, proxy) = h2_site(1).await;
    let url = |path: &str| format!("https://localhost:{}{path}", origin.addr.port());
    for i in 0..4 {
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let answer = client.get(&url(&format!("/p{i}")), &[]).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, format!("secure page /p{i}"));
        let via = answer.header("via").unwrap_or_default();
        assert!(via.starts_with("2 "), "{via}");
    }
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&url("/private/x"), &[]).await.status, 403);
    let seen = origin.seen();
    let pages: Vec<_> = seen.iter().filter(|s| s.target.starts_with("/p")).collect();
    assert_eq!(pages.len(), 4, "{:?}", origin.targets());
    assert!(pages.iter().all(|s| s.version == hyper::Version::HTTP_2));
    assert!(
        pages.iter().all(|s| s.headers.get("host").is_none()),
        "the authority goes as :authority"
    );
    assert_eq!(connections(&origin).len(), 1, "{:?}", origin.seen());
    assert!(origin.targets().iter().all(|t| !t.starts_with("/private")));
    // robots.txt is fetched over HTTP/1.1, as RFC 9309 asks of any server.
    let robots = seen.iter().find(|s| s.target == "/robots.txt").unwrap();
    assert_eq!(robots.version, hyper::Version::HTTP_11);
}

/// Requests at once to an HTTP/2 server share its connections instead of
/// opening one each.
#[tokio::test]
async fn requests_at_once_share_an_http2_connection() {
    let (origin, proxy) = h2_site(8).await;
    let url = |path: String| format!("https://localhost:{}{path}", origin.addr.port());
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&url("/first".into()), &[]).await.status, 200);
    let asks = (0..8).map(|i| {
        let (listener, url) = (proxy.addr(Listener::Http), url(format!("/at-once-{i}")));
        tokio::spawn(async move {
            let mut client = WebClient::connect(listener).await;
            client.get(&url, &[]).await.status
        })
    });
    for ask in asks.collect::<Vec<_>>() {
        assert_eq!(ask.await.unwrap(), 200);
    }
    assert_eq!(connections(&origin).len(), 1, "{:?}", origin.seen());
}

/// An HTTP/2 server whose answer's head is larger than the proxy reads:
/// `502`, and the next request to it is served.
#[tokio::test]
async fn an_http2_answer_head_past_the_bound_is_refused_and_harms_nothing() {
    let (origin, proxy) = h2_site(1).await;
    let url = |path: &str| format!("https://localhost:{}{path}", origin.addr.port());
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&url("/huge-head"), &[]).await.status, 502);
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let answer = client.get(&url("/after"), &[]).await;
    assert_eq!(
        (answer.status, answer.body.as_str()),
        (200, "secure page /after")
    );
}
