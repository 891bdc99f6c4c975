//! In-process fixtures: the proxy, fake Gemini origins and a Gemini client, all
//! on 127.0.0.1 port 0.
#![allow(dead_code)]

pub mod small_web;
pub mod web;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use robots_proxy::cli::RunArgs;
use robots_proxy::config::{Config, RawConfig};
use robots_proxy::server::Proxy;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A fresh state directory for one proxy.
pub fn state_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "state-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    // Process ids come round again: a directory an earlier run left under
    // this name (its FIFOs, symlinks, keys) is not this proxy's.
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Asks the proxy's Gemini listener at `addr` for every URL at once, each on
/// its own connection; the answers' headers, in the order of the URLs.
pub async fn gemini_at_once(
    addr: SocketAddr,
    urls: impl IntoIterator<Item = String>,
) -> Vec<String> {
    let tasks: Vec<_> = urls
        .into_iter()
        .map(|url| tokio::spawn(async move { gemini(addr, &url).await.0 }))
        .collect();
    let mut headers = Vec::new();
    for t in tasks {
        headers.push(t.await.unwrap());
    }
    headers
}

/// How much one connection's latency (connect, TLS, a task scheduled late)
/// may differ from another's on a loaded test machine: arrival gaps at an
/// origin are the gate's spacing give or take this.
pub const JITTER: f64 = 0.1;

/// Asserts that arrivals `gaps` apart were started `delay` seconds apart:
/// each gap, and each run of consecutive gaps, is at least its share of the
/// spacing less one connection's [`JITTER`]. (One late arrival shortens
/// the gap after it by as much as it lengthened the one before, so a single
/// gap alone cannot be held to the full delay; two starts let through
/// together still fail, at any position.)
#[track_caller]
pub fn assert_spaced(gaps: &[f64], delay: f64) {
    for i in 0..gaps.len() {
        let mut span = 0.0;
        for (k, gap) in gaps[i..].iter().enumerate() {
            span += gap;
            let least = (k + 1) as f64 * delay - JITTER;
            assert!(
                span >= least,
                "gaps {i}..={} span {span} s, under {least} s: {gaps:?}",
                i + k
            );
        }
    }
}

/// The configuration tests start from: loopback upstreams allowed, short deadlines.
pub fn test_config() -> Config {
    let args = RunArgs {
        agent: Some("examplebot".into()),
        ..test_args()
    };
    tuned(RawConfig::default().resolve(&args).unwrap())
}

/// [`test_config`] with a config file's text instead of `--agent`.
pub fn test_config_with(toml: &str) -> Config {
    let raw = RawConfig::parse(toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    tuned(
        raw.resolve(&test_args())
            .unwrap_or_else(|e| panic!("{e}\n{toml}")),
    )
}

/// Every listener on 127.0.0.1 port 0, loopback upstreams allowed, a fresh state directory.
fn test_args() -> RunArgs {
    RunArgs {
        gemini_listen: Some("127.0.0.1:0".into()),
        gopher_listen: Some("127.0.0.1:0".into()),
        metrics_listen: Some("127.0.0.1:0".into()),
        socks5_listen: Some("127.0.0.1:0".into()),
        allow_private_upstreams: true,
        state_dir: Some(state_dir()),
        ..RunArgs::default()
    }
}

fn tuned(mut config: Config) -> Config {
    config.robots.fetch_timeout = Duration::from_millis(1500);
    config.limits.request_timeout = Duration::from_millis(1500);
    config.limits.connect_timeout = Duration::from_millis(1500);
    config.limits.idle_timeout = Duration::from_millis(1500);
    config.limits.shutdown_grace = Duration::from_secs(5);
    // No spacing unless a test asks for it (tests/suite/politeness.rs does).
    config.politeness.default_delay = Duration::ZERO;
    config.politeness.max_wait = Duration::from_secs(10);
    config.politeness.web_max_wait = Duration::from_secs(10);
    // A turn past the bound is answered at once, not at the bound: these
    // tests run on the real clock. The horizon's own tests set it (and run
    // on a paused clock, or with a bound of a second or two).
    config.politeness.horizon = Duration::ZERO;
    config
}

pub async fn start_proxy(config: Config) -> Proxy {
    Proxy::start(config).await.unwrap()
}

/// What a fake origin does with one request.
#[derive(Clone)]
pub enum Reply {
    /// Send these bytes, then close.
    Bytes(Vec<u8>),
    /// Send these bytes after a pause, then close.
    Delayed(Duration, Vec<u8>),
    /// Say nothing and keep the connection open.
    Silent,
    /// Send these bytes, then keep the connection open (an answer whose
    /// rest is slow to come).
    Stalled(Vec<u8>),
    /// Send these bytes, then reset the TCP connection (an upstream that fails
    /// mid-answer: no TLS close_notify, no FIN).
    Reset(Vec<u8>),
}

/// Writes `reply` to `io`, the one reply writer of both fake origins. Returns
/// true when the connection must be reset rather than closed.
async fn write_reply<S: tokio::io::AsyncWrite + Unpin>(io: &mut S, reply: Reply) -> bool {
    match reply {
        Reply::Bytes(b) => {
            let _ = io.write_all(&b).await;
        }
        Reply::Delayed(d, b) => {
            tokio::time::sleep(d).await;
            let _ = io.write_all(&b).await;
        }
        Reply::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
        Reply::Stalled(b) => {
            let _ = io.write_all(&b).await;
            let _ = io.flush().await;
            tokio::time::sleep(Duration::from_secs(30)).await
        }
        Reply::Reset(b) => {
            let _ = io.write_all(&b).await;
            let _ = io.flush().await;
            // Let the bytes leave before the reset overtakes them.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return true;
        }
    }
    false
}

pub fn text(status_and_meta: &str, body: &str) -> Reply {
    Reply::Bytes(format!("{status_and_meta}\r\n{body}").into_bytes())
}

type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// A Titan upload as a test capsule received it: the URL line and the data.
pub type Upload = (String, Vec<u8>);

/// A `titan://` URL's `;size=N`: the bytes of data that follow its line.
fn titan_size(url: &str) -> Option<usize> {
    url.strip_prefix("titan://")?
        .split(';')
        .find_map(|p| p.strip_prefix("size="))?
        .parse()
        .ok()
}

/// Polls `condition` until it holds; panics after 10 s (a bound, not a timing).
pub async fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(
            std::time::Instant::now() < deadline,
            "never happened: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A server that is gone: a port on 127.0.0.1 held bound but never
/// listening, so a connection to it is refused, and nothing else (another
/// test's server, the proxy's own listeners) takes it while the socket lives.
pub fn gone_server() -> (tokio::net::TcpSocket, SocketAddr) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// Port 0 on `127.0.0.n`: another machine, as far as the proxy can tell
/// (a politeness gate is per address, whatever the port: `127.0.0.1` is one
/// machine however many servers listen on it).
pub fn machine(n: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, n], 0))
}

/// Spellings of `/private/x.txt` that a server reading paths as Spartan and
/// Nex servers do (escapes decoded, dot segments and doubled slashes
/// resolved) would serve as that file: each must meet `Disallow: /private`.
pub const PRIVATE_SPELLINGS: &[&str] = &[
    "/private/x.txt",
    "/%70rivate/x.txt",
    "//private/x.txt",
    "/./private/x.txt",
    "/public/../private/x.txt",
    "/PRIVATE/../private/x.txt",
    "/%2Fprivate/x.txt",
    "/%2fprivate%2Fx.txt",
    "/public/..%2Fprivate/x.txt",
];

/// A Gemini origin whose `/robots.txt` answers `robots` and every other URL `page`.
pub async fn capsule(robots: Reply, page: Reply) -> Origin {
    Origin::start(move |url| match url.ends_with("/robots.txt") {
        true => robots.clone(),
        false => page.clone(),
    })
    .await
}

/// A Gemini origin at `addr` (another machine: `machine(n)`) with an empty
/// robots.txt, every other URL a page.
pub async fn open_capsule_on(addr: SocketAddr) -> Origin {
    let (robots, page) = (text("20 text/plain", ""), text("20 text/gemini", "page"));
    Origin::start_on(addr, move |url| match url.ends_with("/robots.txt") {
        true => robots.clone(),
        false => page.clone(),
    })
    .await
}

/// A Gopher origin whose `robots.txt` answers `robots` and every other selector `page`.
pub async fn hole(robots: Reply, page: Reply) -> GopherOrigin {
    hole_on(machine(1), robots, page).await
}

/// [`hole`] on `addr`: another machine at `127.0.0.n`.
pub async fn hole_on(addr: SocketAddr, robots: Reply, page: Reply) -> GopherOrigin {
    GopherOrigin::start_on(addr, move |sel| match sel == b"robots.txt" {
        true => robots.clone(),
        false => page.clone(),
    })
    .await
}

/// A Gemini server on 127.0.0.1:0 (or another loopback address) that records every request line.
pub struct Origin {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<String>>>,
    /// When each request line arrived, with the URL.
    pub arrivals: Arc<Mutex<Vec<(std::time::Instant, String)>>>,
    /// Titan uploads: the URL and the data that followed it (`;size=N` bytes).
    pub uploads: Arc<Mutex<Vec<Upload>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Origin {
    pub async fn start(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Origin {
        Origin::start_on("127.0.0.1:0".parse().unwrap(), handler).await
    }

    /// [`start`](Self::start) on a given address, with a certificate of its own.
    pub async fn start_on(
        addr: SocketAddr,
        handler: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> Origin {
        let handler: Handler = Arc::new(handler);
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let chain = vec![CertificateDer::from(cert.cert.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(robots_proxy::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let arrived = arrivals.clone();
        let uploads = Arc::new(Mutex::new(Vec::new()));
        let uploaded = uploads.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (acceptor, handler, recorded, arrived, uploaded) = (
                    acceptor.clone(),
                    handler.clone(),
                    recorded.clone(),
                    arrived.clone(),
                    uploaded.clone(),
                );
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut tls = BufReader::new(tls);
                    let Ok(line) = robots_proxy::gemini::wire::read_line(
                        &mut tls,
                        1024,
                        Duration::from_secs(5),
                    )
                    .await
                    else {
                        return;
                    };
                    let url = String::from_utf8_lossy(&line).into_owned();
                    arrived
                        .lock()
                        .unwrap()
                        .push((std::time::Instant::now(), url.clone()));
                    recorded.lock().unwrap().push(url.clone());
                    if let Some(size) = titan_size(&url) {
                        let mut data = vec![0u8; size.min(1 << 20)];
                        let read = tls.read_exact(&mut data);
                        if !matches!(
                            tokio::time::timeout(Duration::from_secs(5), read).await,
                            Ok(Ok(_))
                        ) {
                            return;
                        }
                        uploaded.lock().unwrap().push((url.clone(), data));
                    }
                    if write_reply(tls.get_mut(), handler(&url)).await {
                        let _ = tls.get_ref().get_ref().0.set_zero_linger();
                        return;
                    }
                    let _ = tls.get_mut().shutdown().await;
                });
            }
        });
        Origin {
            addr,
            requests,
            arrivals,
            uploads,
            task,
        }
    }

    /// Stops accepting and frees the port.
    pub async fn stop(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// `gemini://ADDR:PORT` + path (`127.0.0.1` unless started elsewhere).
    pub fn url(&self, path: &str) -> String {
        format!("gemini://{}{path}", self.addr)
    }

    /// Requests for this path (robots.txt included).
    pub fn count(&self, path: &str) -> usize {
        let suffix = format!(":{}{path}", self.addr.port());
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.ends_with(&suffix))
            .count()
    }

    pub fn all(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }

    /// Gaps between consecutive request arrivals, in seconds.
    pub fn gaps(&self) -> Vec<f64> {
        let a = self.arrivals.lock().unwrap();
        a.windows(2)
            .map(|w| (w[1].0 - w[0].0).as_secs_f64())
            .collect()
    }
}

/// A client certificate (self-signed, as Gemini clients make them) and its
/// fingerprint as a bot's `client_certs` lists it.
pub struct ClientCert {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub fingerprint: String,
}

pub fn client_cert(name: &str) -> ClientCert {
    let cert = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    let der = CertificateDer::from(cert.cert.der().to_vec());
    ClientCert {
        fingerprint: robots_proxy::bots::Fingerprint::of(der.as_ref()).to_string(),
        chain: vec![der],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pair.serialize_der())),
    }
}

/// A TCP connection to `to` from the loopback address `from` (127.0.0.0/8 is
/// all this machine's, so tests can be several clients).
pub async fn tcp_from(from: &str, to: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::new(from.parse().unwrap(), 0))
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// A Gemini request through the proxy from the loopback address `from`, with
/// a client certificate or none; the answer's header line and body.
pub async fn gemini_as(
    proxy: SocketAddr,
    url: &str,
    from: &str,
    cert: Option<&ClientCert>,
) -> (String, Vec<u8>) {
    let tcp = tcp_from(from, proxy).await;
    let provider = robots_proxy::tls::provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(robots_proxy::tls::GeminiVerifier::new(
            provider,
        )));
    let config = match cert {
        Some(c) => builder
            .with_client_auth_cert(c.chain.clone(), c.key.clone_key())
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    let (answer, _) = exchange_tls(tcp, Arc::new(config), format!("{url}\r\n").as_bytes()).await;
    split(&answer)
}

/// TLS to the proxy (as `localhost`) on `tcp`, `request` sent, the whole answer
/// read; and how the reading ended (`UnexpectedEof`: no TLS `close_notify`).
pub async fn exchange_tls(
    tcp: TcpStream,
    config: Arc<rustls::ClientConfig>,
    request: &[u8],
) -> (Vec<u8>, Result<(), std::io::ErrorKind>) {
    let mut tls = TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    tls.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let end = tls.read_to_end(&mut answer).await.map(|_| ());
    (answer, end.map_err(|e| e.kind()))
}

/// One line to the proxy's Gopher listener from the loopback address `from`.
pub async fn gopher_from(proxy: SocketAddr, line: &[u8], from: &str) -> Vec<u8> {
    let mut stream = tcp_from(from, proxy).await;
    let _ = stream.write_all(&[line, b"\r\n"].concat()).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer
}

/// Sends `request` (bytes, CRLF included by the caller) over TLS and reads the
/// whole answer.
pub async fn gemini_raw(proxy: SocketAddr, request: &[u8]) -> Vec<u8> {
    let tcp = TcpStream::connect(proxy).await.unwrap();
    let config = robots_proxy::tls::client_config().unwrap();
    match exchange_tls(tcp, config, request).await {
        (answer, Ok(()) | Err(std::io::ErrorKind::UnexpectedEof)) => answer,
        (_, Err(e)) => panic!("reading the answer: {e}"),
    }
}

/// A proxy request for `url`; the answer's header line and body.
pub async fn gemini(proxy: SocketAddr, url: &str) -> (String, Vec<u8>) {
    let answer = gemini_raw(proxy, format!("{url}\r\n").as_bytes()).await;
    split(&answer)
}

pub fn split(answer: &[u8]) -> (String, Vec<u8>) {
    let end = answer
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(answer.len());
    let header = String::from_utf8_lossy(&answer[..end]).into_owned();
    let body = answer.get(end + 2..).unwrap_or_default().to_vec();
    (header, body)
}

/// A Gopher server on 127.0.0.1:0 (or another loopback address) that records every selector line.
pub struct GopherOrigin {
    pub addr: SocketAddr,
    pub selectors: Arc<Mutex<Vec<Vec<u8>>>>,
    /// When each selector line arrived.
    pub arrivals: Arc<Mutex<Vec<std::time::Instant>>>,
}

impl GopherOrigin {
    pub async fn start(handler: impl Fn(&[u8]) -> Reply + Send + Sync + 'static) -> GopherOrigin {
        GopherOrigin::start_on(machine(1), handler).await
    }

    /// [`start`](Self::start) on a given address.
    pub async fn start_on(
        addr: SocketAddr,
        handler: impl Fn(&[u8]) -> Reply + Send + Sync + 'static,
    ) -> GopherOrigin {
        let handler = Arc::new(handler);
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let selectors = Arc::new(Mutex::new(Vec::new()));
        let recorded = selectors.clone();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let arrived = arrivals.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (handler, recorded, arrived) =
                    (handler.clone(), recorded.clone(), arrived.clone());
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    let Ok(line) = robots_proxy::protocol::read_line(
                        &mut stream,
                        4096,
                        Duration::from_secs(5),
                    )
                    .await
                    else {
                        return;
                    };
                    arrived.lock().unwrap().push(std::time::Instant::now());
                    recorded.lock().unwrap().push(line.clone());
                    if write_reply(stream.get_mut(), handler(&line)).await {
                        let _ = stream.get_ref().set_zero_linger();
                        return;
                    }
                    let _ = stream.get_mut().shutdown().await;
                });
            }
        });
        GopherOrigin {
            addr,
            selectors,
            arrivals,
        }
    }

    /// Gaps between consecutive selector arrivals, in seconds.
    pub fn gaps(&self) -> Vec<f64> {
        let a = self.arrivals.lock().unwrap();
        a.windows(2).map(|w| (w[1] - w[0]).as_secs_f64()).collect()
    }

    /// `gopher://ADDR:PORT/` + type and selector (`127.0.0.1` unless started elsewhere).
    pub fn url(&self, type_and_selector: &str) -> String {
        format!("gopher://{}/{type_and_selector}", self.addr)
    }

    pub fn count(&self, selector: &[u8]) -> usize {
        self.selectors
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.as_slice() == selector)
            .count()
    }

    pub fn all(&self) -> Vec<String> {
        self.selectors
            .lock()
            .unwrap()
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect()
    }
}

/// Sends one selector line to the proxy's Gopher listener; the whole answer.
pub async fn gopher(proxy: SocketAddr, line: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    // The proxy may answer (and stop reading) before an over-long line is all sent.
    let _ = stream.write_all(&[line, b"\r\n"].concat()).await;
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer
}

/// Greeting (no auth, or user/password) and CONNECT to `host:port` by name;
/// returns the stream and the CONNECT reply code.
pub async fn socks_connect(
    proxy: SocketAddr,
    host: &str,
    port: u16,
    auth: Option<(&str, &str)>,
) -> (TcpStream, u8) {
    socks_handshake(TcpStream::connect(proxy).await.unwrap(), host, port, auth).await
}

/// [`socks_connect`] on a connection already open.
pub async fn socks_handshake(
    mut s: TcpStream,
    host: &str,
    port: u16,
    auth: Option<(&str, &str)>,
) -> (TcpStream, u8) {
    match auth {
        None => s.write_all(&[5, 1, 0]).await.unwrap(),
        Some(_) => s.write_all(&[5, 1, 2]).await.unwrap(),
    }
    let mut choice = [0u8; 2];
    s.read_exact(&mut choice).await.unwrap();
    if let Some((user, pass)) = auth {
        assert_eq!(choice, [5, 2]);
        let mut msg = vec![1, user.len() as u8];
        msg.extend_from_slice(user.as_bytes());
        msg.push(pass.len() as u8);
        msg.extend_from_slice(pass.as_bytes());
        s.write_all(&msg).await.unwrap();
        let mut status = [0u8; 2];
        s.read_exact(&mut status).await.unwrap();
        if status[1] != 0 {
            return (s, 0xFF);
        }
    } else {
        assert_eq!(choice, [5, 0]);
    }
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).await.unwrap();
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).await.unwrap();
    (s, reply[1])
}

/// One bare selector line through the SOCKS5 listener to `origin`; the whole answer.
pub async fn gopher_via_socks(proxy: SocketAddr, origin: SocketAddr, selector: &[u8]) -> Vec<u8> {
    let (mut s, code) = socks_connect(proxy, "127.0.0.1", origin.port(), None).await;
    assert_eq!(code, 0);
    s.write_all(&[selector, b"\r\n"].concat()).await.unwrap();
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer).await;
    answer
}

/// A plain HTTP/1.1 GET; the status code and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(addr, "GET", path, &[], "").await
}

/// One HTTP/1.1 request with these extra header lines and a form body (if
/// any); the status code and the body.
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[&str],
    body: &str,
) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    if !body.is_empty() {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// `/metrics` once every request connection the proxy had has ended: a
/// request's counts are taken just after its client has the whole answer
/// (so the counting adds nothing to the client's wait), so a test that read
/// an answer waits for its connection to end before reading the counts.
/// Panics after 10 s (a bound, not a timing).
pub async fn settled_metrics(addr: SocketAddr) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, m) = http_get(addr, "/metrics").await;
        assert_eq!(status, 200, "/metrics");
        let open: f64 = ["gemini", "gopher", "socks5", "transparent"]
            .iter()
            .filter_map(|l| {
                sample(
                    &m,
                    &format!("robots_proxy_connections_open{{listener=\"{l}\"}}"),
                )
            })
            .sum();
        if open == 0.0 {
            return m;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "connections never ended: {open} open"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The value of one sample line, e.g. `robots_proxy_requests_total{bot="default",decision="allowed",protocol="gemini"}`.
pub fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// The first line of an answer, without its line end.
pub fn first_line(answer: &[u8]) -> String {
    let end = answer
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(answer.len());
    String::from_utf8_lossy(&answer[..end]).into_owned()
}

/// The standard error of a spawned `robots-proxy`, line by line, read on a
/// thread: tests wait for lines, not for time.
pub fn log_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().expect("stderr piped");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// The next JSON log line (`--log-format json`) that holds `what`, read
/// within 30 s.
pub fn next_json(lines: &std::sync::mpsc::Receiver<String>, what: &str) -> serde_json::Value {
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("no log line: {what}"));
        if line.contains(what) {
            return serde_json::from_str(&line).unwrap();
        }
    }
}

/// The built `robots-proxy run`, its Gemini, Gopher and admin listeners on
/// port 0, `state_dir` its state directory, `RUST_LOG` set to `rust_log`,
/// `more` arguments after those; standard error piped (see [`log_lines`]).
pub fn spawn_run(
    state_dir: &std::path::Path,
    rust_log: &str,
    more: &[&str],
) -> std::process::Child {
    use std::process::{Command, Stdio};
    Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args([
            "run",
            "--gemini-listen",
            "127.0.0.1:0",
            "--gopher-listen",
            "127.0.0.1:0",
        ])
        .args(["--metrics-listen", "127.0.0.1:0", "--state-dir"])
        .arg(state_dir)
        .args(more)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Runs the built `robots-proxy` with `args` and `stdin`; its output.
pub fn binary(args: &[&str], stdin: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// A Gemini client that trusts only the proxy's drop-in CA and checks the name:
/// TLS on `tcp` with SNI `sni`, with a client certificate or none, `url` sent;
/// the answer's header line.
pub async fn gemini_trusting_ca(
    proxy: &Proxy,
    tcp: TcpStream,
    (sni, url): (&str, &str),
    cert: Option<&ClientCert>,
) -> String {
    use rustls::pki_types::pem::PemObject;
    let ca = CertificateDer::from_pem_file(proxy.ca_cert_path.as_ref().unwrap()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(robots_proxy::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match cert {
        Some(c) => config
            .with_client_auth_cert(c.chain.clone(), c.key.clone_key())
            .unwrap(),
        None => config.with_no_client_auth(),
    };
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(sni.to_string()).unwrap(), tcp)
        .await
        .expect("the proxy's certificate verifies for this name against its CA");
    tls.write_all(format!("{url}\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer).await;
    split(&answer).0
}

/// A crawler: `clients` clients asking for pages (`c<client>-<n>`) at a
/// Gopher `origin` through `proxies` in turn, each again 50 ms after a
/// "slow down" (`3503`, the only other answer allowed), until stopped;
/// counts the pages relayed.
pub struct Crawl {
    stop: Arc<std::sync::atomic::AtomicBool>,
    relayed: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Crawl {
    pub fn start(proxies: &[&Proxy], origin: &GopherOrigin, clients: usize) -> Crawl {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let relayed = Arc::new(AtomicUsize::new(0));
        let tasks = (0..clients)
            .map(|i| {
                let proxy =
                    proxies[i % proxies.len()].addr(robots_proxy::listener::Listener::Gopher);
                let (stop, relayed) = (stop.clone(), relayed.clone());
                let base = origin.url("0/");
                tokio::spawn(async move {
                    let mut n = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let answer = gopher(proxy, format!("{base}c{i}-{n}").as_bytes()).await;
                        n += 1;
                        if answer == b"text\r\n" {
                            relayed.fetch_add(1, Ordering::Relaxed);
                        } else {
                            let line = first_line(&answer);
                            assert!(line.starts_with("3503 "), "{line}");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                })
            })
            .collect();
        Crawl {
            stop,
            relayed,
            tasks,
        }
    }

    pub fn relayed(&self) -> usize {
        self.relayed.load(Ordering::Relaxed)
    }

    /// Waits until `n` pages in all were relayed, at most `within` (after
    /// a failover, a Crawl-delay from the break: longer than `wait_until`).
    pub async fn relayed_at_least(&self, n: usize, within: Duration) {
        let deadline = std::time::Instant::now() + within;
        while self.relayed() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{n} pages relayed within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
    }
}

/// A Gopher server on `addr` whose robots.txt is `robots` and every page
/// `text`.
pub async fn text_hole_on(addr: SocketAddr, robots: &str) -> GopherOrigin {
    hole_on(
        addr,
        Reply::Bytes(robots.as_bytes().to_vec()),
        Reply::Bytes(b"text\r\n".to_vec()),
    )
    .await
}

/// The kernel as a test wants it: every connection was going to `to` (none:
/// not redirected), and `local` are this machine's addresses besides loopback.
#[derive(Default)]
pub struct FakeKernel {
    pub to: Mutex<Option<SocketAddr>>,
    pub local: Vec<std::net::IpAddr>,
}

impl FakeKernel {
    pub fn redirect_to(&self, addr: SocketAddr) {
        *self.to.lock().unwrap() = Some(addr);
    }
}

impl robots_proxy::transparent::OriginalDestination for FakeKernel {
    fn original_destination(&self, _stream: &TcpStream) -> std::io::Result<SocketAddr> {
        self.to
            .lock()
            .unwrap()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

impl robots_proxy::transparent::LocalAddresses for FakeKernel {
    fn is_local(&self, ip: std::net::IpAddr) -> bool {
        self.local.contains(&ip)
    }
}

/// A capsule whose robots.txt asks `Crawl-delay: 0.2`, whose `/warm` is a
/// page, and whose every other page answers `answer` (a slow-down: `44 2`,
/// a bare `44`, …).
pub async fn slowing_capsule(answer: &'static str) -> Origin {
    Origin::start(move |url| {
        if url.ends_with("/robots.txt") {
            text("20 text/plain", "User-agent: *\nCrawl-delay: 0.2\n")
        } else if url.ends_with("/warm") {
            text("20 text/gemini", "page")
        } else {
            text(answer, "")
        }
    })
    .await
}

/// Six Gemini clients at once for `/p0` … `/p5` at `origin` (a
/// [`slowing_capsule`] answering `answer`), spread over the Gemini
/// listeners `proxies`: no two of its pages are asked within 2 s (less a
/// margin), every client is answered `44` (the capsule's, or the proxy's),
/// and `44 3600` lets one page through.
pub async fn six_at_once_are_held(origin: &Origin, proxies: &[SocketAddr], answer: &str) {
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let addr = proxies[i % proxies.len()];
            let url = origin.url(&format!("/p{i}"));
            tokio::spawn(async move { gemini(addr, &url).await.0 })
        })
        .collect();
    let mut headers = Vec::new();
    for t in tasks {
        headers.push(t.await.unwrap());
    }
    let starts: Vec<std::time::Instant> = origin
        .arrivals
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, url)| url.contains("/p"))
        .map(|(at, _)| *at)
        .collect();
    let gaps: Vec<f64> = starts
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    let row = format!("{answer}: {headers:?}, gaps {gaps:?}");
    assert!(!starts.is_empty(), "{row}");
    assert!(gaps.iter().all(|g| *g >= 1.9), "{row}");
    assert!(headers.iter().all(|h| h.starts_with("44")), "{row}");
    if answer == "44 3600" {
        assert_eq!(starts.len(), 1, "{row}");
    }
}

/// A proxy with `config` and its transparent listener on, whose kernel
/// answers as `kernel` says (the original destination, this machine's
/// addresses).
pub async fn start_transparent(mut config: Config, kernel: FakeKernel) -> (Proxy, Arc<FakeKernel>) {
    config.listen.set(
        robots_proxy::listener::Listener::Transparent,
        Some("127.0.0.1:0".parse().unwrap()),
    );
    let kernel = Arc::new(kernel);
    let original: Arc<dyn robots_proxy::transparent::OriginalDestination> = kernel.clone();
    let local: Arc<dyn robots_proxy::transparent::LocalAddresses> = kernel.clone();
    let proxy = Proxy::start_with(
        config,
        robots_proxy::transparent::Kernel { original, local },
    )
    .await
    .unwrap();
    (proxy, kernel)
}
