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

/// One request the origin saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    /// The request target as sent (origin-form: path and query).
    pub target: String,
    pub headers: HeaderMap,
    pub at: std::time::Instant,
}

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
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (handler, log) = (handler.clone(), log.clone());
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
                                });
                                let _ = request.into_body().collect().await;
                                let (status, headers, body) = handler(&target);
                                let mut response = Response::new(Full::new(Bytes::from(body)));
                                *response.status_mut() = status.try_into().unwrap();
                                for (name, value) in headers {
                                    response.headers_mut().insert(name, value.parse().unwrap());
                                }
                                Ok::<_, Infallible>(response)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
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
        let tcp = TcpStream::connect(proxy).await.unwrap();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
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
