//! Politeness through the whole proxy, over loopback with small real delays (the
//! gate's own timing is tested with a paused clock in src/politeness/tests.rs): the
//! spacing the origin sees, whose Crawl-delay applies, "slow down" answers,
//! upstream `44`, hosts independent, clients that leave while waiting.

use robots_proxy::listener::Listener;
use std::time::Duration;

use crate::common::*;

/// A capsule whose robots.txt is `robots`; every page answers `20`, `/busy`
/// answers `busy`.
async fn busy_capsule(robots: &'static str, busy: &'static str) -> Origin {
    busy_capsule_on(machine(1), robots, busy).await
}

/// [`busy_capsule`] on `addr`: another machine at `127.0.0.n`.
async fn busy_capsule_on(
    addr: std::net::SocketAddr,
    robots: &'static str,
    busy: &'static str,
) -> Origin {
    Origin::start_on(addr, move |url| {
        if url.ends_with("/robots.txt") {
            text("20 text/plain", robots)
        } else if url.ends_with("/busy") {
            text(busy, "")
        } else {
            text("20 text/gemini", "page")
        }
    })
    .await
}

fn config_with(agent: &str, virtuals: &[&str]) -> robots_proxy::config::Config {
    let mut config = test_config();
    config.bots = robots_proxy::bots::Bots::single(
        virtuals
            .iter()
            .fold(robots_proxy::robots::BotProfile::new(agent), |b, v| {
                b.with_virtual_agent(v)
            }),
    );
    config.politeness.max_wait = Duration::from_secs(5);
    config
}

/// Concurrent requests reach the origin spaced by the Crawl-delay, and the
/// robots.txt fetch takes the first slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_origin_sees_requests_spaced_by_crawl_delay() {
    let origin = busy_capsule("User-agent: *\nCrawl-delay: 0.2\n", "20 text/gemini").await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    let addr = proxy.addr(Listener::Gemini);
    let urls = (0..4).map(|i| origin.url(&format!("/p{i}")));
    for header in gemini_at_once(addr, urls).await {
        assert_eq!(header, "20 text/gemini");
    }
    let arrivals = origin.arrivals.lock().unwrap().clone();
    assert!(arrivals[0].1.ends_with("/robots.txt"), "{arrivals:?}");
    // Arrival gaps carry each connection's own handshake time; the gate spaces
    // starts, so the span of all four gaps is what it guarantees (only the
    // first and last latencies can shorten it).
    let gaps = origin.gaps();
    assert_eq!(gaps.len(), 4);
    let span: f64 = gaps.iter().sum();
    assert!(span >= 4.0 * 0.2 - JITTER, "gaps {gaps:?}");
}

/// The bot's own group decides the delay; then its virtual agents; then `*`.
/// The robots.txt fetch took the host's first slot, so the first page already
/// waits one Crawl-delay: past max_wait, the answer is `44` with that delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bots_own_group_sets_the_delay() {
    const ROBOTS: &str = "User-agent: examplebot\nCrawl-delay: 100\n\n\
                          User-agent: indexer\nCrawl-delay: 50\n\n\
                          User-agent: *\nCrawl-delay: 0\n";
    // (agent, virtual agents, the answer)
    let cases: &[(&str, &[&str], &str)] = &[
        ("examplebot", &["indexer"], "44 100"),
        ("otherbot", &["indexer"], "44 50"),
        ("otherbot", &[], "20 text/gemini"),
    ];
    for (agent, virtuals, want) in cases {
        let origin = busy_capsule(ROBOTS, "20 text/gemini").await;
        let proxy = start_proxy(config_with(agent, virtuals)).await;
        // A `44 N` answer is itself the proof the request was not held: held,
        // it would have been relayed after N s.
        let (answer, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/a")).await;
        assert_eq!(answer.as_str(), *want, "{agent} {virtuals:?}");
    }
}

/// Past max_wait, Gopher answers `3503 … slow down, retry in N s`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gopher_slow_down_is_a_3503_menu() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nCrawl-delay: 30\n".to_vec()),
        Reply::Bytes(b"text\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    // The robots.txt fetch took the first slot: the page waits 30 s, past max_wait.
    let answer = gopher(proxy.addr(Listener::Gopher), origin.url("0/a").as_bytes()).await;
    let first = String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        first.starts_with("3503 Service Unavailable: slow down, retry in 3"),
        "{first}"
    );
    assert!(first.ends_with(" s\texample.com\t0"), "{first}");
}

/// An upstream `44 N` is relayed, and the host's next start moves N s out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_44_with_seconds_is_relayed_and_obeyed() {
    let origin = busy_capsule("User-agent: *\n", "44 120").await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    let (answer, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/busy")).await;
    assert_eq!(answer, "44 120");
    let (answer, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/page")).await;
    assert!(answer.starts_with("44 1"), "{answer}");
    let secs: u64 = answer[3..].parse().unwrap();
    assert!((115..=120).contains(&secs), "{answer}");
    assert_eq!(origin.count("/page"), 0);
}

/// An upstream `44` without a number doubles the host's spacing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_44_without_seconds_doubles_the_spacing() {
    let origin = busy_capsule("User-agent: *\nCrawl-delay: 0.2\n", "44 Slow down").await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    let (answer, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/busy")).await;
    assert_eq!(answer, "44 Slow down");
    let (answer, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/page")).await;
    assert_eq!(answer, "20 text/gemini");
    let gaps = origin.gaps();
    // robots.txt → /busy: 0.2 s; /busy → /page: doubled to 0.4 s.
    assert!(
        gaps[0] >= 0.2 - JITTER && gaps[1] >= 0.4 - JITTER,
        "{gaps:?}"
    );
}

/// A slow host never slows another host's requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_host_is_not_held_up() {
    let slow = busy_capsule("User-agent: *\nCrawl-delay: 2\n", "20 text/gemini").await;
    // Another machine (a gate is per address, whatever the port).
    let fast = busy_capsule_on(machine(2), "User-agent: *\n", "20 text/gemini").await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    let addr = proxy.addr(Listener::Gemini);
    let slow_url = slow.url("/x");
    let waiting = tokio::spawn(async move { gemini(addr, &slow_url).await.0 });
    // The slow host's robots.txt took its slot: /x waits 2 s in the queue.
    let politeness = proxy.context().admission.politeness.clone();
    wait_until("/x is queued", || politeness.usage().1 == 1).await;
    // Meanwhile the fast host answers three times, and /x is still waiting:
    // the slow host's queue held nothing up.
    for i in 0..3 {
        assert_eq!(
            gemini(addr, &fast.url(&format!("/{i}"))).await.0,
            "20 text/gemini"
        );
    }
    assert_eq!(slow.count("/x"), 0, "/x still waits its turn");
    assert_eq!(proxy.context().admission.politeness.usage().1, 1);
    assert_eq!(waiting.await.unwrap(), "20 text/gemini");
}

/// A client that disconnects while waiting gives its place back: the next
/// request goes at the first free turn, and the origin never sees the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_gives_its_place_back() {
    use rustls::pki_types::ServerName;
    use tokio::io::AsyncWriteExt;
    let origin = busy_capsule("User-agent: *\nCrawl-delay: 1\n", "20 text/gemini").await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    // robots.txt is fetched at t≈0; /first would go at t≈1 s.
    let tcp = tokio::net::TcpStream::connect(proxy.addr(Listener::Gemini))
        .await
        .unwrap();
    let connector = tokio_rustls::TlsConnector::from(robots_proxy::tls::client_config().unwrap());
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(format!("{}\r\n", origin.url("/first")).as_bytes())
        .await
        .unwrap();
    let politeness = proxy.context().admission.politeness.clone();
    wait_until("/first is queued", || politeness.usage().1 == 1).await;
    tls.shutdown().await.unwrap();
    drop(tls);
    wait_until("the queue entry left with the client", || {
        politeness.usage().1 == 0
    })
    .await;
    // The next request is served, spaced from robots.txt by the Crawl-delay;
    // /first never reached the origin. (That it takes the free turn rather
    // than the one after is timed with a paused clock in src/politeness/tests.rs.)
    let (answer, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/second")).await;
    assert_eq!(answer, "20 text/gemini");
    assert_eq!(origin.count("/first"), 0);
    let gaps = origin.gaps();
    assert!(gaps[0] >= 1.0 - JITTER, "{gaps:?}");
}

/// One Gopher server under eight spellings of its name gets a burst of 16
/// requests: the proxy keys politeness by the server (its address and port), so
/// every start, the robots.txt fetches included, is a Crawl-delay apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_under_eight_names_is_spaced_by_its_crawl_delay() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nCrawl-delay: 0.1\n".to_vec()),
        Reply::Bytes(b"page\r\n".to_vec()),
    )
    .await;
    let port = origin.addr.port();
    let names = [
        "127.0.0.1",
        "localhost",
        "[::ffff:127.0.0.1]",
        "127.1",
        "0x7f.0.0.1",
        "2130706433",
        "0177.0.0.1",
        "LocalHost.",
    ];
    let mut config = config_with("examplebot", &[]);
    config.politeness.max_wait = Duration::from_secs(30);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gopher);
    let tasks: Vec<_> = names
        .iter()
        .cycle()
        .take(16)
        .enumerate()
        .map(|(i, name)| {
            let url = format!("gopher://{name}:{port}/0/p{i}");
            tokio::spawn(async move { gopher(addr, url.as_bytes()).await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), b"page\r\n");
    }
    // Two robots.txt hosts (127.0.0.1 and localhost), sixteen pages.
    assert_eq!(origin.count(b"robots.txt"), 2, "{:?}", origin.all());
    // One gate for all eight names, and 18 starts spaced by it. Arrival gaps at
    // the origin carry each connection's own latency, so the span of all of
    // them is checked rather than each gap (only the first and last latencies
    // can shorten it).
    assert_eq!(
        proxy.context().admission.politeness.usage().0,
        1,
        "one gate"
    );
    let gaps = origin.gaps();
    assert_eq!(gaps.len(), 17);
    let span: f64 = gaps.iter().sum();
    assert!(span >= 1.6, "gaps {gaps:?}");
}

/// Hostile numbers from outside cannot crash the proxy: a robots.txt with
/// `Crawl-delay: 99999999999999999999` and an upstream answering
/// `44 18446744073709551615` each get slow-down answers, and the proxy goes on
/// serving other hosts (time arithmetic saturates at about a century).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_crawl_delays_and_slow_downs_do_not_crash_the_proxy() {
    let huge_delay = busy_capsule(
        "User-agent: *\nCrawl-delay: 99999999999999999999\n",
        "20 text/gemini",
    )
    .await;
    let huge_44 = busy_capsule_on(
        machine(2),
        "User-agent: *\nDisallow:\n",
        "44 18446744073709551615",
    )
    .await;
    let fine = busy_capsule_on(machine(3), "User-agent: *\nDisallow:\n", "20 text/gemini").await;
    let proxy = start_proxy(config_with("examplebot", &[])).await;
    let addr = proxy.addr(Listener::Gemini);

    let (header, _) = gemini(addr, &huge_delay.url("/page")).await;
    let secs: u64 = header
        .strip_prefix("44 ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{header}"));
    assert!(secs > 86_400 * 365, "{header}");

    let (header, _) = gemini(addr, &huge_44.url("/busy")).await;
    assert_eq!(header, "44 18446744073709551615", "relayed as it came");
    let (header, _) = gemini(addr, &huge_44.url("/page")).await;
    assert!(header.starts_with("44 "), "{header}");

    // Nothing broke: the sweeper and other hosts carry on.
    proxy.context().admission.politeness.sweep();
    assert_eq!(gemini(addr, &fine.url("/page")).await.0, "20 text/gemini");
}

/// Shutdown answers the requests still waiting for their turn at once, each
/// in its protocol's words (Gemini `44`, Gopher's `3503` slow-down), instead
/// of cutting them at the end of the grace period: a crawler knows to come
/// back, and the drain ends as soon as nothing is in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_the_requests_waiting_for_their_turn() {
    let capsule = busy_capsule("User-agent: *\nCrawl-delay: 3\n", "20 text/gemini").await;
    let hole = hole(
        Reply::Bytes(b"User-agent: *\nCrawl-delay: 3\n".to_vec()),
        Reply::Bytes(b"text\r\n".to_vec()),
    )
    .await;
    let mut config = config_with("examplebot", &[]);
    config.politeness.max_wait = Duration::from_secs(60);
    config.limits.shutdown_grace = Duration::from_secs(60);
    let proxy = start_proxy(config).await;
    // Each robots.txt fetch took its host's first turn: each page waits 3 s.
    let gemini_asks = {
        let (addr, url) = (proxy.addr(Listener::Gemini), capsule.url("/a"));
        tokio::spawn(async move { gemini(addr, &url).await.0 })
    };
    let gopher_asks = {
        let (addr, url) = (proxy.addr(Listener::Gopher), hole.url("0/a"));
        tokio::spawn(async move { gopher(addr, url.as_bytes()).await })
    };
    let context = proxy.context();
    wait_until("both requests waiting for their turn", || {
        context.admission.politeness.usage().1 == 2
    })
    .await;
    proxy.shutdown();
    assert!(proxy.drained().await, "nothing left in flight to cut");
    assert_eq!(gemini_asks.await.unwrap(), "44 3");
    let answer = gopher_asks.await.unwrap();
    let line = first_line(&answer);
    assert!(
        line.starts_with(
            "3503 Service Unavailable: slow down, retry in 3 s (the proxy is shutting down)\t"
        ),
        "{line}"
    );
    assert_eq!(capsule.count("/a"), 0, "nothing was relayed");
    assert_eq!(
        context.admission.politeness.usage().1,
        0,
        "their places were given back"
    );
}
