//! The web through the HTTP listener, from a crawler's side: what robots.txt
//! disallows never reaches the origin, however it is spelled or sent, and
//! the answer says why in its status and `Proxy-Status`.

use std::time::Duration;

use robots_proxy::config::Config;
use robots_proxy::listener::Listener;
use robots_proxy::protocols::http::wire::pseudonym;

use crate::common::web::{basic, raw_exchange, web_config_with, WebClient, WebOrigin};
use crate::common::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\nDisallow: /*.bin$\n";

fn web_config() -> Config {
    let mut config = test_config();
    config
        .listen
        .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
    config
}

#[tokio::test]
async fn an_allowed_page_is_relayed_and_a_disallowed_one_refused_naming_its_rule() {
    let origin = WebOrigin::site(ROBOTS).await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let page = client.get(&origin.url("/public/a"), &[]).await;
    assert_eq!((page.status, page.body.as_str()), (200, "page /public/a"));
    assert!(page.header("via").is_some_and(|v| v.contains(pseudonym())));
    // The same connection (keep-alive): refused, and still usable.
    let refused = client.get(&origin.url("/private/b"), &[]).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("Disallow: /private/ (line 2)"),
        "{}",
        refused.body
    );
    let status = refused.header("proxy-status").unwrap();
    assert!(status.starts_with(pseudonym()), "{status}");
    assert!(status.contains("error=http_request_denied"), "{status}");
    let again = client.get(&origin.url("/public/c"), &[]).await;
    assert_eq!(again.status, 200);
    assert_eq!(
        origin.targets(),
        ["/robots.txt", "/public/a", "/public/c"],
        "robots.txt once, never the disallowed page"
    );
}

/// A proxy for the web only (the small web's listeners off, as
/// config/examples/web-only.toml has it) starts and serves the web.
#[tokio::test]
async fn a_web_only_proxy_runs_with_the_small_web_s_listeners_off() {
    let origin = WebOrigin::site(ROBOTS).await;
    let mut config = web_config();
    for off in [Listener::Gemini, Listener::Gopher, Listener::Socks5] {
        config.listen.set(off, None);
    }
    let proxy = start_proxy(config).await;
    let on: Vec<Listener> = proxy
        .context()
        .admission
        .config
        .listen
        .iter()
        .map(|(l, _)| l)
        .collect();
    assert_eq!(on, [Listener::Http, Listener::Admin]);
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let page = client.get(&origin.url("/public/a"), &[]).await;
    assert_eq!((page.status, page.body.as_str()), (200, "page /public/a"));
    let (status, _) = http_get(proxy.addr(Listener::Admin), "/healthz").await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn every_spelling_of_a_disallowed_path_is_refused_and_a_query_is_no_spelling() {
    let origin = WebOrigin::site(ROBOTS).await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for path in [
        "/private/x",
        "/%70rivate/x",
        "/PRIVATE/../private/x",
        "/public/../private/x",
        "/public/%2e%2e/private/x",
        "/%2Fprivate/x",
        "/public/..%2Fprivate/x",
        "//private/x",
        "/./private/x",
        "/data.bin",
        "/public%5C..%5Cprivate/x",
        "/public%5c..%5cprivate/x",
        "/private;jsessionid=1/x",
        "/public/..;/private/x",
        "/data.bin;v=2",
    ] {
        let answer = client.get(&origin.url(path), &[]).await;
        assert_eq!(answer.status, 403, "{path}: {answer:?}");
    }
    // `$` ends the path: with a query the URL does not end in `.bin`.
    let answer = client.get(&origin.url("/data.bin?x=1"), &[]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(origin.targets(), ["/robots.txt", "/data.bin?x=1"]);
    // A NUL, where C servers end a path, is no path at all.
    let nul = client.get(&origin.url("/data.bin%00.html"), &[]).await;
    assert_eq!(nul.status, 400, "{nul:?}");
    assert_eq!(origin.targets(), ["/robots.txt", "/data.bin?x=1"]);
}

#[tokio::test]
async fn headers_that_stop_at_a_hop_never_reach_the_origin() {
    let origin = WebOrigin::site("").await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let answer = client
        .get(
            &origin.url("/p"),
            &[
                ("connection", "keep-alive, x-secret"),
                ("x-secret", "the client's"),
                ("proxy-authorization", "Basic dXNlcjpwYXNz"),
                ("te", "trailers"),
                ("accept", "text/plain"),
            ],
        )
        .await;
    assert_eq!(answer.status, 200);
    let seen = origin.seen().pop().unwrap();
    assert_eq!(seen.target, "/p");
    for name in ["x-secret", "proxy-authorization", "te", "connection"] {
        assert!(
            !seen.headers.contains_key(name),
            "{name} reached the origin"
        );
    }
    assert_eq!(seen.headers.get("accept").unwrap(), "text/plain");
    assert_eq!(
        seen.headers.get("host").unwrap().to_str().unwrap(),
        origin.addr.to_string()
    );
    assert!(seen
        .headers
        .get("via")
        .unwrap()
        .to_str()
        .unwrap()
        .ends_with(pseudonym()));
}

#[tokio::test]
async fn what_the_proxy_cannot_decide_is_refused_before_anything_is_fetched() {
    let origin = WebOrigin::site(ROBOTS).await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    // A path, as if the proxy were the origin.
    let origin_form = client
        .send("GET", "/public/a", &[("host", "127.0.0.1")])
        .await;
    assert_eq!(origin_form.map(|a| a.status), Some(400));
    // A request that came through this proxy already.
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let via = format!("1.1 {}", pseudonym());
    let looped = client.get(&origin.url("/public/a"), &[("via", &via)]).await;
    assert_eq!(looped.status, 508);
    assert!(looped
        .header("proxy-status")
        .unwrap()
        .contains("proxy_loop_detected"));
    // A protocol switch would carry requests never decided.
    let upgrade = client
        .get(
            &origin.url("/public/a"),
            &[("upgrade", "websocket"), ("connection", "upgrade")],
        )
        .await;
    assert_eq!(upgrade.status, 400, "{upgrade:?}");
    // Another scheme.
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let ftp = client
        .send("GET", &format!("ftp://{}/x", origin.addr), &[])
        .await;
    assert_eq!(ftp.map(|a| a.status), Some(400));
    assert!(origin.targets().is_empty(), "{:?}", origin.targets());
}

#[tokio::test]
async fn a_private_address_is_refused_as_the_egress_rules_say() {
    let origin = WebOrigin::site("").await;
    let mut config = web_config();
    config.limits.allow_private_upstreams = false;
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for url in [
        origin.url("/x"),
        format!("http://[::1]:{}/x", origin.addr.port()),
    ] {
        let answer = client.get(&url, &[]).await;
        assert_eq!(answer.status, 403, "{url}: {answer:?}");
        assert!(answer
            .header("proxy-status")
            .unwrap()
            .contains("destination_ip_prohibited"));
    }
    assert!(origin.seen().is_empty());
}

#[tokio::test]
async fn robots_txt_answers_decide_as_rfc_9309_says() {
    // 404: no robots.txt, everything allowed.
    let missing = WebOrigin::start(|p| match p {
        "/robots.txt" => (404, vec![], b"no".to_vec()),
        _ => (200, vec![], b"ok".to_vec()),
    })
    .await;
    // 503: unreachable, everything disallowed until it is fetched again.
    let failing = WebOrigin::start(|p| match p {
        "/robots.txt" => (503, vec![("retry-after", "120".into())], b"busy".to_vec()),
        _ => (200, vec![], b"ok".to_vec()),
    })
    .await;
    // A redirect to another path on the same site is followed.
    let moved = WebOrigin::start(|p| match p {
        "/robots.txt" => (301, vec![("location", "/real-robots.txt".into())], vec![]),
        "/real-robots.txt" => (200, vec![], b"User-agent: *\nDisallow: /\n".to_vec()),
        _ => (200, vec![], b"ok".to_vec()),
    })
    .await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&missing.url("/a"), &[]).await.status, 200);
    let unreachable = client.get(&failing.url("/a"), &[]).await;
    assert_eq!(unreachable.status, 503, "{unreachable:?}");
    assert!(unreachable.header("retry-after").is_some());
    assert!(unreachable
        .header("proxy-status")
        .unwrap()
        .contains("destination_unavailable"));
    assert_eq!(failing.targets(), ["/robots.txt"]);
    assert_eq!(client.get(&moved.url("/a"), &[]).await.status, 403);
    assert_eq!(moved.targets(), ["/robots.txt", "/real-robots.txt"]);
}

/// The web is gated per host name: two sites on one address are two
/// visitors, while one site keeps its Crawl-delay (its robots.txt fetch is
/// its first start).
#[tokio::test]
async fn the_web_is_spaced_per_host_not_per_address() {
    let origin = WebOrigin::site("User-agent: *\nCrawl-delay: 30\n").await;
    let mut config = web_config();
    config.politeness.max_wait = Duration::ZERO;
    config.politeness.web_max_wait = Duration::ZERO;
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let port = origin.addr.port();
    let held = client.get(&origin.url("/1"), &[]).await;
    assert_eq!(held.status, 429, "{held:?}");
    let retry: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "{retry}");
    // `localhost` is 127.0.0.1 too, and another site: its robots.txt is
    // fetched at once, not held behind the other's 30 s.
    let other = client.get(&format!("http://localhost:{port}/1"), &[]).await;
    assert_eq!(other.status, 429, "{other:?}");
    assert_eq!(origin.targets(), ["/robots.txt", "/robots.txt"]);
    let (gates, _) = proxy.context().admission.politeness.usage();
    assert_eq!(gates, 2, "one gate per site");
}

#[tokio::test]
async fn smuggling_and_folded_headers_are_refused_and_nothing_behind_them_is_relayed() {
    let origin = WebOrigin::site(ROBOTS).await;
    // A bot that may post: its posts are decided by robots.txt.
    let config = web_config_with(
        "[bot]\nagent = \"formbot\"\nhttp_methods = [\"GET\", \"HEAD\", \"POST\"]\n",
    );
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    let host = origin.addr;
    // Two lengths: which is the body? Refused, the connection closed.
    let two_lengths = format!(
        "POST http://{host}/public/a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 5\r\nContent-Length: 50\r\n\r\nhelloGET http://{host}/private/x HTTP/1.1\r\nHost: {host}\r\n\r\n"
    );
    let answer = raw_exchange(http, two_lengths.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // An obsolete line folding hides a header's end.
    let folded =
        format!("GET http://{host}/public/a HTTP/1.1\r\nHost: {host}\r\nX-A: 1\r\n X-B: 2\r\n\r\n");
    let answer = raw_exchange(http, folded.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // A refused request's body is never read as the next request.
    let behind = format!(
        "POST http://{host}/private/form HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\n\r\nGET http://{host}/private/y HTTP/1.1\r\nHost: {host}\r\n\r\n",
        format!("GET http://{host}/private/y HTTP/1.1\r\nHost: {host}\r\n\r\n").len()
    );
    let answer = raw_exchange(http, behind.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert_eq!(answer.matches("HTTP/1.1").count(), 1, "{answer}");
    assert!(
        origin.targets().iter().all(|t| !t.starts_with("/private")),
        "{:?}",
        origin.targets()
    );
}

/// A client that hangs up while its request waits for its turn gives its
/// place back at once: nothing is fetched for nobody.
#[tokio::test]
async fn a_client_that_leaves_while_waiting_gives_its_place_back() {
    let origin = WebOrigin::site("User-agent: *\nCrawl-delay: 30\n").await;
    let mut config = web_config();
    config.politeness.max_wait = Duration::from_secs(60);
    config.politeness.web_max_wait = Duration::from_secs(60);
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    let politeness = proxy.context().admission.politeness.clone();
    let mut waiting = tokio::net::TcpStream::connect(http).await.unwrap();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        origin.url("/1"),
        origin.addr
    );
    tokio::io::AsyncWriteExt::write_all(&mut waiting, request.as_bytes())
        .await
        .unwrap();
    // Its robots.txt fetched, it waits 30 s for its turn.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while politeness.usage().1 == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(waiting);
    while politeness.usage().1 != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still queued after its client left"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(origin.targets(), ["/robots.txt"]);
}

#[tokio::test]
async fn a_header_section_past_its_caps_is_refused() {
    let origin = WebOrigin::site("").await;
    let proxy = start_proxy(web_config()).await;
    let http = proxy.addr(Listener::Http);
    let host = origin.addr;
    let many: String = (0..200).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = raw_exchange(
        http,
        format!("GET http://{host}/a HTTP/1.1\r\nHost: {host}\r\n{many}\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    let long = "x".repeat(2 * robots_proxy::protocols::http::wire::MAX_HEADER_BYTES);
    let answer = raw_exchange(
        http,
        format!("GET http://{host}/a HTTP/1.1\r\nHost: {host}\r\nX-Long: {long}\r\n\r\n")
            .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert!(origin.seen().is_empty());
}

/// A client that stops reading its answer does not keep its host's turn:
/// after `limits.idle_timeout` without progress the answer is given up, the
/// slot freed, and the request logged as cut.
#[tokio::test]
async fn a_client_that_stops_reading_gives_its_slot_back() {
    let big = vec![b'x'; 32 << 20];
    let origin = WebOrigin::start(move |p| match p {
        "/robots.txt" => (404, vec![], vec![]),
        _ => (200, vec![], big.clone()),
    })
    .await;
    let proxy = start_proxy(web_config()).await;
    let http = proxy.addr(Listener::Http);
    let mut stuck = tokio::net::TcpStream::connect(http).await.unwrap();
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\n\r\n",
        origin.url("/big"),
        origin.addr
    );
    tokio::io::AsyncWriteExt::write_all(&mut stuck, request.as_bytes())
        .await
        .unwrap();
    let server = robots_proxy::target::Server {
        name: robots_proxy::target::HostKey {
            scheme: robots_proxy::target::Scheme::Http,
            host: "127.0.0.1".into(),
            port: origin.addr.port(),
        },
        addrs: vec![origin.addr],
    };
    let politeness = proxy.context().admission.politeness.clone();
    let in_flight = || politeness.peek(&server).map_or(0, |g| g.in_flight);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while in_flight() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "never relayed");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The client reads nothing more; its connection stays open.
    while in_flight() != 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot is still held"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(stuck);
}

#[tokio::test]
async fn a_method_the_bot_may_not_use_is_405_with_the_ones_it_may() {
    let origin = WebOrigin::site("").await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
        let answer = client
            .send(method, &origin.url("/form"), &[])
            .await
            .unwrap();
        assert_eq!(answer.status, 405, "{method}: {answer:?}");
        assert_eq!(answer.header("allow"), Some("GET, HEAD"));
    }
    let head = client
        .send("HEAD", &origin.url("/page"), &[])
        .await
        .unwrap();
    assert_eq!(head.status, 200);
    assert!(
        origin
            .seen()
            .iter()
            .all(|s| s.method == "GET" || s.method == "HEAD"),
        "{:?}",
        origin.seen()
    );
    // A bot allowed to post has its posts decided and relayed.
    let mut config =
        test_config_with("[bot]\nagent = \"formbot\"\nhttp_methods = [\"GET\", \"POST\"]\n");
    config
        .listen
        .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let post = client
        .send("POST", &origin.url("/form"), &[])
        .await
        .unwrap();
    assert_eq!(post.status, 200);
    assert_eq!(origin.seen().last().unwrap().method, "POST");
}

/// The server's logs name the bot robots.txt was read for, whatever the
/// client claims to be.
#[tokio::test]
async fn the_bot_s_user_agent_replaces_the_client_s() {
    let origin = WebOrigin::site("").await;
    let cases = [
        (
            "[bot]\nagent = \"examplebot\"\nuser_agent = \"examplebot/1.0 (+https://example.org/bot)\"\n",
            "examplebot/1.0 (+https://example.org/bot)",
        ),
        ("[bot]\nagent = \"examplebot\"\n", "examplebot"),
    ];
    for (toml, sent) in cases {
        let config = web_config_with(toml);
        let proxy = start_proxy(config).await;
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let answer = client
            .get(
                &origin.url("/p"),
                &[("user-agent", "Mozilla/5.0 (innocent browser)")],
            )
            .await;
        assert_eq!(answer.status, 200);
        let seen = origin.seen().pop().unwrap();
        assert_eq!(seen.headers.get("user-agent").unwrap(), sent);
    }
    // The proxy's own robots.txt fetch names the proxy.
    let robots = origin
        .seen()
        .into_iter()
        .find(|s| s.target == "/robots.txt")
        .unwrap();
    let ua = robots.headers.get("user-agent").unwrap().to_str().unwrap();
    assert!(ua.starts_with("robots-proxy/"), "{ua}");
    assert_eq!(robots.headers.get("accept-encoding").unwrap(), "identity");
}

/// A server's `429` or `503` with `Retry-After` holds that server back, for
/// every bot, however absurd the number: at most `politeness.max_slow_down`.
#[tokio::test]
async fn a_servers_retry_after_holds_it_back_at_most_max_slow_down() {
    let origin = WebOrigin::start(|p| match p {
        "/robots.txt" => (404, vec![], vec![]),
        "/busy" => (
            429,
            vec![("retry-after", "120".into())],
            b"slow down".to_vec(),
        ),
        "/absurd" => (
            503,
            vec![("retry-after", "99999999999999999999999".into())],
            b"down".to_vec(),
        ),
        _ => (200, vec![], b"ok".to_vec()),
    })
    .await;
    let mut config = web_config();
    config.politeness.max_slow_down = Duration::from_secs(3600);
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    // The server's own answer reaches the client as it was.
    let busy = client.get(&origin.url("/busy"), &[]).await;
    assert_eq!((busy.status, busy.body.as_str()), (429, "slow down"));
    let held = client.get(&origin.url("/page"), &[]).await;
    assert_eq!(held.status, 429, "{held:?}");
    let retry: u64 = held.header("retry-after").unwrap().parse().unwrap();
    assert!((100..=120).contains(&retry), "{retry}");
    assert!(
        held.header("proxy-status").is_some(),
        "the proxy's own answer"
    );
    // Another name for the same address is another site: not held.
    let port = origin.addr.port();
    let absurd = client
        .get(&format!("http://localhost:{port}/absurd"), &[])
        .await;
    assert_eq!(absurd.status, 503);
    let capped = client
        .get(&format!("http://localhost:{port}/page"), &[])
        .await;
    assert_eq!(capped.status, 429, "{capped:?}");
    let retry: u64 = capped.header("retry-after").unwrap().parse().unwrap();
    assert!((3500..=3600).contains(&retry), "{retry}");
    assert_eq!(
        origin.targets().iter().filter(|t| *t == "/page").count(),
        0,
        "{:?}",
        origin.targets()
    );
}

const TWO_WEB_BOTS: &str = r#"
[socks5]
users = [{ name = "alice", password = "a-pass" }, { name = "bob", password = "b-pass" }]

[bot]
name = "anon"
agent = "anonbot"

[[bots]]
name = "alpha"
agent = "AlphaBot"
socks5_users = ["alice"]

[[bots]]
name = "beta"
agent = "BetaBot"
socks5_users = ["bob"]
"#;

/// With users configured, a web client says who it is by
/// `Proxy-Authorization: Basic`, which picks its bot (and its robots.txt
/// group) and never goes upstream; a missing or wrong password is `407`.
#[tokio::test]
async fn proxy_authorization_picks_the_bot_and_a_wrong_one_is_407() {
    let origin =
        WebOrigin::site("User-agent: AlphaBot\nDisallow: /\n\nUser-agent: *\nAllow: /\n").await;
    let config = web_config_with(TWO_WEB_BOTS);
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    let mut client = WebClient::connect(http).await;
    let none = client.get(&origin.url("/a"), &[]).await;
    assert_eq!(none.status, 407, "{none:?}");
    assert_eq!(
        none.header("proxy-authenticate"),
        Some("Basic realm=\"robots-proxy\"")
    );
    let wrong = client
        .get(
            &origin.url("/a"),
            &[("proxy-authorization", &basic("alice", "b-pass"))],
        )
        .await;
    assert_eq!(wrong.status, 407);
    // The same connection, the right password: alpha, whom robots.txt shuts out.
    let alpha = client
        .get(
            &origin.url("/a"),
            &[("proxy-authorization", &basic("alice", "a-pass"))],
        )
        .await;
    assert_eq!(alpha.status, 403, "{alpha:?}");
    assert!(alpha.body.contains("for alphabot"), "{}", alpha.body);
    // Its next request is alpha's still, whatever it sends.
    let still = client.get(&origin.url("/b"), &[]).await;
    assert_eq!(still.status, 403);
    let mut beta = WebClient::connect(http).await;
    let page = beta
        .get(
            &origin.url("/a"),
            &[("proxy-authorization", &basic("bob", "b-pass"))],
        )
        .await;
    assert_eq!(page.status, 200, "{page:?}");
    let seen = origin.seen().pop().unwrap();
    assert!(!seen.headers.contains_key("proxy-authorization"));
    assert_eq!(seen.headers.get("user-agent").unwrap(), "betabot");
    // Guessing is throttled as SOCKS5 logins are: past the budget even the
    // right password is not looked at.
    let mut guesser = WebClient::connect(http).await;
    for _ in 0..robots_proxy::guesses::BURST {
        let answer = guesser
            .get(
                &origin.url("/a"),
                &[("proxy-authorization", &basic("bob", "guess"))],
            )
            .await;
        assert_eq!(answer.status, 407);
    }
    let right = guesser
        .get(
            &origin.url("/a"),
            &[("proxy-authorization", &basic("bob", "b-pass"))],
        )
        .await;
    assert_eq!(right.status, 407, "throttled: {right:?}");
}

/// A web server's robots.txt names a bot by its product token, then `*`:
/// the Gemini virtual agents (`indexer`, …) are the small web's.
#[tokio::test]
async fn the_gemini_virtual_agents_do_not_name_a_bot_on_the_web() {
    let origin =
        WebOrigin::site("User-agent: indexer\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n")
            .await;
    let mut config =
        test_config_with("[bot]\nagent = \"examplebot\"\nvirtual_agents = [\"indexer\"]\n");
    config
        .listen
        .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/page"), &[]).await.status, 200);
    assert_eq!(client.get(&origin.url("/private/x"), &[]).await.status, 403);
}

/// A web robots.txt is kept for the shorter of `robots.ttl`, 24 hours and
/// its `Cache-Control: max-age`, never less than a minute.
#[tokio::test]
async fn a_web_robots_txt_is_kept_as_long_as_its_server_says_within_bounds() {
    let cases = [
        ("max-age=120", 120),
        ("public, max-age=5", 60),
        ("no-store", 60),
        ("max-age=999999999", 86_400),
    ];
    let mut config = web_config();
    config.robots.ttl = Duration::from_secs(7 * 86_400);
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for (cache_control, kept) in cases {
        let origin = WebOrigin::start(move |p| match p {
            "/robots.txt" => (
                200,
                vec![("cache-control", cache_control.to_string())],
                b"User-agent: *\nDisallow: /private/\n".to_vec(),
            ),
            _ => (200, vec![], b"ok".to_vec()),
        })
        .await;
        assert_eq!(client.get(&origin.url("/a"), &[]).await.status, 200);
        let key = robots_proxy::target::HostKey {
            scheme: robots_proxy::target::Scheme::Http,
            host: "127.0.0.1".into(),
            port: origin.addr.port(),
        };
        let entry = proxy.context().admission.robots.peek(&key).await.unwrap();
        let fresh = entry
            .fresh_until()
            .saturating_duration_since(tokio::time::Instant::now())
            .as_secs();
        assert!(
            (kept - 5..=kept).contains(&fresh),
            "{cache_control}: kept {fresh} s"
        );
    }
}

/// A refused request that asks to send a body (`Expect: 100-continue`) is
/// never told to go on: its answer comes first, and its connection ends.
#[tokio::test]
async fn a_refused_upload_gets_no_100_continue() {
    let origin = WebOrigin::site(ROBOTS).await;
    let config = web_config_with(
        "[bot]\nagent = \"formbot\"\nhttp_methods = [\"GET\", \"HEAD\", \"POST\"]\n",
    );
    let proxy = start_proxy(config).await;
    let host = origin.addr;
    let ask = format!(
        "POST http://{host}/private/form HTTP/1.1\r\nHost: {host}\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"
    );
    let answer = raw_exchange(proxy.addr(Listener::Http), ask.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(origin.targets().iter().all(|t| t == "/robots.txt"));
}

/// A keep-alive client that names one site, then another, reaches each on
/// a connection of its own: the second never rides the first's.
#[tokio::test]
async fn a_keep_alive_client_naming_another_site_never_reaches_the_first_s_connection() {
    let a = WebOrigin::site("").await;
    let b = WebOrigin::site("User-agent: *\nDisallow: /secret\n").await;
    let proxy = start_proxy(web_config()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&a.url("/1"), &[]).await.status, 200);
    assert_eq!(client.get(&b.url("/secret"), &[]).await.status, 403);
    assert_eq!(client.get(&b.url("/2"), &[]).await.status, 200);
    assert_eq!(client.get(&a.url("/3"), &[]).await.status, 200);
    assert_eq!(a.targets(), ["/robots.txt", "/1", "/3"]);
    assert_eq!(b.targets(), ["/robots.txt", "/2"]);
    let hosts = |o: &WebOrigin| -> Vec<String> {
        o.seen()
            .iter()
            .map(|s| s.headers.get("host").unwrap().to_str().unwrap().to_string())
            .collect()
    };
    assert!(hosts(&a).iter().all(|h| *h == a.addr.to_string()));
    assert!(hosts(&b).iter().all(|h| *h == b.addr.to_string()));
}
