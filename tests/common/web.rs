//! A web origin on loopback for the web's tests (hyper, HTTP/1.1): it
//! answers each request from a handler and keeps what it was asked (method,
//! path, headers, when), so a test can say what never reached it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::HeaderMap;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `test_config_with(toml)` with the HTTP listener on too.
/// `Proxy-Authorization: Basic` for `user` and `pass`.
pub fn basic(user: &str, pass: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
    )
}

pub fn web_config_with(toml: &str) -> robots_proxy::config::Config {
    let mut config = super::test_config_with(toml);
    config.listen.set(
        robots_proxy::listener::Listener::Http,
        Some("127.0.0.1:0".parse().unwrap()),
    );
    config
}

/// One request the origin saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    /// The request target as sent (origin-form: path and query).
    pub target: String,
    pub headers: HeaderMap,
    pub at: std::time::Instant,
    /// The connection it came on (the proxy's end of it).
    pub peer: SocketAddr,
    /// The HTTP it came in.
    pub version: hyper::Version,
}

/// Where an origin listens unless told: 127.0.0.1, a port of its own.
const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

/// What the origin answers: status, headers, body.
pub type Page = (u16, Vec<(&'static str, String)>, Vec<u8>);

pub struct WebOrigin {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl WebOrigin {
    /// Answers each request with `handler(path)`.
    pub async fn start<F>(handler: F) -> WebOrigin
    where
        F: Fn(&str) -> Page + Send + Sync + 'static,
    {
        WebOrigin::serve(move |path, _: &HeaderMap| handler(path), None, LOOPBACK).await
    }

    /// Answers each request with `handler(path, its header fields)`.
    pub async fn start_asked<F>(handler: F) -> WebOrigin
    where
        F: Fn(&str, &HeaderMap) -> Page + Send + Sync + 'static,
    {
        WebOrigin::serve(handler, None, LOOPBACK).await
    }

    /// [`WebOrigin::start_asked`] on `addr` (another loopback address is
    /// another site: `127.0.0.2`).
    pub async fn start_on<F>(addr: SocketAddr, handler: F) -> WebOrigin
    where
        F: Fn(&str, &HeaderMap) -> Page + Send + Sync + 'static,
    {
        WebOrigin::serve(handler, None, addr).await
    }

    /// [`WebOrigin::start`] over TLS, showing `tls`'s certificate.
    pub async fn start_tls<F>(handler: F, tls: tokio_rustls::TlsAcceptor) -> WebOrigin
    where
        F: Fn(&str) -> Page + Send + Sync + 'static,
    {
        WebOrigin::serve(
            move |path, _: &HeaderMap| handler(path),
            Some(tls),
            LOOPBACK,
        )
        .await
    }

    async fn serve<F>(
        handler: F,
        tls: Option<tokio_rustls::TlsAcceptor>,
        at: SocketAddr,
    ) -> WebOrigin
    where
        F: Fn(&str, &HeaderMap) -> Page + Send + Sync + 'static,
    {
        let listener = tokio::net::TcpListener::bind(at).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, peer)) = listener.accept().await {
                let (handler, log) = (handler.clone(), log.clone());
                let tls = tls.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |request: Request<hyper::body::Incoming>| {
                            let (handler, log) = (handler.clone(), log.clone());
                            async move {
                                let target = request
                                    .uri()
                                    .path_and_query()
                                    .map_or("/".to_string(), |p| p.to_string());
                                log.lock().unwrap().push(Seen {
                                    method: request.method().to_string(),
                                    target: target.clone(),
                                    headers: request.headers().clone(),
                                    at: std::time::Instant::now(),
                                    peer,
                                    version: request.version(),
                                });
                                let asked = request.headers().clone();
                                let _ = request.into_body().collect().await;
                                let (status, headers, body) = handler(&target, &asked);
                                let mut response = Response::new(Full::new(Bytes::from(body)));
                                *response.status_mut() = status.try_into().unwrap();
                                for (name, value) in headers {
                                    response.headers_mut().append(name, value.parse().unwrap());
                                }
                                Ok::<_, Infallible>(response)
                            }
                        },
                    );
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        Some(tls) => {
                            let Ok(tls) = tls.accept(tcp).await else {
                                return;
                            };
                            // HTTP/2 when the client took it by ALPN.
                            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                                let h2 = hyper::server::conn::http2::Builder::new(
                                    hyper_util::rt::TokioExecutor::new(),
                                );
                                let _ = h2.serve_connection(TokioIo::new(tls), service).await;
                            } else {
                                let _ = http.serve_connection(TokioIo::new(tls), service).await;
                            }
                        }
                        None => {
                            let _ = http.serve_connection(TokioIo::new(tcp), service).await;
                        }
                    }
                });
            }
        });
        WebOrigin { addr, seen }
    }

    /// A site whose robots.txt is `robots`, and whose every other path is a
    /// small text page naming itself.
    pub async fn site(robots: &'static str) -> WebOrigin {
        WebOrigin::start(move |path| match path {
            "/robots.txt" => (
                200,
                vec![("content-type", "text/plain".into())],
                robots.into(),
            ),
            p => (
                200,
                vec![("content-type", "text/plain".into())],
                format!("page {p}").into(),
            ),
        })
        .await
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request it saw, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The request targets it saw, in order.
    pub fn targets(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.target).collect()
    }
}

/// A CA of a test site's own, and what it signs: the HTTPS origin's
/// certificate, which the proxy trusts by `[http] extra_roots`.
pub struct LocalCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl LocalCa {
    pub fn new() -> LocalCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test site CA");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        LocalCa { cert, key }
    }

    /// Its certificate as a PEM file in `dir`.
    pub fn pem_file(&self, dir: &std::path::Path) -> std::path::PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("site-ca.pem");
        std::fs::write(&path, self.cert.pem()).unwrap();
        path
    }

    /// A TLS acceptor showing a certificate for `names`, signed by this CA.
    pub fn acceptor(&self, names: &[&str]) -> tokio_rustls::TlsAcceptor {
        self.acceptor_offering(names, &[b"http/1.1"])
    }

    /// [`LocalCa::acceptor`], choosing among `alpn` (in its order) by ALPN.
    pub fn acceptor_offering(&self, names: &[&str], alpn: &[&[u8]]) -> tokio_rustls::TlsAcceptor {
        let params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
        let mut config = rustls::ServerConfig::builder_with_provider(robots_proxy::tls::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config))
    }
}

/// `CONNECT host:port` through the proxy, then TLS inside trusting
/// `trust` (the proxy's CA, as a crawler is told to), offering `alpn`,
/// naming `sni`: a client on the tunnel, or the first status line when the
/// proxy refused the tunnel, or the TLS error.
pub async fn tunnel(
    proxy: SocketAddr,
    (host, port): (&str, u16),
    tls: std::sync::Arc<rustls::ClientConfig>,
    sni: &str,
) -> Result<WebClient, String> {
    let mut tcp = TcpStream::connect(proxy).await.unwrap();
    let ask = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
    tcp.write_all(ask.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match tcp.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return Err(format!("closed after {:?}", String::from_utf8_lossy(&head))),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if !head.starts_with("HTTP/1.1 200") {
        return Err(head);
    }
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let tls = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(WebClient { sender })
}

/// A client config trusting `ca_pem` alone (the proxy's CA file), offering
/// `alpn`.
pub fn trusting(ca_pem: &std::path::Path, alpn: &[&[u8]]) -> std::sync::Arc<rustls::ClientConfig> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_file_iter(ca_pem).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(robots_proxy::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    std::sync::Arc::new(config)
}

/// An answer as a client read it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A client connection to the proxy, requests sent one after another on
/// it (keep-alive), each as a request line and headers written out.
pub struct WebClient {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
}

impl WebClient {
    pub async fn connect(proxy: SocketAddr) -> WebClient {
        WebClient::over(TcpStream::connect(proxy).await.unwrap()).await
    }

    /// A client on a stream already open (a SOCKS5 connection, a
    /// transparent one): requests in origin-form go as written.
    pub async fn over<S>(stream: S) -> WebClient
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(async move {
            let _ = connection.await;
        });
        WebClient { sender }
    }

    /// `GET url` (absolute-form, as a proxy is asked), with `headers`.
    pub async fn get(&mut self, url: &str, headers: &[(&str, &str)]) -> Answer {
        self.send("GET", url, headers).await.expect("an answer")
    }

    /// Sends `method url`; `None` when the connection is closed instead.
    pub async fn send(
        &mut self,
        method: &str,
        url: &str,
        headers: &[(&str, &str)],
    ) -> Option<Answer> {
        let uri: hyper::Uri = url.parse().unwrap();
        let mut request = Request::builder().method(method).uri(url);
        if let Some(authority) = uri.authority() {
            request = request.header("host", authority.as_str());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(Bytes::new())).unwrap();
        self.sender.ready().await.ok()?;
        let response = self.sender.send_request(request).await.ok()?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some(Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

/// Writes `raw` to a new connection to `proxy` and reads until the proxy
/// closes it (or 2 s pass): for requests no well-behaved client would send.
pub async fn raw_exchange(proxy: SocketAddr, raw: &[u8]) -> String {
    let mut tcp = TcpStream::connect(proxy).await.unwrap();
    tcp.write_all(raw).await.unwrap();
    let mut got = Vec::new();
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(2), tcp.read_to_end(&mut got)).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// An origin that writes each answer as bytes (a status line and fields
/// no well-behaved server library would write: obs-text, huge fields, a
/// chunked body cut small), one request per connection: `answer(path,
/// the request's head)` gives the whole answer. Keeps the heads it was sent.
pub struct RawOrigin {
    pub addr: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
}

impl RawOrigin {
    pub async fn start<F>(answer: F) -> RawOrigin
    where
        F: Fn(&str, &str) -> Vec<u8> + Send + Sync + 'static,
    {
        let listener = tokio::net::TcpListener::bind(LOOPBACK).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let (answer, log) = (answer.clone(), log.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65_536 {
                        match tcp.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    log.lock().unwrap().push(head.clone());
                    let _ = tcp.write_all(&answer(&path, &head)).await;
                    let _ = tcp.shutdown().await;
                });
            }
        });
        RawOrigin { addr, asked }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The request heads it was sent, in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }

    /// The paths it was asked for, in order.
    pub fn paths(&self) -> Vec<String> {
        self.asked()
            .iter()
            .map(|h| h.split(' ').nth(1).unwrap_or("").to_string())
            .collect()
    }
}

/// A whole HTTP/1.1 answer: `200`, `fields` (raw bytes each, `Name: value`),
/// `Connection: close`, and `body` with its length.
pub fn answer_bytes(fields: &[&[u8]], body: &[u8]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nconnection: close\r\n".to_vec();
    for field in fields {
        out.extend_from_slice(field);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

/// Hole 1's robots.txt row, from the site's side: a request of a bot held
/// by its rate (`1/s`) waits while the site's robots.txt becomes
/// unreachable (another bot's request fetches it again: `503`, no good
/// copy). When its turn comes it is decided again with the copy the proxy
/// holds then: refused (`503`, naming robots.txt), never sent, and it
/// fetched nothing itself. `proxy_with(config)` makes the proxy (with a
/// fleet's store, or alone).
pub async fn robots_txt_unreachable_while_waiting<F, P>(proxy_with: F)
where
    F: FnOnce(robots_proxy::config::Config) -> P,
    P: std::future::Future<Output = robots_proxy::server::Proxy>,
{
    use std::sync::atomic::{AtomicBool, Ordering};
    let down = Arc::new(AtomicBool::new(false));
    let site_down = down.clone();
    let origin = WebOrigin::start(move |path| match path {
        "/robots.txt" if site_down.load(Ordering::SeqCst) => (503, vec![], vec![]),
        "/robots.txt" => (404, vec![], vec![]),
        _ => (200, vec![], b"page".to_vec()),
    })
    .await;
    let mut config = web_config_with(
        r#"
[socks5]
users = [{ name = "s", password = "s-pass" }, { name = "o", password = "o-pass" }]
[bot]
name = "anon"
agent = "anonbot"
[[bots]]
name = "rated"
agent = "examplebot"
rate = "1/s"
socks5_users = ["s"]
[[bots]]
name = "other"
agent = "otherbot"
socks5_users = ["o"]
"#,
    );
    config.robots.ttl = std::time::Duration::from_millis(100);
    let proxy = proxy_with(config).await;
    let http = proxy.addr(robots_proxy::listener::Listener::Http);
    let rated = basic("s", "s-pass");
    let mut client = WebClient::connect(http).await;
    let first = client
        .get(&origin.url("/first"), &[("proxy-authorization", &rated)])
        .await;
    assert_eq!(first.status, 200, "{first:?}");
    // Waits about 1 s on its bot's rate.
    let waiting_url = origin.url("/waiting");
    let waiting = tokio::spawn(async move {
        let answer = client.get(&waiting_url, &[]).await;
        (answer.status, answer.body)
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    down.store(true, Ordering::SeqCst);
    let other = basic("o", "o-pass");
    let mut client = WebClient::connect(http).await;
    let refreshed = client
        .get(&origin.url("/other"), &[("proxy-authorization", &other)])
        .await;
    assert_eq!(
        refreshed.status, 503,
        "robots.txt unreachable: {refreshed:?}"
    );
    let (status, why) = waiting.await.unwrap();
    assert_eq!(status, 503, "decided again when its turn came: {why}");
    assert!(why.contains("robots.txt"), "{why}");
    assert_eq!(
        origin.targets(),
        ["/robots.txt", "/first", "/robots.txt"],
        "the waiting request fetched nothing, and was not sent"
    );
}

/// `head` (a request as a client writes it) sent on `stream`, over TLS when
/// `tls` is given (trusting the CA in that file, naming that server), and
/// the whole answer read until the proxy closes (10 s at most), as text.
pub async fn raw_over(
    stream: TcpStream,
    tls: Option<(&std::path::Path, &str)>,
    head: &str,
) -> String {
    let mut answer = Vec::new();
    let bound = std::time::Duration::from_secs(10);
    match tls {
        Some((ca, name)) => {
            let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
            let mut tls = tokio_rustls::TlsConnector::from(trusting(ca, &[b"http/1.1"]))
                .connect(name, stream)
                .await
                .expect("the proxy's leaf");
            tls.write_all(head.as_bytes()).await.unwrap();
            let _ = tokio::time::timeout(bound, tls.read_to_end(&mut answer)).await;
        }
        None => {
            let mut stream = stream;
            stream.write_all(head.as_bytes()).await.unwrap();
            let _ = tokio::time::timeout(bound, stream.read_to_end(&mut answer)).await;
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// One site on three servers of 127.0.0.1: `busy` (plain HTTP, every page
/// `429 Retry-After: 600`), `plain` (HTTP, every page a page) and `secure`
/// (HTTPS, its certificate from the returned CA): each without robots.txt
/// rules but `plain`'s `Allow: /`.
pub async fn one_site_on_three_ports() -> (WebOrigin, WebOrigin, WebOrigin, LocalCa) {
    let busy = WebOrigin::start(|path| match path {
        "/robots.txt" => (404, vec![], vec![]),
        _ => (429, vec![("retry-after", "600".into())], b"busy".to_vec()),
    })
    .await;
    let plain = WebOrigin::site("User-agent: *\nAllow: /\n").await;
    let ca = LocalCa::new();
    let secure = WebOrigin::start_tls(
        |path| match path {
            "/robots.txt" => (404, vec![], vec![]),
            _ => (200, vec![], b"secure page".to_vec()),
        },
        ca.acceptor(&["127.0.0.1", "localhost"]),
    )
    .await;
    (busy, plain, secure, ca)
}
