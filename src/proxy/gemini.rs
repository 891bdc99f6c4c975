//! One Gemini request: TLS, the request line, the shared checks, then the
//! upstream's answer streamed back (its header checked, then byte for byte).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::{
    ceil_secs, finish, log, serve_admitted, stream, Admitted, Answer, Context, Cut, Ended, Hangup,
    Outcome, Refusal,
};
use crate::fate::Fate;
use crate::metrics::Protocol;
use crate::protocol::gemini::{
    header, parse_header, parse_request, read_line, status, LineError, MAX_HEADER, MAX_URL,
};
use crate::target::Target;

/// The Gemini status for a request that was not relayed (the README's table).
fn status_for(fate: Fate) -> u8 {
    match fate {
        Fate::Malformed => status::BAD_REQUEST,
        Fate::ProxyRule | Fate::Disallowed => status::PROXY_REQUEST_REFUSED,
        Fate::RobotsUnreachable | Fate::UpstreamFailed | Fate::Relayed | Fate::ClientLeft => {
            status::PROXY_ERROR
        }
        Fate::SlowDown => status::SLOW_DOWN,
    }
}

/// Serves one client connection: TLS, one request, one answer.
pub async fn serve(stream: TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, ctx: Arc<Context>) {
    let started = Instant::now();
    // The handshake and the request line share one deadline: a client that
    // trickles bytes cannot hold a connection longer than that.
    let deadline = started + ctx.config.limits.request_timeout;
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
    serve_tls(tls, peer, &ctx, None, started, deadline).await;
}

/// The request on an established TLS connection. `expected`: the names the
/// connection was made for (SOCKS5 drop-in mode: the CONNECT host and the SNI
/// name) and its port; a request naming another host is refused with `53`.
pub async fn serve_tls<S>(
    tls: S,
    peer: SocketAddr,
    ctx: &Arc<Context>,
    expected: Option<(&[String], u16)>,
    started: Instant,
    deadline: Instant,
) where
    S: AsyncRead + AsyncWrite + Cut + Unpin,
{
    // The buffer is sized to the request it must hold: a waiting request costs
    // this much, not the 8 KiB default (docs/architecture.md, "Memory per waiting request").
    let mut client = BufReader::with_capacity(MAX_URL + 2, tls);
    let left = deadline.saturating_duration_since(Instant::now());
    let (target, outcome) = match read_line(&mut client, MAX_URL, left).await {
        Ok(line) => handle(&mut client, &line, ctx, expected).await,
        Err(LineError::TooLong(_)) => {
            let refusal = Refusal::Malformed("request longer than 1024 bytes".into());
            (None, answer(client.get_mut(), &refusal).await)
        }
        Err(e) => {
            tracing::debug!(%peer, error = %e, "no request");
            return;
        }
    };
    log(
        &ctx.metrics,
        Protocol::Gemini,
        peer,
        target.as_ref(),
        started,
        &outcome,
    );
    finish(client.get_mut(), &outcome, &ctx.metrics, Protocol::Gemini).await;
}

/// Writes the answer to a refusal.
async fn answer<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    let code = status_for(refusal.fate());
    // Our own `44` always carries a number: the seconds to wait.
    let meta = match refusal {
        Refusal::SlowDown { retry_after, .. } => ceil_secs(*retry_after).to_string(),
        other => other.detail().to_string(),
    };
    let _ = client.write_all(&header(code, &meta)).await;
    let _ = client.flush().await;
    Outcome::new(refusal.fate(), Some(code), refusal.detail().to_string())
}

/// The request line → a Gemini target, or a `59`.
fn parse(line: &[u8]) -> Result<Target, Refusal> {
    parse_request(line).map_err(Refusal::Malformed)
}

async fn handle<S>(
    client: &mut BufReader<S>,
    line: &[u8],
    ctx: &Context,
    expected: Option<(&[String], u16)>,
) -> (Option<Target>, Outcome)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let target = match parse(line) {
        Ok(t) => t,
        Err(refusal) => return (None, answer(client.get_mut(), &refusal).await),
    };
    if let Some((hosts, port)) = expected {
        if !hosts.contains(&target.host) || target.port != port {
            let refusal = Refusal::ProxyRule(format!(
                "this connection is for {}:{port}, the request names {}",
                hosts.join(" or "),
                target.authority()
            ));
            return (Some(target), answer(client.get_mut(), &refusal).await);
        }
    }
    let gemini = Gemini {
        ctx,
        target: &target,
    };
    let outcome = serve_admitted(ctx, &target, client, Hangup::OnEof, &gemini).await;
    (Some(target), outcome)
}

/// How Gemini relays and refuses.
struct Gemini<'a> {
    ctx: &'a Context,
    target: &'a Target,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Answer<S> for Gemini<'_> {
    async fn relay(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
    ) -> Result<Outcome, Refusal> {
        relay(client, self.target, admitted, self.ctx).await
    }

    async fn refuse(&self, client: &mut S, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
}

/// Connects upstream, sends the canonical URL, and streams the answer back as it
/// arrives: the header after checking it, then the body, byte for byte. A
/// refusal is returned only while nothing has been sent to the client yet.
async fn relay<S>(
    client: &mut BufReader<S>,
    target: &Target,
    admitted: &Admitted,
    ctx: &Context,
) -> Result<Outcome, Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = ctx.config.limits.idle_timeout;
    let authority = target.authority();
    let connecting = Instant::now();
    let upstream = ctx
        .upstream
        .connect_gemini_to(&target.host, target.port, &admitted.server.addrs)
        .await
        .map_err(Refusal::from)?;
    let mut upstream = BufReader::with_capacity(16 * 1024, upstream);
    let request = format!("{}\r\n", target.url());
    ctx.metrics.bytes_to_upstream.inc_by(request.len() as u64);
    let sent = tokio::time::timeout(idle, upstream.get_mut().write_all(request.as_bytes())).await;
    if !matches!(sent, Ok(Ok(()))) {
        return Err(Refusal::Upstream(format!(
            "upstream {authority}: could not send the request"
        )));
    }
    let line = read_line(&mut upstream, MAX_HEADER, idle)
        .await
        .map_err(|e| Refusal::Upstream(format!("upstream {authority}: {e}")))?;
    let upstream_header =
        parse_header(&line).map_err(|e| Refusal::Upstream(format!("upstream {authority}: {e}")))?;
    ctx.metrics
        .upstream_first_byte
        .observe(connecting.elapsed().as_secs_f64());
    ctx.metrics.gemini_status(upstream_header.status);
    // An upstream `44` is relayed, and pushes the host's next start out: by its
    // seconds (the older spec), else by doubling the spacing (the newer one).
    match upstream_header.class() {
        4 if upstream_header.status == 44 => {
            let secs = upstream_header
                .meta
                .trim()
                .parse::<u64>()
                .ok()
                .map(Duration::from_secs);
            ctx.politeness.slow_down(admitted.permit.gate(), secs);
        }
        2 => ctx.politeness.recovered(admitted.permit.gate()),
        _ => {}
    }

    let client_io = client.get_mut();
    let head = [line.as_slice(), b"\r\n"].concat();
    let mut outcome = Outcome::new(Fate::Relayed, Some(upstream_header.status), String::new());
    if !matches!(
        tokio::time::timeout(idle, client_io.write_all(&head)).await,
        Ok(Ok(()))
    ) {
        outcome.detail = Ended::ClientGone.detail();
        return Ok(outcome);
    }
    let (body, ended) = stream(&mut upstream, client_io, idle, None).await;
    ctx.metrics
        .upstream_duration
        .observe(connecting.elapsed().as_secs_f64());
    outcome.bytes = head.len() as u64 + body;
    outcome.detail = ended.detail();
    outcome.cut = ended == Ended::UpstreamFailed;
    Ok(outcome)
}
