//! The six holes of issue 46, tried from the attacker's side through the
//! listeners: a NUL that cuts a `$` rule, a URL whose scheme contradicts
//! `[ports]`, an upstream answering junk for robots.txt, a `Visit-time`
//! leaking across groups, report mode skipping the operator's politeness,
//! one capsule's slow-down holding back its neighbours for a century, and a
//! bot spreading over ever more servers to grow the budgets' book.
//! Each table row is one way in; a row whose refusal is missing fails.

use crate::common::small_web;
use std::time::Duration;

use robots_proxy::listener::Listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;
use small_web::{private_in_every_protocol, spartan_guarding_private, SmallServer, Speaks};

/// One request line through SOCKS5 to `port` on 127.0.0.1; the whole answer.
async fn through_socks(proxy: std::net::SocketAddr, port: u16, request: &[u8]) -> String {
    let (mut s, code) = socks_connect(proxy, "127.0.0.1", port, None).await;
    assert_eq!(code, 0, "CONNECT refused");
    s.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// A NUL behind escapes (once or twice over) would cut the path where a C
/// server opens the file: `/data.bin%00.txt` is `/data.bin` there, which
/// `Disallow: /*.bin$` refuses. Every path-addressed protocol, every way in:
/// refused as malformed, and neither server is asked for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_behind_escapes_never_cuts_a_dollar_rule() {
    const ROBOTS: &str = "User-agent: *\nDisallow: /*.bin$\n";
    let origin = capsule(
        text("20 text/plain", ROBOTS),
        text("20 application/octet-stream", "binary"),
    )
    .await;
    let files = [("/robots.txt", ROBOTS), ("/data.bin", "binary")];
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &files).await;
    let sp = spartan.addr.port();
    let proxy = start_proxy(test_config_with(&format!(
        "[ports]\nspartan = [{sp}]\n\n[bot]\nagent = \"examplebot\"\n"
    )))
    .await;
    let gemini_at = proxy.addr(Listener::Gemini);
    for spelling in [
        "/data.bin%00.txt",
        "/data.bin%2500.txt",
        "/data.bin%252500.txt",
    ] {
        // The Gemini listener: a Gemini URL, and a Spartan URL (the gateway).
        for url in [
            origin.url(spelling),
            format!("spartan://127.0.0.1:{sp}{spelling}"),
        ] {
            let (header, _) = gemini(gemini_at, &url).await;
            assert!(header.starts_with("59 "), "{url}: {header}");
        }
        // A Spartan line through SOCKS5.
        let line = format!("127.0.0.1 {spelling} 0\r\n");
        let answer = through_socks(proxy.addr(Listener::Socks5), sp, line.as_bytes()).await;
        assert!(answer.starts_with("4 "), "{line:?}: {answer}");
    }
    // The plain file is refused by the rule, as before.
    let (header, _) = gemini(gemini_at, &origin.url("/data.bin")).await;
    assert!(header.starts_with("53 "), "{header}");
    assert!(
        !origin.all().iter().any(|r| r.contains("data.bin")),
        "{:?}",
        origin.all()
    );
    assert!(
        !spartan.paths().iter().any(|p| p.contains("data.bin")),
        "{:?}",
        spartan.paths()
    );
}

/// `[ports]` says a port speaks Spartan: a `gopher://`, `nex://` or
/// `gemini://` URL to it, on the Gemini listener or as a Gopher selector, is
/// refused before anything is sent there (not even a robots.txt request,
/// whose answer would be the Spartan server's error line).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheme_that_contradicts_ports_is_refused_on_every_listener() {
    let (spartan, toml) = spartan_guarding_private(machine(1)).await;
    let sp = spartan.addr.port();
    let proxy = start_proxy(test_config_with(&toml)).await;
    for url in [
        format!("gopher://127.0.0.1:{sp}/0/private/x"),
        format!("nex://127.0.0.1:{sp}/private/x"),
        format!("gemini://127.0.0.1:{sp}/private/x"),
    ] {
        let (header, _) = gemini(proxy.addr(Listener::Gemini), &url).await;
        assert!(
            header.starts_with("53 ") && header.contains("[ports]"),
            "{url}: {header}"
        );
        let answer = gopher(proxy.addr(Listener::Gopher), url.as_bytes()).await;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        // Refused (the Gopher listener takes only gopher:// selectors).
        assert!(answer.starts_with("34"), "{url}: {answer}");
    }
    assert!(spartan.paths().is_empty(), "{:?}", spartan.paths());
}

/// The same over SOCKS5: the client names only an address and a port, and
/// whatever protocol's line it sends (a Gemini URL, a Gopher selector, a Nex
/// path), a port `[ports]` says speaks Spartan is spoken to as Spartan:
/// robots.txt is fetched over Spartan and nothing disallowed reaches the
/// server. (Transparent mode: tests/suite/transparent.rs,
/// `a_port_that_speaks_spartan_is_spoken_to_as_spartan_whatever_the_client_sends`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_socks5_a_ports_protocol_is_the_one_spoken_whatever_the_client_sends() {
    let (spartan, toml) = spartan_guarding_private(machine(1)).await;
    let sp = spartan.addr.port();
    let proxy = start_proxy(test_config_with(&toml)).await;
    for line in private_in_every_protocol(sp) {
        let request = format!("{line}\r\n");
        let answer = through_socks(proxy.addr(Listener::Socks5), sp, request.as_bytes()).await;
        small_web::assert_refused_in_spartan(&line, &answer);
    }
    // robots.txt was asked over Spartan (the server reads only Spartan), and
    // nothing else.
    spartan.assert_asked_only_robots_txt();
}

/// A server on a port `[ports]` does not list (or one that answers junk)
/// gives robots.txt answers that are none: another protocol's status line,
/// an HTTP error, binary data. None of them reads as "no robots.txt, allow
/// everything": the host is unreachable and the request is refused, over
/// the Gopher listener, through SOCKS5 as Nex, and on the Gemini gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_robots_txt_answer_that_is_none_never_allows_everything() {
    for junk in [
        &b"4 bad request\r\n"[..],
        b"59 bad request\r\n",
        b"HTTP/1.0 400 Bad Request\r\n\r\n",
        b"\x00\x01\x02\x03\xff\xfe binary",
    ] {
        let shown = String::from_utf8_lossy(junk).into_owned();
        let hole = GopherOrigin::start({
            let junk = junk.to_vec();
            move |_| Reply::Bytes(junk.clone())
        })
        .await;
        let port = hole.addr.port();
        // Over Gopher to a port [ports] does not list.
        let proxy = start_proxy(test_config()).await;
        let url = format!("gopher://127.0.0.1:{port}/0/private/x");
        let answer = gopher(proxy.addr(Listener::Gopher), url.as_bytes()).await;
        let answer = String::from_utf8_lossy(&answer).into_owned();
        assert!(
            answer.starts_with("3503 "),
            "{shown:?} over Gopher: {answer}"
        );
        // As Nex, the port listed for it: through SOCKS5 and the gateway.
        let proxy = start_proxy(test_config_with(&format!(
            "[ports]\nnex = [{port}]\n\n[bot]\nagent = \"examplebot\"\n"
        )))
        .await;
        let answer = through_socks(proxy.addr(Listener::Socks5), port, b"/private/x\r\n").await;
        assert!(
            answer.contains("robots.txt") && !answer.contains(&shown),
            "{shown:?} over Nex: {answer}"
        );
        let (header, _) = gemini(
            proxy.addr(Listener::Gemini),
            &format!("nex://127.0.0.1:{port}/private/x"),
        )
        .await;
        assert!(
            header.starts_with("43 "),
            "{shown:?} on the gateway: {header}"
        );
        assert_eq!(hole.count(b"/private/x"), 0, "{shown:?}: {:?}", hole.all());
    }
}

/// The robots.txt answer of a Gopher hole that is binary junk is no
/// robots.txt: the hole is unreachable, the request refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_junk_for_robots_txt_is_unreachable_over_gopher() {
    let hole = hole(
        Reply::Bytes(b"\x00\x01\x02junk\xff".to_vec()),
        text("", "secret\r\n"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    let answer = gopher(proxy.addr(Listener::Gopher), hole.url("0/x").as_bytes()).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("3503 "), "{answer}");
    assert_eq!(hole.count(b"/x") + hole.count(b"x"), 0, "{:?}", hole.all());
}

/// The current UTC time of day plus `minutes`, as `HHMM`.
fn utc_hhmm(minutes: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let m = (now / 60 + minutes) % (24 * 60);
    format!("{:02}{:02}", m / 60, m % 60)
}

/// `Visit-time` under `User-agent: otherbot`, then a blank line and
/// `User-agent: *`: the window holds otherbot only, as a Crawl-delay in the
/// same place would. Another bot goes now; otherbot is told to come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visit_time_holds_only_the_agents_it_follows() {
    let window = format!("{}-{}", utc_hhmm(120), utc_hhmm(121));
    let robots = format!(
        "User-agent: otherbot\nVisit-time: {window}\n\nUser-agent: *\nDisallow: /private\n"
    );
    let origin = capsule(
        text("20 text/plain", &robots),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/open")).await;
    assert_eq!(header, "20 text/gemini", "{robots}");
    let other = start_proxy(test_config_with("[bot]\nagent = \"otherbot\"\n")).await;
    let (header, _) = gemini(other.addr(Listener::Gemini), &origin.url("/held")).await;
    assert!(header.starts_with("44 "), "{header}");
    assert_eq!(origin.count("/held"), 0);
}

fn reporting(extra: &str) -> robots_proxy::config::Config {
    let mut config = test_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\nmode = \"report\"\n{extra}\n"
    ));
    config.politeness.max_wait = Duration::from_secs(10);
    config
}

/// Report mode relaxes robots.txt, not the operator: with
/// `per_host_concurrency = 1`, four requests at once of a reporting bot
/// reach the server one at a time, each after the one before has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_keeps_per_host_concurrency() {
    let hold = Duration::from_millis(300);
    let origin = capsule(
        text("20 text/plain", "User-agent: *\nCrawl-delay: 5\n"),
        Reply::Delayed(hold, b"20 text/gemini\r\npage".to_vec()),
    )
    .await;
    let proxy = start_proxy(reporting("")).await;
    let urls = (0..4).map(|i| origin.url(&format!("/p{i}")));
    let headers = gemini_at_once(proxy.addr(Listener::Gemini), urls).await;
    assert!(headers.iter().all(|h| h == "20 text/gemini"), "{headers:?}");
    // robots.txt, then the four pages: each page after the last one's answer.
    let gaps = origin.gaps();
    assert_eq!(gaps.len(), 4, "{:?}", origin.all());
    assert_spaced(&gaps[1..], hold.as_secs_f64());
}

/// Report mode relaxes robots.txt, not the server: after a capsule's own
/// `44 30`, a reporting bot's next request there is held (the proxy's `44`),
/// not relayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_keeps_a_servers_own_slow_down() {
    let origin = Origin::start(|url| match url {
        u if u.ends_with("/robots.txt") => text("20 text/plain", ""),
        u if u.ends_with("/slow") => text("44 30", ""),
        _ => text("20 text/gemini", "page"),
    })
    .await;
    let mut config = reporting("");
    config.politeness.max_wait = Duration::from_secs(1);
    let proxy = start_proxy(config).await;
    let at = proxy.addr(Listener::Gemini);
    assert_eq!(gemini(at, &origin.url("/slow")).await.0, "44 30");
    let (header, _) = gemini(at, &origin.url("/next")).await;
    assert!(header.starts_with("44 "), "{header}");
    let secs: u64 = header[3..].trim().parse().unwrap();
    assert!((25..=30).contains(&secs), "{header}");
    assert_eq!(origin.count("/next"), 0);
}

/// How a Gemini crawler asks: on the Gemini listener, or over SOCKS5 (TLS
/// with the proxy's CA, to `localhost`).
#[derive(Clone, Copy, Debug)]
enum GeminiWay {
    Listener,
    Socks5,
}

async fn gemini_by(way: GeminiWay, proxy: &robots_proxy::server::Proxy, url: &str) -> String {
    match way {
        GeminiWay::Listener => gemini(proxy.addr(Listener::Gemini), url).await.0,
        GeminiWay::Socks5 => {
            let port: u16 = url
                .rsplit_once(':')
                .unwrap()
                .1
                .split('/')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let (tcp, code) =
                socks_connect(proxy.addr(Listener::Socks5), "localhost", port, None).await;
            assert_eq!(code, 0, "CONNECT refused");
            gemini_trusting_ca(proxy, tcp, ("localhost", url), None).await
        }
    }
}

/// Three capsules on one machine (127.0.0.1, three ports). One answers
/// `44 999999999999`: its own next request is held at most
/// `politeness.max_slow_down` (24 h by default), not a century, and its
/// neighbours keep being served; on the Gemini listener and over SOCKS5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_capsules_slow_down_neither_lasts_a_century_nor_stops_its_neighbours() {
    for way in [GeminiWay::Listener, GeminiWay::Socks5] {
        let hostile = Origin::start(|url| match url {
            u if u.ends_with("/robots.txt") => text("20 text/plain", ""),
            u if u.ends_with("/slow") => text("44 999999999999", ""),
            _ => text("20 text/gemini", "page"),
        })
        .await;
        let a = capsule(text("20 text/plain", ""), text("20 text/gemini", "a")).await;
        let b = capsule(text("20 text/plain", ""), text("20 text/gemini", "b")).await;
        let mut config = test_config();
        config.politeness.max_wait = Duration::from_secs(1);
        let proxy = start_proxy(config).await;
        let url = |origin: &Origin, path: &str| {
            format!("gemini://localhost:{}{path}", origin.addr.port())
        };
        let header = gemini_by(way, &proxy, &url(&hostile, "/slow")).await;
        assert!(header.starts_with("44 "), "{way:?}: {header}");
        for neighbour in [&a, &b] {
            let header = gemini_by(way, &proxy, &url(neighbour, "/page")).await;
            assert_eq!(header, "20 text/gemini", "{way:?}");
        }
        let header = gemini_by(way, &proxy, &url(&hostile, "/again")).await;
        let secs: u64 = header
            .strip_prefix("44 ")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_else(|| panic!("{way:?}: {header}"));
        assert!(
            (24 * 3600 - 60..=24 * 3600).contains(&secs),
            "{way:?}: {header}"
        );
        assert_eq!(hostile.count("/again"), 0, "{way:?}");
    }
}

/// A bot with a daily budget that goes to ever more servers, to grow the
/// budgets' book and the file it is kept in: past `limits.max_budget_pairs`
/// a new server is "slow down" on every way in (never relayed uncounted) and
/// is not asked for the page; the servers in the book go on; and the next
/// process starts on the file this one wrote, a line per server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_spreading_over_servers_is_never_relayed_uncounted() {
    let counted = [
        text_hole_on(machine(1), "").await,
        text_hole_on(machine(3), "").await,
    ];
    let files = [("/robots.txt", ""), ("/page", "page")];
    let spartan = SmallServer::start(Speaks::Spartan, machine(4), &files).await;
    let nex = SmallServer::start(Speaks::Nex, machine(5), &files).await;
    let new_gopher = text_hole_on(machine(6), "").await;
    let capsule = Origin::start_on(machine(7), |url| match url.ends_with("/robots.txt") {
        true => text("20 text/plain", ""),
        false => text("20 text/gemini", "page"),
    })
    .await;
    let (sp, nx) = (spartan.addr.port(), nex.addr.port());
    let toml = format!(
        "[ports]\nspartan = [{sp}]\nnex = [{nx}]\n\n[limits]\nmax_budget_pairs = 2\n\n\
         [bot]\nagent = \"examplebot\"\ndaily_requests_per_server = 100\n"
    );
    let config = test_config_with(&toml);
    let dir = config.state_dir.clone();
    let proxy = start_proxy(config).await;
    let gopher_at = proxy.addr(Listener::Gopher);
    for origin in &counted {
        let url = origin.url("0/page");
        assert_eq!(gopher(gopher_at, url.as_bytes()).await, b"text\r\n");
    }
    // The book is full: a new server, every way in.
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &capsule.url("/page")).await;
    assert!(header.starts_with("44 "), "gemini: {header}");
    let url = format!("spartan://127.0.0.4:{sp}/page");
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &url).await;
    assert!(header.starts_with("44 "), "gateway: {header}");
    let answer = gopher(gopher_at, new_gopher.url("0/page").as_bytes()).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(
        answer.starts_with('3') && answer.contains("max_budget_pairs"),
        "gopher: {answer}"
    );
    let (mut s, code) = socks_connect(proxy.addr(Listener::Socks5), "127.0.0.5", nx, None).await;
    assert_eq!(code, 0, "CONNECT refused");
    s.write_all(b"/page\r\n").await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("robots-proxy: 44 "), "nex: {answer}");
    assert_eq!(capsule.count("/page"), 0);
    assert_eq!(new_gopher.count(b"page"), 0);
    assert_eq!(spartan.count("/page") + nex.count("/page"), 0);
    // The servers in the book go on.
    let url = counted[0].url("0/again");
    assert_eq!(gopher(gopher_at, url.as_bytes()).await, b"text\r\n");
    proxy.shutdown();
    assert!(proxy.drained().await);
    drop(proxy);
    // A line per server, its day in it; the next process reads it back and
    // still has no room.
    let kept = std::fs::read_to_string(dir.join("budgets")).unwrap();
    let mut lines: Vec<&str> = kept.lines().collect();
    lines.sort();
    assert_eq!(lines.len(), 2, "{kept}");
    assert!(
        lines[0].starts_with("default\ta/127.0.0.1\t") && lines[0].ends_with("\t0:2"),
        "{kept}"
    );
    assert!(
        lines[1].starts_with("default\ta/127.0.0.3\t") && lines[1].ends_with("\t0:1"),
        "{kept}"
    );
    let mut config = test_config_with(&toml);
    config.state_dir = dir;
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &capsule.url("/page")).await;
    assert!(header.starts_with("44 "), "after a restart: {header}");
    assert_eq!(capsule.count("/page"), 0);
}
