//! The admin listener (`listen.metrics`, hyper): `GET /metrics` (Prometheus),
//! `GET /healthz`, the status page (`/`, `/host/HOST:PORT`), the same data as
//! JSON (`/api/status`, `/api/host/HOST:PORT`, `?explain=URL`), and actions,
//! each a `POST`: `/api/pins/forget` and `/api/robots/forget` (`host`, `port`,
//! in the query or a form body). Actions need `[admin] token` as a bearer
//! token (or a `token` form field) when one is set, and a loopback client when
//! none is; a request a web page made in someone's browser (its `Origin` is
//! another site) is refused. Header reads have a deadline, bodies a byte cap;
//! on shutdown, idle keep-alive connections are closed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::{Listener, Rejection};
use crate::proxy::Context;
use crate::server::Live;
use crate::target::{HostKey, Scheme};

mod page;
mod status;

/// The most bytes of a `POST` body read.
const MAX_BODY: usize = 4096;

type Answer = (StatusCode, &'static str, Vec<u8>);

fn json_answer(status: StatusCode, v: &Value) -> Answer {
    let mut body = serde_json::to_vec_pretty(v).unwrap_or_default();
    body.push(b'\n');
    (status, "application/json", body)
}

fn html(body: String) -> Answer {
    (
        StatusCode::OK,
        "text/html; charset=utf-8",
        body.into_bytes(),
    )
}

fn text(status: StatusCode, body: &str) -> Answer {
    (
        status,
        "text/plain; charset=utf-8",
        body.as_bytes().to_vec(),
    )
}

/// The query's (or a form body's) fields.
fn fields(raw: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(raw).into_owned().collect()
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// Compares without stopping at the first difference.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn answer(
    req: Request<Incoming>,
    live: Live,
    peer: SocketAddr,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let ctx = live.load_full();
    let (status, content_type, body) = route(req, &ctx, peer).await;
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    // The page loads nothing from elsewhere, and is not to be framed.
    if let Ok(v) = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'".parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_SECURITY_POLICY, v);
    }
    Ok(response)
}

async fn route(req: Request<Incoming>, ctx: &Context, peer: SocketAddr) -> Answer {
    let path = req.uri().path().to_string();
    let query = fields(req.uri().query().unwrap_or("").as_bytes());
    match (req.method(), path.as_str()) {
        (&Method::GET, "/metrics") => {
            // Gauges that describe state are read when scraped, not kept up to date
            // on the request path.
            let (entries, bytes) = ctx.robots.usage().await;
            ctx.metrics.cache_entries.set(entries as i64);
            ctx.metrics.cache_bytes.set(bytes as i64);
            let (hosts, waiting) = ctx.politeness.usage();
            ctx.metrics.politeness_hosts.set(hosts as i64);
            ctx.metrics.politeness_waiting.set(waiting as i64);
            (
                StatusCode::OK,
                "text/plain; version=0.0.4",
                ctx.metrics.encode(),
            )
        }
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/") => {
            let filter = field(&query, "filter").unwrap_or("");
            let s = status::status(ctx, Some(filter).filter(|f| !f.is_empty())).await;
            html(page::status(&s, filter))
        }
        (&Method::GET, "/api/status") => {
            let filter = field(&query, "filter").filter(|f| !f.is_empty());
            json_answer(StatusCode::OK, &status::status(ctx, filter).await)
        }
        (&Method::GET, p) if p.starts_with("/host/") || p.starts_with("/api/host/") => {
            let api = p.starts_with("/api/");
            let raw = p.trim_start_matches("/api").trim_start_matches("/host/");
            let raw =
                String::from_utf8_lossy(&crate::robots::encoding::percent_decode(raw.as_bytes()))
                    .into_owned();
            let Some((host, port)) = status::parse_host_port(&raw) else {
                return text(
                    StatusCode::BAD_REQUEST,
                    "expected /host/HOST:PORT, e.g. /host/capsule.example:1965\n",
                );
            };
            let hostport = format!("{host}:{port}");
            let h = status::host(ctx, &host, port).await;
            let explained = match field(&query, "explain").filter(|u| !u.is_empty()) {
                Some(url) => Some(status::explain(ctx, url).await),
                None => None,
            };
            match api {
                true => json_answer(StatusCode::OK, &json!({ "host": h, "explain": explained })),
                false => html(page::host(&h, explained.as_ref(), &hostport)),
            }
        }
        (&Method::POST, "/api/pins/forget") | (&Method::POST, "/api/robots/forget") => {
            act(req, ctx, peer, query).await
        }
        (_, "/api/pins/forget") | (_, "/api/robots/forget") => text(
            StatusCode::METHOD_NOT_ALLOWED,
            "actions are POST requests\n",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /, /metrics, /healthz or /api/status\n",
        ),
    }
}

/// A `POST` action: checked (who may act, where the request comes from),
/// then done, answered in JSON.
async fn act(
    req: Request<Incoming>,
    ctx: &Context,
    peer: SocketAddr,
    query: Vec<(String, String)>,
) -> Answer {
    let path = req.uri().path().to_string();
    let headers = req.headers().clone();
    // A browser sends Origin with a form post: one from another site is a
    // page trying to act through the operator's browser.
    if let Some(origin) = headers.get(hyper::header::ORIGIN) {
        let host = headers
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let ok = origin.to_str().is_ok_and(|o| {
            o.strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"))
                == Some(host)
        });
        if !ok {
            return json_answer(
                StatusCode::FORBIDDEN,
                &json!({ "error": "a request from another site's page (Origin does not match Host)" }),
            );
        }
    }
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return json_answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                &json!({ "error": format!("the body is over {MAX_BODY} bytes") }),
            )
        }
    };
    let mut given = query;
    given.extend(fields(&body));
    let bearer = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .or(field(&given, "token"));
    match &ctx.config.admin_token {
        Some(token) if !bearer.is_some_and(|b| same_secret(b.as_bytes(), token.as_bytes())) => {
            return json_answer(
                StatusCode::UNAUTHORIZED,
                &json!({ "error": "this action needs [admin] token: Authorization: Bearer TOKEN" }),
            );
        }
        None if !peer.ip().to_canonical().is_loopback() => {
            return json_answer(
                StatusCode::FORBIDDEN,
                &json!({ "error": "without [admin] token, only loopback clients may act" }),
            );
        }
        _ => {}
    }
    let (Some(host), Some(port)) = (field(&given, "host"), field(&given, "port")) else {
        return json_answer(
            StatusCode::BAD_REQUEST,
            &json!({ "error": "give host and port (query or form fields)" }),
        );
    };
    let Some((host, port)) = status::parse_host_port(&format!("{host}:{port}")) else {
        return json_answer(
            StatusCode::BAD_REQUEST,
            &json!({ "error": format!("not a host and port: {host}:{port}") }),
        );
    };
    let done = if path == "/api/pins/forget" {
        let had = ctx.upstream.pins().forget(&host, port).await;
        // A robots.txt the pin made unreachable is asked again at once, not
        // after `unreachable_retry`.
        let mut retried = Vec::new();
        for scheme in [Scheme::Gemini, Scheme::Gopher] {
            let key = HostKey {
                scheme,
                host: host.clone(),
                port,
            };
            let unreachable = ctx
                .robots
                .peek(&key)
                .await
                .is_some_and(|e| e.state() == "unreachable");
            if unreachable && ctx.robots.forget(&key).await {
                retried.push(key.to_string());
            }
        }
        tracing::info!(%host, port, had, client = %peer, "admin: certificate pin forgotten");
        json!({ "action": "forget-pin", "host": host, "port": port, "had_pin": had, "robots_forgotten": retried })
    } else {
        let mut forgot = Vec::new();
        for scheme in [Scheme::Gemini, Scheme::Gopher] {
            let key = HostKey {
                scheme,
                host: host.clone(),
                port,
            };
            if ctx.robots.forget(&key).await {
                forgot.push(key.to_string());
            }
        }
        tracing::info!(%host, port, forgot = %forgot.join(","), client = %peer, "admin: cached robots.txt forgotten");
        json!({ "action": "forget-robots", "host": host, "port": port, "forgotten": forgot })
    };
    json_answer(StatusCode::OK, &done)
}

/// Connections the metrics listener serves at once: a scraper needs one or
/// two; more are closed at once, so the listener cannot use up the proxy's
/// file descriptors.
pub const MAX_CONNECTIONS: usize = 32;

pub async fn serve(
    listener: TcpListener,
    live: Live,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Some((stream, peer)) =
            crate::server::next_connection(&listener, &shutdown, "metrics accept failed").await
        else {
            break;
        };
        let ctx = live.load_full();
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            ctx.metrics.rejected(Listener::Metrics, Rejection::Full);
            let _ = stream.set_zero_linger();
            continue;
        };
        let (live, shutdown) = (live.clone(), shutdown.clone());
        tracker.spawn(async move {
            let _slot = slot;
            let _open = ctx.metrics.connection(Listener::Metrics);
            let service = hyper::service::service_fn(move |req| answer(req, live.clone(), peer));
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10));
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                }
            }
        });
    }
}
