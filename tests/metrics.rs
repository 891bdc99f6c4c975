//! `/metrics` after a scripted mix of requests: every counter moved by exactly
//! what happened. `/healthz` answers; anything else is 404.

mod common;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_by_exactly_what_happened() {
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nDisallow: /private\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let hole = hole(
        Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        Reply::Bytes(b"text\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(test_config()).await;

    // Gemini: two allowed, one disallowed, one malformed.
    assert_eq!(
        gemini(proxy.gemini_addr, &capsule.url("/a")).await.0,
        "20 text/gemini"
    );
    assert_eq!(
        gemini(proxy.gemini_addr, &capsule.url("/b")).await.0,
        "20 text/gemini"
    );
    assert!(gemini(proxy.gemini_addr, &capsule.url("/private/x"))
        .await
        .0
        .starts_with("53"));
    assert!(gemini(proxy.gemini_addr, "not a url")
        .await
        .0
        .starts_with("59"));
    // Gopher: one allowed, one disallowed.
    assert_eq!(
        gopher(proxy.gopher_addr, hole.url("0/page").as_bytes()).await,
        b"text\r\n"
    );
    assert!(
        gopher(proxy.gopher_addr, hole.url("0/private/x").as_bytes())
            .await
            .starts_with(b"3403")
    );

    let (status, m) = http_get(proxy.metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    let expect = [
        (
            r#"robots_proxy_requests_total{bot="default",decision="allowed",protocol="gemini"}"#,
            2.0,
        ),
        (
            r#"robots_proxy_requests_total{bot="default",decision="disallowed",protocol="gemini"}"#,
            1.0,
        ),
        (
            r#"robots_proxy_requests_total{bot="default",decision="error",protocol="gemini"}"#,
            1.0,
        ),
        (
            r#"robots_proxy_requests_total{bot="default",decision="slowed",protocol="gemini"}"#,
            0.0,
        ),
        (
            r#"robots_proxy_requests_total{bot="default",decision="allowed",protocol="gopher"}"#,
            1.0,
        ),
        (
            r#"robots_proxy_requests_total{bot="default",decision="disallowed",protocol="gopher"}"#,
            1.0,
        ),
        (
            r#"robots_proxy_robots_fetches_total{outcome="found",protocol="gemini"}"#,
            1.0,
        ),
        (
            r#"robots_proxy_robots_fetches_total{outcome="found",protocol="gopher"}"#,
            1.0,
        ),
        (
            r#"robots_proxy_robots_fetches_total{outcome="unreachable",protocol="gemini"}"#,
            0.0,
        ),
        ("robots_proxy_robots_cache_misses_total", 2.0),
        ("robots_proxy_robots_cache_hits_total", 3.0),
        ("robots_proxy_robots_cache_entries", 2.0),
        (
            r#"robots_proxy_upstream_gemini_status_total{class="2x"}"#,
            2.0,
        ),
        ("robots_proxy_politeness_wait_seconds_count", 3.0),
        ("robots_proxy_upstream_first_byte_seconds_count", 3.0),
        ("robots_proxy_upstream_duration_seconds_count", 3.0),
    ];
    for (series, want) in expect {
        assert_eq!(sample(&m, series), Some(want), "{series}\n{m}");
    }
    // The relayed bytes: two 20 answers ("20 text/gemini\r\npage") and one Gopher text.
    let to_client = sample(&m, "robots_proxy_relayed_to_client_bytes_total").unwrap();
    assert_eq!(
        to_client,
        (2 * "20 text/gemini\r\npage".len() + "text\r\n".len()) as f64
    );
    assert!(sample(&m, "robots_proxy_robots_cache_bytes").unwrap() > 0.0);
    assert!(m.contains(r#"robots_proxy_connections_open{listener="gemini"}"#));
    // No label takes a value per host.
    assert!(!m.contains("127.0.0.1"), "a host leaked into a label");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_not_found() {
    let proxy = start_proxy(test_config()).await;
    assert_eq!(
        http_get(proxy.metrics_addr, "/healthz").await,
        (200, "ok\n".to_string())
    );
    assert_eq!(http_get(proxy.metrics_addr, "/nope").await.0, 404);
    let (status, body) = http_get(proxy.metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(body.contains("# TYPE robots_proxy_requests_total counter"));
}

/// With `metrics.per_host` on, hosts get a label of their own up to the limit;
/// the rest count as `other`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_host_series_is_opt_in_and_capped() {
    let capsule = capsule(text("51 none", ""), text("20 text/gemini", "page")).await;
    let mut config = test_config();
    config.metrics_per_host = Some(1);
    let proxy = start_proxy(config).await;
    let port = capsule.addr.port();
    assert_eq!(
        gemini(proxy.gemini_addr, &format!("gemini://127.0.0.1:{port}/"))
            .await
            .0,
        "20 text/gemini"
    );
    assert_eq!(
        gemini(proxy.gemini_addr, &format!("gemini://localhost:{port}/"))
            .await
            .0,
        "20 text/gemini"
    );
    let (_, m) = http_get(proxy.metrics_addr, "/metrics").await;
    assert_eq!(
        sample(
            &m,
            r#"robots_proxy_host_requests_total{decision="allowed",host="127.0.0.1"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            r#"robots_proxy_host_requests_total{decision="allowed",host="other"}"#
        ),
        Some(1.0)
    );

    // Off by default.
    let plain = start_proxy(test_config()).await;
    let (_, m) = http_get(plain.metrics_addr, "/metrics").await;
    assert!(!m.contains("robots_proxy_host_requests_total"));
}
