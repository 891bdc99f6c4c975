//! A fixed number of requests of one protocol through a running robots-proxy,
//! one after another, each checked: what `benches/exchange-instructions.sh`
//! sends while callgrind counts the proxy's instructions. It starts its own
//! origin on loopback (a Gemini capsule over TLS, a Gopher hole, a web site
//! over plain HTTP/1.1 with keep-alive), whose robots.txt allows everything.
//!
//! ```sh
//! cargo run --release --example exchange_load -- gemini|gopher|http PROXY_ADDR REQUESTS
//! ```
//!
//! Gemini: a new TLS connection to the proxy per request (as Gemini clients
//! do). Gopher: a TCP connection per request. HTTP: one keep-alive
//! connection to the proxy's HTTP listener, absolute-form `GET`s.

use std::net::SocketAddr;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

const PAGE: &[u8] = b"Hello from the exchange's origin.\r\n";
const ROBOTS: &[u8] = b"User-agent: *\r\nAllow: /\r\n";

/// The body an origin answers `path` with.
fn body(path: &str) -> &'static [u8] {
    match path.contains("robots.txt") {
        true => ROBOTS,
        false => PAGE,
    }
}

/// An origin on 127.0.0.1: each connection it accepts served by `serve`.
async fn origin<F, Fut>(serve: F) -> SocketAddr
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("bound");
    tokio::spawn(async move {
        loop {
            if let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(serve(tcp));
            }
        }
    });
    addr
}

/// One line read from `r`, or `None` if it could not be.
async fn line<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<String> {
    let mut line = String::new();
    r.read_line(&mut line).await.ok().map(|_| line)
}

async fn gemini_origin() -> SocketAddr {
    let dir = std::env::temp_dir().join(format!("exchange-load-{}", std::process::id()));
    let identity = robots_proxy::tls::load_or_generate(&dir, &["localhost".to_string()])
        .expect("a certificate");
    let acceptor = TlsAcceptor::from(robots_proxy::tls::server_config(identity).expect("config"));
    let _ = std::fs::remove_dir_all(&dir);
    origin(move |tcp| {
        let acceptor = acceptor.clone();
        async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut tls = BufReader::new(tls);
            let Some(url) = line(&mut tls).await else {
                return;
            };
            let mut answer = b"20 text/plain\r\n".to_vec();
            answer.extend_from_slice(body(&url));
            let _ = tls.get_mut().write_all(&answer).await;
            let _ = tls.get_mut().shutdown().await;
        }
    })
    .await
}

async fn gopher_origin() -> SocketAddr {
    origin(|tcp| async move {
        let mut tcp = BufReader::new(tcp);
        if let Some(selector) = line(&mut tcp).await {
            let _ = tcp.get_mut().write_all(body(&selector)).await;
        }
    })
    .await
}

async fn http_origin() -> SocketAddr {
    origin(|tcp| async move {
        let mut tcp = BufReader::new(tcp);
        while let Some(path) = read_head(&mut tcp).await {
            let body = body(&path);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            let mut answer = head.into_bytes();
            answer.extend_from_slice(body);
            if tcp.get_mut().write_all(&answer).await.is_err() {
                return;
            }
        }
    })
    .await
}

/// A request's head read whole: its target, or `None` at the end.
async fn read_head<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> Option<String> {
    let mut first = String::new();
    if r.read_line(&mut first).await.ok()? == 0 {
        return None;
    }
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
    }
    first.split(' ').nth(1).map(str::to_string)
}

/// An answer's head and its `Content-Length` body, read whole: its status.
async fn read_answer<R: tokio::io::AsyncBufRead + Unpin>(r: &mut R) -> u16 {
    let mut status = String::new();
    r.read_line(&mut status).await.expect("a status line");
    let mut length = 0;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).await.expect("a header");
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().expect("a length");
            }
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).await.expect("the body");
    status
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let protocol = args.next().expect("gemini, gopher or http");
    let proxy: SocketAddr = args
        .next()
        .expect("PROXY_ADDR")
        .parse()
        .expect("an address");
    let n: usize = args.next().expect("REQUESTS").parse().expect("a number");
    match protocol.as_str() {
        "gemini" => {
            let origin = gemini_origin().await;
            let connector = TlsConnector::from(robots_proxy::tls::client_config().expect("TLS"));
            for i in 0..n {
                let tcp = TcpStream::connect(proxy).await.expect("the proxy");
                let name = ServerName::try_from("localhost").expect("a name");
                let mut tls = connector.connect(name, tcp).await.expect("TLS");
                let url = format!("gemini://127.0.0.1:{}/page{i}\r\n", origin.port());
                tls.write_all(url.as_bytes()).await.expect("sent");
                let mut answer = Vec::new();
                let _ = tls.read_to_end(&mut answer).await;
                assert!(
                    answer.starts_with(b"20 "),
                    "{}",
                    String::from_utf8_lossy(&answer)
                );
            }
        }
        "gopher" => {
            let origin = gopher_origin().await;
            for i in 0..n {
                let mut tcp = TcpStream::connect(proxy).await.expect("the proxy");
                let line = format!("gopher://127.0.0.1:{}/0/page{i}\r\n", origin.port());
                tcp.write_all(line.as_bytes()).await.expect("sent");
                let mut answer = Vec::new();
                let _ = tcp.read_to_end(&mut answer).await;
                assert_eq!(answer, PAGE, "{}", String::from_utf8_lossy(&answer));
            }
        }
        "http" => {
            let origin = http_origin().await;
            let mut tcp = BufReader::new(TcpStream::connect(proxy).await.expect("the proxy"));
            for i in 0..n {
                let request = format!(
                    "GET http://{origin}/page{i} HTTP/1.1\r\nhost: {origin}\r\nuser-agent: bench\r\n\r\n"
                );
                tcp.get_mut()
                    .write_all(request.as_bytes())
                    .await
                    .expect("sent");
                assert_eq!(read_answer(&mut tcp).await, 200);
            }
        }
        other => panic!("unknown protocol {other}"),
    }
}
