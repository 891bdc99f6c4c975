//! The web's back-off, from the crawler's side and the server's: a site's
//! `429` or `503` without a `Retry-After` it can be held to (none, negative,
//! zero, text, a date past) closes it for 60 s (doubling, jittered, at most
//! `max_slow_down`) for every bot, report mode included; meanwhile the
//! crawler gets `429` with the remaining `Retry-After`, and the server hears
//! nothing. (The doubling and forgiving: `politeness` unit tests, paused
//! clock; the fleet: tests/store/fleet.rs.)

use robots_proxy::listener::Listener;

use crate::common::web::{basic, web_config_with, WebClient, WebOrigin};
use crate::common::*;

/// A site with no robots.txt whose `/busy` answers `status` with these
/// fields, and every other path a page.
async fn busy_site(status: u16, fields: Vec<(&'static str, String)>) -> WebOrigin {
    WebOrigin::start(move |path| match path {
        "/robots.txt" => (404, vec![], vec![]),
        "/busy" => (status, fields.clone(), b"busy".to_vec()),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await
}

/// The seconds of a held answer's `Retry-After`.
fn retry(answer: &crate::common::web::Answer) -> u64 {
    answer
        .header("retry-after")
        .unwrap_or_else(|| panic!("no Retry-After: {answer:?}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_429_without_a_usable_retry_after_holds_the_site_for_every_bot() {
    let past = httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1));
    let values: [Option<&str>; 5] = [None, Some("-5"), Some("0"), Some("soon"), Some(&past)];
    let config = web_config_with(
        r#"
[socks5]
users = [{ name = "e", password = "e-pass" }, { name = "r", password = "r-pass" }]
[bot]
name = "anon"
agent = "anonbot"
[[bots]]
name = "enforced"
agent = "examplebot"
socks5_users = ["e"]
[[bots]]
name = "reporting"
agent = "watchbot"
mode = "report"
socks5_users = ["r"]
"#,
    );
    let (enforced, reporting) = (basic("e", "e-pass"), basic("r", "r-pass"));
    for value in values {
        // A proxy each: every origin here is on 127.0.0.1, one site.
        let proxy = start_proxy(config.clone()).await;
        let fields = value
            .map(|v| vec![("retry-after", v.to_string())])
            .unwrap_or_default();
        let origin = busy_site(429, fields).await;
        let mut crawler = WebClient::connect(proxy.addr(Listener::Http)).await;
        let busy = crawler
            .get(&origin.url("/busy"), &[("proxy-authorization", &enforced)])
            .await;
        assert_eq!(
            (busy.status, busy.body.as_str()),
            (429, "busy"),
            "{value:?}"
        );
        // The same bot, and a bot in report mode: held, told how long.
        let held = crawler.get(&origin.url("/page"), &[]).await;
        assert_eq!(held.status, 429, "{value:?}: {held:?}");
        assert!((50..=66).contains(&retry(&held)), "{value:?}: {held:?}");
        assert!(
            held.header("proxy-status").is_some(),
            "the proxy's own answer"
        );
        let mut watcher = WebClient::connect(proxy.addr(Listener::Http)).await;
        let held = watcher
            .get(&origin.url("/page"), &[("proxy-authorization", &reporting)])
            .await;
        assert_eq!(
            held.status, 429,
            "report mode is held by the server's word: {held:?}"
        );
        assert_eq!(origin.targets(), ["/robots.txt", "/busy"], "{value:?}");
    }
}

/// A server that answers `503` to everything is asked once, not stormed:
/// twenty requests from two crawlers, one reaches it.
#[tokio::test]
async fn a_503_storm_reaches_the_server_once() {
    let origin = WebOrigin::start(|path| match path {
        "/robots.txt" => (404, vec![], vec![]),
        _ => (503, vec![], b"down".to_vec()),
    })
    .await;
    let proxy = start_proxy(web_config_with("[bot]\nagent = \"examplebot\"\n")).await;
    let mut statuses = Vec::new();
    for _ in 0..2 {
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        for i in 0..10 {
            statuses.push(client.get(&origin.url(&format!("/{i}")), &[]).await.status);
        }
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 503).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        19,
        "{statuses:?}"
    );
    assert_eq!(
        origin.targets().len(),
        2,
        "robots.txt and one page: {:?}",
        origin.targets()
    );
}

/// A huge `Retry-After`, in either form, is held to `max_slow_down`; the
/// back-off's own keys are bounded at start.
#[tokio::test]
async fn absurd_values_are_bounded() {
    let far = httpdate::fmt_http_date(
        std::time::SystemTime::now() + std::time::Duration::from_secs(10 * 365 * 86_400),
    );
    let mut config = web_config_with("[bot]\nagent = \"examplebot\"\n");
    config.politeness.max_slow_down = std::time::Duration::from_secs(7200);
    let proxy = start_proxy(config).await;
    for value in ["99999999999999999999999", far.as_str()] {
        let origin = busy_site(503, vec![("retry-after", value.to_string())]).await;
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        assert_eq!(client.get(&origin.url("/busy"), &[]).await.status, 503);
        let held = client.get(&origin.url("/page"), &[]).await;
        assert!((7100..=7200).contains(&retry(&held)), "{value}: {held:?}");
    }
    for (key, value, said) in [
        (
            "web_backoff",
            "\"0s\"",
            "politeness.web_backoff: \"0s\" is out of range",
        ),
        (
            "web_backoff",
            "\"2d\"",
            "politeness.web_backoff: \"2d\" is out of range",
        ),
        (
            "web_backoff_forgive",
            "\"30d\"",
            "politeness.web_backoff_forgive",
        ),
        (
            "web_backoff_jitter",
            "90",
            "politeness.web_backoff_jitter: 90 is out of range: from 0 to 50",
        ),
        ("web_backoff_jitter", "-1", "web_backoff_jitter"),
        ("web_backoff_jitter", "0.1", "web_backoff_jitter"),
    ] {
        let text = format!("[politeness]\n{key} = {value}\n");
        // Refused when read (not a whole number) or when checked (out of range).
        let err = match robots_proxy::config::RawConfig::parse(&text) {
            Err(e) => e,
            Ok(raw) => raw
                .resolve(&robots_proxy::cli::RunArgs::default())
                .unwrap_err()
                .to_string(),
        };
        assert!(err.contains(said), "{text}: {err}");
    }
}
