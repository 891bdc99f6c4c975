//! The admin listener: the status page and its JSON after real traffic, the
//! explain box, the forget actions and who may use them, certificate pins
//! that survive a restart, and a hostile robots.txt or URL that tries to
//! script the operator's browser.

use crate::common::*;
use robots_proxy::listener::Listener;

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

const ROBOTS: &str =
    "User-agent: examplebot\nDisallow: /private\nCrawl-delay: 0.25\n\nUser-agent: *\nDisallow: /\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_what_the_proxy_saw() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &capsule.url("/a"))
            .await
            .0,
        "20 text/gemini"
    );
    assert!(
        gemini(proxy.addr(Listener::Gemini), &capsule.url("/private/x"))
            .await
            .0
            .starts_with("53")
    );

    let (status, body) = http(proxy.addr(Listener::Admin), "GET", "/api/status", &[], "").await;
    assert_eq!(status, 200, "{body}");
    let s = json(&body);
    assert_eq!(s["bots"][0]["agent"], "examplebot");
    assert_eq!(s["requests"]["allowed"], 1);
    assert_eq!(s["requests"]["disallowed"], 1);
    assert_eq!(
        s["listeners"]["gemini"],
        proxy.addr(Listener::Gemini).to_string()
    );
    let host = &s["hosts"][0];
    assert_eq!(
        host["key"],
        format!("gemini://127.0.0.1:{}", capsule.addr.port())
    );
    assert_eq!(host["robots"]["state"], "found");
    assert_eq!(host["crawl_delay"]["default"], 0.25);
    assert_eq!(host["requests"], 2);
    assert_eq!(host["refusals"], 1);
    assert_eq!(host["last_refusal"]["outcome"], "disallowed");
    let rule = host["last_refusal"]["detail"].as_str().unwrap();
    assert!(
        rule.contains("/private") && rule.contains("line 2"),
        "{rule}"
    );
    assert!(host["next_start_in_seconds"].as_f64().unwrap() <= 0.25);

    let (status, page) = http(proxy.addr(Listener::Admin), "GET", "/", &[], "").await;
    assert_eq!(status, 200);
    assert!(page.contains("<table id=\"hosts\""), "{page}");
    assert!(page.contains(&format!("gemini://127.0.0.1:{}", capsule.addr.port())));
    assert!(!page.contains("src=\"http"), "no external assets");
    // The filter leaves out what does not match.
    let (_, filtered) = http(
        proxy.addr(Listener::Admin),
        "GET",
        "/api/status?filter=nomatch",
        &[],
        "",
    )
    .await;
    assert_eq!(json(&filtered)["hosts"].as_array().unwrap().len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_page_marks_the_lines_each_bot_follows_and_explains() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    gemini(proxy.addr(Listener::Gemini), &capsule.url("/a")).await;
    let hp = format!("127.0.0.1:{}", capsule.addr.port());
    let url = capsule.url("/private/diary.gmi");
    let path = format!(
        "/api/host/{hp}?explain={}",
        url.replace(':', "%3A").replace('/', "%2F")
    );
    let (status, body) = http(proxy.addr(Listener::Admin), "GET", &path, &[], "").await;
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    let entry = &v["host"]["entries"][0];
    assert_eq!(entry["robots_txt"][1], "Disallow: /private");
    // The agent line and the rules (Crawl-delay lines are not marked).
    assert_eq!(entry["bots"][0]["lines"], serde_json::json!([1, 2]));
    let verdict = &v["explain"]["bots"][0];
    assert_eq!(verdict["decision"], "disallow");
    assert_eq!(
        verdict["explanation"],
        "group examplebot (line 1); rule Disallow: /private (line 2)"
    );
    let (status, page) = http(
        proxy.addr(Listener::Admin),
        "GET",
        &path.replace("/api/host/", "/host/"),
        &[],
        "",
    )
    .await;
    assert_eq!(status, 200);
    assert!(page.contains("class=\"applies\""), "{page}");
    assert!(
        page.contains("<td class=\"disallow\">disallow</td>"),
        "{page}"
    );
    // Not a host:port: a clear 400, not a panic.
    assert_eq!(
        http(proxy.addr(Listener::Admin), "GET", "/host/%00:x", &[], "")
            .await
            .0,
        400
    );
    assert_eq!(
        http(
            proxy.addr(Listener::Admin),
            "GET",
            "/host/a:99999999",
            &[],
            ""
        )
        .await
        .0,
        400
    );
}

/// An upstream's robots.txt and a client's URL end up on the operator's page:
/// neither can put markup, let alone script, into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_robots_txt_and_urls_are_escaped_on_the_page() {
    let evil = "User-agent: examplebot\nDisallow: /<script>alert(1)</script>\n# <img src=x onerror=alert(2)>\n";
    let capsule = capsule(text("20 text/plain", evil), text("20 text/gemini", "page")).await;
    let proxy = start_proxy(test_config()).await;
    let answer = gemini(
        proxy.addr(Listener::Gemini),
        &capsule.url("/<script>alert(1)</script>"),
    )
    .await
    .0;
    assert!(
        answer.starts_with("53") || answer.starts_with("59"),
        "{answer}"
    );
    gemini(
        proxy.addr(Listener::Gemini),
        &capsule.url("/\"><img src=x onerror=alert(3)>"),
    )
    .await;
    let hp = format!("127.0.0.1:{}", capsule.addr.port());
    for path in ["/".to_string(), format!("/host/{hp}")] {
        let (_, page) = http(proxy.addr(Listener::Admin), "GET", &path, &[], "").await;
        assert!(!page.contains("<script>alert"), "{path}: {page}");
        assert!(!page.contains("<img src=x"), "{path}: {page}");
    }
    let (_, page) = http(
        proxy.addr(Listener::Admin),
        "GET",
        &format!("/host/{hp}"),
        &[],
        "",
    )
    .await;
    assert!(
        page.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "{page}"
    );
}

/// Pins survive a restart (a capsule that changed its certificate while the
/// proxy was down is still refused); forgetting the pin through the admin
/// listener lets the renewed certificate in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_survive_a_restart_and_can_be_forgotten() {
    let first = Origin::start(|_| text("20 text/gemini", "first")).await;
    let addr = first.addr;
    let config = test_config();
    let proxy = start_proxy(config.clone()).await;
    let url = format!("gemini://127.0.0.1:{}/page", addr.port());
    assert_eq!(gemini(proxy.addr(Listener::Gemini), &url).await.1, b"first");
    proxy.shutdown();
    assert!(proxy.drained().await);
    drop(proxy);
    first.stop().await;

    let _renewed = Origin::start_on(addr, |_| text("20 text/gemini", "renewed")).await;
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &url).await;
    assert!(
        header.starts_with("43") && header.contains("certificate"),
        "{header}"
    );

    let form = format!("host=127.0.0.1&port={}", addr.port());
    let (status, body) = http(
        proxy.addr(Listener::Admin),
        "POST",
        "/api/pins/forget",
        &[],
        &form,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["had_pin"], true);
    let (header, body) = gemini(proxy.addr(Listener::Gemini), &url).await;
    assert_eq!(body, b"renewed", "{header}");
}

/// With a token, actions need it; a page on another site cannot act through
/// the operator's browser; GET does not act.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_need_the_token_and_a_same_site_request() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let token = "0123456789abcdef0123456789abcdef";
    let proxy = start_proxy(test_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\n[admin]\ntoken = \"{token}\"\n"
    )))
    .await;
    gemini(proxy.addr(Listener::Gemini), &capsule.url("/a")).await;
    assert_eq!(capsule.count("/robots.txt"), 1);
    let form = format!("host=127.0.0.1&port={}", capsule.addr.port());
    let m = proxy.addr(Listener::Admin);
    assert_eq!(
        http(m, "POST", "/api/robots/forget", &[], &form).await.0,
        401
    );
    let wrong = "Authorization: Bearer 0123456789abcdef0123456789abcdeX";
    assert_eq!(
        http(m, "POST", "/api/robots/forget", &[wrong], &form)
            .await
            .0,
        401
    );
    let right = format!("Authorization: Bearer {token}");
    let evil_origin = "Origin: http://attacker.example";
    assert_eq!(
        http(
            m,
            "POST",
            "/api/robots/forget",
            &[&right, evil_origin],
            &form
        )
        .await
        .0,
        403
    );
    assert_eq!(
        http(m, "GET", &format!("/api/robots/forget?{form}"), &[], "")
            .await
            .0,
        405
    );
    let huge = "x".repeat(10_000);
    assert_eq!(
        http(m, "POST", "/api/robots/forget", &[&right], &huge)
            .await
            .0,
        413
    );
    // Still cached: nothing above acted.
    gemini(proxy.addr(Listener::Gemini), &capsule.url("/b")).await;
    assert_eq!(capsule.count("/robots.txt"), 1);

    let (status, body) = http(m, "POST", "/api/robots/forget", &[&right], &form).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        json(&body)["forgotten"][0],
        format!("gemini://127.0.0.1:{}", capsule.addr.port())
    );
    // The form field works as the header does (the page's forms use it).
    let (status, _) = http(
        m,
        "POST",
        "/api/pins/forget",
        &[],
        &format!("{form}&token={token}"),
    )
    .await;
    assert_eq!(status, 200);
    gemini(proxy.addr(Listener::Gemini), &capsule.url("/c")).await;
    assert_eq!(
        capsule.count("/robots.txt"),
        2,
        "fetched again after forgetting"
    );
}

/// One raw HTTP/1.1 request (`head` without its blank line, then `body`);
/// the status code, 0 when the connection closed without an answer.
async fn raw_http(addr: std::net::SocketAddr, head: &str, body: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    String::from_utf8_lossy(&raw)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// DNS rebinding: a web page on evil.example points its name at the admin
/// listener, so the operator's browser sends `Host: evil.example:PORT` (and,
/// for a form, a matching `Origin`). Nothing is answered on any path: no
/// action taken, no status page read. The listener's own names still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebound_name_reaches_nothing() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config_with(
        "[bot]\nagent = \"examplebot\"\n[admin]\nhosts = [\"status.lan\"]\n",
    ))
    .await;
    gemini(proxy.addr(Listener::Gemini), &capsule.url("/a")).await;
    let m = proxy.addr(Listener::Admin);
    let port = m.port();
    let form = format!("host=127.0.0.1&port={}", capsule.addr.port());
    let evil = format!("evil.example:{port}");
    let forget = format!(
        "POST /api/robots/forget HTTP/1.1\r\nHost: {evil}\r\nOrigin: http://{evil}\r\nContent-Type: application/x-www-form-urlencoded"
    );
    assert_eq!(raw_http(m, &forget, &form).await, 421);
    for path in [
        "/api/status",
        "/",
        "/metrics",
        "/healthz",
        "/api/host/127.0.0.1:1965",
    ] {
        let head = format!("GET {path} HTTP/1.1\r\nHost: {evil}");
        assert_eq!(raw_http(m, &head, "").await, 421, "{path}");
    }
    // Nothing was forgotten.
    gemini(proxy.addr(Listener::Gemini), &capsule.url("/b")).await;
    assert_eq!(capsule.count("/robots.txt"), 1);
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "status.lan".into(),
    ] {
        let head = format!("GET /api/status HTTP/1.1\r\nHost: {host}");
        assert_eq!(raw_http(m, &head, "").await, 200, "{host}");
    }
    let (_, metrics) = http_get(m, "/metrics").await;
    let refused = sample(
        &metrics,
        r#"robots_proxy_connections_rejected_total{listener="metrics",reason="host"}"#,
    );
    assert_eq!(refused, Some(6.0), "{metrics}");
}

/// Clients that open every connection the admin listener has and trickle a
/// request body into each (1 byte of a promised 4,000) do not keep a scrape or
/// a health check out: the newest connection gets in, cutting the oldest that
/// is still sending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trickling_bodies_do_not_keep_health_checks_out() {
    use tokio::io::AsyncWriteExt;
    let proxy = start_proxy(test_config()).await;
    let m = proxy.addr(Listener::Admin);
    let mut tricklers = Vec::new();
    for _ in 0..(robots_proxy::admin::MAX_CONNECTIONS + 8) {
        let mut s = tokio::net::TcpStream::connect(m).await.unwrap();
        let head = format!(
            "POST /api/robots/forget HTTP/1.1\r\nHost: {m}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\nh"
        );
        s.write_all(head.as_bytes()).await.unwrap();
        tricklers.push(s);
    }
    for round in 0..5 {
        assert_eq!(http_get(m, "/healthz").await.0, 200, "round {round}");
        let (status, metrics) = http_get(m, "/metrics").await;
        assert_eq!(status, 200, "round {round}");
        assert!(metrics.contains("robots_proxy_requests_total"));
        // They keep trickling.
        for s in &mut tricklers {
            let _ = s.write_all(b"o").await;
        }
    }
}

/// A body that does not arrive within its deadline ends the request (`408`):
/// a trickling client holds a connection for seconds, not for ever. (Paused
/// time: the deadline passes as soon as everything waits.)
#[tokio::test(start_paused = true)]
async fn a_body_that_never_arrives_is_given_up() {
    let proxy = start_proxy(test_config()).await;
    let m = proxy.addr(Listener::Admin);
    let started = tokio::time::Instant::now();
    let head = format!(
        "POST /api/robots/forget HTTP/1.1\r\nHost: {m}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\nh"
    );
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(m).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let answer = String::from_utf8_lossy(&raw);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() >= robots_proxy::admin::BODY_DEADLINE);
}

/// `GET path` on the proxy's admin listener: its status and body.
async fn admin_get(proxy: &robots_proxy::server::Proxy, path: &str) -> (u16, String) {
    http(proxy.addr(Listener::Admin), "GET", path, &[], "").await
}

/// Two bots crawl one capsule at once: the host page draws every start, in
/// its bot's colour, each at least its bot's spacing after the start before
/// it (by either bot), the queue that built up, and says where each bot's
/// spacing comes from, marking the Crawl-delay line in the robots.txt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_page_draws_the_starts_against_their_spacing() {
    let robots = "User-agent: examplebot\nDisallow: /private\nCrawl-delay: 0.2\n\nUser-agent: *\nDisallow: /nothing\n";
    let capsule = capsule(
        text("20 text/plain", robots),
        text("20 text/gemini", "page"),
    )
    .await;
    let mut config = test_config_with(
        "[bot]\nagent = \"examplebot\"\n\n\
         [[bots]]\nname = \"other\"\nagent = \"otherbot\"\nmin_delay = \"150ms\"\n\
         clients = [\"127.0.0.2/32\"]\n",
    );
    config.politeness.default_delay = std::time::Duration::from_millis(100);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (a, b) = (
            capsule.url(&format!("/a{i}")),
            capsule.url(&format!("/b{i}")),
        );
        tasks.push(tokio::spawn(async move { gemini(addr, &a).await.0 }));
        tasks.push(tokio::spawn(async move {
            gemini_as(addr, &b, "127.0.0.2", None).await.0
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), "20 text/gemini");
    }
    let hp = format!("127.0.0.1:{}", capsule.addr.port());
    let (status, body) = admin_get(&proxy, &format!("/api/host/{hp}")).await;
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    let e = &v["host"]["entries"][0];
    let starts = e["timeline"]["starts"].as_array().unwrap();
    assert_eq!(starts.len(), 8, "{starts:?}");
    let mut by_bot = std::collections::HashMap::new();
    for s in starts {
        *by_bot.entry(s["bot"].as_str().unwrap()).or_insert(0) += 1;
        let want = match s["bot"].as_str().unwrap() {
            "default" => 0.2,
            _ => 0.15,
        };
        assert_eq!(s["spacing_seconds"], want, "{s}");
        assert_eq!(s["early"], false, "{starts:?}");
        if let Some(gap) = s["gap_seconds"].as_f64() {
            assert!(gap >= want, "{gap} < {want}: {starts:?}");
        }
    }
    assert_eq!(by_bot, [("default", 4), ("other", 4)].into());
    let most = e["timeline"]["queue"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["waiting"].as_u64())
        .max()
        .unwrap();
    assert!(
        most >= 3,
        "eight at once: a queue built up: {}",
        e["timeline"]
    );
    let spacing = &e["summary"]["spacing"];
    assert_eq!(
        spacing["default"],
        serde_json::json!({ "seconds": 0.2, "from": "robots.txt Crawl-delay", "line": 3, "crawl_delay": 0.2 })
    );
    assert_eq!(spacing["other"]["from"], "the bot's min_delay");
    assert_eq!(spacing["other"]["seconds"], 0.15);

    let (_, page) = admin_get(&proxy, &format!("/host/{hp}")).await;
    assert_eq!(page.matches("<line class=\"start\"").count(), 8, "{page}");
    assert_eq!(page.matches("data-bot=\"other\"").count(), 4);
    assert!(page.contains("The spacing held."), "{page}");
    assert!(!page.contains("sooner than their spacing"));
    assert!(page.contains("<svg id=\"queue-gemini\""));
    // The Crawl-delay line that spaces examplebot, marked in its column.
    assert!(
        page.contains("<tr class=\"delay\"><td class=\"n\">3</td><td class=\"spacing\" title=\"the Crawl-delay this bot is spaced by\">spacing 200 ms</td><td></td><td><pre>Crawl-delay: 0.2</pre>"),
        "{page}"
    );
    assert!(page.contains("(robots.txt Crawl-delay, line 3)"));
    assert!(
        page.contains("other</b> 150 ms <small>(the bot&#39;s min_delay)</small>"),
        "{page}"
    );

    // The status page: each bot's requests per minute, the spacing column.
    let (_, body) = admin_get(&proxy, "/api/status").await;
    let s = json(&body);
    for bot in s["bots"].as_array().unwrap() {
        let allowed: u64 = bot["per_minute"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["allowed"].as_u64().unwrap())
            .sum();
        assert_eq!(allowed, 4, "{bot}");
    }
    let (_, page) = admin_get(&proxy, "/").await;
    assert!(
        page.contains("<th>spacing for default</th><th>spacing for other</th>"),
        "{page}"
    );
    assert!(page.contains("200 ms <small>Crawl-delay, line 3</small>"));
    assert!(page.contains("<svg id=\"minutes-0\""));
    assert!(page.contains("4 requests in the last hour"), "{page}");
    assert!(!page.contains("src=\"http"), "no external assets");
}

/// A bot in report mode is not held to the spacing: its starts are drawn
/// dashed and said to be so, not mistaken for a gate that failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_starts_are_drawn_as_not_held() {
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nCrawl-delay: 5\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config_with(
        "[bot]\nagent = \"examplebot\"\nmode = \"report\"\n",
    ))
    .await;
    let addr = proxy.addr(Listener::Gemini);
    for i in 0..3 {
        assert_eq!(
            gemini(addr, &capsule.url(&format!("/{i}"))).await.0,
            "20 text/gemini"
        );
    }
    let hp = format!("127.0.0.1:{}", capsule.addr.port());
    let (_, page) = admin_get(&proxy, &format!("/host/{hp}")).await;
    assert_eq!(page.matches("data-early=\"true\"").count(), 2, "{page}");
    assert!(
        page.contains(
            "3 starts of a bot in report mode were not held (dashed), and are not counted here."
        ),
        "{page}"
    );
    assert!(!page.contains("sooner than their spacing"), "{page}");
    // Only enforced starts can show that the spacing held.
    assert!(!page.contains("The spacing held."), "{page}");
    assert!(page.contains("No enforced start here lately."), "{page}");
}

/// Errors at a server are counted by outcome and cause, on the host page
/// and in the hosts table: an upstream that went away, a client that left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_broken_down_by_cause() {
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nDisallow: /private\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    let addr = proxy.addr(Listener::Gemini);
    assert_eq!(gemini(addr, &capsule.url("/ok")).await.0, "20 text/gemini");
    assert!(gemini(addr, &capsule.url("/private/x"))
        .await
        .0
        .starts_with("53"));
    let url = capsule.url("/gone");
    let port = capsule.addr.port();
    capsule.stop().await;
    let (header, _) = gemini(addr, &url).await;
    assert!(header.starts_with("43"), "{header}");
    let hp = format!("127.0.0.1:{port}");
    let (_, body) = admin_get(&proxy, &format!("/api/host/{hp}")).await;
    let v = json(&body);
    assert_eq!(
        v["host"]["entries"][0]["summary"]["errors"],
        serde_json::json!({ "upstream": { "count": 1, "cause": "upstream" } }),
        "a refusal by robots.txt is not an error: {v}"
    );
    let (_, page) = admin_get(&proxy, &format!("/host/{hp}")).await;
    assert!(
        page.contains("<tr><td>upstream</td><td>upstream</td><td class=\"n\">1</td></tr>"),
        "{page}"
    );
    let (_, page) = admin_get(&proxy, "/").await;
    assert!(page.contains("<td>upstream 1</td>"), "{page}");
}

/// `robots-proxy status` for a terminal: it finds the admin listener in the
/// state directory `run` wrote it to, presents the token from the
/// environment, and prints the bots with their mode and limits, the latest
/// refusal with its rule, and the hosts. Without the token it says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_subcommand_prints_what_the_admin_api_shows() {
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nDisallow: /private\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let token = "a-token-of-32-characters-0123456";
    let config = test_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\nconcurrency = 2\n\
         [[bots]]\nname = \"watcher\"\nagent = \"watchbot\"\nmode = \"report\"\nclients = [\"127.0.0.2/32\"]\nmax_wait = \"90s\"\n\
         [admin]\ntoken = \"{token}\"\n"
    ));
    let state = config.state_dir.clone();
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    assert_eq!(gemini(addr, &capsule.url("/a")).await.0, "20 text/gemini");
    assert!(gemini(addr, &capsule.url("/private/x"))
        .await
        .0
        .starts_with("53"));
    let run = move |token: Option<&'static str>| {
        let state = state.clone();
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"));
            cmd.args(["status", "--state-dir"]).arg(&state);
            cmd.env_remove("ROBOTS_PROXY_ADMIN_TOKEN");
            if let Some(t) = token {
                cmd.env("ROBOTS_PROXY_ADMIN_TOKEN", t);
            }
            cmd.output().unwrap()
        })
    };
    let out = run(Some(token)).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let key = format!("gemini://127.0.0.1:{}", capsule.addr.port());
    for said in [
        "robots-proxy 0.",
        "requests: allowed 1, disallowed 1, error 0, slowed 0",
        "  default (agent \"examplebot\")\n    concurrency 2: 2 free at its busiest server",
        "  watcher (agent \"watchbot\"), REPORT MODE: relayed at once",
        "    max_wait 90.0 s",
        &format!("{key}  disallowed: robots.txt of 127.0.0.1:{} disallows this for examplebot: Disallow: /private (line 2)", capsule.addr.port()),
        &format!("  {key}  found"),
    ] {
        assert!(stdout.contains(said), "{said}:\n{stdout}");
    }
    // A loopback client reads without the token ([admin]'s rules); the
    // same view comes back.
    let out = run(None).await.unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("watcher (agent \"watchbot\")"));
    // A state directory no proxy runs with: said, with what to try.
    let out = tokio::task::spawn_blocking(|| {
        std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(["status", "--state-dir", "/nonexistent/state"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/nonexistent/state/listening")
            && stderr.contains("is the proxy running with this state directory?"),
        "{stderr}"
    );
}
