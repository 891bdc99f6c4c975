//! Who may use the proxy, and as which bot, tried from the other side: clients
//! from other addresses, without certificates, with someone else's
//! certificate, as the wrong SOCKS5 user, on every listener.

use std::time::Duration;

use crate::common::*;
use robots_proxy::config::RawConfig;
use robots_proxy::listener::Listener;

/// Two bots with opposite rules at the same capsule and gopherhole.
const ROBOTS: &str = "User-agent: alphabot\nDisallow: /b\n\n\
                      User-agent: betabot\nDisallow: /a\n\n\
                      User-agent: *\nDisallow: /a\nDisallow: /b\n";

/// alpha and beta, each picked by a SOCKS5 user, a certificate and an address;
/// a default bot for everyone else on loopback.
fn two_bots(alpha: &ClientCert, beta: &ClientCert) -> String {
    format!(
        r#"
[socks5]
users = [{{ name = "alice", password = "a-pass" }}, {{ name = "bob", password = "b-pass" }}]

[bot]
name = "anon"
agent = "anonbot"

[[bots]]
name = "alpha"
agent = "AlphaBot/1.0"
socks5_users = ["alice"]
client_certs = ["{}"]
clients = ["127.0.0.2"]

[[bots]]
name = "beta"
agent = "BetaBot/2.0"
socks5_users = ["bob"]
client_certs = ["{}"]
clients = ["127.0.0.3/32"]
"#,
        alpha.fingerprint,
        // Either case, with colons: as `openssl x509 -fingerprint -sha256` prints it.
        colons_upper(&beta.fingerprint)
    )
}

fn colons_upper(fingerprint: &str) -> String {
    let hex = fingerprint.trim_start_matches("sha256:").to_uppercase();
    let pairs: Vec<&str> = (0..32).map(|i| &hex[2 * i..2 * i + 2]).collect();
    pairs.join(":")
}

/// A capsule and a gopherhole with [`ROBOTS`], every other page `page`.
async fn origins() -> (Origin, GopherOrigin) {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let hole = hole(
        Reply::Bytes(ROBOTS.as_bytes().to_vec()),
        Reply::Bytes(b"page\r\n".to_vec()),
    )
    .await;
    (capsule, hole)
}

/// One bot's view through every way it can be picked: `allowed` is served,
/// `refused` is not.
#[tokio::test]
async fn two_bots_get_their_own_answers_by_user_certificate_and_address() {
    let (capsule, hole) = origins().await;
    let (alpha_cert, beta_cert) = (client_cert("alpha"), client_cert("beta"));
    let proxy = start_proxy(test_config_with(&two_bots(&alpha_cert, &beta_cert))).await;
    let gopher_at = proxy.addr(Listener::Gopher);
    let gemini_at = proxy.addr(Listener::Gemini);

    for (bot, cert, from, user, allowed, refused) in [
        ("alpha", &alpha_cert, "127.0.0.2", "alice", "/a", "/b"),
        ("beta", &beta_cert, "127.0.0.3", "bob", "/b", "/a"),
    ] {
        // By certificate, from the default bot's address.
        let (header, body) =
            gemini_as(gemini_at, &capsule.url(allowed), "127.0.0.1", Some(cert)).await;
        assert_eq!(
            (header.as_str(), body.as_slice()),
            ("20 text/gemini", &b"page"[..]),
            "{bot}"
        );
        let (header, _) =
            gemini_as(gemini_at, &capsule.url(refused), "127.0.0.1", Some(cert)).await;
        let token = if bot == "alpha" {
            "alphabot"
        } else {
            "betabot"
        };
        assert!(
            header.starts_with("53 ") && header.contains(token),
            "{bot}: {header}"
        );

        // By address, on both listeners.
        let (header, _) = gemini_as(gemini_at, &capsule.url(allowed), from, None).await;
        assert_eq!(header, "20 text/gemini", "{bot} from {from}");
        let (header, _) = gemini_as(gemini_at, &capsule.url(refused), from, None).await;
        assert!(header.starts_with("53 "), "{bot} from {from}: {header}");
        let answer =
            gopher_from(gopher_at, hole.url(&format!("0{allowed}")).as_bytes(), from).await;
        assert_eq!(answer, b"page\r\n", "{bot} from {from}");
        let answer =
            gopher_from(gopher_at, hole.url(&format!("0{refused}")).as_bytes(), from).await;
        assert!(first_line(&answer).starts_with("3403 Forbidden"), "{bot}");

        // By SOCKS5 user, from the default bot's address: the user wins.
        let password = if user == "alice" { "a-pass" } else { "b-pass" };
        for (selector, served) in [(allowed, true), (refused, false)] {
            let (mut s, code) = socks_connect(
                proxy.addr(Listener::Socks5),
                "127.0.0.1",
                hole.addr.port(),
                Some((user, password)),
            )
            .await;
            assert_eq!(code, 0);
            let answer = exchange(&mut s, selector.as_bytes()).await;
            assert_eq!(
                answer == b"page\r\n",
                served,
                "{user} {selector}: {answer:?}"
            );
        }
    }
    // The default bot: only `*` applies, both refused.
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.1", None).await;
    assert!(
        header.starts_with("53 ") && header.contains("anonbot"),
        "{header}"
    );

    // One robots.txt fetch per host for every bot.
    assert_eq!(capsule.count("/robots.txt"), 1);
    assert_eq!(hole.count(b"robots.txt"), 1);

    // Counted per bot.
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    for (bot, protocol, decision, n) in [
        ("alpha", "gemini", "allowed", 2.0),
        ("alpha", "gemini", "disallowed", 2.0),
        ("beta", "gopher", "allowed", 2.0),
        ("beta", "gopher", "disallowed", 2.0),
        ("anon", "gemini", "disallowed", 1.0),
    ] {
        let series = format!(
            r#"robots_proxy_requests_total{{bot="{bot}",decision="{decision}",protocol="{protocol}"}}"#
        );
        assert_eq!(sample(&metrics, &series), Some(n), "{series}");
    }
}

/// Sends a selector line on an open connection; the whole answer.
async fn exchange(s: &mut tokio::net::TcpStream, selector: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(&[selector, b"\r\n"].concat()).await.unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    answer
}

/// A client outside `allow_from` gets each listener's refusal and reaches
/// nothing: no robots.txt fetch, no upstream connection, whatever it sends.
#[tokio::test]
async fn outsiders_are_refused_on_every_listener_before_anything_is_fetched() {
    let (capsule, hole) = origins().await;
    let proxy = start_proxy(test_config_with(
        r#"
[access]
allow_from = ["127.0.0.2/32"]
[socks5]
users = [{ name = "alice", password = "a-pass" }]
[bot]
agent = "anybot"
"#,
    ))
    .await;
    let gopher_at = proxy.addr(Listener::Gopher);
    let gemini_at = proxy.addr(Listener::Gemini);
    let outsider = "127.0.0.1";

    let (header, body) = gemini_as(gemini_at, &capsule.url("/a"), outsider, None).await;
    assert!(header.starts_with("53 "), "{header}");
    assert!(
        header.contains("127.0.0.1 is not in access.allow_from"),
        "{header}"
    );
    assert!(body.is_empty());
    // With a certificate, too.
    let cert = client_cert("anyone");
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), outsider, Some(&cert)).await;
    assert!(header.starts_with("53 "), "{header}");

    let answer = gopher_from(gopher_at, hole.url("0/a").as_bytes(), outsider).await;
    assert!(
        first_line(&answer)
            .starts_with("3403 Forbidden: client 127.0.0.1 is not in access.allow_from"),
        "{:?}",
        String::from_utf8_lossy(&answer)
    );

    // SOCKS5: 0x02 at CONNECT, with no password or with any password at all.
    let socks = proxy.addr(Listener::Socks5);
    for auth in [None, Some(("alice", "a-pass")), Some(("alice", "wrong"))] {
        let stream = tcp_from(outsider, socks).await;
        let (_, code) = socks_handshake(stream, "127.0.0.1", hole.addr.port(), auth).await;
        assert_eq!(code, 0x02, "{auth:?}");
    }

    // The one admitted address is served.
    let (header, _) = gemini_as(gemini_at, &capsule.url("/c"), "127.0.0.2", None).await;
    assert_eq!(header, "20 text/gemini");
    let answer = gopher_from(gopher_at, hole.url("0/c").as_bytes(), "127.0.0.2").await;
    assert_eq!(answer, b"page\r\n");

    // Nothing of the outsiders reached either origin: the only requests are
    // the admitted client's robots.txt and page.
    assert_eq!(capsule.all().len(), 2, "{:?}", capsule.all());
    assert_eq!(hole.all(), ["robots.txt", "/c"]);

    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    for (listener, n) in [("gemini", 2.0), ("gopher", 1.0), ("socks5", 3.0)] {
        let series = format!(
            r#"robots_proxy_connections_rejected_total{{listener="{listener}",reason="access"}}"#
        );
        assert_eq!(sample(&metrics, &series), Some(n), "{series}");
    }
}

/// `require_client_cert`: no certificate `60`, someone else's `61`, a listed
/// one served as its bot. Gopher has no certificates: its clients are picked
/// as before.
#[tokio::test]
async fn required_certificates_are_checked_with_gemini_statuses() {
    let (capsule, hole) = origins().await;
    let (alpha_cert, beta_cert) = (client_cert("alpha"), client_cert("beta"));
    let config = format!(
        "[access]\nrequire_client_cert = true\n{}",
        two_bots(&alpha_cert, &beta_cert)
    );
    let proxy = start_proxy(test_config_with(&config)).await;
    let gemini_at = proxy.addr(Listener::Gemini);
    let stranger = client_cert("stranger");

    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.1", None).await;
    assert!(header.starts_with("60 "), "{header}");
    // An address that picks alpha is not enough without the certificate.
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.2", None).await;
    assert!(header.starts_with("60 "), "{header}");
    let (header, _) = gemini_as(gemini_at, &capsule.url("/a"), "127.0.0.1", Some(&stranger)).await;
    assert!(header.starts_with("61 "), "{header}");
    assert!(header.contains(&stranger.fingerprint), "{header}");
    let (header, _) = gemini_as(
        gemini_at,
        &capsule.url("/a"),
        "127.0.0.1",
        Some(&alpha_cert),
    )
    .await;
    assert_eq!(header, "20 text/gemini");

    let answer = gopher_from(
        proxy.addr(Listener::Gopher),
        hole.url("0/b").as_bytes(),
        "127.0.0.3",
    )
    .await;
    assert_eq!(answer, b"page\r\n", "beta by address");
    // The refused requests reached nothing.
    assert_eq!(capsule.count("/a"), 1);
}

/// Without a default bot, a client that nothing picks is refused on every
/// listener, before anything is fetched.
#[tokio::test]
async fn without_a_default_bot_unknown_clients_are_refused() {
    let (capsule, hole) = origins().await;
    let proxy = start_proxy(test_config_with(
        r#"
[socks5]
users = [{ name = "alice", password = "a-pass" }, { name = "eve", password = "e-pass" }]
[[bots]]
name = "alpha"
agent = "alphabot"
socks5_users = ["alice"]
clients = ["127.0.0.2"]
"#,
    ))
    .await;
    let (header, _) = gemini_as(
        proxy.addr(Listener::Gemini),
        &capsule.url("/a"),
        "127.0.0.1",
        None,
    )
    .await;
    assert!(
        header.starts_with("53 ") && header.contains("no bot"),
        "{header}"
    );
    let answer = gopher_from(
        proxy.addr(Listener::Gopher),
        hole.url("0/a").as_bytes(),
        "127.0.0.1",
    )
    .await;
    assert!(
        first_line(&answer).starts_with("3403 Forbidden: no bot"),
        "{answer:?}"
    );
    // A valid SOCKS5 user that no bot names: refused at CONNECT.
    let (_, code) = socks_connect(
        proxy.addr(Listener::Socks5),
        "127.0.0.1",
        hole.addr.port(),
        Some(("eve", "e-pass")),
    )
    .await;
    assert_eq!(code, 0x02);
    assert!(capsule.all().is_empty() && hole.all().is_empty());

    // alice is alpha.
    let (mut s, code) = socks_connect(
        proxy.addr(Listener::Socks5),
        "127.0.0.1",
        hole.addr.port(),
        Some(("alice", "a-pass")),
    )
    .await;
    assert_eq!(code, 0);
    assert_eq!(exchange(&mut s, b"/a").await, b"page\r\n");
}

/// A listener other machines can reach, with access for this machine only:
/// the proxy does not start, and says which key to set.
#[test]
fn a_public_listener_with_loopback_access_does_not_start() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("public-listener-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("public.toml");
    std::fs::write(
        &path,
        "[listen]\ngemini = \"0.0.0.0:0\"\ngopher = \"127.0.0.1:0\"\nmetrics = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["run", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("access.allow_from: the Gemini listener is on 0.0.0.0:0"),
        "{stderr}"
    );

    // Opened to the world on purpose, it resolves.
    let open = RawConfig::parse(
        "[listen]\ngemini = \"0.0.0.0:0\"\n[access]\nallow_from = [\"0.0.0.0/0\", \"::/0\"]\n",
    )
    .unwrap()
    .resolve(&Default::default())
    .unwrap();
    assert!(open.access.open_to_all());
}

/// Two bots at one server share its spacing: each request waits its own bot's
/// Crawl-delay from the last start by any bot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bots_share_one_servers_spacing() {
    const DELAY: f64 = 0.3;
    let robots = format!(
        "User-agent: alphabot\nCrawl-delay: {DELAY}\n\n\
         User-agent: betabot\nCrawl-delay: {DELAY}\n\n\
         User-agent: *\nCrawl-delay: 100\n"
    );
    let capsule = capsule(
        text("20 text/plain", &robots),
        text("20 text/gemini", "page"),
    )
    .await;
    let mut config = test_config_with(
        r#"
[bot]
agent = "slowbot"
[[bots]]
name = "alpha"
agent = "alphabot"
clients = ["127.0.0.2"]
[[bots]]
name = "beta"
agent = "betabot"
clients = ["127.0.0.3"]
"#,
    );
    config.politeness.max_wait = Duration::from_secs(5);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let tasks: Vec<_> = ["127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"]
        .into_iter()
        .enumerate()
        .map(|(i, from)| {
            let url = capsule.url(&format!("/p{i}"));
            tokio::spawn(async move { gemini_as(addr, &url, from, None).await.0 })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), "20 text/gemini");
    }
    // robots.txt, then four pages: four spacings, not two per bot side by side.
    let gaps = capsule.gaps();
    assert_eq!(gaps.len(), 4, "{gaps:?}");
    let span: f64 = gaps.iter().sum();
    assert!(span >= 4.0 * DELAY - 0.1, "gaps {gaps:?}");

    // The default bot's Crawl-delay of 100 s is measured from the others' last
    // start: past max_wait, `44` with about that many seconds.
    let (header, _) = gemini_as(addr, &capsule.url("/slow"), "127.0.0.1", None).await;
    let secs: u64 = header
        .strip_prefix("44 ")
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{header}"));
    assert!((99..=100).contains(&secs), "{header}");
    // And alpha's next request is not held by slowbot's 100 s.
    let (header, _) = gemini_as(addr, &capsule.url("/again"), "127.0.0.2", None).await;
    assert_eq!(header, "20 text/gemini");
}

/// A listed certificate is not enough without its key: a client that shows
/// alpha's certificate but signs with another key fails the handshake, and
/// nothing is fetched.
#[tokio::test]
async fn a_copied_certificate_without_its_key_is_refused_at_the_handshake() {
    use std::sync::Arc;
    let (capsule, _hole) = origins().await;
    let (alpha, beta) = (client_cert("alpha"), client_cert("beta"));
    let config = format!(
        "[access]\nrequire_client_cert = true\n{}",
        two_bots(&alpha, &beta)
    );
    let proxy = start_proxy(test_config_with(&config)).await;
    let provider = robots_proxy::tls::provider();
    let forged = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(robots_proxy::tls::GeminiVerifier::new(
            provider,
        )))
        // rustls' own builder checks that a key matches its certificate; a
        // forger's resolver does not.
        .with_client_cert_resolver(Arc::new(Forged(Arc::new(rustls::sign::CertifiedKey::new(
            alpha.chain.clone(),
            rustls::crypto::ring::sign::any_supported_type(&beta.key).unwrap(),
        )))));
    let tcp = tcp_from("127.0.0.1", proxy.addr(Listener::Gemini)).await;
    let connected = tokio_rustls::TlsConnector::from(Arc::new(forged))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await;
    // TLS 1.3: the client may finish before the server's alert arrives; then
    // the first read fails instead.
    if let Ok(mut tls) = connected {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _ = tls
            .write_all(format!("{}\r\n", capsule.url("/a")).as_bytes())
            .await;
        let mut answer = Vec::new();
        let read = tls.read_to_end(&mut answer).await;
        assert!(read.is_err() && answer.is_empty(), "{answer:?}");
    }
    assert!(capsule.all().is_empty(), "{:?}", capsule.all());
}

/// Shows a certificate with a key that is not its own.
#[derive(Debug)]
struct Forged(std::sync::Arc<rustls::sign::CertifiedKey>);

impl rustls::client::ResolvesClientCert for Forged {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<std::sync::Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Outsiders cannot crowd out admitted clients: their connections, held
/// silent in the TLS handshake, count against the per-client cap like anyone's,
/// so an admitted client is served while they still hold theirs.
#[tokio::test]
async fn outsiders_holding_connections_do_not_crowd_out_clients() {
    let (capsule, _hole) = origins().await;
    let mut config =
        test_config_with("[access]\nallow_from = [\"127.0.0.2\"]\n[bot]\nagent = \"anybot\"\n");
    config.limits.max_connections = 8;
    config.limits.max_connections_per_client = 4;
    config.limits.request_timeout = Duration::from_secs(30);
    let proxy = start_proxy(config).await;
    let gemini_at = proxy.addr(Listener::Gemini);
    let mut outsiders = Vec::new();
    for _ in 0..10 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        // A connection past the cap may already be reset when connect returns.
        if let Ok(stream) = socket.connect(gemini_at).await {
            outsiders.push(stream);
        }
    }
    let (header, _) = gemini_as(gemini_at, &capsule.url("/c"), "127.0.0.2", None).await;
    assert_eq!(header, "20 text/gemini");
    // Served while the outsiders' first connections are still held open.
    let mut buf = [0u8; 16];
    let open = outsiders
        .iter()
        .filter(|s| {
            matches!(s.try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count();
    assert!(open >= 1, "the outsider still holds connections");
    let (_, metrics) = http_get(proxy.addr(Listener::Admin), "/metrics").await;
    let capped =
        r#"robots_proxy_connections_rejected_total{listener="gemini",reason="client-cap"}"#;
    assert_eq!(sample(&metrics, capped), Some(6.0));
    let refused = r#"robots_proxy_connections_rejected_total{listener="gemini",reason="access"}"#;
    assert_eq!(sample(&metrics, refused), Some(4.0));
}
