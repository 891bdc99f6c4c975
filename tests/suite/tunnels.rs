//! `CONNECT` on the HTTP listener, from a crawler's side: a tunnel is never
//! a blind pipe. Its TLS is ended with a leaf from the proxy's CA, each
//! request inside is decided as one on the listener is, and a tunnel to
//! somewhere the proxy would never connect is refused before it opens.

use std::time::Duration;

use robots_proxy::config::Config;
use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;

use crate::common::web::{trusting, tunnel, LocalCa, WebOrigin};
use crate::common::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";

/// An HTTPS site on 127.0.0.1 with its own CA, and a proxy that trusts that
/// CA (`extra_roots`) and listens for the web.
async fn https_site(robots: &'static str) -> (WebOrigin, Proxy) {
    let (origin, ca) = https_origin(robots).await;
    let mut config: Config = test_config();
    config
        .listen
        .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
    config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
    (origin, start_proxy(config).await)
}

/// An HTTPS origin for 127.0.0.1 and localhost, and the CA it chains to.
async fn https_origin(robots: &'static str) -> (WebOrigin, LocalCa) {
    let ca = LocalCa::new();
    let origin = WebOrigin::start_tls(
        move |path| match path {
            "/robots.txt" => (200, vec![], robots.into()),
            p => (200, vec![], format!("secure page {p}").into()),
        },
        ca.acceptor(&["127.0.0.1", "localhost"]),
    )
    .await;
    (origin, ca)
}

fn proxy_ca(proxy: &Proxy) -> std::path::PathBuf {
    proxy
        .ca_cert_path
        .clone()
        .expect("the HTTP listener has a CA")
}

#[tokio::test]
async fn requests_inside_a_tunnel_are_decided_one_by_one() {
    let (origin, proxy) = https_site(ROBOTS).await;
    let port = origin.addr.port();
    let tls = trusting(&proxy_ca(&proxy), &[b"http/1.1"]);
    let mut client = tunnel(
        proxy.addr(Listener::Http),
        ("127.0.0.1", port),
        tls,
        "127.0.0.1",
    )
    .await
    .unwrap();
    let host = format!("127.0.0.1:{port}");
    let page = client
        .send("GET", "/public/a", &[("host", &host)])
        .await
        .unwrap();
    assert_eq!(
        (page.status, page.body.as_str()),
        (200, "secure page /public/a")
    );
    let refused = client
        .send("GET", "/private/b", &[("host", &host)])
        .await
        .unwrap();
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("Disallow: /private/"),
        "{}",
        refused.body
    );
    // The same tunnel still carries the next request.
    let again = client
        .send("GET", "/public/c", &[("host", &host)])
        .await
        .unwrap();
    assert_eq!(again.status, 200);
    assert_eq!(origin.targets(), ["/robots.txt", "/public/a", "/public/c"]);
    // Counted under the protocol of the server reached.
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert!(
        metrics.contains("protocol=\"https\""),
        "no https series in the metrics"
    );
}

#[tokio::test]
async fn a_tunnel_to_where_the_proxy_never_connects_is_refused_before_it_opens() {
    let (origin, proxy) = https_site(ROBOTS).await;
    let http = proxy.addr(Listener::Http);
    let tls = || trusting(&proxy_ca(&proxy), &[b"http/1.1"]);
    // A port of another service.
    let refused = tunnel(http, ("127.0.0.1", 22), tls(), "127.0.0.1")
        .await
        .err()
        .unwrap();
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    // The proxy's own listener.
    let own = proxy.addr(Listener::Admin).port();
    let refused = tunnel(http, ("127.0.0.1", own), tls(), "127.0.0.1")
        .await
        .err()
        .unwrap();
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    // An IPv6 zone id names no address the proxy can check.
    let refused = tunnel(http, ("[fe80::1%25lo]", 443), tls(), "localhost")
        .await
        .err()
        .unwrap();
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(origin.seen().is_empty());
}

#[tokio::test]
async fn a_private_address_is_refused_for_a_tunnel_too() {
    let mut config = test_config();
    config
        .listen
        .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
    config.limits.allow_private_upstreams = false;
    let proxy = start_proxy(config).await;
    let tls = trusting(&proxy_ca(&proxy), &[b"http/1.1"]);
    for host in ["127.0.0.1", "[::1]", "localhost"] {
        let refused = tunnel(
            proxy.addr(Listener::Http),
            (host, 8443),
            tls.clone(),
            "localhost",
        )
        .await
        .err()
        .unwrap();
        assert!(refused.starts_with("HTTP/1.1 403"), "{host}: {refused}");
        assert!(refused.contains("destination_ip_prohibited"), "{refused}");
    }
}

/// A tunnel opened for one host carries requests for that host only: a
/// `Host` or a TLS server name naming another is answered `421`.
#[tokio::test]
async fn a_tunnel_s_requests_are_for_its_own_host() {
    let (origin, proxy) = https_site(ROBOTS).await;
    let port = origin.addr.port();
    let http = proxy.addr(Listener::Http);
    let tls = trusting(&proxy_ca(&proxy), &[b"http/1.1"]);
    let mut client = tunnel(http, ("127.0.0.1", port), tls, "127.0.0.1")
        .await
        .unwrap();
    let other = client
        .send("GET", "/public/a", &[("host", "example.com")])
        .await
        .unwrap();
    assert_eq!(other.status, 421, "{other:?}");
    // A client that checks nothing (any certificate), naming another host
    // by SNI than it asked to CONNECT to.
    let blind = robots_proxy::tls::client_config().unwrap();
    let mut blind_config = (*blind).clone();
    blind_config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut client = tunnel(http, ("127.0.0.1", port), blind_config.into(), "localhost")
        .await
        .unwrap();
    let host = format!("127.0.0.1:{port}");
    let misdirected = client
        .send("GET", "/public/a", &[("host", &host)])
        .await
        .unwrap();
    assert_eq!(misdirected.status, 421, "{misdirected:?}");
    assert!(
        origin.targets().iter().all(|t| t == "/robots.txt"),
        "{:?}",
        origin.targets()
    );
}

/// The leaf a crawler is shown is one a browser accepts: for the name (or
/// address) it asked, `serverAuth`, at most 397 days; and a client that
/// offers only HTTP/2 is refused in the handshake (the proxy speaks
/// HTTP/1.1 inside a tunnel, whose every request it decides).
#[tokio::test]
async fn the_leaf_is_a_web_server_s_and_http2_alone_is_refused() {
    let (origin, proxy) = https_site(ROBOTS).await;
    let port = origin.addr.port();
    let http = proxy.addr(Listener::Http);
    // rustls verifies the chain, the IP SAN and serverAuth.
    let tls = trusting(&proxy_ca(&proxy), &[b"http/1.1"]);
    let client = tunnel(http, ("127.0.0.1", port), tls, "127.0.0.1").await;
    assert!(client.is_ok(), "{:?}", client.err());
    let h2 = trusting(&proxy_ca(&proxy), &[b"h2"]);
    let refused = tunnel(http, ("127.0.0.1", port), h2, "127.0.0.1")
        .await
        .err()
        .unwrap();
    assert!(refused.starts_with("TLS"), "{refused}");
    let leaf = peer_leaf(http, port, &proxy).await;
    let (_, cert) = x509_parser::parse_x509_certificate(&leaf).unwrap();
    let days =
        (cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp()) / 86_400;
    assert!(days <= 397, "{days} days");
    let eku = cert.extended_key_usage().unwrap().unwrap();
    assert!(eku.value.server_auth);
    let _ = Duration::ZERO;
}

/// The leaf the proxy shows for a tunnel to 127.0.0.1:`port`.
async fn peer_leaf(http: std::net::SocketAddr, port: u16, proxy: &Proxy) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(http).await.unwrap();
    tcp.write_all(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tcp.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let tls = trusting(&proxy_ca(proxy), &[b"http/1.1"]);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .unwrap();
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// The web through SOCKS5, by port: plain text to a `[ports] http` port is
/// HTTP, TLS that offers HTTP by ALPN is HTTPS with the proxy's leaf; each
/// request decided for the server the client connected to.
#[tokio::test]
async fn the_web_through_socks5_is_decided_request_by_request() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let plain = WebOrigin::site(ROBOTS).await;
    let (secure, ca) = https_origin(ROBOTS).await;
    let mut config = test_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\n[ports]\nhttp = [{}]\n",
        plain.addr.port()
    ));
    config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
    let proxy = start_proxy(config).await;
    let socks = proxy.addr(Listener::Socks5);
    // Plain HTTP to the http port.
    for (path, status) in [("/public/a", "200"), ("/private/b", "403")] {
        let (mut s, code) = socks_connect(socks, "127.0.0.1", plain.addr.port(), None).await;
        assert_eq!(code, 0);
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            plain.addr
        );
        s.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        s.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{path}: {answer}"
        );
    }
    assert_eq!(plain.targets(), ["/robots.txt", "/public/a"]);
    // HTTPS by ALPN, to a port no table lists: the leaf names the host the
    // client asked for by SNI, and the proxy's CA is what the client trusts.
    let (s, code) = socks_connect(socks, "127.0.0.1", secure.addr.port(), None).await;
    assert_eq!(code, 0);
    let tls = trusting(&proxy_ca(&proxy), &[b"http/1.1"]);
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(tls)
        .connect(name, s)
        .await
        .expect("the proxy's leaf for localhost");
    let request = format!(
        "GET /private/x HTTP/1.1\r\nHost: localhost:{}\r\nConnection: close\r\n\r\n",
        secure.addr.port()
    );
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
}
