//! What the proxy does for the small web's bots, for web requests too: the
//! metrics under the protocol of the server reached, the status page, report
//! mode, declared uses, the bots' own limits. (Fleet mode for the web:
//! tests/store/fleet.rs.)

use robots_proxy::listener::Listener;

use crate::common::web::{web_config_with, WebClient, WebOrigin};
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
