//! TLS session resumption on both sides, and that it changes nothing a
//! request's fate depends on: the bot a client certificate picked, the
//! capsule's pinned certificate.

use robots_proxy::listener::Listener;
use std::sync::Arc;

use crate::common::*;

const ROBOTS: &str = "User-agent: alphabot\nDisallow: /b\n\nUser-agent: *\nDisallow: /a\n";

async fn handshakes(proxy: &robots_proxy::server::Proxy, side: &str, kind: &str) -> f64 {
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    let series = format!("robots_proxy_tls_handshakes_total{{kind=\"{kind}\",side=\"{side}\"}}");
    sample(&m, &series).unwrap_or(0.0)
}

/// The proxy resumes its sessions with a capsule: one full handshake (the
/// robots.txt fetch), then every request resumed, each counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_resumes_its_sessions_with_a_capsule() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    for _ in 0..4 {
        let (header, body) = gemini(proxy.addr(Listener::Gemini), &capsule.url("/b")).await;
        assert_eq!(
            (header.as_str(), body.as_slice()),
            ("20 text/gemini", &b"page"[..])
        );
    }
    assert_eq!(handshakes(&proxy, "upstream", "full").await, 1.0);
    assert_eq!(handshakes(&proxy, "upstream", "resumed").await, 4.0);
}

/// Requests in flight to one capsule at once each resume, once the capsule
/// has handed out tickets: a TLS 1.3 ticket is used once, and the proxy keeps
/// two for every request `per_host_concurrency` lets in at once (rustls' own
/// store keeps 8 a server: of 16 at once, 8 would make full handshakes, the
/// capsule signing and the proxy verifying each time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_at_once_each_resume() {
    // The page waits a little: all of a wave's requests are in flight, their
    // handshakes done, at once.
    let slow_page = Reply::Delayed(
        std::time::Duration::from_millis(200),
        b"20 text/gemini\r\npage".to_vec(),
    );
    let capsule = capsule(text("20 text/plain", ROBOTS), slow_page).await;
    let proxy = start_proxy(test_config_with(
        "[politeness]\nper_host_concurrency = 16\n",
    ))
    .await;
    let gemini_addr = proxy.addr(Listener::Gemini);
    let wave = || async {
        let asks: Vec<_> = (0..16)
            .map(|i| {
                let url = capsule.url(&format!("/page{i}"));
                tokio::spawn(async move { gemini(gemini_addr, &url).await })
            })
            .collect();
        for ask in asks {
            let (header, body) = ask.await.unwrap();
            assert_eq!(
                (header.as_str(), body.as_slice()),
                ("20 text/gemini", &b"page"[..])
            );
        }
    };
    // The first wave finds at most the robots.txt fetch's tickets.
    wave().await;
    let full = handshakes(&proxy, "upstream", "full").await;
    assert!(full >= 2.0, "the first wave made full handshakes: {full}");
    for _ in 0..3 {
        wave().await;
    }
    assert_eq!(handshakes(&proxy, "upstream", "full").await, full);
    assert_eq!(
        handshakes(&proxy, "upstream", "resumed").await + full,
        1.0 + 4.0 * 16.0
    );
}

/// A crawler that resumes its session with the proxy is still the bot its
/// certificate picked: the resumed session carries the certificate, and its
/// rules (not the default bot's) apply. A crawler without a certificate that
/// resumes stays the default bot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_keeps_the_bot_its_certificate_picked() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let alpha = client_cert("alpha");
    let config = test_config_with(&format!(
        "[bot]\nname = \"anon\"\nagent = \"anonbot\"\n\n[[bots]]\nname = \"alpha\"\nagent = \"AlphaBot\"\nclient_certs = [\"{}\"]\n",
        alpha.fingerprint
    ));
    let proxy = start_proxy(config).await;
    let provider = robots_proxy::tls::provider();
    let builder = || {
        rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(robots_proxy::tls::GeminiVerifier::new(
                provider.clone(),
            )))
    };
    let with_cert = Arc::new(
        builder()
            .with_client_auth_cert(alpha.chain.clone(), alpha.key.clone_key())
            .unwrap(),
    );
    let without = Arc::new(builder().with_no_client_auth());
    let gemini = proxy.addr(Listener::Gemini);
    let ask = |config: &Arc<rustls::ClientConfig>, path: &str| {
        let (config, url) = (config.clone(), capsule.url(path));
        async move {
            let tcp = tokio::net::TcpStream::connect(gemini).await.unwrap();
            let (answer, _) = exchange_tls(tcp, config, format!("{url}\r\n").as_bytes()).await;
            first_line(&answer)
        }
    };
    for _ in 0..3 {
        assert_eq!(ask(&with_cert, "/a").await, "20 text/gemini");
        let refused = ask(&with_cert, "/b").await;
        assert!(
            refused.starts_with("53 ") && refused.contains("alphabot"),
            "{refused}"
        );
        let refused = ask(&without, "/a").await;
        assert!(
            refused.starts_with("53 ") && refused.contains("anonbot"),
            "{refused}"
        );
        assert_eq!(ask(&without, "/b").await, "20 text/gemini");
    }
    // The first connection of each client was a full handshake; the other ten resumed.
    assert_eq!(handshakes(&proxy, "listener", "full").await, 2.0);
    assert_eq!(handshakes(&proxy, "listener", "resumed").await, 10.0);
}
