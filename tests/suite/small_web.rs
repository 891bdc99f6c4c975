//! Spartan and Nex through the proxy's drop-in ways in (SOCKS5 here; the
//! transparent listener shares the same path, `dropin.rs`): each decided by
//! its own robots.txt over its own protocol, every spelling of a disallowed
//! path refused, uploads refused for bots that may not upload, a Spartan line
//! to a port `[ports]` does not list refused rather than sent as a Gopher
//! selector, and one politeness gate for a machine reached over four
//! protocols.

use crate::common::small_web;
use std::time::Duration;

use robots_proxy::listener::Listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;
use small_web::{SmallServer, Speaks};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn files(robots: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("/robots.txt", robots),
        ("/public.txt", "public text\n"),
        ("/private/x.txt", "secret\n"),
        ("/guestbook", "thanks\n"),
    ]
}

/// A config whose `[ports]` table names the test servers' ports.
fn config_for(spartan: u16, nex: u16, extra: &str) -> robots_proxy::config::Config {
    test_config_with(&format!(
        "[ports]\nspartan = [{spartan}]\nnex = [{nex}]\n\n[bot]\nagent = \"examplebot\"\n{extra}"
    ))
}

/// One request line (and data) through SOCKS5 to `port` on 127.0.0.1; the
/// whole answer.
async fn through_socks(proxy: std::net::SocketAddr, port: u16, request: &[u8]) -> Vec<u8> {
    let (mut s, code) = socks_connect(proxy, "127.0.0.1", port, None).await;
    assert_eq!(code, 0, "CONNECT refused");
    s.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    answer
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spartan_through_socks5_follows_its_own_robots_txt_over_every_spelling() {
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &files(ROBOTS)).await;
    let proxy = start_proxy(config_for(spartan.addr.port(), 1, "")).await;
    let socks = proxy.addr(Listener::Socks5);
    let port = spartan.addr.port();
    let ok = through_socks(socks, port, b"127.0.0.1 /public.txt 0\r\n").await;
    assert_eq!(text(&ok), "2 text/plain\r\npublic text\n");
    for spelling in PRIVATE_SPELLINGS {
        let line = format!("127.0.0.1 {spelling} 0\r\n");
        let answer = text(&through_socks(socks, port, line.as_bytes()).await);
        assert!(
            answer.starts_with("4 robots.txt of 127.0.0.1:")
                && answer.contains("Disallow: /private"),
            "{spelling}: {answer}"
        );
    }
    assert_eq!(spartan.count("/private/x.txt"), 0, "{:?}", spartan.paths());
    assert_eq!(
        spartan.count("/robots.txt"),
        1,
        "fetched once, over Spartan"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nex_through_socks5_follows_its_own_robots_txt_over_every_spelling() {
    let nex = SmallServer::start(Speaks::Nex, machine(1), &files(ROBOTS)).await;
    let proxy = start_proxy(config_for(1, nex.addr.port(), "")).await;
    let socks = proxy.addr(Listener::Socks5);
    let port = nex.addr.port();
    assert_eq!(
        text(&through_socks(socks, port, b"public.txt\r\n").await),
        "public text\n"
    );
    for spelling in [
        "private/x.txt",
        "/private/x.txt",
        "//private//x.txt",
        "/%70rivate/x.txt",
        "/%2570rivate/x.txt",
        "public/../private/x.txt",
        "./private/x.txt",
    ] {
        let line = format!("{spelling}\r\n");
        let answer = text(&through_socks(socks, port, line.as_bytes()).await);
        let first = answer.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("robots-proxy: 53 robots.txt of 127.0.0.1:"),
            "{spelling}: {answer}"
        );
    }
    assert_eq!(nex.count("/private/x.txt"), 0, "{:?}", nex.paths());
    assert_eq!(nex.count("/robots.txt"), 1, "fetched once, over Nex");
}

/// Uploads are side effects, not crawling: refused for a bot by default,
/// relayed (data and all) for a bot with `uploads = true`, which robots.txt
/// still decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spartan_upload_is_refused_unless_the_bot_may_upload() {
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &files(ROBOTS)).await;
    let port = spartan.addr.port();
    let config = config_for(
        port,
        1,
        "\n[[bots]]\nname = \"poster\"\nagent = \"posterbot\"\nuploads = true\nclients = [\"127.0.0.2/32\"]\n",
    );
    let proxy = start_proxy(config).await;
    let socks = proxy.addr(Listener::Socks5);
    let answer = text(&through_socks(socks, port, b"127.0.0.1 /guestbook 5\r\nhello").await);
    assert!(answer.starts_with("4 uploads are refused"), "{answer}");
    assert_eq!(spartan.count("/guestbook"), 0);
    // Another bot, which may upload: the data reaches the server.
    let from = |s: &[u8]| {
        let s = s.to_vec();
        async move {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            let tcp = sock.connect(socks).await.unwrap();
            let (mut tcp, code) = socks_handshake(tcp, "127.0.0.1", port, None).await;
            assert_eq!(code, 0);
            tcp.write_all(&s).await.unwrap();
            let mut answer = Vec::new();
            let _ = tcp.read_to_end(&mut answer).await;
            text(&answer)
        }
    };
    assert_eq!(
        from(b"127.0.0.1 /guestbook 5\r\nhello").await,
        "2 text/gemini\r\nthanks\n"
    );
    let posted = spartan.asked.lock().unwrap().last().unwrap().clone();
    assert_eq!(
        (posted.path.as_str(), posted.data.as_slice()),
        ("/guestbook", &b"hello"[..])
    );
    // robots.txt still decides its uploads.
    let answer = from(b"127.0.0.1 /private/form 3\r\nabc").await;
    assert!(answer.starts_with("4 robots.txt"), "{answer}");
    // An upload that sends less than it announced reaches nothing whole.
    let answer = from(b"127.0.0.1 /guestbook 900\r\nshort").await;
    assert!(!answer.starts_with("2 "), "{answer}");
}

/// A Spartan request to a port the table does not list is refused, in
/// Spartan, and never reaches the server as a Gopher selector.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spartan_line_to_an_unlisted_port_is_not_sent_as_a_selector() {
    let hole = hole(
        Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        Reply::Bytes(b"text\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(config_for(1, 2, "")).await;
    let socks = proxy.addr(Listener::Socks5);
    let answer = text(&through_socks(socks, hole.addr.port(), b"127.0.0.1 /public 0\r\n").await);
    assert!(
        answer.starts_with("4 a spartan request to port") && answer.contains("[ports]"),
        "{answer}"
    );
    // A selector is still a selector there.
    assert_eq!(
        through_socks(socks, hole.addr.port(), b"/public\r\n").await,
        b"text\r\n"
    );
    assert_eq!(hole.count(b"127.0.0.1 /public 0"), 0);
}

/// A request line naming another host than the one the client connected to
/// is refused (its robots.txt would be another's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spartan_line_for_another_host_is_refused() {
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &files(ROBOTS)).await;
    let port = spartan.addr.port();
    let proxy = start_proxy(config_for(port, 1, "")).await;
    let (mut s, code) = socks_connect(proxy.addr(Listener::Socks5), "localhost", port, None).await;
    assert_eq!(code, 0);
    s.write_all(b"other.example /public.txt 0\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    let answer = text(&answer);
    assert!(
        answer.starts_with("4 this connection is for localhost"),
        "{answer}"
    );
    assert!(spartan.paths().is_empty());
}

/// A hostile Spartan server: a status line that is no status line, or
/// nothing at all, gets the client a `5` naming the upstream, not garbage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spartan_upstream_that_answers_garbage_gets_a_clear_error() {
    let liar = tokio::net::TcpListener::bind(machine(1)).await.unwrap();
    let port = liar.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = liar.accept().await {
            tokio::spawn(async move {
                let mut line = [0u8; 256];
                let n = s.read(&mut line).await.unwrap_or(0);
                let asked = String::from_utf8_lossy(&line[..n]).into_owned();
                let answer: &[u8] = if asked.contains("/robots.txt") {
                    b"2 text/plain\r\nUser-agent: *\nAllow: /\n"
                } else {
                    b"20 text/gemini\x1b[2J\r\nhello"
                };
                let _ = s.write_all(answer).await;
            });
        }
    });
    let proxy = start_proxy(config_for(port, 1, "")).await;
    let answer =
        text(&through_socks(proxy.addr(Listener::Socks5), port, b"127.0.0.1 /x 0\r\n").await);
    assert!(answer.starts_with("5 upstream 127.0.0.1:"), "{answer}");
    assert!(!answer.contains("hello"), "{answer}");
}

/// A capsule mirrored over Gemini, Gopher, Spartan and Nex on one machine
/// sees one visitor: every request start, whatever its protocol, is spaced
/// by the Crawl-delay from the last start at that machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_gate_for_a_machine_reached_over_four_protocols() {
    let robots = "User-agent: *\nCrawl-delay: 0.5\n";
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &files(robots)).await;
    let nex = SmallServer::start(Speaks::Nex, machine(1), &files(robots)).await;
    let capsule = capsule(
        crate::common::text("20 text/plain", robots),
        crate::common::text("20 text/gemini", "page"),
    )
    .await;
    let hole = hole(
        Reply::Bytes(robots.as_bytes().to_vec()),
        Reply::Bytes(b"text\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(config_for(spartan.addr.port(), nex.addr.port(), "")).await;
    let socks = proxy.addr(Listener::Socks5);
    // robots.txt first, four fetches at the gate (no delay of their own):
    // then every page start is spaced by 0.5 s from the one before.
    for _ in 0..2 {
        let (s, n) = (spartan.addr.port(), nex.addr.port());
        let g = proxy.addr(Listener::Gemini);
        let (page, menu) = (capsule.url("/page"), hole.url("0/page"));
        let (a, b, c, d) = tokio::join!(
            through_socks(socks, s, b"127.0.0.1 /public.txt 0\r\n"),
            through_socks(socks, n, b"/public.txt\r\n"),
            gemini(g, &page),
            gopher(proxy.addr(Listener::Gopher), menu.as_bytes()),
        );
        assert!(text(&a).starts_with("2 "), "{}", text(&a));
        assert_eq!(text(&b), "public text\n");
        assert_eq!(c.0, "20 text/gemini");
        assert_eq!(d, b"text\r\n");
    }
    let mut starts: Vec<std::time::Instant> = Vec::new();
    starts.extend(
        spartan
            .asked
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.path != "/robots.txt")
            .map(|a| a.at),
    );
    starts.extend(
        nex.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.path != "/robots.txt")
            .map(|a| a.at),
    );
    starts.extend(
        capsule
            .arrivals
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, url)| !url.ends_with("/robots.txt"))
            .map(|(at, _)| *at),
    );
    let hole_arrivals = hole.arrivals.lock().unwrap().clone();
    let hole_selectors = hole.selectors.lock().unwrap().clone();
    starts.extend(
        hole_arrivals
            .iter()
            .zip(hole_selectors.iter())
            .filter(|(_, s)| s.as_slice() != b"robots.txt")
            .map(|(at, _)| *at),
    );
    assert_eq!(starts.len(), 8);
    starts.sort();
    let gaps: Vec<f64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    assert_spaced(&gaps, 0.5);
}

/// A client that connected by address and names a host in its line is no
/// way around robots.txt: the named host's robots.txt decides, fetched over
/// Spartan from the addresses that name resolves to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_named_after_connecting_by_address_is_decided_by_its_own_robots_txt() {
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &files(ROBOTS)).await;
    let port = spartan.addr.port();
    let proxy = start_proxy(config_for(port, 1, "")).await;
    let socks = proxy.addr(Listener::Socks5);
    let answer = text(&through_socks(socks, port, b"localhost /private/x.txt 0\r\n").await);
    assert!(
        answer.starts_with("4 robots.txt of localhost:") && answer.contains("Disallow: /private"),
        "{answer}"
    );
    let answer = text(&through_socks(socks, port, b"LocalHost. /public.txt 0\r\n").await);
    assert_eq!(answer, "2 text/plain\r\npublic text\n");
    assert_eq!(spartan.count("/private/x.txt"), 0, "{:?}", spartan.paths());
}
