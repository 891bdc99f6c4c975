//! Report mode (`mode = "report"`), robots.txt preferences about declared
//! uses (`content_usage`) and `Visit-time`, through the proxy's listeners
//! over loopback: what a bot in report mode would have been refused is
//! relayed and counted, while the proxy's own rules still hold, and bots
//! that enforce keep their spacing after it.

use std::time::Duration;

use robots_proxy::bot_limits::WallClock;
use robots_proxy::config::Config;
use robots_proxy::listener::Listener;

use crate::common::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nCrawl-delay: 5\n";

async fn guarded_capsule(robots: &str) -> Origin {
    capsule(
        text("20 text/plain", robots),
        text("20 text/gemini", "page"),
    )
    .await
}

fn reporting(keys: &str) -> Config {
    let mut config = test_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\nmode = \"report\"\n{keys}\n"
    ));
    config.politeness.max_wait = Duration::from_secs(1);
    config
}

fn report_count(metrics: &str, bot: &str, reason: &str) -> f64 {
    sample(
        metrics,
        &format!("robots_proxy_report_only_total{{bot=\"{bot}\",reason=\"{reason}\"}}"),
    )
    .unwrap_or(0.0)
}

async fn status(proxy: &robots_proxy::server::Proxy) -> serde_json::Value {
    let (_, body) = http(proxy.addr(Listener::Admin), "GET", "/api/status", &[], "").await;
    serde_json::from_str(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_relays_what_robots_txt_would_refuse_and_counts_it() {
    let origin = guarded_capsule(ROBOTS).await;
    let proxy = start_proxy(reporting("")).await;
    let addr = proxy.addr(Listener::Gemini);
    // Disallowed, and then at once again (Crawl-delay 5 s, max_wait 1 s):
    // an enforcing bot would get `53` (robots.txt says no before the turn
    // is asked for), then `44`.
    assert_eq!(
        gemini(addr, &origin.url("/private/a")).await.0,
        "20 text/gemini"
    );
    assert_eq!(gemini(addr, &origin.url("/open")).await.0, "20 text/gemini");
    assert_eq!(origin.count("/private/a"), 1);
    assert_eq!(origin.count("/open"), 1);
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(report_count(&m, "default", "disallowed"), 1.0);
    // Both: the robots.txt fetch took the host's first turn.
    assert_eq!(report_count(&m, "default", "crawl_delay"), 2.0);
    let relayed =
        "robots_proxy_requests_total{bot=\"default\",decision=\"allowed\",protocol=\"gemini\"}";
    assert_eq!(sample(&m, relayed), Some(2.0));
    // The status page says which bots only report.
    assert_eq!(status(&proxy).await["bots"][0]["mode"], "report");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_relays_what_the_bots_limits_would_hold() {
    let origin = guarded_capsule("").await;
    let proxy = start_proxy(reporting("daily_requests_per_server = 1\nrate = \"1/h\"")).await;
    let addr = proxy.addr(Listener::Gemini);
    for i in 0..3 {
        let url = origin.url(&format!("/p{i}"));
        assert_eq!(gemini(addr, &url).await.0, "20 text/gemini", "{i}");
    }
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        report_count(&m, "default", "daily_requests_per_server"),
        2.0
    );
    assert_eq!(report_count(&m, "default", "rate"), 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_over_gopher_relays_the_file_not_a_refusal() {
    let hole = hole(
        text("", "User-agent: *\nDisallow: /private\n"),
        text("", "secret\r\n"),
    )
    .await;
    let proxy = start_proxy(reporting("")).await;
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        hole.url("0/private/x").as_bytes(),
    )
    .await;
    assert!(
        !answer.starts_with(b"3"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(hole.count(b"/private/x"), 1);
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(report_count(&m, "default", "disallowed"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_mode_still_keeps_the_proxys_own_rules() {
    let proxy = start_proxy(reporting("")).await;
    let addr = proxy.addr(Listener::Gemini);
    // The proxy itself, and a request that is no request.
    let itself = format!("gemini://127.0.0.1:{}/", addr.port());
    let (header, _) = gemini(addr, &itself).await;
    assert!(header.starts_with("53 "), "{header}");
    let answer = gemini_raw(addr, b"no url at all\r\n").await;
    assert!(
        answer.starts_with(b"59 "),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert!(!m.contains("robots_proxy_report_only_total{"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_that_enforces_keeps_its_spacing_after_a_reporting_bots_request() {
    let origin = guarded_capsule("").await;
    let floor = Duration::from_millis(300);
    let mut config = test_config_with(
        "[bot]\nagent = \"examplebot\"\nmin_delay = \"300ms\"\n\n\
         [[bots]]\nname = \"watched\"\nagent = \"watchedbot\"\nmode = \"report\"\n\
         clients = [\"127.0.0.2/32\"]\n",
    );
    config.politeness.max_wait = Duration::from_millis(100);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let watched = |path: &str| {
        let url = origin.url(path);
        async move { gemini_as(addr, &url, "127.0.0.2", None).await.0 }
    };
    assert_eq!(watched("/w1").await, "20 text/gemini");
    // Past the enforcing bot's floor since that start (and the robots.txt
    // fetch before it): only the reporting bot's next start can hold it.
    tokio::time::sleep(floor + Duration::from_millis(100)).await;
    assert_eq!(watched("/w2").await, "20 text/gemini");
    let (header, _) = gemini(addr, &origin.url("/e")).await;
    assert!(header.starts_with("44 "), "{header}");
    assert_eq!(origin.count("/e"), 0);
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(report_count(&m, "default", "min_delay"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_use_gets_the_robots_refusal_naming_the_line() {
    let robots = "User-agent: *\nDisallow: /private\nContent-Usage: train-ai=n\n\
                  Content-Usage: /open/ train-ai=y\n";
    let origin = guarded_capsule(robots).await;
    let config = test_config_with(
        "[bot]\nagent = \"examplebot\"\ncontent_usage = [\"train-ai\"]\n\n\
         [[bots]]\nname = \"indexer\"\nagent = \"indexbot\"\ncontent_usage = [\"search\"]\n\
         clients = [\"127.0.0.2/32\"]\n",
    );
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let (header, _) = gemini(addr, &origin.url("/notes.gmi")).await;
    assert!(header.starts_with("53 "), "{header}");
    assert!(
        header.ends_with("Content-Usage: train-ai=n (line 3)"),
        "{header}"
    );
    // Disallowed anyway: refused for the rule alone.
    let (header, _) = gemini(addr, &origin.url("/private/x")).await;
    assert!(header.ends_with("Disallow: /private (line 2)"), "{header}");
    // A longer path's preference; another spelling of the refused path.
    assert_eq!(
        gemini(addr, &origin.url("/open/a")).await.0,
        "20 text/gemini"
    );
    let (header, _) = gemini(addr, &origin.url("//open/../notes.gmi")).await;
    assert!(header.starts_with("53 "), "{header}");
    // A bot declaring another use is not refused.
    let (header, _) = gemini_as(addr, &origin.url("/notes.gmi"), "127.0.0.2", None).await;
    assert_eq!(header, "20 text/gemini");
    assert_eq!(origin.count("/notes.gmi"), 1);
    let s = status(&proxy).await;
    assert_eq!(s["bots"][0]["content_usage"][0], "train-ai");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_signal_refuses_over_gopher_and_reports_in_report_mode() {
    let hole = hole(
        text(
            "",
            "User-agent: *\nContent-Signal: search=yes, ai-train=no\n",
        ),
        text("", "paper\r\n"),
    )
    .await;
    let enforcing = start_proxy(test_config_with(
        "[bot]\nagent = \"examplebot\"\ncontent_usage = [\"ai-train\"]\n",
    ))
    .await;
    let answer = gopher(
        enforcing.addr(Listener::Gopher),
        hole.url("0/paper").as_bytes(),
    )
    .await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with('3'), "{text}");
    // (`text` puts an empty line before the body: the field is on line 3.)
    assert!(
        text.contains("Content-Signal: ai-train=no (line 3)"),
        "{text}"
    );
    assert_eq!(hole.count(b"/paper"), 0);
    let reporting = start_proxy(reporting("content_usage = [\"train-ai\"]")).await;
    let answer = gopher(
        reporting.addr(Listener::Gopher),
        hole.url("0/paper").as_bytes(),
    )
    .await;
    assert!(
        !answer.starts_with(b"3"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    let m = settled_metrics(reporting.addr(Listener::Admin)).await;
    assert_eq!(report_count(&m, "default", "content_usage"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_visit_time_a_request_is_told_when_to_come_back() {
    let origin = guarded_capsule("User-agent: *\nVisit-time: 0100-0200\n").await;
    let at = |h: u64, m: u64| Duration::from_secs(20_000 * 86_400 + h * 3600 + m * 60);
    let mut config = test_config();
    config.wall_clock = WallClock::StartingAt(at(3, 0));
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/x")).await;
    let secs: u64 = header.strip_prefix("44 ").unwrap().parse().unwrap();
    assert!((22 * 3600 - 5..=22 * 3600).contains(&secs), "{header}");
    assert_eq!(origin.count("/x"), 0);
    let mut config = test_config();
    config.wall_clock = WallClock::StartingAt(at(1, 30));
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/x")).await;
    assert_eq!(header, "20 text/gemini");
}

/// The evidence a research bot's operator keeps: the status page names the
/// robots.txt (its SHA-256, when it was fetched) each host's decisions are
/// made with, and the last refusal's; `check --sha256 --explain` on that
/// text reproduces the decision; the budgets used and left per server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evidence_names_the_robots_txt_and_check_reproduces_the_decision() {
    let robots = "User-agent: *\nDisallow: /private\n";
    let origin = guarded_capsule(robots).await;
    let proxy = start_proxy(test_config_with(
        "[bot]\nagent = \"examplebot\"\ndaily_requests_per_server = 5\n",
    ))
    .await;
    let addr = proxy.addr(Listener::Gemini);
    assert_eq!(gemini(addr, &origin.url("/a")).await.0, "20 text/gemini");
    assert_eq!(gemini(addr, &origin.url("/b")).await.0, "20 text/gemini");
    let (header, _) = gemini(addr, &origin.url("/private/x")).await;
    assert!(header.starts_with("53 "), "{header}");
    let _ = settled_metrics(proxy.addr(Listener::Admin)).await;
    let s = status(&proxy).await;
    let host = s["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["port"] == origin.addr.port())
        .unwrap()
        .clone();
    let digest = robots_proxy::robots::sha256_hex(robots.as_bytes());
    assert_eq!(host["robots"]["sha256"], digest.as_str(), "{host}");
    assert_eq!(host["last_refusal"]["robots_sha256"], digest.as_str());
    let fetched = host["robots"]["fetched_unix"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(fetched) <= 5, "{fetched} vs {now}");
    // The text with that digest, and the decision again, offline.
    let out = binary(
        &[
            "check",
            "--robots",
            "-",
            "--agent",
            "examplebot",
            "--explain",
            "--sha256",
            "/private/x",
        ],
        robots,
    );
    let out = String::from_utf8(out.stdout).unwrap();
    assert!(out.starts_with("disallow\t/private/x\t"), "{out}");
    assert!(out.contains("Disallow: /private (line 2)"), "{out}");
    assert!(out.ends_with(&format!("sha256\t{digest}\n")), "{out}");
    // Two starts of five at this server (the refused one spent nothing).
    let budgets = &s["bots"][0]["budgets"];
    assert_eq!(budgets["per_server"], 5);
    assert_eq!(budgets["servers"][0]["used"], 2, "{budgets}");
    assert_eq!(budgets["servers"][0]["left"], 3);
    assert_eq!(budgets["servers"][0]["server"], "127.0.0.1");
}

/// The log line of each request carries the evidence, and in report mode
/// what would have happened: read from the real binary's JSON log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_log_line_carries_the_evidence_and_what_report_mode_would_have_done() {
    let robots = "User-agent: *\nDisallow: /private\nCrawl-delay: 0.5\n";
    let origin = guarded_capsule(robots).await;
    let dir = state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        // No default spacing: the proxy's own spacing (what report mode
        // keeps) is then shorter than the Crawl-delay it reports.
        "[bot]\nagent = \"examplebot\"\nmode = \"report\"\n\n[politeness]\nmax_wait = \"1s\"\ndefault_delay = \"0s\"\n",
    )
    .unwrap();
    let mut child = spawn_run(
        &dir,
        "info",
        &[
            "--allow-private-upstreams",
            "--log-format",
            "json",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let lines = log_lines(&mut child);
    let next = |what: &str| next_json(&lines, what);
    let listening = next("robots-proxy listening");
    let warned = next("bots in report mode");
    assert_eq!(warned["report_mode"], "default");
    let gemini_at: std::net::SocketAddr = listening["gemini"].as_str().unwrap().parse().unwrap();
    assert_eq!(
        gemini(gemini_at, &origin.url("/private/x")).await.0,
        "20 text/gemini"
    );
    let logged = next("\"request\"");
    let digest = robots_proxy::robots::sha256_hex(robots.as_bytes());
    assert_eq!(logged["robots_sha256"], digest.as_str(), "{logged}");
    assert!(logged["robots_fetched"].as_u64().is_some(), "{logged}");
    let would = logged["would"].as_str().unwrap();
    assert!(would.starts_with("disallowed: "), "{would}");
    assert!(would.contains("Disallow: /private (line 2)"), "{would}");
    let would_wait = logged["would_wait"].as_str().unwrap();
    assert!(would_wait.ends_with("(crawl_delay)"), "{would_wait}");
    assert_eq!(logged["decision"], "allowed");
    // An allowed page: what in robots.txt allowed it.
    assert_eq!(
        gemini(gemini_at, &origin.url("/open")).await.0,
        "20 text/gemini"
    );
    let logged = next("\"request\"");
    assert_eq!(
        logged["allowed_by"], "group * (line 1); no rule matches",
        "{logged}"
    );
    child.kill().unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
