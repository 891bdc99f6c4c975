//! Where the proxy connects, tried from the attacker's side through every
//! listener: special-purpose address ranges by any spelling, the proxy itself
//! by any spelling, ports of line-based services, and web clients sent through
//! the SOCKS5 drop-in. Each is refused before anything is sent upstream.

use robots_proxy::listener::Listener;
use std::sync::Arc;

use crate::common::*;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Ranges that stay refused with private upstreams allowed (as in every test
/// config): each spelling gets `53` on the Gemini listener and `3403` on the
/// Gopher listener, naming the range; the origin hears nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_purpose_ranges_are_refused_by_any_spelling() {
    let origin = GopherOrigin::start(|_| Reply::Bytes(b"page\r\n".to_vec())).await;
    let proxy = start_proxy(test_config()).await;
    let port = origin.addr.port();
    let hosts = [
        ("0.0.0.0", "this network"),
        ("0", "this network"),
        ("[::]", "unspecified"),
        ("[::127.0.0.1]", "IPv4-compatible"),
        (
            "[64:ff9b::7f00:1]",
            "NAT64 well-known prefix carrying 127.0.0.1",
        ),
        ("[64:ff9b:1::a00:1]", "NAT64 local-use"),
        ("[2002:7f00:1::1]", "6to4 carrying 127.0.0.1"),
        ("[2001::1]", "Teredo"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.254", "benchmarking"),
        ("192.0.0.170", "IETF protocol assignments"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("[ff02::1]", "multicast"),
        ("[100::1]", "discard-only"),
    ];
    for (host, range) in hosts {
        let (header, _) = gemini(
            proxy.addr(Listener::Gemini),
            &format!("gemini://{host}:{port}/"),
        )
        .await;
        assert!(header.starts_with("53 "), "{host}: {header}");
        assert!(
            header.contains(range),
            "{host}: {header} should name {range:?}"
        );
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            format!("gopher://{host}:{port}/0/x").as_bytes(),
        )
        .await;
        let line = first_line(&answer);
        assert!(line.starts_with("3403 Forbidden"), "{host}: {line}");
        assert!(line.contains(range), "{host}: {line}");
    }
    assert!(origin.all().is_empty(), "{:?}", origin.all());
}

/// The proxy never connects to one of its own listeners, whatever the
/// spelling (with private upstreams allowed, loopback is otherwise fine):
/// each listener of the table is on here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_never_connects_to_itself() {
    let mut config = test_config();
    config
        .listen
        .set(Listener::Transparent, Some("127.0.0.1:0".parse().unwrap()));
    config
        .listen
        .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
    config
        .listen
        .set(Listener::KeyDirectory, Some("127.0.0.1:0".parse().unwrap()));
    let proxy = start_proxy(config).await;
    let socks = proxy.addr(Listener::Socks5);
    // Every listener of the table, a new one included.
    let own: Vec<u16> = proxy.listens.iter().map(|(_, addr)| addr.port()).collect();
    assert_eq!(own.len(), Listener::ALL.len());
    for port in own {
        for host in [
            "127.0.0.1",
            "[::ffff:127.0.0.1]",
            "127.1",
            "2130706433",
            "0x7f.0.0.1",
            "localhost",
        ] {
            let (header, _) = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                gemini(
                    proxy.addr(Listener::Gemini),
                    &format!("gemini://{host}:{port}/"),
                ),
            )
            .await
            .expect("answered at once");
            assert!(
                header.starts_with("53 ") || header.starts_with("43 "),
                "{host}:{port}: {header}"
            );
            if host != "localhost" {
                assert!(header.contains("is this proxy"), "{host}:{port}: {header}");
            }
            let answer = gopher(
                proxy.addr(Listener::Gopher),
                format!("gopher://{host}:{port}/0/x").as_bytes(),
            )
            .await;
            let line = first_line(&answer);
            assert!(line.starts_with('3'), "{host}:{port}: {line}");
            assert!(!line.contains("page"), "{line}");
        }
        let (_, code) = socks_connect(socks, "127.0.0.1", port, None).await;
        assert_eq!(code, 0x02, "SOCKS5 CONNECT to the proxy's own port {port}");
    }
}

/// A listener on every address is reached through any address of this
/// machine: 127.0.0.2 and the like are the proxy too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_on_all_addresses_is_itself_by_every_local_address() {
    let mut config = test_config();
    config
        .listen
        .set(Listener::Gopher, Some("0.0.0.0:0".parse().unwrap()));
    config.gopher_public_host = Some("127.0.0.1".into());
    let proxy = start_proxy(config).await;
    let port = proxy.addr(Listener::Gopher).port();
    for host in [
        "127.0.0.1",
        "127.0.0.2",
        "127.255.0.9",
        "[::ffff:127.0.0.3]",
    ] {
        let (header, _) = gemini(
            proxy.addr(Listener::Gemini),
            &format!("gemini://{host}:{port}/"),
        )
        .await;
        assert!(
            header.starts_with("53 ") && header.contains("is this proxy"),
            "{host}: {header}"
        );
    }
}

/// Ports of line-based services are refused on every listener: `53`, `3403`,
/// SOCKS5 reply `0x02`; counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_of_other_services_are_refused_everywhere() {
    let proxy = start_proxy(test_config()).await;
    let socks = proxy.addr(Listener::Socks5);
    // (80 and 443 are the web's: tests/suite/web.rs.)
    for port in [22u16, 25, 53, 6379, 11211, 5432, 2375] {
        let (header, _) = gemini(
            proxy.addr(Listener::Gemini),
            &format!("gemini://127.0.0.1:{port}/"),
        )
        .await;
        assert!(
            header.starts_with("53 ") && header.contains("limits.upstream_ports"),
            "{port}: {header}"
        );
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            format!("gopher://localhost:{port}/0/FLUSHALL").as_bytes(),
        )
        .await;
        let line = first_line(&answer);
        assert!(
            line.starts_with("3403 Forbidden") && line.contains("limits.upstream_ports"),
            "{port}: {line}"
        );
        for host in ["127.0.0.1", "localhost"] {
            let (_, code) = socks_connect(socks, host, port, None).await;
            assert_eq!(code, 0x02, "SOCKS5 CONNECT {host}:{port}");
        }
    }
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_connections_rejected_total{listener=\"socks5\",reason=\"destination\"}"
        ),
        Some(14.0)
    );
}

/// SOCKS5 CONNECT to an IPv6 address (ATYP 4) works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_connect_to_an_ipv6_address() {
    let Ok(listener) = tokio::net::TcpListener::bind("[::1]:0").await else {
        eprintln!("no IPv6 loopback here; skipped");
        return;
    };
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while s.read(&mut b).await.unwrap() == 1 && b[0] != b'\n' {
                line.push(b[0]);
            }
            let answer: &[u8] = if line.starts_with(b"robots.txt") {
                b""
            } else {
                b"v6 page\r\n"
            };
            s.write_all(answer).await.unwrap();
        }
    });
    let proxy = start_proxy(test_config()).await;
    let mut s = TcpStream::connect(proxy.addr(Listener::Socks5))
        .await
        .unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).await.unwrap();
    let mut req = vec![5, 1, 0, 4];
    req.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).await.unwrap();
    assert_eq!(reply[1], 0, "CONNECT [::1]:{port} succeeds");
    s.write_all(b"/page\r\n").await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"v6 page\r\n");
    server.abort();
}

/// Web clients sent through the SOCKS5 drop-in to a port that is not the
/// web's: an HTTP request line is closed at once, with nothing sent
/// upstream (the Gopher listener closes on one too); TLS offering only HTTP
/// by ALPN, or to a `[ports] https` port, is the web's: its TLS is ended and
/// each request decided (one for another host than the connection's: `421`,
/// nothing fetched).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_clients_through_socks5_are_closed_or_decided() {
    let origin = GopherOrigin::start(|_| Reply::Bytes(b"page\r\n".to_vec())).await;
    let proxy = start_proxy(test_config()).await;
    let socks = proxy.addr(Listener::Socks5);
    let quick = std::time::Duration::from_secs(3);

    let (mut s, code) = socks_connect(socks, "127.0.0.1", origin.addr.port(), None).await;
    assert_eq!(code, 0);
    s.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(quick, s.read_to_end(&mut answer))
        .await
        .expect("closed at once")
        .ok();
    assert!(answer.is_empty(), "{answer:?}");

    let answer = gopher(proxy.addr(Listener::Gopher), b"GET /index.html HTTP/1.0").await;
    assert!(answer.is_empty(), "{answer:?}");

    for (port, alpn) in [
        (
            origin.addr.port(),
            vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        ),
        (8443, vec![]),
    ] {
        let (s, code) = socks_connect(socks, "127.0.0.1", port, None).await;
        assert_eq!(code, 0);
        let mut config = (*robots_proxy::tls::client_config().unwrap()).clone();
        config.alpn_protocols = alpn;
        let connector = TlsConnector::from(Arc::new(config));
        let mut tls = tokio::time::timeout(
            quick,
            connector.connect(ServerName::try_from("localhost").unwrap(), s),
        )
        .await
        .expect("answered at once")
        .unwrap_or_else(|e| panic!("port {port}: the web's TLS is ended: {e}"));
        tls.write_all(b"GET / HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(quick, tls.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 421"), "port {port}: {answer}");
    }
    assert!(origin.all().is_empty(), "{:?}", origin.all());

    // A Gemini client (no ALPN) on an ordinary port still gets through to TLS.
    let (s, _) = socks_connect(socks, "127.0.0.1", origin.addr.port(), None).await;
    let connector = TlsConnector::from(robots_proxy::tls::client_config().unwrap());
    assert!(connector
        .connect(ServerName::try_from("localhost").unwrap(), s)
        .await
        .is_ok());

    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    let count = |listener: &str, reason: &str| {
        sample(
            &metrics,
            &format!("robots_proxy_connections_rejected_total{{listener=\"{listener}\",reason=\"{reason}\"}}"),
        )
    };
    assert_eq!(count("socks5", "http"), Some(1.0));
    assert_eq!(count("gopher", "http"), Some(1.0));
    // Web TLS is served, never turned away: there is no such reason.
    assert_eq!(count("socks5", "https"), None);
}

/// A client that reads its answer, closes and connects again at once, with
/// as many connections going as its cap allows, is never turned away: a
/// connection whose answer is complete (the proxy waiting for the client's
/// close) no longer counts against the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reconnecting_at_once_stays_within_its_cap() {
    let origin = GopherOrigin::start(|_| Reply::Bytes(b"page\r\n".to_vec())).await;
    let mut config = test_config();
    config.limits.max_connections_per_client = 4;
    let proxy = start_proxy(config).await;
    let request = format!("{}\r\n", origin.url("0/x"));
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (addr, request) = (proxy.addr(Listener::Gopher), request.clone());
            tokio::spawn(async move {
                let mut turned_away = 0;
                for _ in 0..150 {
                    let mut s = TcpStream::connect(addr).await.unwrap();
                    let _ = s.write_all(request.as_bytes()).await;
                    let mut answer = Vec::new();
                    let _ = s.read_to_end(&mut answer).await;
                    if answer != b"page\r\n" {
                        turned_away += 1;
                    }
                }
                turned_away
            })
        })
        .collect();
    let mut turned_away = 0;
    for w in workers {
        turned_away += w.await.unwrap();
    }
    assert_eq!(turned_away, 0, "of 600 requests");
    let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    let rejected = sample(
        &metrics,
        "robots_proxy_connections_rejected_total{listener=\"gopher\",reason=\"client-cap\"}",
    );
    assert_eq!(rejected, Some(0.0), "{metrics}");
}

/// One client cannot take the proxy from the others: past
/// `max_connections_per_client`, its connections are closed at once (and
/// counted) while another client is served as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_crowd_out_the_others() {
    let origin = GopherOrigin::start(|_| Reply::Bytes(b"page\r\n".to_vec())).await;
    let mut config = test_config();
    config.limits.max_connections = 10;
    config.limits.max_connections_per_client = 4;
    let proxy = start_proxy(config).await;
    // Four slow connections from 127.0.0.1 that send nothing.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(
            TcpStream::connect(proxy.addr(Listener::Gopher))
                .await
                .unwrap(),
        );
    }
    // Let the proxy accept them (bounded: they must be counted before the fifth).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
        if sample(
            &metrics,
            "robots_proxy_connections_open{listener=\"gopher\"}",
        ) == Some(4.0)
        {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{metrics}");
        tokio::task::yield_now().await;
    }
    for _ in 0..3 {
        let request = format!("{}\r\n", origin.url("0/x"));
        assert!(closed_at_once(proxy.addr(Listener::Gopher), request.as_bytes()).await);
    }
    // Another client address is served.
    let other = tokio::net::TcpSocket::new_v4().unwrap();
    other.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut other = other.connect(proxy.addr(Listener::Gopher)).await.unwrap();
    other
        .write_all(format!("{}\r\n", origin.url("0/x")).as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    other.read_to_end(&mut answer).await.unwrap();
    assert_eq!(answer, b"page\r\n");
    // And the first client again once its connections are gone.
    drop(held);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let mut answer = Vec::new();
        if let Ok(mut s) = TcpStream::connect(proxy.addr(Listener::Gopher)).await {
            let _ = s
                .write_all(format!("{}\r\n", origin.url("0/x")).as_bytes())
                .await;
            let _ = s.read_to_end(&mut answer).await;
        }
        if answer == b"page\r\n" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{answer:?}");
        tokio::task::yield_now().await;
    }
    let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    let rejected = sample(
        &metrics,
        "robots_proxy_connections_rejected_total{listener=\"gopher\",reason=\"client-cap\"}",
    )
    .unwrap();
    assert!(rejected >= 3.0, "{rejected}");
}

/// The metrics listener serves at most 32 connections at once, so it cannot
/// use up the proxy's file descriptors; a 33rd is still served, by cutting
/// the oldest connection that sits idle (counted as `full`), so idle or
/// stalled connections cannot keep a scrape out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_listener_has_its_own_cap() {
    let proxy = start_proxy(test_config()).await;
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n",
        proxy.addr(Listener::Admin)
    );
    let mut held = Vec::new();
    for _ in 0..robots_proxy::admin::MAX_CONNECTIONS {
        let mut s = TcpStream::connect(proxy.addr(Listener::Admin))
            .await
            .unwrap();
        // A request each (kept alive), so every one is accepted and holding its place.
        s.write_all(request.as_bytes()).await.unwrap();
        assert!(healthz_answer(&mut s).await.starts_with("HTTP/1.1 200"));
        held.push(s);
    }
    let (status, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_connections_rejected_total{listener=\"metrics\",reason=\"full\"}"
        ),
        Some(1.0)
    );
    // The oldest idle one was cut for it; the newest ones still serve.
    // (What is left of its last answer may still be unread.)
    let mut rest = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        held[0].read_to_end(&mut rest),
    )
    .await
    .expect("the oldest idle connection was closed")
    .ok();
    let last = held.last_mut().unwrap();
    last.write_all(request.as_bytes()).await.unwrap();
    assert!(healthz_answer(last).await.starts_with("HTTP/1.1 200"));
}

/// One whole `/healthz` answer on a kept-alive connection (its body is `ok`).
async fn healthz_answer(s: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let mut buf = [0u8; 256];
    while !answer.ends_with(b"\r\n\r\nok\n") {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// Connects, sends `request`, and tells whether the proxy closed the
/// connection within a second without answering (the reset may even come
/// before the connect completes).
async fn closed_at_once(addr: std::net::SocketAddr, request: &[u8]) -> bool {
    let attempt = async {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            return true;
        };
        let _ = s.write_all(request).await;
        let mut answer = Vec::new();
        match s.read_to_end(&mut answer).await {
            Ok(_) => answer.is_empty(),
            Err(_) => true,
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(1), attempt)
        .await
        .unwrap_or(false)
}
