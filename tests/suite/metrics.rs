//! `/metrics` after a scripted mix of requests: every counter moved by exactly
//! what happened. `/healthz` answers; anything else is 404.

use crate::common::*;
use robots_proxy::listener::Listener;

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
    let gopher_at = proxy.addr(Listener::Gopher);
    let gemini_at = proxy.addr(Listener::Gemini);

    // Gemini: two allowed, one disallowed, one malformed.
    assert_eq!(
        gemini(gemini_at, &capsule.url("/a")).await.0,
        "20 text/gemini"
    );
    assert_eq!(
        gemini(gemini_at, &capsule.url("/b")).await.0,
        "20 text/gemini"
    );
    assert!(gemini(gemini_at, &capsule.url("/private/x"))
        .await
        .0
        .starts_with("53"));
    assert!(gemini(gemini_at, "not a url").await.0.starts_with("59"));
    // Gopher: one allowed, one disallowed.
    assert_eq!(
        gopher(gopher_at, hole.url("0/page").as_bytes()).await,
        b"text\r\n"
    );
    assert!(gopher(gopher_at, hole.url("0/private/x").as_bytes())
        .await
        .starts_with(b"3403"));

    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
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
    let admin_at = proxy.addr(Listener::Admin);
    assert_eq!(
        http_get(admin_at, "/healthz").await,
        (200, "ok\n".to_string())
    );
    assert_eq!(http_get(admin_at, "/nope").await.0, 404);
    let (status, body) = http_get(admin_at, "/metrics").await;
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
    let gemini_at = proxy.addr(Listener::Gemini);
    let port = capsule.addr.port();
    assert_eq!(
        gemini(gemini_at, &format!("gemini://127.0.0.1:{port}/"))
            .await
            .0,
        "20 text/gemini"
    );
    assert_eq!(
        gemini(gemini_at, &format!("gemini://localhost:{port}/"))
            .await
            .0,
        "20 text/gemini"
    );
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
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
    let m = settled_metrics(plain.addr(Listener::Admin)).await;
    assert!(!m.contains("robots_proxy_host_requests_total"));
}

/// `decision="error"` is split by cause in `robots_proxy_request_outcomes_total`,
/// each refusal by the access rules and each failed SOCKS5 login is counted by
/// reason, and the build and the process describe themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_split_by_cause() {
    // Its pages answer with no Gemini header at all.
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nDisallow: /private\n"),
        Reply::Bytes(b"garbage without a status line".to_vec()),
    )
    .await;
    // A capsule that is gone: its robots.txt cannot be fetched.
    let (_held, gone) = gone_server();
    let config = test_config_with(
        "[bot]\nagent = \"examplebot\"\n[socks5]\nusers = [{ name = \"alice\", password = \"a-pass\" }]\n",
    );
    let proxy = start_proxy(config).await;
    let gemini_at = proxy.addr(Listener::Gemini);

    let malformed = gemini(gemini_at, "not a url").await.0;
    assert!(malformed.starts_with("59"), "{malformed}");
    // Port 25 is a line-based service: the proxy's own rule.
    let rule = gemini(gemini_at, "gemini://127.0.0.1:25/").await.0;
    assert!(rule.starts_with("53"), "{rule}");
    let unreachable = gemini(gemini_at, &format!("gemini://127.0.0.1:{}/", gone.port()))
        .await
        .0;
    assert!(unreachable.starts_with("43"), "{unreachable}");
    let upstream = gemini(gemini_at, &capsule.url("/page")).await.0;
    assert!(upstream.starts_with("43"), "{upstream}");
    let disallowed = gemini(gemini_at, &capsule.url("/private/x")).await.0;
    assert!(disallowed.starts_with("53"), "{disallowed}");
    // SOCKS5: a wrong password, and no password where one is needed.
    // (Each is counted before the proxy closes the connection: read to the end.)
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let socks5 = proxy.addr(Listener::Socks5);
    let (mut s, code) = socks_connect(socks5, "127.0.0.1", 70, Some(("alice", "wrong"))).await;
    assert_eq!(code, 0xFF);
    let _ = s.read_to_end(&mut Vec::new()).await;
    let mut s = tokio::net::TcpStream::connect(socks5).await.unwrap();
    s.write_all(&[5, 1, 0]).await.unwrap();
    let mut choice = Vec::new();
    let _ = s.read_to_end(&mut choice).await;
    assert_eq!(choice, [5, 0xFF], "no acceptable method");

    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    let outcome = |o: &str| {
        sample(
            &m,
            &format!(
                r#"robots_proxy_request_outcomes_total{{bot="default",outcome="{o}",protocol="gemini"}}"#
            ),
        )
    };
    for (o, n) in [
        ("malformed", 1.0),
        ("proxy-rule", 1.0),
        ("robots-unreachable", 1.0),
        ("upstream", 1.0),
        ("disallowed", 1.0),
        ("allowed", 0.0),
        ("slow-down", 0.0),
        ("access", 0.0),
        ("client-left", 0.0),
    ] {
        assert_eq!(outcome(o), Some(n), "{o}\n{m}");
    }
    // The four error causes are what decision="error" counts.
    assert_eq!(
        sample(
            &m,
            r#"robots_proxy_requests_total{bot="default",decision="error",protocol="gemini"}"#
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"robots_proxy_socks5_auth_failures_total{reason="bad-credentials"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            r#"robots_proxy_socks5_auth_failures_total{reason="no-method"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            &format!(
                r#"robots_proxy_build_info{{version="{}"}}"#,
                env!("CARGO_PKG_VERSION")
            )
        ),
        Some(1.0)
    );
    assert!(
        sample(&m, "process_resident_memory_bytes").unwrap() > 0.0,
        "{m}"
    );
    assert!(sample(&m, "process_open_fds").unwrap() > 0.0);
    assert_eq!(
        sample(&m, "robots_proxy_config_last_reload_successful"),
        Some(1.0)
    );
}

/// Clients the access rules refuse are counted by reason: outside
/// `allow_from`, no certificate where one is required, a certificate no bot lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_refusals_are_counted_by_reason() {
    let capsule = capsule(text("20 text/plain", ""), text("20 text/gemini", "page")).await;
    let listed = client_cert("listed");
    let config = test_config_with(&format!(
        "[access]\nallow_from = [\"127.0.0.1/32\"]\nrequire_client_cert = true\n\
         [[bots]]\nname = \"listed\"\nagent = \"listedbot\"\nclient_certs = [\"{}\"]\n",
        listed.fingerprint
    ));
    let proxy = start_proxy(config).await;
    let gemini_at = proxy.addr(Listener::Gemini);
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.1", None).await;
    assert!(header.starts_with("60"), "{header}");
    let stranger = client_cert("stranger");
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.1", Some(&stranger)).await;
    assert!(header.starts_with("61"), "{header}");
    let answer = gopher_from(
        proxy.addr(Listener::Gopher),
        capsule.url("/a").as_bytes(),
        "127.0.0.2",
    )
    .await;
    assert!(answer.starts_with(b"3"), "outside allow_from");
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.1", Some(&listed)).await;
    assert_eq!(header, "20 text/gemini");

    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    for (reason, n) in [
        ("address", 1.0),
        ("no-certificate", 1.0),
        ("unknown-certificate", 1.0),
        ("no-bot", 0.0),
    ] {
        let series = format!(r#"robots_proxy_access_refusals_total{{reason="{reason}"}}"#);
        assert_eq!(sample(&m, &series), Some(n), "{series}\n{m}");
    }
}
