//! Transparent mode, in-process: a client that knows nothing of any proxy
//! connects "to the server" and lands on the transparent listener. The kernel's
//! answers (the original destination, which addresses are this machine's) come
//! from a fake here; tests/interop/run does the same with real iptables rules in
//! a network namespace of its own.

use crate::common::small_web;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::common::*;
use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(config_toml: Option<&str>, kernel: FakeKernel) -> (Proxy, Arc<FakeKernel>) {
    let config = match config_toml {
        Some(toml) => test_config_with(toml),
        None => test_config(),
    };
    start_transparent(config, kernel).await
}

/// What a proxy-unaware Gopher client gets: it sends the bare selector it
/// would send the server.
async fn gopher_direct(listener: SocketAddr, from: &str, selector: &[u8]) -> Vec<u8> {
    let mut s = tcp_from(from, listener).await;
    let _ = s.write_all(&[selector, b"\r\n"].concat()).await;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    answer
}

/// What a proxy-unaware Gemini client gets: TLS with SNI `sni` (trusting the
/// proxy's CA, checking the name), then the request it would send the server.
async fn gemini_direct(proxy: &Proxy, sni: &str, url: &str) -> String {
    let tcp = TcpStream::connect(proxy.addr(Listener::Transparent))
        .await
        .unwrap();
    gemini_trusting_ca(proxy, tcp, (sni, url), None).await
}

/// Bytes that end at once, with nothing written back: the connection was closed.
async fn closed_at_once(mut s: TcpStream, send: &[u8]) -> bool {
    let _ = s.write_all(send).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        s.read_to_end(&mut answer),
    )
    .await;
    read.is_ok() && answer.is_empty()
}

async fn rejected(proxy: &Proxy, reason: &str) -> f64 {
    let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    sample(
        &metrics,
        &format!(
            "robots_proxy_connections_rejected_total{{listener=\"transparent\",reason=\"{reason}\"}}"
        ),
    )
    .unwrap_or(0.0)
}

/// A crawler that knows no proxy sends bare selectors to "the server": the
/// rules hold, every spelling that dodges them included, and what is allowed
/// is relayed byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gopher_clients_that_know_no_proxy_are_decided_and_relayed() {
    let menu = b"1Menu\t/m\thost.example\t70\r\n.\r\n".to_vec();
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        Reply::Bytes(menu.clone()),
    )
    .await;
    let (proxy, kernel) = start(None, FakeKernel::default()).await;
    kernel.redirect_to(origin.addr);
    let listener = proxy.addr(Listener::Transparent);

    // Menus are relayed as they are: the client's next request is redirected too.
    assert_eq!(gopher_direct(listener, "127.0.0.1", b"/page").await, menu);
    for dodge in [
        &b"/private/x"[..],
        b"private/x",
        b"/%70rivate/x",
        b"//private/x",
    ] {
        let answer = gopher_direct(listener, "127.0.0.1", dodge).await;
        assert!(
            answer.starts_with(b"3"),
            "{:?} was not refused: {:?}",
            String::from_utf8_lossy(dodge),
            String::from_utf8_lossy(&answer)
        );
    }
    assert!(origin.all().iter().all(|s| !s.contains("rivate")));
    // One robots.txt fetch for all of it, to the original destination.
    assert_eq!(origin.count(b"robots.txt"), 1);
}

/// A Gemini crawler that knows no proxy: its TLS is ended with a certificate
/// for its SNI name from the proxy's CA, then its request is decided as any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_clients_that_know_no_proxy_get_the_sni_names_certificate() {
    let origin = capsule(
        text("20 text/plain", "User-agent: *\nDisallow: /private\n"),
        text("20 text/gemini", "# hello\n"),
    )
    .await;
    let (proxy, kernel) = start(None, FakeKernel::default()).await;
    kernel.redirect_to(origin.addr);
    let port = origin.addr.port();

    let other = port.wrapping_add(1);
    for (url, answer) in [
        (format!("gemini://localhost:{port}/"), "20 text/gemini"),
        (format!("gemini://localhost:{port}/private/x"), "53 "),
        // By address, as a client without SNI would name it.
        (format!("gemini://127.0.0.1:{port}/private/x"), "53 "),
        // Another server than the one it connected to: the redirect cannot be
        // used to reach elsewhere.
        (format!("gemini://localhost:{other}/"), "53 "),
    ] {
        let got = gemini_direct(&proxy, "localhost", &url).await;
        assert!(got.starts_with(answer), "{url}: {got}");
    }
    assert_eq!(origin.count("/private/x"), 0);
}

/// Whatever reaches the listener without a redirect, or would loop back into
/// the proxy, or is an HTTP request line to a port that is not the web's, is
/// closed at once and counted; TLS that is plainly the web's is ended and
/// its requests decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loops_strays_and_web_traffic_are_closed_or_decided() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nDisallow:\n".to_vec()),
        Reply::Bytes(b"iok\r\n.\r\n".to_vec()),
    )
    .await;
    let (proxy, kernel) = start(None, FakeKernel::default()).await;
    let listener = proxy.addr(Listener::Transparent);

    // Not redirected: no original destination.
    let s = TcpStream::connect(listener).await.unwrap();
    assert!(closed_at_once(s, b"/\r\n").await);
    assert_eq!(rejected(&proxy, "not-redirected").await, 1.0);

    // A loop: the original destination is the transparent listener itself, or
    // another of the proxy's listeners.
    for own in [
        listener,
        proxy.addr(Listener::Gopher),
        proxy.addr(Listener::Gemini),
    ] {
        kernel.redirect_to(own);
        let s = TcpStream::connect(listener).await.unwrap();
        assert!(closed_at_once(s, b"/\r\n").await, "{own}");
    }
    assert_eq!(rejected(&proxy, "destination").await, 3.0);

    // An HTTP request line to a redirected port: closed, never relayed.
    kernel.redirect_to(origin.addr);
    let s = TcpStream::connect(listener).await.unwrap();
    assert!(closed_at_once(s, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n").await);
    assert_eq!(rejected(&proxy, "http").await, 1.0);

    // HTTPS: a client that offers only HTTP by ALPN to a port other than
    // 1965 is the web's: its TLS ended, its request decided (for another
    // host than the one it connected to: 421, nothing fetched).
    let tcp = TcpStream::connect(listener).await.unwrap();
    let mut config = robots_proxy::tls::client_config().unwrap().as_ref().clone();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("the web's TLS is ended");
    tls.write_all(b"GET / HTTP/1.1\r\nHost: other.example\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");
    assert!(
        origin.all().is_empty(),
        "nothing reached the server: {:?}",
        origin.all()
    );
}

/// Access rules hold on the transparent listener: a crawler on this machine
/// (redirected from one of its addresses, not loopback) is admitted where
/// loopback is; an address outside allow_from that is not this machine's gets
/// nothing, and nothing is fetched for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_crawlers_are_admitted_and_strangers_are_not() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nDisallow:\n".to_vec()),
        Reply::Bytes(b"iok\r\n.\r\n".to_vec()),
    )
    .await;
    // Only 127.0.0.1 is "loopback" here; 127.0.0.2 plays this machine's LAN
    // address and 127.0.0.3 a stranger.
    let kernel = FakeKernel {
        local: vec!["127.0.0.2".parse().unwrap()],
        ..FakeKernel::default()
    };
    let toml = "[bot]\nagent = \"examplebot\"\n[access]\nallow_from = [\"127.0.0.1/32\"]\n";
    let (proxy, kernel) = start(Some(toml), kernel).await;
    kernel.redirect_to(origin.addr);
    let listener = proxy.addr(Listener::Transparent);

    let local = gopher_direct(listener, "127.0.0.2", b"/page").await;
    assert_eq!(local, b"iok\r\n.\r\n");
    let stranger = tcp_from("127.0.0.3", listener).await;
    assert!(closed_at_once(stranger, b"/page\r\n").await);
    assert_eq!(rejected(&proxy, "access").await, 1.0);
    assert_eq!(origin.count(b"/page"), 1);
    // The other listeners are unchanged: 127.0.0.2 is not loopback there.
    let gopher = gopher_from(
        proxy.addr(Listener::Gopher),
        origin.url("1/page").as_bytes(),
        "127.0.0.2",
    )
    .await;
    assert!(
        gopher.starts_with(b"3"),
        "{}",
        String::from_utf8_lossy(&gopher)
    );
}

/// From the other side: one client holding silent connections, and another
/// sending a ClientHello that is garbage after its first byte. The silent
/// client is held to its per-client cap (the extra connection closed at once),
/// the garbage is closed, and a third client is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crowding_and_garbage_tls_do_not_keep_others_out() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nDisallow:\n".to_vec()),
        Reply::Bytes(b"iok\r\n.\r\n".to_vec()),
    )
    .await;
    let toml = "[bot]\nagent = \"examplebot\"\n[limits]\nmax_connections_per_client = 4\n";
    let (proxy, kernel) = start(Some(toml), FakeKernel::default()).await;
    kernel.redirect_to(origin.addr);
    let listener = proxy.addr(Listener::Transparent);

    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(tcp_from("127.0.0.2", listener).await);
    }
    // The fifth is reset at once: before or after its connect completes.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    if let Ok(extra) = socket.connect(listener).await {
        assert!(
            closed_at_once(extra, b"").await,
            "the fifth connection was kept"
        );
    }
    // Garbage after a TLS record header: ended at once, with at most a TLS alert.
    let mut garbage = tcp_from("127.0.0.3", listener).await;
    garbage
        .write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 0, 1, 2, 3])
        .await
        .unwrap();
    let mut answer = Vec::new();
    let ended = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        garbage.read_to_end(&mut answer),
    )
    .await;
    assert!(ended.is_ok(), "the garbage connection was held");
    assert!(
        answer.is_empty() || answer[0] == 0x15,
        "not a TLS alert: {answer:?}"
    );

    let served = gopher_direct(listener, "127.0.0.4", b"/page").await;
    assert_eq!(served, b"iok\r\n.\r\n");
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_connections_rejected_total{listener=\"transparent\",reason=\"client-cap\"}"
        ),
        Some(1.0)
    );
    drop(held);
}

/// A crawler that knows no proxy, redirected to a port `[ports]` says speaks
/// Spartan: whatever protocol's line it sends (a Gemini URL, a Gopher
/// selector, a Nex path), the port is spoken to as Spartan, robots.txt is
/// fetched over Spartan, and nothing disallowed reaches the server (issue
/// 46, hole 3; SOCKS5: tests/suite/holes.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_that_speaks_spartan_is_spoken_to_as_spartan_whatever_the_client_sends() {
    let (spartan, toml) = small_web::spartan_guarding_private(machine(1)).await;
    let (proxy, kernel) = start(Some(&toml), FakeKernel::default()).await;
    kernel.redirect_to(spartan.addr);
    let listener = proxy.addr(Listener::Transparent);
    for line in small_web::private_in_every_protocol(spartan.addr.port()) {
        let answer = gopher_direct(listener, "127.0.0.1", line.as_bytes()).await;
        small_web::assert_refused_in_spartan(&line, &String::from_utf8_lossy(&answer));
    }
    spartan.assert_asked_only_robots_txt();
}

/// A NUL behind escapes in a Spartan line from a crawler that knows no
/// proxy: `/data.bin%00.txt` is `/data.bin` to a server that stops at the
/// NUL, which `Disallow: /*.bin$` refuses; it is refused as malformed and
/// the server is not asked (issue 46, hole 2; the other ways in:
/// tests/suite/holes.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_behind_escapes_in_a_redirected_spartan_line_is_refused() {
    const ROBOTS: &str = "User-agent: *\nDisallow: /*.bin$\n";
    let files = [("/robots.txt", ROBOTS), ("/data.bin", "binary")];
    let spartan =
        small_web::SmallServer::start(small_web::Speaks::Spartan, machine(1), &files).await;
    let toml = format!(
        "[ports]\nspartan = [{}]\n\n[bot]\nagent = \"examplebot\"\n",
        spartan.addr.port()
    );
    let (proxy, kernel) = start(Some(&toml), FakeKernel::default()).await;
    kernel.redirect_to(spartan.addr);
    let listener = proxy.addr(Listener::Transparent);
    for spelling in [
        "/data.bin%00.txt",
        "/data.bin%2500.txt",
        "/data.bin%252500.txt",
    ] {
        let line = format!("127.0.0.1 {spelling} 0");
        let answer = gopher_direct(listener, "127.0.0.1", line.as_bytes()).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("4 "), "{line:?}: {answer}");
    }
    let paths = spartan.paths();
    assert!(paths.iter().all(|p| !p.contains("data.bin")), "{paths:?}");
}

/// One request on a transparent connection to `dest` (the kernel says the
/// client was going there): over TLS (offering `http/1.1`, naming `sni`)
/// when given, else plain; `head` as written. The status line.
async fn web_direct(
    proxy: &Proxy,
    kernel: &FakeKernel,
    dest: SocketAddr,
    tls: Option<(&std::path::Path, &str)>,
    head: &str,
) -> String {
    kernel.redirect_to(dest);
    let tcp = TcpStream::connect(proxy.addr(Listener::Transparent))
        .await
        .unwrap();
    crate::common::web::raw_over(tcp, tls, head)
        .await
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Transparent mode to web ports, from the crawler's side: every spelling
/// of a disallowed path is refused over plain HTTP and HTTPS; a `Host` is
/// held against the original destination (the same address spelled
/// otherwise, or a name resolving to it, is that server; another address,
/// another port, an absolute URL for elsewhere are `421`); and a `429`'s
/// hold holds the site (the ports and schemes rows: tests/suite/holds.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transparent_web_requests_are_held_against_their_destination() {
    const ROBOTS: &str = "User-agent: *\nDisallow: /private/\nDisallow: /*.bin$\n";
    let plain = crate::common::web::WebOrigin::site(ROBOTS).await;
    let ca = crate::common::web::LocalCa::new();
    let secure = crate::common::web::WebOrigin::start_tls(
        |path| match path {
            "/robots.txt" => (200, vec![], ROBOTS.into()),
            p => (200, vec![], format!("secure page {p}").into()),
        },
        ca.acceptor(&["127.0.0.1", "localhost"]),
    )
    .await;
    let toml = format!(
        "[bot]\nagent = \"examplebot\"\n[ports]\nhttp = [{}]\nhttps = [{}]\n",
        plain.addr.port(),
        secure.addr.port()
    );
    let mut config = test_config_with(&toml);
    config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
    let (proxy, kernel) = start_transparent(config, FakeKernel::default()).await;
    let ca_pem = proxy.ca_cert_path.clone().expect("the drop-in CA");
    let ask = |path: &str, host: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
    };
    for path in [
        "/private/x",
        "/%70rivate/x",
        "/PRIVATE/../private/x",
        "/public/%2e%2e/private/x",
        "/%2Fprivate/x",
        "//private/x",
        "/./private/x",
        "/public%5C..%5Cprivate/x",
        "/public/..;/private/x",
        "/data.bin;v=2",
    ] {
        let host = plain.addr.to_string();
        let got = web_direct(&proxy, &kernel, plain.addr, None, &ask(path, &host)).await;
        assert!(got.starts_with("HTTP/1.1 403"), "http {path}: {got}");
        let host = secure.addr.to_string();
        let tls = Some((ca_pem.as_path(), "127.0.0.1"));
        let got = web_direct(&proxy, &kernel, secure.addr, tls, &ask(path, &host)).await;
        assert!(got.starts_with("HTTP/1.1 403"), "https {path}: {got}");
    }
    let port = plain.addr.port();
    for (host, status) in [
        (format!("127.0.0.1:{port}"), "200"),
        (format!("127.1:{port}"), "200"),
        (format!("localhost:{port}"), "200"),
        (format!("LOCALHOST:{port}"), "200"),
        (format!("127.0.0.2:{port}"), "421"),
        (format!("127.0.0.1:{}", port + 1), "421"),
    ] {
        let got = web_direct(&proxy, &kernel, plain.addr, None, &ask("/public/a", &host)).await;
        assert!(
            got.starts_with(&format!("HTTP/1.1 {status}")),
            "Host: {host}: {got}"
        );
    }
    let elsewhere = ask(
        &format!("http://127.0.0.2:{port}/public/a"),
        &format!("127.0.0.2:{port}"),
    );
    let got = web_direct(&proxy, &kernel, plain.addr, None, &elsewhere).await;
    assert!(got.starts_with("HTTP/1.1 421"), "{got}");
    // Over TLS, the server name is the host: one resolving elsewhere is 421.
    let port = secure.addr.port();
    let tls = Some((ca_pem.as_path(), "localhost"));
    let got = web_direct(
        &proxy,
        &kernel,
        secure.addr,
        tls,
        &ask("/public/a", &format!("localhost:{port}")),
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    // A name that does not resolve to where the client connected: 421,
    // over TLS and plain, and nothing asked there.
    let astray = SocketAddr::from(([127, 0, 0, 2], port));
    let got = web_direct(
        &proxy,
        &kernel,
        astray,
        tls,
        &ask("/public/a", &format!("localhost:{port}")),
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 421"), "{got}");
    let astray = SocketAddr::from(([127, 0, 0, 2], plain.addr.port()));
    let host = format!("localhost:{}", plain.addr.port());
    let got = web_direct(&proxy, &kernel, astray, None, &ask("/public/a", &host)).await;
    assert!(got.starts_with("HTTP/1.1 421"), "{got}");
    let paths: Vec<String> = plain
        .targets()
        .into_iter()
        .chain(secure.targets())
        .filter(|t| t != "/robots.txt")
        .collect();
    assert!(paths.iter().all(|p| p == "/public/a"), "{paths:?}");
}
