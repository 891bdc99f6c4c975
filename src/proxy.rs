//! One Gemini request through the proxy: read the request line → canonical target
//! → robots.txt (cached) → decision → connect upstream → stream the answer back.
//! Every wait has a deadline; every read a byte cap.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::cache::{RobotsCache, Rules};
use crate::config::{Config, OnUnreachable};
use crate::fetch::HostKey;
use crate::protocol::gemini::{
    self, header, parse_header, read_line, status, LineError, MAX_HEADER, MAX_URL,
};
use crate::robots::{BotProfile, Decision, Policy};
use crate::target::{Scheme, Target, TargetError};
use crate::upstream::{Upstream, UpstreamError};

/// What the proxy needs to serve a request; shared by all connections.
pub struct Context {
    pub config: Config,
    pub upstream: Arc<Upstream>,
    pub gemini_robots: RobotsCache,
}

/// Who caused a failure: it decides the answer and, later, the metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    Client,
    Upstream,
    Proxy,
}

/// What happened to one request, for the log line.
#[derive(Debug)]
pub struct Outcome {
    pub decision: &'static str,
    pub status: Option<u8>,
    pub detail: String,
    pub bytes: u64,
}

impl Outcome {
    fn refused(decision: &'static str, status: u8, detail: String) -> Outcome {
        Outcome {
            decision,
            status: Some(status),
            detail,
            bytes: 0,
        }
    }
}

/// The reason a `53` gives: the host, the bot, the rule and its line.
pub fn refusal_reason(
    key: &HostKey,
    bot: &BotProfile,
    policy: &Policy,
    decision: &Decision,
) -> String {
    let who = if bot.token().is_empty() {
        "this bot".to_string()
    } else {
        bot.token().to_string()
    };
    let why = policy.explain(decision);
    match why.rule {
        Some(rule) => format!(
            "robots.txt of {}:{} disallows this for {who}: {}: {} (line {})",
            key.host,
            key.port,
            rule.kind.as_str(),
            rule.pattern,
            rule.line
        ),
        None => format!(
            "robots.txt of {}:{} disallows this for {who}",
            key.host, key.port
        ),
    }
}

/// Serves one client connection: TLS, one request, one answer.
pub async fn serve_gemini(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    ctx: Arc<Context>,
) {
    let started = Instant::now();
    let limits = &ctx.config.limits;
    // The handshake and the request line share one deadline: a client that
    // trickles bytes cannot hold a connection longer than that.
    let deadline = started + limits.request_timeout;
    let tls = match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            return;
        }
    };
    let mut client = BufReader::new(tls);
    let left = deadline.saturating_duration_since(Instant::now());
    let line = match read_line(&mut client, MAX_URL, left).await {
        Ok(line) => line,
        Err(LineError::TooLong(_)) => {
            let _ = write_answer(
                &mut client,
                status::BAD_REQUEST,
                "request longer than 1024 bytes",
            )
            .await;
            log(
                peer,
                None,
                started,
                &Outcome::refused("error", status::BAD_REQUEST, "request too long".into()),
            );
            return;
        }
        Err(e) => {
            tracing::debug!(%peer, error = %e, "no request");
            return;
        }
    };
    let (target, outcome) = handle(&mut client, &line, &ctx).await;
    log(peer, target.as_ref(), started, &outcome);
    let _ = tokio::time::timeout(Duration::from_secs(1), client.get_mut().shutdown()).await;
}

fn log(peer: SocketAddr, target: Option<&Target>, started: Instant, outcome: &Outcome) {
    let (host, path) = match target {
        Some(t) => {
            let path = String::from_utf8_lossy(t.matched_path());
            let path: String = path.chars().take(200).collect();
            (t.authority(), path)
        }
        None => (String::new(), String::new()),
    };
    tracing::info!(
        protocol = "gemini",
        client = %peer,
        host = %host,
        path = %path,
        decision = %outcome.decision,
        status = outcome.status,
        detail = %outcome.detail,
        bytes = outcome.bytes,
        duration_ms = started.elapsed().as_millis() as u64,
        "request"
    );
}

async fn write_answer<W: AsyncWrite + Unpin>(
    w: &mut W,
    code: u8,
    meta: &str,
) -> std::io::Result<()> {
    w.write_all(&header(code, meta)).await?;
    w.flush().await
}

/// Parses, decides and relays one request line; answers refusals itself.
async fn handle<S>(
    client: &mut BufReader<S>,
    line: &[u8],
    ctx: &Context,
) -> (Option<Target>, Outcome)
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin,
{
    let (target, outcome) = match decide(line, ctx).await {
        Ok(Allowed { target, addrs }) => {
            let outcome = relay(client, &target, &addrs, ctx).await;
            (Some(target), outcome)
        }
        Err((target, outcome)) => (target, outcome),
    };
    if let (Some(code), 0) = (outcome.status, outcome.bytes) {
        if outcome.decision != "allowed" {
            let _ = write_answer(client, code, &outcome.detail).await;
        }
    }
    (target, outcome)
}

type Refusal = (Option<Target>, Outcome);

/// A target the proxy may fetch, and the addresses it resolved to.
struct Allowed {
    target: Target,
    addrs: Vec<SocketAddr>,
}

/// Everything before the upstream is contacted: a target to fetch, or a refusal.
async fn decide(line: &[u8], ctx: &Context) -> Result<Allowed, Refusal> {
    let bad = |detail: &str| {
        (
            None,
            Outcome::refused("error", status::BAD_REQUEST, detail.to_string()),
        )
    };
    let url = std::str::from_utf8(line).map_err(|_| bad("the request is not UTF-8"))?;
    let target = match Target::parse(url) {
        Ok(t) => t,
        Err(TargetError::UnsupportedScheme(s)) => {
            return Err(bad(&format!(
                "this proxy fetches gemini:// URLs, not {s}://"
            )))
        }
        Err(TargetError::NotAbsolute) => {
            return Err(bad(
                "send an absolute gemini:// URL of the capsule to fetch",
            ))
        }
        Err(e) => return Err(bad(&e.to_string())),
    };
    if target.scheme != Scheme::Gemini {
        return Err(bad(&format!(
            "this listener fetches gemini:// URLs, not {}://",
            target.scheme.as_str()
        )));
    }
    if target.had_userinfo {
        return Err(bad("Gemini URLs carry no userinfo"));
    }
    if target.had_fragment {
        return Err(bad("Gemini requests carry no fragment"));
    }

    // The proxy's own access rules come before robots.txt: a host it must not
    // connect to is not even asked for its robots.txt.
    let addrs = match ctx.upstream.resolve(&target.host, target.port).await {
        Ok(addrs) => addrs,
        Err(e @ UpstreamError::Refused { .. }) => {
            let outcome = Outcome::refused("refused", status::PROXY_REQUEST_REFUSED, e.to_string());
            return Err((Some(target), outcome));
        }
        Err(e) => {
            let outcome = Outcome::refused("error", status::PROXY_ERROR, format!("upstream: {e}"));
            return Err((Some(target), outcome));
        }
    };

    let key = HostKey {
        scheme: Scheme::Gemini,
        host: target.host.clone(),
        port: target.port,
    };
    let (entry, _) = ctx.gemini_robots.rules(&key).await;
    match &entry.rules {
        Rules::Found { policy, stale } => {
            let decision = target.decide(policy);
            if !decision.allowed() {
                let mut reason = refusal_reason(&key, &ctx.config.bot, policy, &decision);
                if stale.is_some() {
                    reason.push_str(" (cached copy; the host is unreachable now)");
                }
                return Err((
                    Some(target),
                    Outcome::refused("disallowed", status::PROXY_REQUEST_REFUSED, reason),
                ));
            }
        }
        Rules::Missing(_) => {}
        Rules::Unreachable { why, retry_at } => {
            if ctx.gemini_robots.on_unreachable() == OnUnreachable::Disallow {
                let left = retry_at.saturating_duration_since(Instant::now());
                let secs = left.as_millis().div_ceil(1000).max(1);
                let detail = format!(
                    "robots.txt of {}:{} could not be fetched ({why}); trying again in {secs} s",
                    key.host, key.port
                );
                return Err((
                    Some(target),
                    Outcome::refused("error", status::PROXY_ERROR, detail),
                ));
            }
        }
    }
    Ok(Allowed { target, addrs })
}

/// Connects upstream, sends the canonical URL, and streams the answer back as it
/// arrives: the header after checking it, then the body, byte for byte.
async fn relay<S>(
    client: &mut BufReader<S>,
    target: &Target,
    addrs: &[SocketAddr],
    ctx: &Context,
) -> Outcome
where
    S: tokio::io::AsyncRead + AsyncWrite + Unpin,
{
    let idle = ctx.config.limits.idle_timeout;
    let fail = |cause: Cause, detail: String| {
        let code = match cause {
            Cause::Proxy => status::PROXY_REQUEST_REFUSED,
            _ => status::PROXY_ERROR,
        };
        Outcome {
            decision: "error",
            status: Some(code),
            detail,
            bytes: 0,
        }
    };
    let upstream = match ctx
        .upstream
        .connect_gemini_to(&target.host, target.port, addrs)
        .await
    {
        Ok(s) => s,
        Err(e @ UpstreamError::Refused { .. }) => return fail(Cause::Proxy, e.to_string()),
        Err(e) => return fail(Cause::Upstream, format!("upstream: {e}")),
    };
    let mut upstream = BufReader::with_capacity(16 * 1024, upstream);
    let request = format!("{}\r\n", target.url());
    let sent = tokio::time::timeout(idle, upstream.get_mut().write_all(request.as_bytes())).await;
    if !matches!(sent, Ok(Ok(()))) {
        return fail(
            Cause::Upstream,
            format!(
                "upstream {}: could not send the request",
                target.authority()
            ),
        );
    }
    let line = match read_line(&mut upstream, MAX_HEADER, idle).await {
        Ok(line) => line,
        Err(e) => {
            return fail(
                Cause::Upstream,
                format!("upstream {}: {e}", target.authority()),
            )
        }
    };
    let upstream_header = match parse_header(&line) {
        Ok(h) => h,
        Err(e) => {
            return fail(
                Cause::Upstream,
                format!("upstream {}: {e}", target.authority()),
            )
        }
    };

    let mut bytes = 0u64;
    let client_io = client.get_mut();
    let head = [line.as_slice(), b"\r\n"].concat();
    if !matches!(
        tokio::time::timeout(idle, client_io.write_all(&head)).await,
        Ok(Ok(()))
    ) {
        return client_gone(upstream_header, bytes);
    }
    bytes += head.len() as u64;
    loop {
        let chunk = match tokio::time::timeout(idle, upstream.fill_buf()).await {
            Ok(Ok([])) => break,
            Ok(Ok(chunk)) => chunk,
            // A server that closes without TLS close_notify has still sent its answer.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Ok(Err(_)) | Err(_) => {
                return Outcome {
                    decision: "allowed",
                    status: Some(upstream_header.status),
                    detail: "upstream stalled or failed mid-answer".into(),
                    bytes,
                }
            }
        };
        let n = chunk.len();
        if !matches!(
            tokio::time::timeout(idle, client_io.write_all(chunk)).await,
            Ok(Ok(()))
        ) {
            return client_gone(upstream_header, bytes);
        }
        upstream.consume(n);
        bytes += n as u64;
    }
    let _ = client_io.flush().await;
    Outcome {
        decision: "allowed",
        status: Some(upstream_header.status),
        detail: String::new(),
        bytes,
    }
}

fn client_gone(h: gemini::Header, bytes: u64) -> Outcome {
    Outcome {
        decision: "allowed",
        status: Some(h.status),
        detail: "client stopped reading".into(),
        bytes,
    }
}
