//! The metrics listener (hyper): `GET /metrics` in the Prometheus text format,
//! `GET /healthz` for liveness, 404 for anything else. Header reads have a
//! deadline; on shutdown, idle keep-alive connections are closed.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::metrics::{Listener, Rejection};
use crate::server::Live;

async fn answer(req: Request<Incoming>, live: Live) -> Result<Response<Full<Bytes>>, Infallible> {
    let ctx = live.load_full();
    let (status, content_type, body) = match (req.method(), req.uri().path()) {
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
        (&Method::GET, "/healthz") => (StatusCode::OK, "text/plain", b"ok\n".to_vec()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            b"not found: try /metrics or /healthz\n".to_vec(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    Ok(response)
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
        let stream = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
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
            let service = hyper::service::service_fn(move |req| answer(req, live.clone()));
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
