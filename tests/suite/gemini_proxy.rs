//! The Gemini proxy end to end, in-process: a crawler's TLS connection to the
//! proxy, a fake Gemini origin on 127.0.0.1:0, real sockets and real TLS.

use robots_proxy::listener::Listener;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

const ROBOTS: &str = "User-agent: examplebot\nDisallow: /private\nAllow: /private/open\n\nUser-agent: *\nDisallow: /\n";

fn welcome_capsule(url: &str) -> Reply {
    let path = url
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default();
    match path.as_str() {
        "/robots.txt" => text("20 text/plain", ROBOTS),
        "/" | "/index.gmi" => text("20 text/gemini", "# Welcome\n=> /private/x secret\n"),
        _ => text("51 Not found", ""),
    }
}

/// Relays text and a multi-megabyte binary byte for byte (header included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relays_text_and_binary_byte_for_byte() {
    let blob: Arc<Vec<u8>> = Arc::new(
        (0..5 * 1024 * 1024u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect(),
    );
    let served = blob.clone();
    let origin = Origin::start(move |url| {
        if url.ends_with("/robots.txt") {
            text("20 text/plain", "User-agent: *\nDisallow: /nope\n")
        } else if url.ends_with("/blob.bin") {
            Reply::Bytes([b"20 application/octet-stream\r\n".as_slice(), &served].concat())
        } else {
            text("20 text/gemini; lang=en", "# Hello\r\nUnicode: ☃\n")
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;

    let answer = gemini_raw(
        proxy.addr(Listener::Gemini),
        format!("{}\r\n", origin.url("/hello.gmi")).as_bytes(),
    )
    .await;
    assert_eq!(
        answer,
        "20 text/gemini; lang=en\r\n# Hello\r\nUnicode: ☃\n".as_bytes()
    );

    let (header, body) = gemini(proxy.addr(Listener::Gemini), &origin.url("/blob.bin")).await;
    assert_eq!(header, "20 application/octet-stream");
    assert_eq!(body.len(), blob.len());
    assert!(body == *blob, "binary body differs");
}

/// Disallowed paths get `53` naming robots.txt and the rule; the origin never sees them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disallowed_paths_are_refused_before_the_origin() {
    let origin = Origin::start(welcome_capsule).await;
    let proxy = start_proxy(test_config()).await;

    let (header, body) = gemini(
        proxy.addr(Listener::Gemini),
        &origin.url("/private/diary.gmi"),
    )
    .await;
    assert_eq!(
        header,
        format!(
            "53 robots.txt of 127.0.0.1:{} disallows this for examplebot: Disallow: /private (line 2)",
            origin.addr.port()
        )
    );
    assert!(body.is_empty());
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/private/open/x")).await;
    assert!(header.starts_with("51"), "{header}");
    let (header, body) = gemini(proxy.addr(Listener::Gemini), &origin.url("/")).await;
    assert_eq!(header, "20 text/gemini");
    assert_eq!(body, b"# Welcome\n=> /private/x secret\n");

    assert_eq!(origin.count("/private/diary.gmi"), 0);
    assert_eq!(origin.count("/private/open/x"), 1);
    assert_eq!(origin.count("/robots.txt"), 1);
}

/// Spellings that try to dodge a rule decide like the canonical path, and the
/// canonical URL is what the origin receives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dodging_spellings_are_refused() {
    let origin = Origin::start(welcome_capsule).await;
    let proxy = start_proxy(test_config()).await;
    let port = origin.addr.port();
    for url in [
        format!("gemini://127.0.0.1:{port}/%70rivate/x"),
        format!("gemini://127.0.0.1:{port}/a/../private/x"),
        format!("gemini://127.0.0.1:{port}/a/%2e%2e/private/x"),
        format!("gemini://127.0.0.1:{port}//private/x"),
        format!("gemini://127.0.0.1:{port}/./private"),
        format!("gemini://127.0.0.1:{port}/%2Fprivate/x"),
        format!("gemini://127.0.0.1:{port}/a/..%2fprivate/x"),
    ] {
        let (header, _) = gemini(proxy.addr(Listener::Gemini), &url).await;
        assert!(header.starts_with("53 robots.txt"), "{url}: {header}");
    }
    let (header, _) = gemini(
        proxy.addr(Listener::Gemini),
        &format!("GEMINI://127.0.0.1:{port}/x/../%70rivate/open/%7e"),
    )
    .await;
    assert!(header.starts_with("51"), "{header}");
    assert!(
        origin
            .all()
            .contains(&format!("gemini://127.0.0.1:{port}/private/open/~")),
        "{:?}",
        origin.all()
    );
    assert!(origin
        .all()
        .iter()
        .all(|r| !r.contains("/private/x") && !r.contains("%70")));
}

/// Fifty concurrent requests to a cold host cause exactly one robots.txt fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_robots_fetch_for_fifty_concurrent_requests() {
    let origin = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            // Slow, so that all fifty arrive while it is in flight.
            Reply::Delayed(
                Duration::from_millis(300),
                b"20 text/plain\r\nUser-agent: *\nDisallow: /p\n".to_vec(),
            )
        } else {
            text("20 text/gemini", "ok")
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let addr = proxy.addr(Listener::Gemini);
    let urls = (0..50).map(|i| origin.url(if i % 2 == 0 { "/a" } else { "/p/b" }));
    let mut refused = 0;
    for header in gemini_at_once(addr, urls).await {
        refused += usize::from(header.starts_with("53"));
    }
    assert_eq!(refused, 25);
    assert_eq!(origin.count("/robots.txt"), 1);
    assert_eq!(origin.count("/a"), 25);
}

/// `51` (and other 5x, 1x, 6x) for robots.txt: no robots.txt, everything allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_robots_txt_allows_everything() {
    for robots_answer in [
        "51 Not found",
        "59 Bad request",
        "10 Query?",
        "60 Certificate required",
        "20 image/png",
    ] {
        let origin = capsule(text(robots_answer, ""), text("20 text/gemini", "content")).await;
        let proxy = start_proxy(test_config()).await;
        let (header, body) = gemini(proxy.addr(Listener::Gemini), &origin.url("/anything")).await;
        assert_eq!(
            (header.as_str(), body.as_slice()),
            ("20 text/gemini", &b"content"[..]),
            "{robots_answer}"
        );
    }
}

/// `40`, `44` and a silent server: robots.txt unreachable, so requests are refused
/// with `43` (fail closed) and the origin sees nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_robots_txt_refuses() {
    for silent in [false, true] {
        for status in ["40 Temporary failure", "44 30"] {
            if silent && status.starts_with("44") {
                continue;
            }
            let origin = Origin::start(move |url| {
                if url.ends_with("/robots.txt") {
                    if silent {
                        Reply::Silent
                    } else {
                        text(status, "")
                    }
                } else {
                    text("20 text/gemini", "content")
                }
            })
            .await;
            let mut config = test_config();
            config.robots.fetch_timeout = Duration::from_millis(400);
            let proxy = start_proxy(config).await;
            let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/page")).await;
            assert!(
                header.starts_with("43 robots.txt of 127.0.0.1:"),
                "silent={silent} {status}: {header}"
            );
            if status.starts_with("44") {
                assert!(header.ends_with("trying again in 30 s"), "{header}");
            }
            assert_eq!(origin.count("/page"), 0);
        }
    }
}

/// With `on_unreachable = "allow"` the request goes through instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_unreachable_allow_fails_open() {
    let origin = capsule(text("40 Busy", ""), text("20 text/gemini", "content")).await;
    let mut config = test_config();
    config.robots.on_unreachable = robots_proxy::config::OnUnreachable::Allow;
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/page")).await;
    assert_eq!(header, "20 text/gemini");
}

/// A redirected robots.txt is followed; a redirect loop ends (no robots.txt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_redirects_are_followed_and_loops_end() {
    let origin = Origin::start(|url| {
        if url.ends_with("/policy/robots.txt") {
            text("30 robots2.txt", "")
        } else if url.ends_with("/robots.txt") {
            text("31 /policy/robots.txt", "")
        } else if url.ends_with("/policy/robots2.txt") {
            text("20 text/plain", "User-agent: *\nDisallow: /hidden\n")
        } else {
            text("20 text/gemini", "content")
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/hidden/x")).await;
    assert!(header.starts_with("53"), "{header}");
    assert_eq!(origin.count("/policy/robots2.txt"), 1);

    let looping = Origin::start(|url| {
        if url.contains("robots") {
            let next = if url.ends_with("/robots.txt") {
                "/robots-b.txt"
            } else {
                "/robots.txt"
            };
            text(&format!("30 {next}"), "")
        } else {
            text("20 text/gemini", "content")
        }
    })
    .await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &looping.url("/page")).await;
    assert_eq!(header, "20 text/gemini");
    assert!(
        looping.count("/robots.txt") <= 2 && looping.count("/robots-b.txt") <= 1,
        "{:?}",
        looping.all()
    );
}

/// Malformed requests and other schemes get `59`; nothing reaches an origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_answered() {
    let origin = Origin::start(welcome_capsule).await;
    let proxy = start_proxy(test_config()).await;
    let port = origin.addr.port();
    let too_long = format!("gemini://127.0.0.1:{port}/{}\r\n", "a".repeat(1100));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (too_long.into_bytes(), "59 request longer than 1024 bytes"),
        (b"/relative/path\r\n".to_vec(), "59 "),
        (
            format!("gemini://user@127.0.0.1:{port}/\r\n").into_bytes(),
            "59 Gemini URLs carry no userinfo",
        ),
        (
            format!("gemini://127.0.0.1:{port}/#frag\r\n").into_bytes(),
            "59 Gemini requests carry no fragment",
        ),
        (
            b"gemini://127.0.0.1/\xff\r\n".to_vec(),
            "59 the request is not UTF-8",
        ),
        (b"gemini://a\x00b/\r\n".to_vec(), "59 CR, LF or NUL"),
        (b"gemini://bad host/\r\n".to_vec(), "59 invalid host"),
        (b"gemini://127.0.0.1:99999/\r\n".to_vec(), "59 invalid port"),
        (
            b"https://example.org/\r\n".to_vec(),
            "59 this listener fetches the small web's URLs (gemini, titan, gopher, spartan, nex), not https://",
        ),
        (
            b"ftp://example.org/\r\n".to_vec(),
            "59 this proxy fetches gemini://, titan://, gopher://, spartan:// and nex:// URLs, not ftp://",
        ),
    ];
    for (request, want) in cases {
        let (header, _) = split(&gemini_raw(proxy.addr(Listener::Gemini), &request).await);
        assert!(
            header.starts_with(want),
            "{:?}: {header}",
            String::from_utf8_lossy(&request)
        );
    }
    assert!(origin.all().is_empty(), "{:?}", origin.all());
}

/// Upstream down: `43` with the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_down_is_43() {
    // Nothing listens there.
    let (_held, gone) = gone_server();
    let port = gone.port();
    let proxy = start_proxy(test_config()).await;
    let (header, _) = gemini(
        proxy.addr(Listener::Gemini),
        &format!("gemini://127.0.0.1:{port}/"),
    )
    .await;
    assert!(
        header.starts_with("43 robots.txt of 127.0.0.1:"),
        "{header}"
    );
    assert!(header.contains("cannot connect"), "{header}");

    // robots.txt fetched, then the page's answer is not Gemini.
    let broken = capsule(
        text("51 none", ""),
        Reply::Bytes(b"HTTP/1.1 200 OK\r\n\r\n".to_vec()),
    )
    .await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &broken.url("/x")).await;
    assert!(header.starts_with("43 upstream 127.0.0.1:"), "{header}");
}

/// Without --allow-private-upstreams, loopback upstreams are refused with `53`;
/// neither robots.txt nor the page is requested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_upstreams_are_refused_by_default() {
    let origin = Origin::start(welcome_capsule).await;
    let mut config = test_config();
    config.limits.allow_private_upstreams = false;
    let proxy = start_proxy(config).await;
    for url in [
        origin.url("/"),
        format!("gemini://localhost:{}/", origin.addr.port()),
    ] {
        let (header, _) = gemini(proxy.addr(Listener::Gemini), &url).await;
        assert!(header.starts_with("53 "), "{header}");
        assert!(header.contains("does not connect there"), "{header}");
    }
    assert!(origin.all().is_empty());
}

/// A request that names the proxy itself is refused rather than looping.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_does_not_proxy_to_itself() {
    let proxy = start_proxy(test_config()).await;
    let url = format!(
        "gemini://127.0.0.1:{}/",
        proxy.addr(Listener::Gemini).port()
    );
    let (header, _) = tokio::time::timeout(
        Duration::from_secs(5),
        gemini(proxy.addr(Listener::Gemini), &url),
    )
    .await
    .expect("answered");
    assert!(header.starts_with("53 "), "{header}");
}

/// Shutdown: no new connections, but a request in flight finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_requests_in_flight() {
    let origin = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            text("51 none", "")
        } else {
            Reply::Delayed(
                Duration::from_millis(500),
                b"20 text/gemini\r\nslow answer".to_vec(),
            )
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let addr = proxy.addr(Listener::Gemini);
    let url = origin.url("/slow");
    let in_flight = tokio::spawn(async move { gemini(addr, &url).await });
    // Wait until the origin has the request: the proxy is mid-relay.
    while origin.count("/slow") == 0 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.shutdown();
    assert!(proxy.drained().await, "drained within the grace period");
    let (header, body) = in_flight.await.unwrap();
    assert_eq!(
        (header.as_str(), body.as_slice()),
        ("20 text/gemini", &b"slow answer"[..])
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

/// The generated certificate is kept: a restart shows clients the same one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_survives_a_restart() {
    let config = test_config();
    let first = start_proxy(config.clone()).await;
    let fingerprint = first.cert_fingerprint.clone();
    first.shutdown();
    first.drained().await;
    let second = start_proxy(config).await;
    assert_eq!(second.cert_fingerprint, fingerprint);
}

/// TLS 1.2 clients are served as well as TLS 1.3 ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls12_clients_are_served() {
    use rustls::pki_types::ServerName;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = Origin::start(welcome_capsule).await;
    let proxy = start_proxy(test_config()).await;
    let config = robots_proxy::tls::client_config_for(&[&rustls::version::TLS12]).unwrap();
    let tcp = tokio::net::TcpStream::connect(proxy.addr(Listener::Gemini))
        .await
        .unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    tls.write_all(format!("{}\r\n", origin.url("/")).as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    assert!(
        answer.starts_with(b"20 text/gemini\r\n"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// A client that connects and says nothing is dropped at the request deadline,
/// and does not delay anyone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_clients_are_dropped_and_do_not_block_others() {
    use tokio::io::AsyncReadExt;
    let origin = Origin::start(welcome_capsule).await;
    let mut config = test_config();
    config.limits.request_timeout = std::time::Duration::from_millis(300);
    let proxy = start_proxy(config).await;
    let mut silent = tokio::net::TcpStream::connect(proxy.addr(Listener::Gemini))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/")).await;
    assert_eq!(header, "20 text/gemini");
    let mut buf = [0u8; 16];
    // The proxy closes the silent connection (EOF or reset) once the deadline passes.
    let closed = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    assert!(started.elapsed() >= Duration::from_millis(250));
}

/// At `max_connections`, further clients wait until a slot frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap_holds_further_clients() {
    let origin = capsule(
        text("51 none", ""),
        Reply::Delayed(Duration::from_millis(300), b"20 text/gemini\r\nok".to_vec()),
    )
    .await;
    let mut config = test_config();
    config.limits.max_connections = 1;
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let started = std::time::Instant::now();
    let (a, b) = (origin.url("/a"), origin.url("/b"));
    let first = tokio::spawn(async move { gemini(addr, &a).await.0 });
    let second = tokio::spawn(async move { gemini(addr, &b).await.0 });
    assert_eq!(first.await.unwrap(), "20 text/gemini");
    assert_eq!(second.await.unwrap(), "20 text/gemini");
    // One at a time: the two 300 ms answers could not overlap.
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );
}

/// Trust on first use: a capsule that shows another certificate on the same host
/// and port than it first did is refused with `43`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_upstream_certificate_is_refused() {
    let first = capsule(text("51 none", ""), text("20 text/gemini", "first")).await;
    let addr = first.addr;
    let proxy = start_proxy(test_config()).await;
    let url = first.url("/");
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &url).await.0,
        "20 text/gemini"
    );
    first.stop().await;
    // Same address, new key and certificate.
    let _second = Origin::start_on(addr, |_| text("20 text/gemini", "second")).await;
    let (header, body) = gemini(proxy.addr(Listener::Gemini), &url).await;
    assert!(header.starts_with("43 upstream: 127.0.0.1:"), "{header}");
    assert!(header.contains("trust on first use"), "{header}");
    assert!(body.is_empty());
}
