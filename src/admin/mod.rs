//! The admin listener (`listen.metrics`, hyper): `GET /metrics` (Prometheus),
//! `GET /healthz`, the status page (`/`, `/host/HOST:PORT`), the same data as
//! JSON (`/api/status`, `/api/host/HOST:PORT`, `?explain=URL`), and actions,
//! each a `POST`: `/api/pins/forget` and `/api/robots/forget` (`host`, `port`,
//! in the query or a form body). Who may do what is `access::AdminAccess`:
//! clients outside `[admin] allow_from` are closed at accept, every request
//! must name this listener in `Host` (no DNS rebinding), reading needs the
//! token from a client let in only by it, acting needs the token (a bearer
//! token, HTTP Basic's password, or a `token` form field) or, with none set,
//! a loopback client; a request a web page made in someone's browser (its
//! `Origin` is another site) is refused. Headers and bodies are read within
//! deadlines and bodies under a byte cap; the newest connection always gets
//! in (`conns.rs`); on shutdown, idle keep-alive connections are closed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::{Context, Live};
use crate::metrics::{Listener, Rejection};
use crate::protocol::Protocol;
use crate::target::HostKey;

mod charts;
mod conns;
mod html;
pub mod model;
mod page;
mod status;
pub mod terminal;

pub use conns::MAX_CONNECTIONS;

use crate::access::{AdminDenied, AdminUse};

/// The most bytes of a `POST` body read.
const MAX_BODY: usize = 4096;

/// The longest a request's head may take to arrive, and then its body.
const HEAD_DEADLINE: Duration = Duration::from_secs(10);
pub const BODY_DEADLINE: Duration = Duration::from_secs(5);

type Answer = (StatusCode, &'static str, Vec<u8>);

fn json_answer(status: StatusCode, v: &impl serde::Serialize) -> Answer {
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

/// The token a request presents: a bearer token, or HTTP Basic's password
/// (what a browser sends after its prompt).
fn presented(headers: &hyper::HeaderMap) -> Option<String> {
    let value = headers.get(hyper::header::AUTHORIZATION)?.to_str().ok()?;
    if let Some(bearer) = value.strip_prefix("Bearer ") {
        return Some(bearer.trim().to_string());
    }
    use base64::Engine;
    let basic = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(basic.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':')
        .map(|(_, password)| password.to_string())
}

/// What this request asks for.
fn use_of(method: &Method, path: &str) -> AdminUse {
    match (method, path) {
        (_, "/healthz") => AdminUse::Health,
        (&Method::POST, _) => AdminUse::Act,
        _ => AdminUse::Read,
    }
}

/// The answer to a refused request.
fn denied(why: &AdminDenied) -> Answer {
    let status = match why {
        AdminDenied::Host(_) => StatusCode::MISDIRECTED_REQUEST,
        AdminDenied::Token => StatusCode::UNAUTHORIZED,
        AdminDenied::NotLoopback => StatusCode::FORBIDDEN,
    };
    json_answer(status, &json!({ "error": why.to_string() }))
}

/// What each request is served with: the live config, who asks, this
/// machine's name (for `Host`), and the connection's busy marker.
#[derive(Clone)]
struct Served {
    live: Live,
    peer: SocketAddr,
    machine: Option<Arc<str>>,
    marker: conns::Marker,
}

async fn answer(
    req: Request<Incoming>,
    served: Served,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let ctx = served.live.load_full();
    let (status, content_type, body) = checked(req, &ctx, &served).await;
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED {
        // A browser asks its user for the token (as the password).
        if let Ok(v) = "Basic realm=\"robots-proxy admin\", charset=\"UTF-8\"".parse() {
            response
                .headers_mut()
                .insert(hyper::header::WWW_AUTHENTICATE, v);
        }
    }
    if let Ok(v) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, v);
    }
    // The page loads nothing from elsewhere (it fetches itself again to
    // refresh), and is not to be framed.
    if let Ok(v) = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'".parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_SECURITY_POLICY, v);
    }
    Ok(response)
}

/// Who may ask (`Host`, the client, the token), then the route. An action's
/// body is read first (within its deadline), since it may carry the token.
async fn checked(req: Request<Incoming>, ctx: &Context, served: &Served) -> Answer {
    let what = use_of(req.method(), req.uri().path());
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
    let token = presented(req.headers());
    let allowed = |token: Option<&str>| {
        ctx.admission.config.admin.allows(
            (what, served.peer.ip()),
            host.as_deref(),
            token,
            served.machine.as_deref(),
        )
    };
    if what != AdminUse::Act {
        if let Err(why) = allowed(token.as_deref()) {
            return refused(ctx, served.peer, &why);
        }
        let _busy = served.marker.busy();
        return route(req, ctx).await;
    }
    if let Err(why @ AdminDenied::Host(_)) = allowed(None) {
        return refused(ctx, served.peer, &why);
    }
    let (head, body) = req.into_parts();
    let body = match tokio::time::timeout(BODY_DEADLINE, Limited::new(body, MAX_BODY).collect())
        .await
    {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(_)) => {
            return json_answer(
                StatusCode::PAYLOAD_TOO_LARGE,
                &json!({ "error": format!("the body is over {MAX_BODY} bytes") }),
            )
        }
        Err(_) => {
            return json_answer(
                StatusCode::REQUEST_TIMEOUT,
                &json!({ "error": format!("the body did not arrive within {BODY_DEADLINE:?}") }),
            )
        }
    };
    let _busy = served.marker.busy();
    let mut given = fields(head.uri.query().unwrap_or("").as_bytes());
    given.extend(fields(&body));
    let token = token.or_else(|| field(&given, "token").map(str::to_string));
    if let Err(why) = allowed(token.as_deref()) {
        return refused(ctx, served.peer, &why);
    }
    act(&head, ctx, served.peer, given).await
}

/// A refused request: answered, and counted when `Host` named another site.
fn refused(ctx: &Context, peer: SocketAddr, why: &AdminDenied) -> Answer {
    if let AdminDenied::Host(host) = why {
        ctx.admission
            .metrics
            .rejected(Listener::Admin, Rejection::Host);
        tracing::debug!(client = %peer, host = %host, "admin: a request for another Host refused");
    }
    denied(why)
}

async fn route(req: Request<Incoming>, ctx: &Context) -> Answer {
    let path = req.uri().path().to_string();
    let query = fields(req.uri().query().unwrap_or("").as_bytes());
    match (req.method(), path.as_str()) {
        (&Method::GET, "/metrics") => {
            // Gauges that describe state are read when scraped, not kept up to date
            // on the request path.
            let (entries, bytes) = ctx.admission.robots.usage().await;
            ctx.admission.metrics.cache_entries.set(entries as i64);
            ctx.admission.metrics.cache_bytes.set(bytes as i64);
            let (hosts, waiting) = ctx.admission.politeness.usage();
            ctx.admission.metrics.politeness_hosts.set(hosts as i64);
            ctx.admission.metrics.politeness_waiting.set(waiting as i64);
            let metrics = &ctx.admission.metrics;
            // Bots a reload removed are not shown.
            metrics.budget_limit.reset();
            metrics.budget_most_used.reset();
            for bot in ctx.admission.config.bots.all() {
                let Some(limit) = bot.limits.daily_requests_per_server else {
                    continue;
                };
                let most = ctx.admission.limits.budget_used(&bot.name, 1);
                let most = most.first().map_or(0, |(_, used)| *used);
                metrics
                    .budget_limit
                    .with_label_values(&[&bot.name])
                    .set(i64::from(limit));
                metrics
                    .budget_most_used
                    .with_label_values(&[&bot.name])
                    .set(i64::from(most));
            }
            (
                StatusCode::OK,
                "text/plain; version=0.0.4",
                ctx.admission.metrics.encode(),
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
                true => json_answer(
                    StatusCode::OK,
                    &model::HostAnswer {
                        host: h,
                        explain: explained,
                    },
                ),
                false => html(page::host(&h, explained.as_ref(), &hostport)),
            }
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

/// A `POST` action, its body read and its client let act: checked for where
/// the request comes from, then done, answered in JSON.
async fn act(
    head: &hyper::http::request::Parts,
    ctx: &Context,
    peer: SocketAddr,
    given: Vec<(String, String)>,
) -> Answer {
    let path = head.uri.path();
    if path != "/api/pins/forget" && path != "/api/robots/forget" {
        return text(
            StatusCode::NOT_FOUND,
            "not found: the actions are POST /api/pins/forget and /api/robots/forget\n",
        );
    }
    let headers = &head.headers;
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
        let had = ctx.admission.upstream.pins().forget(&host, port).await;
        // A robots.txt the pin made unreachable is asked again at once, not
        // after `unreachable_retry`.
        let mut retried = Vec::new();
        for scheme in Protocol::ALL.iter().map(|p| p.scheme()) {
            let key = HostKey {
                scheme,
                host: host.clone(),
                port,
            };
            let unreachable = ctx
                .admission
                .robots
                .peek(&key)
                .await
                .is_some_and(|e| e.state() == "unreachable");
            if unreachable && ctx.admission.robots.forget(&key).await {
                retried.push(key.to_string());
            }
        }
        tracing::info!(%host, port, had, client = %peer, "admin: certificate pin forgotten");
        json!({ "action": "forget-pin", "host": host, "port": port, "had_pin": had, "robots_forgotten": retried })
    } else {
        let mut forgot = Vec::new();
        for scheme in Protocol::ALL.iter().map(|p| p.scheme()) {
            let key = HostKey {
                scheme,
                host: host.clone(),
                port,
            };
            if ctx.admission.robots.forget(&key).await {
                forgot.push(key.to_string());
            }
        }
        tracing::info!(%host, port, forgot = %forgot.join(","), client = %peer, "admin: cached robots.txt forgotten");
        json!({ "action": "forget-robots", "host": host, "port": port, "forgotten": forgot })
    };
    json_answer(StatusCode::OK, &done)
}

/// This machine's name, which clients may use in `Host`.
fn machine_name() -> Option<Arc<str>> {
    let name = nix::unistd::gethostname().ok()?;
    let name = name.to_str()?.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then(|| Arc::from(name))
}

pub async fn serve(
    listener: TcpListener,
    live: Live,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let conns = Arc::new(conns::Conns::default());
    let machine = machine_name();
    // Clients outside [admin] allow_from are logged up to a budget a second.
    let mut outsiders = crate::accept::LogBudget::new(20);
    loop {
        let Some((stream, peer)) =
            crate::accept::next_connection(&listener, &shutdown, "metrics accept failed").await
        else {
            break;
        };
        let ctx = live.load_full();
        if !ctx.admission.config.admin.admits(peer.ip()) {
            ctx.admission
                .metrics
                .rejected(Listener::Admin, Rejection::Access);
            if let Some(suppressed) = outsiders.note() {
                tracing::info!(client = %peer, suppressed, "admin: client outside [admin] allow_from refused");
            }
            let _ = stream.set_zero_linger();
            continue;
        }
        let Some((conn, evicted)) = conns.admit() else {
            ctx.admission
                .metrics
                .rejected(Listener::Admin, Rejection::Full);
            let _ = stream.set_zero_linger();
            continue;
        };
        if evicted {
            // One idle or still-sending connection was cut for this one.
            ctx.admission
                .metrics
                .rejected(Listener::Admin, Rejection::Full);
        }
        let served = Served {
            live: live.clone(),
            peer,
            machine: machine.clone(),
            marker: conn.marker(),
        };
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let _open = ctx.admission.metrics.connection(Listener::Admin);
            let service = hyper::service::service_fn(move |req| answer(req, served.clone()));
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_DEADLINE);
            let conn_future = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn_future);
            tokio::select! {
                _ = conn_future.as_mut() => {}
                _ = conn.cut.cancelled() => {}
                _ = shutdown.cancelled() => {
                    conn_future.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(5), conn_future).await;
                }
            }
            drop(conn);
        });
    }
}
