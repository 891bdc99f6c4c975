//! What the proxy does for the small web's bots, for web requests too: the
//! metrics under the protocol of the server reached, the status page, report
//! mode, declared uses, the bots' own limits. (Fleet mode for the web:
//! tests/store/fleet.rs.)

use robots_proxy::listener::Listener;

use crate::common::web::{basic, web_config_with, WebClient, WebOrigin};
use crate::common::*;

#[tokio::test]
async fn web_requests_are_counted_under_http_and_shown_on_the_status_page() {
    let origin = WebOrigin::site("User-agent: *\nDisallow: /private/\n").await;
    let proxy = start_proxy(web_config_with(
        "[bot]\nname = \"crawler\"\nagent = \"examplebot\"\n",
    ))
    .await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/a"), &[]).await.status, 200);
    assert_eq!(client.get(&origin.url("/private/b"), &[]).await.status, 403);
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    for (decision, n) in [("allowed", 1.0), ("disallowed", 1.0)] {
        let series = format!(
            "robots_proxy_requests_total{{bot=\"crawler\",decision=\"{decision}\",protocol=\"http\"}}"
        );
        assert_eq!(sample(&metrics, &series), Some(n), "{series}");
    }
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_robots_fetches_total{outcome=\"found\",protocol=\"http\"}"
        ),
        Some(1.0)
    );
    let (status, body) = http(proxy.addr(Listener::Admin), "GET", "/api/status", &[], "").await;
    assert_eq!(status, 200);
    let s: serde_json::Value = serde_json::from_str(&body).unwrap();
    let host = s["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["key"] == format!("http://127.0.0.1:{}", origin.addr.port()))
        .unwrap_or_else(|| panic!("the web host on the status page: {body}"));
    assert_eq!(host["robots"]["state"], "found");
    assert_eq!(host["requests"], 2);
    assert_eq!(host["last_refusal"]["outcome"], "disallowed");
    assert_eq!(
        s["listeners"]["http"],
        proxy.addr(Listener::Http).to_string()
    );
}

/// Report mode: what robots.txt would refuse is relayed, and counted as
/// what it would have been.
#[tokio::test]
async fn a_reporting_bot_s_web_requests_are_relayed_and_reported() {
    let origin = WebOrigin::site("User-agent: *\nDisallow: /private/\n").await;
    let proxy = start_proxy(web_config_with(
        "[bot]\nname = \"watched\"\nagent = \"examplebot\"\nmode = \"report\"\n",
    ))
    .await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let page = client.get(&origin.url("/private/b"), &[]).await;
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(origin.targets(), ["/robots.txt", "/private/b"]);
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_report_only_total{bot=\"watched\",reason=\"disallowed\"}"
        ),
        Some(1.0)
    );
}

/// A bot that declares what it does with what it fetches is held to the
/// site's preferences about it.
#[tokio::test]
async fn a_web_site_s_content_usage_refuses_a_declared_use() {
    let origin = WebOrigin::site("User-agent: *\nAllow: /\nContent-Usage: train-ai=n\n").await;
    let proxy = start_proxy(web_config_with(
        "[bot]\nagent = \"examplebot\"\ncontent_usage = [\"train-ai\"]\n",
    ))
    .await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let refused = client.get(&origin.url("/a"), &[]).await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(
        refused.body.contains("Content-Usage: train-ai=n"),
        "{}",
        refused.body
    );
    assert_eq!(origin.targets(), ["/robots.txt"]);
}

/// A bot's own limits hold its web requests: a daily budget per site.
#[tokio::test]
async fn a_bot_s_daily_budget_holds_on_the_web() {
    let origin = WebOrigin::site("").await;
    let mut config =
        web_config_with("[bot]\nagent = \"examplebot\"\ndaily_requests_per_server = 2\n");
    config.politeness.max_wait = std::time::Duration::from_millis(100);
    let proxy = start_proxy(config).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    // robots.txt's fetch is the proxy's, not the bot's: two pages, then no more.
    assert_eq!(client.get(&origin.url("/1"), &[]).await.status, 200);
    assert_eq!(client.get(&origin.url("/2"), &[]).await.status, 200);
    let held = client.get(&origin.url("/3"), &[]).await;
    assert_eq!(held.status, 429, "{held:?}");
    assert!(
        held.body.contains("daily_requests_per_server"),
        "{}",
        held.body
    );
    assert!(held.header("retry-after").is_some());
    assert_eq!(origin.targets(), ["/robots.txt", "/1", "/2"]);
}

/// A web request's log line, as an operator reads it (JSON): the protocol
/// of the server reached, the listener it came in on, its bot by the name
/// the metrics use, and the robots.txt it was decided with (evidence).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_request_s_log_line_names_protocol_listener_bot_and_evidence() {
    let robots = "User-agent: *\nDisallow: /private/\n";
    let origin = WebOrigin::site(robots).await;
    let dir = state_dir();
    let mut child = spawn_run(
        &dir,
        "info",
        &[
            "--allow-private-upstreams",
            "--log-format",
            "json",
            "--agent",
            "examplebot",
            "--http-listen",
            "127.0.0.1:0",
        ],
    );
    let lines = log_lines(&mut child);
    let next = |what: &str| next_json(&lines, what);
    let announced = next("HTTP listener");
    let http: std::net::SocketAddr = announced["http"].as_str().unwrap().parse().unwrap();
    let mut client = WebClient::connect(http).await;
    assert_eq!(client.get(&origin.url("/private/x"), &[]).await.status, 403);
    let logged = next("\"request\"");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(logged["protocol"], "http", "{logged}");
    assert_eq!(logged["listener"], "http", "{logged}");
    assert_eq!(logged["bot"], "default", "{logged}");
    assert_eq!(logged["decision"], "disallowed", "{logged}");
    assert_eq!(logged["status"], 403, "{logged}");
    let digest = robots_proxy::robots::sha256_hex(robots.as_bytes());
    assert_eq!(logged["robots_sha256"], digest.as_str(), "{logged}");
}

/// A UTC window of the day starting `from_now_h` hours from now, an hour
/// long, as `quiet_hours` writes it.
fn window_from_now(from_now_h: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let h = (now / 3600 + from_now_h) % 24;
    format!("{:02}:00-{:02}:00", h, (h + 1) % 24)
}

/// The status page an operator opens: each bot's mode (a report-mode bot
/// marked, its spent budget not red as if enforced), its limits and what is
/// left of each, the latest refusals with their rule, and the web hosts,
/// whose host page explains with the host's own scheme.
#[tokio::test]
async fn the_status_page_shows_each_bot_s_mode_limits_and_what_is_left() {
    let origin = WebOrigin::site("User-agent: *\nDisallow: /private/\n").await;
    let config = web_config_with(&format!(
        r#"
[socks5]
users = [{{ name = "alice", password = "a-pass" }}, {{ name = "rita", password = "r-pass" }}]

[bot]
name = "anon"
agent = "anonbot"

[[bots]]
name = "crawler"
agent = "examplebot"
socks5_users = ["alice"]
concurrency = 3
rate = "10/min"
daily_requests_per_server = 5
quiet_hours = ["{}"]

[[bots]]
name = "watcher"
agent = "watchbot"
mode = "report"
daily_requests_per_server = 1
socks5_users = ["rita"]
"#,
        window_from_now(3)
    ));
    let proxy = start_proxy(config).await;
    let http_addr = proxy.addr(Listener::Http);
    let mut crawler = WebClient::connect(http_addr).await;
    let alice = basic("alice", "a-pass");
    assert_eq!(
        crawler
            .get(&origin.url("/a"), &[("proxy-authorization", &alice)])
            .await
            .status,
        200
    );
    assert_eq!(
        crawler.get(&origin.url("/private/x"), &[]).await.status,
        403
    );
    assert_eq!(crawler.get(&origin.url("/b"), &[]).await.status, 200);
    let mut watcher = WebClient::connect(http_addr).await;
    let rita = basic("rita", "r-pass");
    for path in ["/c", "/private/y", "/d"] {
        let answer = watcher
            .get(&origin.url(path), &[("proxy-authorization", &rita)])
            .await;
        assert_eq!(answer.status, 200, "report mode relays {path}");
    }
    let admin = proxy.addr(Listener::Admin);
    let (_, body) = http(admin, "GET", "/api/status", &[], "").await;
    let s: robots_proxy::admin::model::Status = serde_json::from_str(&body).unwrap();
    let crawler_row = &s.bots[1];
    assert_eq!(crawler_row.mode, "enforce");
    assert_eq!(crawler_row.left.concurrency, Some(3), "none in flight now");
    assert_eq!(crawler_row.left.rate, Some(8), "two starts in the minute");
    assert_eq!(
        crawler_row.left.daily_requests_per_server,
        Some(3),
        "two of five at the one server"
    );
    assert_eq!(crawler_row.left.quiet_for_seconds, Some(0.0));
    let watcher_row = &s.bots[2];
    assert!(watcher_row.reports());
    let budgets = watcher_row.budgets.as_ref().unwrap();
    assert!(!budgets.enforced);
    assert_eq!((budgets.servers[0].used, budgets.servers[0].left), (1, 0));
    let refusal = &s.recent_refusals[0];
    assert_eq!(refusal.refusal.outcome, "disallowed");
    assert!(
        refusal.refusal.detail.contains("Disallow: /private/"),
        "{refusal:?}"
    );
    let web_key = format!("http://127.0.0.1:{}", origin.addr.port());
    assert!(s.hosts.iter().any(|h| h.key == web_key), "{body}");

    // The same counts for Prometheus: the most used at one server, of the limit.
    let metrics = settled_metrics(admin).await;
    assert_eq!(
        sample(&metrics, "robots_proxy_budget_most_used{bot=\"crawler\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(&metrics, "robots_proxy_budget_daily_limit{bot=\"crawler\"}"),
        Some(5.0)
    );
    assert_eq!(
        sample(&metrics, "robots_proxy_budget_most_used{bot=\"anon\"}"),
        None,
        "no budget, no series"
    );

    let (_, page) = http(admin, "GET", "/", &[], "").await;
    let bot_row = |name: &str| {
        let at = page.find(&format!("<tr data-bot=\"{name}\">")).unwrap();
        page[at..at + page[at..].find("</tr>").unwrap()].to_string()
    };
    let crawler_html = bot_row("crawler");
    assert!(crawler_html.contains("<td>enforce</td>"), "{crawler_html}");
    for said in [
        "concurrency 3 <small>(3 free at its busiest server)</small>",
        "rate 10/min <small>(8 left in the window)</small>",
        "daily_requests_per_server 5 <small>(at least 3 left at each server)</small>",
        "<small>(not quiet now)</small>",
    ] {
        assert!(crawler_html.contains(said), "{said}: {crawler_html}");
    }
    let watcher_html = bot_row("watcher");
    assert!(
        watcher_html.contains("<span class=\"report\">report</span>"),
        "{watcher_html}"
    );
    assert!(watcher_html.contains("; not enforced)"), "{watcher_html}");
    assert!(page.contains("<h4>Daily budget per server (report mode: not enforced)</h4>"));
    assert!(page.contains("would have been spent, had it been enforced."));
    assert!(page.contains("<h2>Latest refusals</h2>"));
    assert!(
        page.contains(&format!(
            "<a href=\"/host/127.0.0.1:{}\">{web_key}</a></td><td>disallowed</td>",
            origin.addr.port()
        )),
        "{page}"
    );
    assert!(
        !page.contains("<h2>Fleet store</h2>"),
        "no store, no store section"
    );

    let (_, host_page) = http(
        admin,
        "GET",
        &format!("/host/127.0.0.1:{}", origin.addr.port()),
        &[],
        "",
    )
    .await;
    assert!(
        host_page.contains(&format!(
            "placeholder=\"http://127.0.0.1:{}/some/page\"",
            origin.addr.port()
        )),
        "the explain box offers the host's own scheme: {host_page}"
    );
    assert!(!host_page.contains("Fleet mode:"));
}
