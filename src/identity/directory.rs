//! The key directory (draft-meunier-http-message-signatures-directory-05):
//! `GET /.well-known/http-message-signatures-directory` answers the public
//! keys of the bots that sign, as a JWK set
//! (`application/http-message-signatures-directory+json`), the answer
//! signed by each key over the `Host` it was asked for. Served on the
//! listener the operator names (`listen.key_directory`), to publish behind
//! their own HTTPS origin (which must pass `Host` on).
//!
//! Bounded: at most [`MAX_CONNECTIONS`] at once, [`PER_CLIENT`] of them from
//! one client (more are closed at once: a client holding silent connections
//! by the hundred keeps nobody else out), one request each, its head within
//! [`DEADLINE`], the whole answer too.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Signers;

/// Where the directory is (RFC 8615 well-known URI).
pub const PATH: &str = "/.well-known/http-message-signatures-directory";

/// Its media type.
pub const MEDIA_TYPE: &str = "application/http-message-signatures-directory+json";

/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;

/// Connections served at once from one client (an IPv4 address, an IPv6
/// /64: `slots::ClientKey`). An HTTPS origin publishing the directory in
/// front of it is one client: eight requests at once, each a few
/// milliseconds, for keys fetched now and then.
pub const PER_CLIENT: usize = 8;

/// The most a connection lasts: its request head, and the answer.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// The directory's answer to `request`, with the keys of `signers`, signed
/// at `now` (Unix seconds) with `nonce`.
pub fn answer<B>(
    request: &Request<B>,
    signers: &Signers,
    now: u64,
    nonce: &[u8],
) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &str| {
        let mut response = Response::new(Full::new(Bytes::from(format!("{body}\n"))));
        *response.status_mut() = status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    };
    if request.uri().path() != PATH {
        return text(
            StatusCode::NOT_FOUND,
            &format!("this listener serves the key directory, at {PATH}"),
        );
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD");
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::trim)
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()));
    let Some(host) = host else {
        return text(
            StatusCode::BAD_REQUEST,
            "no Host: the directory is signed over the host it is asked for",
        );
    };
    if signers.is_empty() {
        return text(
            StatusCode::NOT_FOUND,
            "no bot signs its requests (web_bot_auth)",
        );
    }
    let keys: Vec<_> = signers.keys().map(|k| k.jwk()).collect();
    let body = serde_json::json!({ "keys": keys }).to_string();
    let (input, signature) = super::sign::directory(signers.keys(), host, now, nonce);
    let mut response = Response::new(Full::new(Bytes::from(body)));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("max-age=86400"),
    );
    for (name, value) in [("signature-input", input), ("signature", signature)] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

/// Unix seconds now.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A fresh nonce (64 random bytes).
pub fn nonce() -> [u8; 64] {
    use ring::rand::SecureRandom;
    let mut nonce = [0u8; 64];
    // SystemRandom fails only without a kernel source; a zero nonce is
    // then still a valid, if guessable, signature.
    let _ = ring::rand::SystemRandom::new().fill(&mut nonce);
    nonce
}

/// Serves the directory on `listener` with the signers `current` gives
/// (a reload may change them) until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    current: impl Fn() -> Arc<Signers> + Send + Sync + 'static,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let per_client = crate::slots::PerClient::new(PER_CLIENT);
    let current = Arc::new(current);
    loop {
        let Some((stream, peer)) =
            crate::accept::next_connection(&listener, &shutdown, "key directory accept failed")
                .await
        else {
            break;
        };
        let (Some(client), Ok(slot)) = (
            per_client.try_take(peer.ip()),
            slots.clone().try_acquire_owned(),
        ) else {
            let _ = stream.set_zero_linger();
            continue;
        };
        let current = current.clone();
        tracker.spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                let signers = current();
                async move { Ok::<_, Infallible>(answer(&request, &signers, unix_now(), &nonce())) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(DEADLINE)
                .keep_alive(false);
            let served = builder.serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(DEADLINE, served).await;
            drop((slot, client));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signers() -> Signers {
        let dir = std::env::temp_dir().join(format!("rp-dir-{}", std::process::id()));
        let signing = super::super::Signing {
            when: super::super::When::Always,
            agent: "https://bots.example".into(),
        };
        let off = super::super::Signing::default();
        Signers::load(&dir, [("a", &signing), ("b", &off)].into_iter()).unwrap()
    }

    fn get(path: &str, host: Option<&str>) -> Request<()> {
        let mut r = Request::get(path);
        if let Some(host) = host {
            r = r.header("host", host);
        }
        r.body(()).unwrap()
    }

    #[test]
    fn the_directory_lists_the_signing_bots_keys_signed() {
        let s = signers();
        let r = answer(&get(PATH, Some("bots.example")), &s, 100, &[0; 64]);
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], MEDIA_TYPE);
        let input = r.headers()["signature-input"].to_str().unwrap();
        assert!(
            input.starts_with("binding0=(\"@authority\";req)"),
            "{input}"
        );
        assert!(!input.contains("binding1"), "one key: the bot that signs");
    }

    #[test]
    fn anything_else_gets_a_plain_answer() {
        let s = signers();
        assert_eq!(answer(&get("/", Some("h")), &s, 0, &[0; 64]).status(), 404);
        assert_eq!(answer(&get(PATH, None), &s, 0, &[0; 64]).status(), 400);
        let post = Request::post(PATH).header("host", "h").body(()).unwrap();
        assert_eq!(answer(&post, &s, 0, &[0; 64]).status(), 405);
        assert_eq!(
            answer(&get(PATH, Some("h")), &Signers::default(), 0, &[0; 64]).status(),
            404
        );
    }
}
