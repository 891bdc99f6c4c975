//! A server's "slow down", from the server's side and the crawler's: what
//! it asks holds every request it has not yet seen, those already waiting
//! their turn included, and, on the web, holds the site (its host name:
//! both schemes, every port, every way in). Tables over the kinds of
//! slow-down (Gemini `44` with and without a number, the web's `429` and
//! `503` with and without `Retry-After`, a robots.txt that became
//! unreachable) and the ways a crawler may come back. (The fleet's rows:
//! tests/store/fleet.rs.)

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use tokio::net::TcpStream;

use crate::common::web::{raw_over, trusting, tunnel, web_config_with, WebClient, WebOrigin};
use crate::common::*;

/// What a crawler was answered: the status, the seconds of the
/// `Retry-After`, and whether the proxy wrote it (`Proxy-Status`).
#[derive(Debug)]
struct Told {
    status: u16,
    retry: Option<u64>,
    by_proxy: bool,
}

fn told(answer: &crate::common::web::Answer) -> Told {
    Told {
        status: answer.status,
        retry: answer.header("retry-after").and_then(|v| v.parse().ok()),
        by_proxy: answer.header("proxy-status").is_some(),
    }
}

/// Requests at once through the HTTP listener, one client each: what each
/// was told, in the order they were sent.
async fn at_once(proxy: &Proxy, urls: Vec<String>) -> Vec<Told> {
    let http = proxy.addr(Listener::Http);
    let tasks: Vec<_> = urls
        .into_iter()
        .map(|url| {
            tokio::spawn(async move {
                let mut client = WebClient::connect(http).await;
                told(&client.get(&url, &[]).await)
            })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

/// The pages (not robots.txt) an origin saw, with when.
fn pages(origin: &WebOrigin) -> Vec<std::time::Instant> {
    origin
        .seen()
        .into_iter()
        .filter(|s| s.target != "/robots.txt")
        .map(|s| s.at)
        .collect()
}

/// Hole 1 on the web: a site with `Crawl-delay: 1` whose every page says
/// "slow down", asked for four pages at once. The first reaches it; the
/// three waiting their turn (queued, or with `per_host_concurrency = 4`
/// waiting only for the spacing) are held by what it said when their turn comes,
/// told to slow down at once (the proxy's `429`, with how long) since the
/// hold passes their bound. Every kind: `429` and `503`, with a
/// `Retry-After` in seconds or as a date, and without one (the back-off's
/// first 60 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_for_a_site_are_held_by_its_slow_down() {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3600));
    let rows: [(u16, Option<String>); 6] = [
        (429, Some("3600".into())),
        (429, Some(date.clone())),
        (429, None),
        (503, Some("3600".into())),
        (503, Some(date)),
        (503, None),
    ];
    // The rows at once (each its own proxy and site): each takes a spacing.
    let rows = rows
        .into_iter()
        .flat_map(|row| [(row.clone(), 1), (row, 4)])
        .map(|((status, retry_after), concurrency)| async move {
            // A proxy each: every origin here is on 127.0.0.1, one site.
            let mut config = web_config_with("[bot]\nagent = \"examplebot\"\n");
            config.politeness.per_host_concurrency = concurrency;
            let proxy = start_proxy(config).await;
            let fields: Vec<(&'static str, String)> = retry_after
                .clone()
                .map(|v| vec![("retry-after", v)])
                .unwrap_or_default();
            let origin = WebOrigin::start(move |path| match path {
                "/robots.txt" => (200, vec![], b"User-agent: *\nCrawl-delay: 1\n".to_vec()),
                _ => (status, fields.clone(), b"busy".to_vec()),
            })
            .await;
            let urls = (0..4).map(|i| origin.url(&format!("/p{i}"))).collect();
            let answers = at_once(&proxy, urls).await;
            let row = format!("{status} {retry_after:?} ×{concurrency}: {answers:?}");
            assert_eq!(pages(&origin).len(), 1, "one page reached it: {row}");
            let relayed = answers.iter().filter(|t| !t.by_proxy).count();
            assert_eq!(relayed, 1, "{row}");
            for held in answers.iter().filter(|t| t.by_proxy) {
                assert_eq!(held.status, 429, "{row}");
                let retry = held.retry.unwrap_or_else(|| panic!("{row}"));
                assert!((50..=3600).contains(&retry), "{row}");
            }
        });
    futures_util::future::join_all(rows).await;
}

/// A site's short hold: the requests waiting then go when it has passed,
/// within what is left of their own bound, spaced as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_hold_delays_the_waiting_requests_until_it_has_passed() {
    let first = Arc::new(AtomicBool::new(true));
    let origin = WebOrigin::start(move |path| match path {
        "/robots.txt" => (200, vec![], b"User-agent: *\nCrawl-delay: 0.5\n".to_vec()),
        _ if first.swap(false, Ordering::SeqCst) => {
            (429, vec![("retry-after", "2".into())], b"busy".to_vec())
        }
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let proxy = start_proxy(web_config_with("[bot]\nagent = \"examplebot\"\n")).await;
    let urls = (0..3).map(|i| origin.url(&format!("/p{i}"))).collect();
    let answers = at_once(&proxy, urls).await;
    let mut statuses: Vec<u16> = answers.iter().map(|t| t.status).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 200, 429], "{answers:?}");
    let at = pages(&origin);
    assert_eq!(at.len(), 3);
    let after_429 = at[1] - at[0];
    assert!(after_429 >= Duration::from_millis(1900), "{after_429:?}");
    assert!(
        at[2] - at[1] >= Duration::from_millis(450),
        "spaced as before"
    );
}

/// Hole 1 on the small web: six clients at once against a capsule whose
/// every page answers a slow-down (`44 2`, `44 3600`, a bare `44`). Every
/// start after the first waits out what the capsule asked: no two of its
/// pages are asked within 2 s (the bare `44`: its spacing doubled from the
/// 1 s floor), and what cannot wait is answered `44` at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_clients_waiting_for_a_capsule_are_held_by_its_44() {
    // The rows at once, each its own proxy and capsule.
    let rows = ["44 2", "44 3600", "44 Slow down"].map(|answer| async move {
        let origin = slowing_capsule(answer).await;
        let mut config = test_config();
        config.politeness.max_wait = Duration::from_secs(5);
        let proxy = start_proxy(config).await;
        six_at_once_are_held(&origin, &[proxy.addr(Listener::Gemini)], answer).await;
        proxy.shutdown();
    });
    futures_util::future::join_all(rows).await;
}

/// Hole 1, robots.txt: a request waiting on its bot's rate while the
/// site's robots.txt became unreachable (fetched again for another bot, and
/// answered `503`, with no good copy) is decided again with the copy cached
/// when its turn comes: refused, as a request asked then would be; the
/// waiting request fetches nothing itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waiting_when_robots_txt_becomes_unreachable_is_refused() {
    crate::common::web::robots_txt_unreachable_while_waiting(start_proxy).await;
}

/// How a crawler comes back to a site.
#[derive(Clone, Copy, Debug)]
enum WayIn {
    /// The HTTP listener: an absolute URL, or `CONNECT` for HTTPS.
    Listener,
    Socks5,
    Transparent,
}

/// What a crawler coming `way` is told for `path` at `127.0.0.1:port` over
/// `https` or not.
async fn told_via(
    proxy: &Proxy,
    kernel: &FakeKernel,
    (way, https): (WayIn, bool),
    port: u16,
    path: &str,
) -> Told {
    let ca = proxy.ca_cert_path.clone().expect("a CA");
    let head =
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    let stream = match (way, https) {
        (WayIn::Listener, false) => {
            let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
            return told(
                &client
                    .get(&format!("http://127.0.0.1:{port}{path}"), &[])
                    .await,
            );
        }
        (WayIn::Listener, true) => {
            let tls = trusting(&ca, &[b"http/1.1"]);
            let mut client = tunnel(
                proxy.addr(Listener::Http),
                ("127.0.0.1", port),
                tls,
                "127.0.0.1",
            )
            .await
            .expect("a tunnel");
            return told(
                &client
                    .get(&format!("https://127.0.0.1:{port}{path}"), &[])
                    .await,
            );
        }
        (WayIn::Socks5, _) => {
            let (s, code) =
                socks_connect(proxy.addr(Listener::Socks5), "127.0.0.1", port, None).await;
            assert_eq!(code, 0);
            s
        }
        (WayIn::Transparent, _) => {
            kernel.redirect_to(SocketAddr::from(([127, 0, 0, 1], port)));
            TcpStream::connect(proxy.addr(Listener::Transparent))
                .await
                .unwrap()
        }
    };
    let answer = raw_over(stream, https.then_some((ca.as_path(), "127.0.0.1")), &head).await;
    let (head, _) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{way:?} https={https} {port}: {answer}"));
    let field = |name: &str| {
        head.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    Told {
        status: head[9..12].parse().unwrap(),
        retry: field("retry-after").and_then(|v| v.parse().ok()),
        by_proxy: field("proxy-status").is_some(),
    }
}

/// Hole 2: a `429 Retry-After: 600` from `http://127.0.0.1:P1/` holds the
/// site, not the port: every port and both schemes, however the crawler
/// comes back (the HTTP listener and `CONNECT`, SOCKS5, transparent), are
/// told by the proxy to come back when the hold ends, and no server of the
/// site hears anything more, robots.txt included (a port whose robots.txt
/// is not yet known is answered `503`: it cannot be fetched before then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_holds_the_site_on_every_port_scheme_and_way_in() {
    let (busy, plain, secure, ca) = crate::common::web::one_site_on_three_ports().await;
    let mut config = web_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\n[ports]\nhttp = [{}, {}]\nhttps = [{}]\n",
        busy.addr.port(),
        plain.addr.port(),
        secure.addr.port()
    ));
    config.http.extra_roots = vec![ca.pem_file(&config.state_dir)];
    let (proxy, kernel) = start_transparent(config, FakeKernel::default()).await;
    let said = told_via(
        &proxy,
        &kernel,
        (WayIn::Listener, false),
        busy.addr.port(),
        "/a",
    )
    .await;
    assert_eq!((said.status, said.by_proxy), (429, false));
    assert_eq!(busy.targets(), ["/robots.txt", "/a"]);
    for way in [WayIn::Listener, WayIn::Socks5, WayIn::Transparent] {
        for (port, https) in [
            (busy.addr.port(), false),
            (plain.addr.port(), false),
            (secure.addr.port(), true),
        ] {
            let told = told_via(&proxy, &kernel, (way, https), port, "/b").await;
            let row = format!("{way:?} port {port} https={https}: {told:?}");
            let known = port == busy.addr.port();
            assert_eq!(told.status, if known { 429 } else { 503 }, "{row}");
            assert!(told.by_proxy, "{row}");
            assert!(
                told.retry.is_some_and(|r| (500..=600).contains(&r)),
                "{row}"
            );
        }
    }
    assert_eq!(busy.targets(), ["/robots.txt", "/a"]);
    assert!(plain.targets().is_empty(), "{:?}", plain.targets());
    assert!(secure.targets().is_empty(), "{:?}", secure.targets());
}
