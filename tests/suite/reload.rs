//! Reloading the config (SIGHUP) while the proxy serves: bots, access rules,
//! politeness and certificates change for new connections; connections in
//! flight, the robots.txt cache and the pins stay; settings that need a
//! restart are named and kept; a broken file changes nothing. The last test
//! sends real signals to the built binary.

use robots_proxy::listener::Listener;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ROBOTS: &str = "User-agent: alphabot\nDisallow: /a\n\nUser-agent: betabot\nDisallow: /b\n";

fn bot(agent: &str) -> String {
    format!("[bot]\nagent = \"{agent}\"\n")
}

/// A capsule with [`ROBOTS`], and a proxy serving as `agent`.
async fn serving(
    agent: &str,
) -> (
    Origin,
    robots_proxy::config::Config,
    robots_proxy::server::Proxy,
) {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let config = test_config_with(&bot(agent));
    let proxy = start_proxy(config.clone()).await;
    (capsule, config, proxy)
}

/// The same state directory across reloads, as a real reload has.
fn reload_config(base: &robots_proxy::config::Config, toml: &str) -> robots_proxy::config::Config {
    let mut config = test_config_with(toml);
    config.state_dir = base.state_dir.clone();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_the_bot_for_new_connections_and_keeps_the_cache() {
    let (capsule, config, proxy) = serving("alphabot").await;
    assert!(gemini(proxy.addr(Listener::Gemini), &capsule.url("/a"))
        .await
        .0
        .starts_with("53"));
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &capsule.url("/b"))
            .await
            .0,
        "20 text/gemini"
    );

    let done = proxy
        .reload(reload_config(
            &config,
            "[bot]\nname = \"beta\"\nagent = \"betabot\"\n",
        ))
        .await
        .unwrap();
    assert!(done.kept.is_empty(), "{:?}", done.kept);
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &capsule.url("/a"))
            .await
            .0,
        "20 text/gemini"
    );
    assert!(gemini(proxy.addr(Listener::Gemini), &capsule.url("/b"))
        .await
        .0
        .starts_with("53"));
    // The cached robots.txt was compiled again for the new bot, not fetched again.
    assert_eq!(capsule.count("/robots.txt"), 1);
    // The metrics name the new bot.
    let m = settled_metrics(proxy.addr(Listener::Admin)).await;
    let beta = r#"robots_proxy_requests_total{bot="beta",decision="disallowed",protocol="gemini"}"#;
    assert_eq!(sample(&m, beta), Some(1.0), "{m}");
    let before =
        r#"robots_proxy_requests_total{bot="default",decision="disallowed",protocol="gemini"}"#;
    assert_eq!(sample(&m, before), Some(1.0), "the old bot's count stays");
}

/// A connection accepted before the reload finishes with the config it
/// started with; the next one gets the new config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_in_flight_keeps_its_config() {
    let (capsule, config, proxy) = serving("betabot").await;
    // TLS open, request not sent yet.
    let mut early = tls_to(proxy.addr(Listener::Gemini)).await;
    proxy
        .reload(reload_config(&config, &bot("alphabot")))
        .await
        .unwrap();
    early
        .write_all(format!("{}\r\n", capsule.url("/a")).as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = early.read_to_end(&mut answer).await;
    assert_eq!(split(&answer).0, "20 text/gemini", "betabot may fetch /a");
    assert!(gemini(proxy.addr(Listener::Gemini), &capsule.url("/a"))
        .await
        .0
        .starts_with("53"));
}

/// Access rules change at once: an address let in before is refused after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_rules_change_on_reload() {
    let hole = hole(Reply::Bytes(Vec::new()), Reply::Bytes(b"page\r\n".to_vec())).await;
    let config = test_config();
    let proxy = start_proxy(config.clone()).await;
    let url = hole.url("0/x");
    assert_eq!(
        gopher_from(proxy.addr(Listener::Gopher), url.as_bytes(), "127.0.0.3").await,
        b"page\r\n"
    );
    proxy
        .reload(reload_config(
            &config,
            "[bot]\nagent = \"examplebot\"\n[access]\nallow_from = [\"127.0.0.1/32\"]\n",
        ))
        .await
        .unwrap();
    let refused = gopher_from(proxy.addr(Listener::Gopher), url.as_bytes(), "127.0.0.3").await;
    assert!(
        refused.starts_with(b"3"),
        "{}",
        String::from_utf8_lossy(&refused)
    );
    assert_eq!(
        gopher_from(proxy.addr(Listener::Gopher), url.as_bytes(), "127.0.0.1").await,
        b"page\r\n"
    );
}

/// A new Crawl-delay default applies to the next request to a server the
/// proxy already spaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn politeness_changes_on_reload() {
    let hole = hole(Reply::Bytes(Vec::new()), Reply::Bytes(b"page\r\n".to_vec())).await;
    let config = test_config();
    let proxy = start_proxy(config.clone()).await;
    gopher(proxy.addr(Listener::Gopher), hole.url("0/1").as_bytes()).await;
    let mut slower = reload_config(&config, &bot("examplebot"));
    slower.politeness.default_delay = Duration::from_secs(30);
    slower.politeness.max_wait = Duration::from_secs(1);
    proxy.reload(slower).await.unwrap();
    // The next start would be 30 s after the last, past max_wait: slow down.
    let answer = gopher(proxy.addr(Listener::Gopher), hole.url("0/2").as_bytes()).await;
    assert!(
        answer.starts_with(b"3503"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// Listener addresses, the state directory and the like need a restart: a
/// reload names them and keeps the running values; the rest of it applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_only_settings_are_named_and_kept() {
    let (capsule, config, proxy) = serving("betabot").await;
    let mut moved = reload_config(&config, &bot("alphabot"));
    moved
        .listen
        .set(Listener::Gopher, Some("127.0.0.1:1".parse().unwrap()));
    moved.state_dir = state_dir();
    moved.limits.max_connections = 7;
    let done = proxy.reload(moved).await.unwrap();
    assert_eq!(
        done.kept,
        ["listen.gopher", "state_dir", "limits.max_connections"]
    );
    let ctx = proxy.context();
    assert_eq!(ctx.admission.config.listen, config.listen);
    assert_eq!(ctx.admission.config.state_dir, config.state_dir);
    // The bot changed all the same.
    assert!(gemini(proxy.addr(Listener::Gemini), &capsule.url("/a"))
        .await
        .0
        .starts_with("53"));
}

/// A reload that cannot be applied (here: a certificate file that is not
/// there) changes nothing: the old config goes on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_fails_changes_nothing() {
    let (capsule, config, proxy) = serving("betabot").await;
    let mut broken = reload_config(&config, &bot("alphabot"));
    broken.tls.cert_and_key = Some((
        "/nonexistent/cert.pem".into(),
        "/nonexistent/key.pem".into(),
    ));
    let err = proxy.reload(broken).await.unwrap_err();
    assert!(err.to_string().contains("/nonexistent/cert.pem"), "{err}");
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &capsule.url("/a"))
            .await
            .0,
        "20 text/gemini"
    );
    assert_eq!(proxy.context().admission.generation, 0);
}

/// An operator's renewed listener certificate is served after a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_listener_certificate_is_served_after_a_reload() {
    let dir = state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let write_pair = || {
        let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        std::fs::write(&cert, c.cert.pem()).unwrap();
        std::fs::write(&key, c.key_pair.serialize_pem()).unwrap();
    };
    write_pair();
    let mut config = test_config();
    config.tls.cert_and_key = Some((cert.clone(), key.clone()));
    let proxy = start_proxy(config.clone()).await;
    let first = served_fingerprint(proxy.addr(Listener::Gemini)).await;
    assert_eq!(first, proxy.cert_fingerprint);
    write_pair();
    let done = proxy.reload(config).await.unwrap();
    let second = served_fingerprint(proxy.addr(Listener::Gemini)).await;
    assert_ne!(first, second);
    assert_eq!(second, done.cert_fingerprint);
}

/// A TLS connection to the proxy's Gemini listener, trusting anything.
async fn tls_to(
    addr: std::net::SocketAddr,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(robots_proxy::tls::client_config().unwrap());
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

async fn served_fingerprint(addr: std::net::SocketAddr) -> String {
    let tls = tls_to(addr).await;
    let cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    robots_proxy::tls::fingerprint(&cert)
}

/// The built binary: SIGHUP with a good file reloads it (counted, logged);
/// with a broken file it keeps running on the old one (counted as failed,
/// the gauge at 0); SIGTERM still drains and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_running_process() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "page"),
    )
    .await;
    let dir = state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("robots-proxy.toml");
    let listen = "[listen]\ngemini = \"127.0.0.1:0\"\ngopher = \"127.0.0.1:0\"\nmetrics = \"127.0.0.1:0\"\n[limits]\nallow_private_upstreams = true\n";
    std::fs::write(&file, format!("{listen}{}", bot("alphabot"))).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["run", "--log-format", "json", "--config"])
        .arg(&file)
        .arg("--state-dir")
        .arg(&dir)
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    // The log, line by line, on a thread: the test waits for lines, not for time.
    let lines = log_lines(&mut child);
    let wait_for = |what: &str| -> String {
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no log line with {what:?}"));
            if line.contains(what) {
                return line;
            }
        }
    };
    let listening = wait_for("robots-proxy listening");
    let field = |line: &str, name: &str| -> std::net::SocketAddr {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v[name].as_str().unwrap().parse().unwrap()
    };
    let (gemini_addr, metrics_addr) = (field(&listening, "gemini"), field(&listening, "metrics"));
    assert!(gemini(gemini_addr, &capsule.url("/a"))
        .await
        .0
        .starts_with("53"));

    std::fs::write(&file, format!("{listen}{}", bot("betabot"))).unwrap();
    let kill = |sig: &str| {
        assert!(Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
            .success());
    };
    kill("-HUP");
    wait_for("config reloaded");
    assert_eq!(
        gemini(gemini_addr, &capsule.url("/a")).await.0,
        "20 text/gemini"
    );

    std::fs::write(&file, "[bot\nthis is not TOML").unwrap();
    kill("-HUP");
    wait_for("reload refused");
    assert!(
        gemini(gemini_addr, &capsule.url("/b"))
            .await
            .0
            .starts_with("53"),
        "betabot still"
    );
    let (_, m) = http_get(metrics_addr, "/metrics").await;
    let count = |r: &str| {
        sample(
            &m,
            &format!(r#"robots_proxy_config_reloads_total{{result="{r}"}}"#),
        )
    };
    assert_eq!(count("success"), Some(1.0), "{m}");
    assert_eq!(count("failure"), Some(1.0));
    assert_eq!(
        sample(&m, "robots_proxy_config_last_reload_successful"),
        Some(0.0)
    );

    kill("-TERM");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A reload that changes `[socks5] users` while connections keep their
/// bot: a connection authenticated before keeps the bot it was given (its
/// generation), on the HTTP listener and through SOCKS5, whatever it sends
/// after; a new connection with the removed user's password is refused,
/// and the new user's gets the new bot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_socks5_users_applies_to_new_connections_only() {
    use crate::common::web::{basic, web_config_with, WebClient, WebOrigin};
    let origin = WebOrigin::site(ROBOTS).await;
    let users = |user: &str, agent: &str| {
        let mut config = web_config_with(&format!(
            "[socks5]\nusers = [{{ name = \"{user}\", password = \"{user}-pass\" }}]\n\
             [bot]\nname = \"anon\"\nagent = \"anonbot\"\n\
             [[bots]]\nname = \"{agent}\"\nagent = \"{agent}\"\nsocks5_users = [\"{user}\"]\n\
             [ports]\nhttp = [{}]\n",
            origin.addr.port()
        ));
        config.state_dir = state_dir();
        config
    };
    let before = users("one", "alphabot");
    let proxy = start_proxy(before.clone()).await;
    let (http, socks) = (proxy.addr(Listener::Http), proxy.addr(Listener::Socks5));
    let one = basic("one", "one-pass");
    let two = basic("two", "two-pass");
    // Opened before: one on the HTTP listener, one through SOCKS5.
    let mut listener = WebClient::connect(http).await;
    let got = listener
        .get(&origin.url("/b"), &[("proxy-authorization", &one)])
        .await;
    assert_eq!(got.status, 200, "alphabot may fetch /b: {got:?}");
    let (stream, code) = socks_connect(
        socks,
        "127.0.0.1",
        origin.addr.port(),
        Some(("one", "one-pass")),
    )
    .await;
    assert_eq!(code, 0);
    let mut tunnelled = WebClient::over(stream).await;
    assert_eq!(tunnelled.get(&origin.url("/b"), &[]).await.status, 200);

    let mut after = users("two", "betabot");
    after.state_dir = before.state_dir.clone();
    proxy.reload(after).await.unwrap();

    // The connections opened before keep alphabot, whatever they send now.
    for (client, auth) in [
        (&mut listener, one.as_str()),
        (&mut tunnelled, two.as_str()),
    ] {
        let a = client
            .get(&origin.url("/a"), &[("proxy-authorization", auth)])
            .await;
        assert_eq!(a.status, 403, "still alphabot: {a:?}");
        let b = client
            .get(&origin.url("/b"), &[("proxy-authorization", auth)])
            .await;
        assert_eq!(b.status, 200, "still alphabot: {b:?}");
    }
    // New connections: the removed user is refused, the new one is betabot.
    let mut new = WebClient::connect(http).await;
    let refused = new
        .get(&origin.url("/b"), &[("proxy-authorization", &one)])
        .await;
    assert_eq!(refused.status, 407, "{refused:?}");
    let mut new = WebClient::connect(http).await;
    let b = new
        .get(&origin.url("/b"), &[("proxy-authorization", &two)])
        .await;
    assert_eq!(b.status, 403, "betabot: {b:?}");
    let (_, code) = socks_connect(
        socks,
        "127.0.0.1",
        origin.addr.port(),
        Some(("one", "one-pass")),
    )
    .await;
    assert_eq!(
        code, 0xFF,
        "the removed user's password no longer opens SOCKS5"
    );
    let (stream, code) = socks_connect(
        socks,
        "127.0.0.1",
        origin.addr.port(),
        Some(("two", "two-pass")),
    )
    .await;
    assert_eq!(code, 0);
    let mut fresh = WebClient::over(stream).await;
    assert_eq!(
        fresh.get(&origin.url("/a"), &[]).await.status,
        200,
        "betabot may fetch /a"
    );
}
