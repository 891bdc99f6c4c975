//! The SOCKS5 drop-in mode, in-process: a client that knows nothing of Gemini or
//! Gopher proxies connects through SOCKS5 to a fake origin. Gemini clients check
//! that the certificate they get is for the right name and signed by the proxy's CA.

use crate::common::*;
use robots_proxy::listener::Listener;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A Gemini request over SOCKS5 with a client that trusts only the proxy's CA
/// and checks the certificate's name.
async fn gemini_via_socks(
    proxy: &robots_proxy::server::Proxy,
    host: &str,
    port: u16,
    url: &str,
) -> String {
    gemini_via_socks_as(proxy, (host, port), url, None).await
}

/// [`gemini_via_socks`] with a client certificate or none.
async fn gemini_via_socks_as(
    proxy: &robots_proxy::server::Proxy,
    (host, port): (&str, u16),
    url: &str,
    cert: Option<&ClientCert>,
) -> String {
    let (tcp, code) = socks_connect(proxy.addr(Listener::Socks5), host, port, None).await;
    assert_eq!(code, 0);
    gemini_trusting_ca(proxy, tcp, (host, url), cert).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gopher_through_socks_is_decided_and_relayed() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        Reply::Bytes(b"1Menu\t/m\thost.example\t70\r\n.\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    let socks = proxy.addr(Listener::Socks5);

    let (mut s, code) = socks_connect(socks, "127.0.0.1", origin.addr.port(), None).await;
    assert_eq!(code, 0);
    s.write_all(b"/page\r\n").await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    // Through SOCKS, menus are not rewritten: the client's next request comes through SOCKS too.
    assert_eq!(answer, b"1Menu\t/m\thost.example\t70\r\n.\r\n");

    let (mut s, _) = socks_connect(socks, "127.0.0.1", origin.addr.port(), None).await;
    s.write_all(b"/private/x\r\n").await.unwrap();
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"3403 Forbidden: robots.txt of 127.0.0.1:"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(origin.count(b"/private/x"), 0);
    assert_eq!(origin.count(b"/page"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_through_socks_gets_a_certificate_from_the_proxy_ca() {
    let origin = capsule(
        text("20 text/plain", "User-agent: *\nDisallow: /private\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    let port = origin.addr.port();
    let url = |path: &str| format!("gemini://localhost:{port}{path}");

    assert_eq!(
        gemini_via_socks(&proxy, "localhost", port, &url("/")).await,
        "20 text/gemini"
    );
    let refused = gemini_via_socks(&proxy, "localhost", port, &url("/private/x")).await;
    assert!(
        refused.starts_with("53 robots.txt of localhost:"),
        "{refused}"
    );
    // A request naming another host than the one connected to.
    let other = gemini_via_socks(
        &proxy,
        "localhost",
        port,
        &format!("gemini://127.0.0.1:{port}/"),
    )
    .await;
    assert!(
        other.starts_with("53 this connection is for localhost:"),
        "{other}"
    );
    assert_eq!(origin.count("/private/x"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_greetings_and_commands_are_answered() {
    let proxy = start_proxy(test_config()).await;
    let socks = proxy.addr(Listener::Socks5);
    let exchange = |bytes: &'static [u8]| async move {
        let mut s = TcpStream::connect(socks).await.unwrap();
        s.write_all(bytes).await.unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out).await;
        out
    };
    // SOCKS4: no SOCKS5 reply, the connection is closed.
    assert_eq!(exchange(&[4, 1, 0, 70, 127, 0, 0, 1, 0]).await, b"");
    // Only username/password offered, none configured: no acceptable method.
    assert_eq!(exchange(&[5, 1, 2]).await, [5, 0xFF]);
    // BIND: command not supported (0x07).
    let out = exchange(&[5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 70]).await;
    assert_eq!(&out[..4], &[5, 0, 5, 7]);
    // Unknown address type (0x08).
    let out = exchange(&[5, 1, 0, 5, 1, 0, 9]).await;
    assert_eq!(&out[..4], &[5, 0, 5, 8]);
}

/// A proxy whose SOCKS5 listener takes the user `crawler` with the
/// password `s3cret`, and a hole behind it that serves `ok`.
async fn with_a_password() -> (GopherOrigin, robots_proxy::server::Proxy) {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\n".to_vec()),
        Reply::Bytes(b"ok\r\n".to_vec()),
    )
    .await;
    let mut config = test_config();
    config.socks5_users = vec![("crawler".into(), "s3cret".into())];
    (origin, start_proxy(config).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn username_and_password_when_configured() {
    let (origin, proxy) = with_a_password().await;
    let socks = proxy.addr(Listener::Socks5);
    let (_, code) = socks_connect(
        socks,
        "127.0.0.1",
        origin.addr.port(),
        Some(("crawler", "wrong")),
    )
    .await;
    assert_eq!(code, 0xFF, "refused");
    let (mut s, code) = socks_connect(
        socks,
        "127.0.0.1",
        origin.addr.port(),
        Some(("crawler", "s3cret")),
    )
    .await;
    assert_eq!(code, 0);
    s.write_all(b"/x\r\n").await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, b"ok\r\n");
}

/// A client guessing SOCKS5 passwords as fast as it can gets its first few
/// guesses checked, then none: even the right password is answered
/// "failure" while its budget refills, so it learns nothing. Another client
/// logs in as usual, and the counts say what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_guessing_is_throttled_per_client() {
    let (origin, proxy) = with_a_password().await;
    let socks = proxy.addr(Listener::Socks5);
    let port = origin.addr.port();
    let guesses = 50;
    let guessing = std::time::Instant::now();
    for i in 0..guesses {
        let pass = format!("guess{i}");
        let (_, code) = socks_connect(socks, "127.0.0.1", port, Some(("crawler", &pass))).await;
        assert_eq!(code, 0xFF);
    }
    // The right password, from the guesser: not even looked at.
    let (_, code) = socks_connect(socks, "127.0.0.1", port, Some(("crawler", "s3cret"))).await;
    assert_eq!(code, 0xFF, "the guesser's budget is spent");
    // Another client is not affected.
    let other = tcp_from("127.0.0.2", socks).await;
    let (mut s, code) =
        socks_handshake(other, "127.0.0.1", port, Some(("crawler", "s3cret"))).await;
    assert_eq!(code, 0);
    s.write_all(b"/x\r\n").await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    assert_eq!(out, b"ok\r\n");
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    let failed = |why: &str| {
        sample(
            &metrics,
            &format!("robots_proxy_socks5_auth_failures_total{{reason=\"{why}\"}}"),
        )
    };
    // The burst, plus one a refill while the guesses went on (a loaded
    // machine can take longer than a refill for them).
    let burst = f64::from(robots_proxy::guesses::BURST);
    let refills =
        (guessing.elapsed().as_secs_f64() / robots_proxy::guesses::REFILL.as_secs_f64()).floor();
    let checked = failed("bad-credentials").unwrap_or_default();
    assert!(
        (burst..=burst + refills).contains(&checked),
        "{checked} checked: {metrics}"
    );
    assert_eq!(failed("throttled"), Some(guesses as f64 + 1.0 - checked));
}

/// Guesses sent at once, over many connections, get no more checks than
/// guesses sent one by one: a check is taken from the budget before the
/// password is looked at, so connections racing each other cannot share one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guesses_sent_at_once_get_no_more_checks() {
    let (origin, proxy) = with_a_password().await;
    let socks = proxy.addr(Listener::Socks5);
    let port = origin.addr.port();
    let guesses = 40;
    let started = std::time::Instant::now();
    let tries = (0..guesses).map(|i| async move {
        let pass = format!("guess{i}");
        socks_connect(socks, "127.0.0.1", port, Some(("crawler", &pass)))
            .await
            .1
    });
    let codes = futures_util::future::join_all(tries).await;
    assert!(codes.iter().all(|&c| c == 0xFF), "{codes:?}");
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    let checked = sample(
        &metrics,
        "robots_proxy_socks5_auth_failures_total{reason=\"bad-credentials\"}",
    )
    .unwrap_or_default();
    let refills =
        (started.elapsed().as_secs_f64() / robots_proxy::guesses::REFILL.as_secs_f64()).floor();
    let burst = f64::from(robots_proxy::guesses::BURST);
    assert!(
        (burst..=burst + refills).contains(&checked),
        "{checked} of {guesses} guesses sent at once were checked"
    );
}

/// The CA is generated once: a restart issues under the same CA certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_survives_a_restart() {
    let config = test_config();
    let first = start_proxy(config.clone()).await;
    let pem = std::fs::read(first.ca_cert_path.as_ref().unwrap()).unwrap();
    first.shutdown();
    first.drained().await;
    let second = start_proxy(config).await;
    assert_eq!(
        std::fs::read(second.ca_cert_path.as_ref().unwrap()).unwrap(),
        pem
    );
}

/// SOCKS5's Gemini interception asks for client certificates too: with
/// `require_client_cert`, none is `60`, an unlisted one `61`, a listed one
/// picks its bot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_through_socks() {
    let origin = capsule(
        text("20 text/plain", "User-agent: certbot\nDisallow: /private\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let listed = client_cert("listed");
    let proxy = start_proxy(test_config_with(&format!(
        "[access]\nrequire_client_cert = true\n[[bots]]\nname = \"cert\"\nagent = \"certbot\"\nclient_certs = [\"{}\"]\n",
        listed.fingerprint
    )))
    .await;
    let at = ("localhost", origin.addr.port());
    let url = |path: &str| format!("gemini://localhost:{}{path}", at.1);
    let none = gemini_via_socks_as(&proxy, at, &url("/"), None).await;
    assert!(none.starts_with("60 "), "{none}");
    let stranger = client_cert("stranger");
    let other = gemini_via_socks_as(&proxy, at, &url("/"), Some(&stranger)).await;
    assert!(other.starts_with("61 "), "{other}");
    assert_eq!(
        gemini_via_socks_as(&proxy, at, &url("/"), Some(&listed)).await,
        "20 text/gemini"
    );
    let refused = gemini_via_socks_as(&proxy, at, &url("/private/x"), Some(&listed)).await;
    assert!(refused.contains("for certbot"), "{refused}");
    assert_eq!(
        origin.all().len(),
        2,
        "robots.txt and one page: {:?}",
        origin.all()
    );
}
