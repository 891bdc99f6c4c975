//! A web robots.txt fetched again once it is no longer fresh asks whether it
//! changed (`If-None-Match`, `If-Modified-Since`): a `304` keeps the copy
//! and makes it fresh again, counted `not-modified`. From the server's side
//! too: a `304` nobody asked for, a changed file under the same question,
//! validators no server should be sent back.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderMap;
use robots_proxy::listener::Listener;

use crate::common::web::{WebClient, WebOrigin};
use crate::common::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";
const LAST_MODIFIED: &str = "Wed, 21 Oct 2026 07:28:00 GMT";

/// Past any robots.txt's freshness (24 hours at most on the web).
const A_DAY_AND_MORE: Duration = Duration::from_secs(86_400 + 61);

/// The clock moved past the kept copy's freshness.
async fn a_day_later() {
    tokio::time::pause();
    tokio::time::advance(A_DAY_AND_MORE).await;
    tokio::time::resume();
}

fn field<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// How many robots.txt fetches ended in `outcome`.
async fn fetches(proxy: &robots_proxy::server::Proxy, outcome: &str) -> Option<f64> {
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    sample(
        &metrics,
        &format!("robots_proxy_robots_fetches_total{{outcome=\"{outcome}\",protocol=\"http\"}}"),
    )
}

/// One page, on a connection of its own.
async fn status(proxy: &robots_proxy::server::Proxy, url: &str) -> u16 {
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    client.get(url, &[]).await.status
}

#[tokio::test]
async fn a_304_keeps_the_copy_and_makes_it_fresh_again() {
    let origin = WebOrigin::start_asked(|path, asked| match path {
        "/robots.txt" if field(asked, "if-none-match") == Some("\"v1\"") => (304, vec![], vec![]),
        "/robots.txt" => (
            200,
            vec![
                ("etag", "\"v1\"".into()),
                ("last-modified", LAST_MODIFIED.into()),
            ],
            ROBOTS.into(),
        ),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let proxy = start_proxy(crate::common::web::web_config_with("")).await;
    assert_eq!(status(&proxy, &origin.url("/a")).await, 200);
    a_day_later().await;
    assert_eq!(status(&proxy, &origin.url("/private/b")).await, 403);
    assert_eq!(status(&proxy, &origin.url("/c")).await, 200);
    let asked: Vec<_> = origin
        .seen()
        .into_iter()
        .filter(|s| s.target == "/robots.txt")
        .collect();
    assert_eq!(asked.len(), 2, "fetched once, then asked once more");
    assert_eq!(field(&asked[0].headers, "if-none-match"), None);
    assert_eq!(field(&asked[1].headers, "if-none-match"), Some("\"v1\""));
    assert_eq!(
        field(&asked[1].headers, "if-modified-since"),
        Some(LAST_MODIFIED)
    );
    assert_eq!(fetches(&proxy, "found").await, Some(1.0));
    assert_eq!(fetches(&proxy, "not-modified").await, Some(1.0));
    // Fresh again for a day: the copy is dated by the `304`.
    let key = robots_proxy::target::HostKey {
        scheme: robots_proxy::target::Scheme::Http,
        host: "127.0.0.1".into(),
        port: origin.addr.port(),
    };
    let entry = proxy.context().admission.robots.peek(&key).await.unwrap();
    let fresh = entry
        .fresh_until()
        .saturating_duration_since(tokio::time::Instant::now());
    assert!(fresh > Duration::from_secs(86_000), "{fresh:?}");
    assert_eq!(entry.state(), "found");
}

/// The file changed: the server answers the question with the new file,
/// whose rules hold from then on.
#[tokio::test]
async fn a_changed_robots_txt_replaces_the_copy() {
    let version = Arc::new(AtomicU32::new(1));
    let v = version.clone();
    let origin = WebOrigin::start_asked(move |path, asked| {
        let now = v.load(Ordering::SeqCst);
        let etag = format!("\"v{now}\"");
        match path {
            "/robots.txt" if field(asked, "if-none-match") == Some(etag.as_str()) => {
                (304, vec![], vec![])
            }
            "/robots.txt" => (
                200,
                vec![("etag", etag)],
                format!("User-agent: *\nDisallow: /v{now}/\n").into(),
            ),
            _ => (200, vec![], b"page".to_vec()),
        }
    })
    .await;
    let proxy = start_proxy(crate::common::web::web_config_with("")).await;
    assert_eq!(status(&proxy, &origin.url("/v1/a")).await, 403);
    assert_eq!(status(&proxy, &origin.url("/v2/a")).await, 200);
    version.store(2, Ordering::SeqCst);
    a_day_later().await;
    assert_eq!(status(&proxy, &origin.url("/v1/a")).await, 200);
    assert_eq!(status(&proxy, &origin.url("/v2/a")).await, 403);
    assert_eq!(fetches(&proxy, "found").await, Some(2.0));
    assert_eq!(fetches(&proxy, "not-modified").await, Some(0.0));
}

/// A server that answers `304` to a request that asked nothing (it sent no
/// validators, or ones the proxy does not keep) has answered nothing: the
/// host is unreachable, its pages refused, never "everything allowed".
#[tokio::test]
async fn a_304_nobody_asked_for_is_no_robots_txt() {
    let origin = WebOrigin::start(|path| match path {
        "/robots.txt" => (304, vec![], vec![]),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let proxy = start_proxy(crate::common::web::web_config_with("")).await;
    assert_ne!(status(&proxy, &origin.url("/a")).await, 200);
    assert_eq!(fetches(&proxy, "unreachable").await, Some(1.0));
    assert!(origin.targets().iter().all(|t| t == "/robots.txt"));
}

/// Validators no server should be sent back (too long, control bytes) are
/// not kept: the next fetch asks for the whole file, and a `304` to it is
/// no answer.
#[tokio::test]
async fn unusable_validators_are_not_sent_back() {
    let long = format!("\"{}\"", "x".repeat(4096));
    let origin = WebOrigin::start_asked(move |path, asked| match path {
        "/robots.txt" if asked.contains_key("if-none-match") => (304, vec![], vec![]),
        "/robots.txt" => (200, vec![("etag", long.clone())], ROBOTS.into()),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let proxy = start_proxy(crate::common::web::web_config_with("")).await;
    assert_eq!(status(&proxy, &origin.url("/private/a")).await, 403);
    a_day_later().await;
    assert_eq!(status(&proxy, &origin.url("/private/a")).await, 403);
    assert_eq!(status(&proxy, &origin.url("/b")).await, 200);
    assert!(origin
        .seen()
        .iter()
        .all(|s| !s.headers.contains_key("if-none-match")));
    assert_eq!(fetches(&proxy, "found").await, Some(2.0));
}
