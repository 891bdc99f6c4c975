//! A crawler dropped in front of the proxy at its defaults loses no page of
//! a slow site, and the site is asked for nothing early: crawlers that
//! retry a `429` at once (Scrapy retries twice), and crawlers whose own
//! timeout is shorter than their page's turn (colly's 10 s), through the
//! HTTP listener, on the real clock with a site one second apart.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use robots_proxy::listener::Listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::web::{web_config_with, WebOrigin};
use crate::common::*;

/// How a crawler asks for one page.
#[derive(Clone, Copy, Debug)]
enum Crawler {
    /// Waits as long as it takes; a `429` is asked again at once, at most
    /// this many times (Scrapy's `RETRY_TIMES`).
    RetriesAtOnce(usize),
    /// Gives up after this long and asks again at once, at most 5 times.
    TimesOut(Duration),
}

/// One `GET` of `url` through the proxy's HTTP listener, on a connection of
/// its own: the status, or `None` when `within` passed first (the crawler
/// hangs up).
async fn get(http: SocketAddr, url: impl AsRef<str>, within: Option<Duration>) -> Option<u16> {
    let ask = async {
        let mut tcp = tokio::net::TcpStream::connect(http).await.unwrap();
        let url = url.as_ref();
        let head = format!("GET {url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tcp.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer);
        answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{answer}"))
    };
    match within {
        Some(within) => tokio::time::timeout(within, ask).await.ok(),
        None => Some(ask.await),
    }
}

/// A crawler's fetch of `url`: its last status, and how many times it asked.
async fn crawl(http: SocketAddr, url: String, crawler: Crawler) -> (Option<u16>, usize) {
    let (tries, within) = match crawler {
        Crawler::RetriesAtOnce(retries) => (retries + 1, None),
        Crawler::TimesOut(after) => (6, Some(after)),
    };
    let mut last = None;
    for asked in 1..=tries {
        last = get(http, &url, within).await;
        if last == Some(200) {
            return (last, asked);
        }
    }
    (last, tries)
}

/// Six pages asked at once of a site one second apart, two more 2 s later,
/// with the web's wait bounded at 2.2 s: pages 3 to 8 cannot be served
/// within one asking. Each crawler gets every page, each page reaches the
/// site once and in the order first asked, one second apart: the pages told
/// "slow down" (or whose crawler hung up) came back to their places, not to
/// the end behind pages 7 and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawler_at_its_defaults_gets_every_page_of_a_slow_site() {
    for crawler in [
        Crawler::RetriesAtOnce(2),
        Crawler::TimesOut(Duration::from_millis(1500)),
    ] {
        let site = WebOrigin::site("User-agent: *\nCrawl-delay: 1\n").await;
        let mut config = web_config_with("[bot]\nagent = \"examplebot\"\n");
        config.politeness.web_max_wait = Duration::from_millis(2200);
        config.politeness.horizon = Duration::from_secs(60);
        let proxy = start_proxy(config).await;
        let http = proxy.addr(Listener::Http);
        let pages = [1, 2, 3, 4, 5, 6, 7, 8];
        let t0 = Instant::now();
        let mut crawls = Vec::new();
        for page in pages {
            // Pages 7 and 8 come while 3 to 6 wait (a slot of the crawler's
            // freed): they go behind them, however often those are asked.
            if page == 7 {
                tokio::time::sleep_until((t0 + Duration::from_secs(2)).into()).await;
            }
            let url = site.url(&format!("/page{page}"));
            crawls.push(tokio::spawn(crawl(http, url, crawler)));
            // Asked in order.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut asked = 0;
        for (page, crawl) in pages.iter().zip(crawls) {
            let (status, times) = crawl.await.unwrap();
            assert_eq!(status, Some(200), "{crawler:?}: page {page}");
            asked += times;
        }
        assert!(asked > pages.len(), "{crawler:?}: some were asked again");
        let seen = site.seen();
        let targets: Vec<&str> = seen.iter().map(|s| s.target.as_str()).collect();
        let expected: Vec<String> = pages.iter().map(|p| format!("/page{p}")).collect();
        assert_eq!(targets[0], "/robots.txt");
        assert_eq!(targets[1..], expected, "{crawler:?}: once each, in order");
        let starts: Vec<Instant> = seen.iter().map(|s| s.at).collect();
        for pair in starts.windows(2) {
            let gap = pair[1].duration_since(pair[0]);
            assert!(gap >= Duration::from_millis(990), "{crawler:?}: {gap:?}");
        }
    }
}

/// The `request` lines of the log naming `path` at `host`, as JSON fields.
fn logged(host: &str, path: &str) -> Vec<serde_json::Value> {
    let text = String::from_utf8_lossy(&crate::tallies::log().lock().unwrap()).into_owned();
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .map(|json| json["fields"].clone())
        .filter(|f| f["message"] == "request" && f["host"] == host && f["path"] == path)
        .collect()
}

/// What a crawler lost at a site is seen there, told apart: an answer to
/// come back later (its turn past its wait), a client that left while it
/// waited, and the pages never asked for again (their kept places due): on
/// the status page's API and in each request's log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_work_a_crawler_lost_is_seen_per_site() {
    crate::tallies::log();
    let site = WebOrigin::site("User-agent: *\nCrawl-delay: 1\n").await;
    let mut config = web_config_with("[bot]\nagent = \"examplebot\"\n");
    config.politeness.web_max_wait = Duration::from_millis(1200);
    config.politeness.horizon = Duration::from_secs(60);
    let proxy = start_proxy(config).await;
    let http = proxy.addr(Listener::Http);
    // robots.txt at 0, page 1 at 1 s; page 2's turn (2 s) is past its wait.
    let one = tokio::spawn(get(http, site.url("/page1"), None));
    tokio::time::sleep(Duration::from_millis(20)).await;
    let two = tokio::spawn(get(http, site.url("/page2"), None));
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Page 3's crawler hangs up at 0.5 s and never asks again.
    let three = get(http, &site.url("/page3"), Some(Duration::from_millis(500))).await;
    assert_eq!(three, None);
    assert_eq!(one.await.unwrap(), Some(200));
    assert_eq!(two.await.unwrap(), Some(429));
    let host = site.addr.to_string();
    let key = format!("http://{host}");
    let api = proxy.addr(Listener::Admin);
    let mut lost = serde_json::Value::Null;
    let expected = serde_json::json!({"client-left": 1, "given-up": 2, "wait": 1});
    for _ in 0..100 {
        let (_, body) = http_get(api, "/api/status").await;
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        let hosts = status["hosts"].as_array().cloned().unwrap_or_default();
        lost = hosts
            .iter()
            .find(|h| h["key"].as_str().is_some_and(|k| k.starts_with(&key)))
            .map_or(serde_json::Value::Null, |h| h["lost"].clone());
        if lost == expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        lost, expected,
        "pages 2 and 3 given up once their places were due"
    );
    let line = |path: &str| {
        let lines = logged(&host, path);
        assert_eq!(lines.len(), 1, "{path}: {lines:?}");
        lines[0].clone()
    };
    assert_eq!(line("/page1")["lost"], serde_json::Value::Null);
    let two = line("/page2");
    assert_eq!(two["lost"], "wait");
    // Told at its bound, and the line says how long it waited.
    let waited = two["wait_ms"].as_u64().unwrap();
    assert!((1150..3000).contains(&waited), "{two}");
    assert_eq!(line("/page3")["lost"], "client-left");
}
