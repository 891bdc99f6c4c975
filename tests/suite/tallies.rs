//! Each request is counted once and logged once, whatever its protocol and
//! its way in, relayed or refused: every protocol's request ends through the
//! one exchange and its one tally (`proxy::Tally`). Read as an operator reads
//! them: `robots_proxy_requests_total` from `/metrics`, and the `request`
//! lines of the log (a JSON subscriber this test binary installs, each line
//! picked by the origin it names).

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;

use crate::common::small_web::{SmallServer, Speaks};
use crate::common::web::{raw_over, trusting, tunnel, LocalCa, WebClient, WebOrigin};
use crate::common::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// Where the log's JSON lines go.
#[derive(Clone)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The log of this test binary, as JSON lines (installed once).
pub(crate) fn log() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(log.clone());
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || sink.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        log
    })
}

/// `(protocol, listener, decision)` of each `request` line naming one of
/// `hosts`, counted.
fn logged(hosts: &[String]) -> BTreeMap<(String, String, String), usize> {
    let text = String::from_utf8_lossy(&log().lock().unwrap()).into_owned();
    let mut lines = BTreeMap::new();
    for line in text.lines() {
        let Ok(json) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let fields = &json["fields"];
        let host = fields["host"].as_str().unwrap_or_default();
        if fields["message"] != "request" || !hosts.iter().any(|h| h == host) {
            continue;
        }
        let field = |name: &str| fields[name].as_str().unwrap_or_default().to_string();
        let key = (field("protocol"), field("listener"), field("decision"));
        *lines.entry(key).or_insert(0) += 1;
    }
    lines
}

/// Waits (10 s at most: a line is written once its client has its answer)
/// until the log's `request` lines naming `hosts` are `want`, each once.
async fn assert_logged(hosts: &[String], want: &BTreeMap<(String, String, String), usize>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while logged(hosts) != *want && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(logged(hosts), *want);
}

/// The sum of `robots_proxy_requests_total` over its series.
fn requests_total(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("robots_proxy_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// A server of every protocol on 127.0.0.1, each with `ROBOTS`, each
/// serving `/page` (and `/private`, never asked for).
struct Sites {
    capsule: Origin,
    hole: GopherOrigin,
    spartan: SmallServer,
    nex: SmallServer,
    web: WebOrigin,
    secure: WebOrigin,
    ca: LocalCa,
}

impl Sites {
    async fn start() -> Sites {
        let files = [
            ("/robots.txt", ROBOTS),
            ("/page", "page"),
            ("/private", "no"),
        ];
        let ca = LocalCa::new();
        let secure = WebOrigin::start_tls(
            |path| match path {
                "/robots.txt" => (200, vec![], ROBOTS.into()),
                p => (200, vec![], format!("secure page {p}").into()),
            },
            ca.acceptor(&["127.0.0.1"]),
        )
        .await;
        Sites {
            capsule: capsule(
                text("20 text/plain", ROBOTS),
                text("20 text/gemini", "page"),
            )
            .await,
            hole: GopherOrigin::start(|selector| match selector {
                b"robots.txt" | b"/robots.txt" => Reply::Bytes(ROBOTS.as_bytes().to_vec()),
                _ => Reply::Bytes(b"page\r\n".to_vec()),
            })
            .await,
            spartan: SmallServer::start(Speaks::Spartan, machine(1), &files).await,
            nex: SmallServer::start(Speaks::Nex, machine(1), &files).await,
            web: WebOrigin::site(ROBOTS).await,
            secure,
            ca,
        }
    }

    /// Every origin's authority, as log lines name it.
    fn hosts(&self) -> Vec<String> {
        [
            self.capsule.addr,
            self.hole.addr,
            self.spartan.addr,
            self.nex.addr,
            self.web.addr,
            self.secure.addr,
        ]
        .iter()
        .map(SocketAddr::to_string)
        .collect()
    }

    /// A proxy with every listener on, its `[ports]` naming these servers'
    /// ports, trusting the HTTPS site's CA.
    async fn proxy(&self) -> Proxy {
        let mut config = web_config(&format!(
            "[ports]\nspartan = [{}]\nnex = [{}]\nhttp = [{}]\nhttps = [{}]\n",
            self.spartan.addr.port(),
            self.nex.addr.port(),
            self.web.addr.port(),
            self.secure.addr.port(),
        ));
        config.http.extra_roots = vec![self.ca.pem_file(&config.state_dir)];
        start_proxy(config).await
    }
}

fn web_config(toml: &str) -> robots_proxy::config::Config {
    crate::common::web::web_config_with(toml)
}

/// What one way in sent, relayed and refused: the `(protocol, listener)`
/// its log lines must name.
type Sent = Vec<(&'static str, &'static str)>;

/// One request line through a SOCKS5 connection to `port`; the answer.
async fn through_socks(socks: SocketAddr, port: u16, request: &[u8]) -> Vec<u8> {
    let (mut s, code) = socks_connect(socks, "127.0.0.1", port, None).await;
    assert_eq!(code, 0, "CONNECT refused");
    s.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer)).await;
    answer
}

/// An HTTP/1.1 request for `path` on a connection to `host`, closing it.
fn origin_form(path: &str, host: SocketAddr) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
}

/// Every protocol through the listeners that take it (the Gemini
/// listener's own URLs and its gateway's, the Gopher listener, SOCKS5 for
/// every protocol, the HTTP listener's absolute URLs and its tunnels), each
/// a page and a disallowed path.
async fn every_way(sites: &Sites, proxy: &Proxy) -> Sent {
    let gemini_at = proxy.addr(Listener::Gemini);
    let socks = proxy.addr(Listener::Socks5);
    let http = proxy.addr(Listener::Http);
    let proxy_ca = proxy.ca_cert_path.clone().expect("the proxy's CA");
    let (sp, np) = (sites.spartan.addr.port(), sites.nex.addr.port());
    let mut sent = Sent::new();
    for (path, status, page) in [("/page", "20", "200"), ("/private", "53", "403")] {
        let (header, _) = gemini(gemini_at, &sites.capsule.url(path)).await;
        assert!(header.starts_with(status), "{path}: {header}");
        for (url, protocol) in [
            (sites.hole.url(&format!("0{path}")), "gopher"),
            (format!("spartan://127.0.0.1:{sp}{path}"), "spartan"),
            (format!("nex://127.0.0.1:{np}{path}"), "nex"),
        ] {
            let (header, _) = gemini(gemini_at, &url).await;
            assert!(header.starts_with(status), "{url}: {header}");
            sent.push((protocol, "gemini"));
        }
        sent.push(("gemini", "gemini"));

        let line = sites.hole.url(&format!("0{path}"));
        let answer = gopher(proxy.addr(Listener::Gopher), line.as_bytes()).await;
        assert_eq!(answer.starts_with(b"3"), path == "/private", "{line}");
        sent.push(("gopher", "gopher"));

        let answer = gopher_via_socks(socks, sites.hole.addr, path.as_bytes()).await;
        assert_eq!(answer.starts_with(b"3"), path == "/private", "{path}");
        let line = format!("127.0.0.1 {path} 0\r\n");
        let answer = through_socks(socks, sp, line.as_bytes()).await;
        assert_eq!(answer.starts_with(b"2"), path == "/page", "{line}");
        let answer = through_socks(socks, np, format!("{path}\r\n").as_bytes()).await;
        assert!(!answer.is_empty(), "nex {path}");
        let (s, code) = socks_connect(socks, "127.0.0.1", sites.capsule.addr.port(), None).await;
        assert_eq!(code, 0, "CONNECT refused");
        let url = sites.capsule.url(path);
        let header = gemini_trusting_ca(proxy, s, ("localhost", &url), None).await;
        assert!(header.starts_with(status), "{path}: {header}");
        let (s, _) = socks_connect(socks, "127.0.0.1", sites.web.addr.port(), None).await;
        let answer = raw_over(s, None, &origin_form(path, sites.web.addr)).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {page}")), "{answer}");
        let (s, _) = socks_connect(socks, "127.0.0.1", sites.secure.addr.port(), None).await;
        let tls = Some((proxy_ca.as_path(), "127.0.0.1"));
        let answer = raw_over(s, tls, &origin_form(path, sites.secure.addr)).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {page}")), "{answer}");
        for protocol in ["gopher", "spartan", "nex", "gemini", "http", "https"] {
            sent.push((protocol, "socks5"));
        }

        let mut client = WebClient::connect(http).await;
        let answer = client.get(&sites.web.url(path), &[]).await;
        assert_eq!(answer.status.to_string(), page, "{path}");
        sent.push(("http", "http"));
        let tls = trusting(&proxy_ca, &[b"http/1.1"]);
        let secure = ("127.0.0.1", sites.secure.addr.port());
        let mut client = tunnel(http, secure, tls, "127.0.0.1").await.unwrap();
        let host = sites.secure.addr.to_string();
        let answer = client.send("GET", path, &[("host", &host)]).await.unwrap();
        assert_eq!(answer.status.to_string(), page, "{path}");
        sent.push(("https", "http"));
    }
    sent
}

/// What `sent` must have logged, each request once: a page allowed, a
/// `/private` disallowed.
fn expected(sent: &Sent) -> BTreeMap<(String, String, String), usize> {
    let mut lines = BTreeMap::new();
    for (i, (protocol, listener)) in sent.iter().enumerate() {
        // Each way sent its page first, its `/private` second: the halves.
        let decision = match i < sent.len() / 2 {
            true => "allowed",
            false => "disallowed",
        };
        let key = (protocol.to_string(), listener.to_string(), decision.into());
        *lines.entry(key).or_insert(0) += 1;
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_is_counted_once_and_logged_once_every_protocol_every_way_in() {
    log();
    let sites = Sites::start().await;
    let proxy = sites.proxy().await;
    let sent = every_way(&sites, &proxy).await;
    // And refused before admission: a request that names no URL, a client
    // of an HTTP request line on the Gopher listener (closed, not a request).
    let (header, _) = gemini(proxy.addr(Listener::Gemini), "not a url").await;
    assert!(header.starts_with("59"), "{header}");
    let made = sent.len() + 1;

    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(requests_total(&metrics), made as f64, "{metrics}");
    let want = expected(&sent);
    let hosts = sites.hosts();
    // A line is written once its client has its answer: waited for, bounded.
    assert_logged(&hosts, &want).await;
}

/// The transparent listener, for a protocol of each kind (a line, the web):
/// counted and logged once each, relayed and refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_transparent_request_is_counted_once_and_logged_once() {
    log();
    let sites = Sites::start().await;
    let config = web_config(&format!("[ports]\nhttp = [{}]\n", sites.web.addr.port()));
    let (proxy, kernel) = start_transparent(config, FakeKernel::default()).await;
    let listener = proxy.addr(Listener::Transparent);
    let mut sent = Sent::new();
    for (path, page) in [("/page", "200"), ("/private", "403")] {
        kernel.redirect_to(sites.hole.addr);
        let mut s = tokio::net::TcpStream::connect(listener).await.unwrap();
        s.write_all(format!("{path}\r\n").as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer).await;
        assert_eq!(answer.starts_with(b"3"), path == "/private", "{path}");
        sent.push(("gopher", "transparent"));
        kernel.redirect_to(sites.web.addr);
        let s = tokio::net::TcpStream::connect(listener).await.unwrap();
        let answer = raw_over(s, None, &origin_form(path, sites.web.addr)).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {page}")), "{answer}");
        sent.push(("http", "transparent"));
    }
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(requests_total(&metrics), sent.len() as f64, "{metrics}");
    let want = expected(&sent);
    let hosts = sites.hosts();
    assert_logged(&hosts, &want).await;
}

/// A request that ends otherwise than by its answer is still counted and
/// logged once: its client left while it waited for its turn; its server
/// answered junk after it was admitted (a Gemini header that does not parse:
/// `43`; a web answer that is no HTTP: `502`), refused by the exchange.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_ends_early_is_counted_once_and_logged_once() {
    use crate::common::web::{answer_bytes, RawOrigin};
    log();
    // Crawl-delay 1: robots.txt is fetched at t≈0, a page waits ≈1 s.
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nCrawl-delay: 1\n"),
        Reply::Bytes(b"not a header\r\n".to_vec()),
    )
    .await;
    let junk = RawOrigin::start(|path, _| match path {
        "/robots.txt" => answer_bytes(&[b"content-type: text/plain"], b"User-agent: *\n"),
        _ => b"not HTTP at all\r\n\r\n".to_vec(),
    })
    .await;
    let proxy = start_proxy(web_config("")).await;

    let tcp = tokio::net::TcpStream::connect(proxy.addr(Listener::Gemini))
        .await
        .unwrap();
    let connector = TlsConnector::from(robots_proxy::tls::client_config().unwrap());
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(format!("{}\r\n", capsule.url("/left")).as_bytes())
        .await
        .unwrap();
    let politeness = proxy.context().admission.politeness.clone();
    wait_until("/left is queued", || politeness.usage().1 == 1).await;
    tls.shutdown().await.unwrap();
    drop(tls);
    wait_until("the client's place given back", || {
        politeness.usage().1 == 0
    })
    .await;

    let (header, _) = gemini(proxy.addr(Listener::Gemini), &capsule.url("/junk")).await;
    assert!(header.starts_with("43"), "{header}");
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let answer = client.get(&junk.url("/junk"), &[]).await;
    assert_eq!(answer.status, 502, "{answer:?}");

    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(requests_total(&metrics), 3.0, "{metrics}");
    let outcome = |fate: &str| {
        sample(
            &metrics,
            &format!(
                r#"robots_proxy_request_outcomes_total{{bot="default",outcome="{fate}",protocol="gemini"}}"#
            ),
        )
    };
    assert_eq!(outcome("client-left"), Some(1.0), "{metrics}");
    assert_eq!(outcome("upstream"), Some(1.0), "{metrics}");
    let hosts = [capsule.addr.to_string(), junk.addr.to_string()];
    let want: BTreeMap<_, _> = [
        (("gemini".into(), "gemini".into(), "error".into()), 2),
        (("http".into(), "http".into(), "error".into()), 1),
    ]
    .into_iter()
    .collect();
    assert_logged(&hosts, &want).await;
}
