//! One Gopher request: the selector line (a Gopher URL), the shared checks, then
//! the upstream's answer streamed back: text and binary byte for byte, menus
//! (type 1, and the results of type 7) rewritten to point back through the proxy.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::access::Denied;
use crate::admission::Admitted;
use crate::bots::BotId;
use crate::context::Context;
use crate::fate::Fate;
use crate::gopher::wire::{
    error_menu, parse_request, BadRequest, MenuRewriter, Request, MAX_REQUEST,
};
use crate::metrics::{Listener, Protocol, Rejection};
use crate::protocol::{read_line, LineError};
use crate::proxy::{
    close, finish, log, serve_admitted, stream, Answer, Conn, Cut, Ended, Hangup, Outcome,
    Transform, CLIENT_BUFFER,
};
use crate::refusal::{Malformed, Refusal, UpstreamFailure};

/// The first line of the type-3 menu for a refusal (the README's table),
/// before its detail.
fn kind_for(refusal: &Refusal) -> &'static str {
    match refusal.fate() {
        Fate::Malformed => "400 Bad Request",
        Fate::ProxyRule | Fate::Disallowed | Fate::Denied => "403 Forbidden",
        Fate::RobotsUnreachable | Fate::SlowDown => "503 Service Unavailable",
        Fate::UpstreamFailed | Fate::Relayed | Fate::ClientLeft => "502 Bad Gateway",
    }
}

async fn answer<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    // The detail is formatted once: for the menu and for the log line.
    let detail = refusal.detail();
    let text = format!("{}: {detail}", kind_for(refusal));
    let _ = client.write_all(&error_menu(&text)).await;
    let _ = client.flush().await;
    Outcome::new(refusal.fate(), None, detail)
}

/// Serves one client of the Gopher listener: one selector line (a Gopher URL),
/// one answer, menus rewritten to point back through the proxy.
pub async fn serve(stream: TcpStream, peer: SocketAddr, ctx: Arc<Context>) {
    let conn = Conn::accepted(peer, ctx.config.limits.request_timeout);
    serve_line(stream, conn, &ctx, parse_request, Listener::Gopher).await;
}

/// A client outside `access.allow_from`: a `403` menu at once, and nothing
/// else. Its selector is not read.
pub async fn turn_away(mut stream: TcpStream, peer: SocketAddr) {
    answer(&mut stream, &Refusal::Denied(Denied::Address(peer.ip()))).await;
    close(&mut stream).await;
}

/// Serves one selector line read from `stream` within the connection's
/// deadline, parsed by `parse`: the Gopher listener's URL lines and the bare
/// selectors of SOCKS5 and the transparent listener take the same path from here
/// on (checks, answers, log line, metrics). Only the Gopher listener's clients
/// get menus rewritten to point back through it; the others' next request
/// comes through their way in again.
pub async fn serve_line<S: AsyncRead + AsyncWrite + Cut + Unpin>(
    stream: S,
    conn: Conn<'_>,
    ctx: &Context,
    parse: impl FnOnce(&[u8]) -> Result<Request, BadRequest>,
    listener: Listener,
) {
    let rewrite_menus = listener == Listener::Gopher;
    let peer = conn.peer;
    // Small: `read_line` gathers a longer line over several reads, and a
    // waiting request holds this buffer (tests/footprint.rs).
    let mut client = BufReader::with_capacity(CLIENT_BUFFER, stream);
    let left = conn.deadline.saturating_duration_since(Instant::now());
    // Who is asking is known before its line is read: even a malformed
    // request counts for its bot.
    let who = ctx.config.access.identify(&ctx.config.bots, &conn.client());
    let bot = who.as_ref().ok().copied();
    let (request, outcome) = match read_line(&mut client, MAX_REQUEST, left).await {
        Ok(line) => match (parse(&line), who) {
            (Err(BadRequest::Http), _) => {
                // A web client: no Gopher answer would mean anything to it.
                tracing::info!(%peer, listener = %listener.as_str(), "an HTTP request; closed (Gemini and Gopher only)");
                ctx.metrics.rejected(listener, Rejection::Http);
                close(client.get_mut()).await;
                return;
            }
            (parsed, Err(denied)) => {
                ctx.metrics.access_refused(&denied);
                let outcome = answer(client.get_mut(), &Refusal::Denied(denied)).await;
                (parsed.ok(), outcome)
            }
            (Ok(request), Ok(bot)) => {
                let outcome = process(&mut client, (bot, &request), ctx, rewrite_menus).await;
                (Some(request), outcome)
            }
            (Err(e), Ok(_)) => {
                let refusal = Refusal::Malformed(e.into());
                (None, answer(client.get_mut(), &refusal).await)
            }
        },
        Err(LineError::TooLong(max)) => {
            let refusal = Refusal::Malformed(Malformed::TooLong {
                what: "selector line",
                max,
            });
            (None, answer(client.get_mut(), &refusal).await)
        }
        Err(e) => {
            // As before on the Gopher listener: a scanner that sends nothing is no request.
            tracing::debug!(%peer, error = %e, "no selector line; closed");
            return;
        }
    };
    let target = request.as_ref().map(|r| &r.target);
    finish(
        client.get_mut(),
        &outcome,
        (&ctx.metrics, Protocol::Gopher),
        || log(ctx, Protocol::Gopher, &conn, (bot, target), &outcome),
    )
    .await;
}

/// The shared checks, then the relay. `rewrite_menus`: menus answer to a client
/// of the Gopher listener, which must be sent back through the proxy; through
/// SOCKS5 the client's next request comes through SOCKS again, so no rewriting.
pub async fn process<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    (bot, request): (BotId, &Request),
    ctx: &Context,
    rewrite_menus: bool,
) -> Outcome {
    let gopher = Gopher {
        ctx,
        request,
        rewrite_menus,
    };
    let admitted = (bot, &request.target);
    serve_admitted(ctx, admitted, client, Hangup::OnError, &gopher).await
}

/// How Gopher relays and refuses.
struct Gopher<'a> {
    ctx: &'a Context,
    request: &'a Request,
    rewrite_menus: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Answer<S> for Gopher<'_> {
    async fn relay(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
    ) -> Result<Outcome, Refusal> {
        relay(client, self.request, admitted, self.ctx, self.rewrite_menus).await
    }

    async fn refuse(&self, client: &mut S, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
}

/// Sends the selector upstream and streams the answer back. A refusal is
/// returned only while nothing has been sent to the client yet.
async fn relay<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    request: &Request,
    admitted: &Admitted,
    ctx: &Context,
    rewrite_menus: bool,
) -> Result<Outcome, Refusal> {
    let idle = ctx.config.limits.idle_timeout;
    let target = &request.target;
    let connecting = Instant::now();
    let upstream = ctx
        .upstream
        .connect_tcp(&target.host, &admitted.server.addrs)
        .await
        .map_err(Refusal::from)?;
    let mut upstream = BufReader::with_capacity(16 * 1024, upstream);
    let line = request.upstream_line();
    ctx.metrics.bytes_to_upstream.inc_by(line.len() as u64);
    let sent = tokio::time::timeout(idle, upstream.get_mut().write_all(&line)).await;
    if !matches!(sent, Ok(Ok(()))) {
        return Err(Refusal::Upstream(UpstreamFailure::Send {
            authority: target.authority(),
            what: "selector",
        }));
    }
    // Wait for the first byte before answering anything: a server that says
    // nothing gets a 3502, not an empty answer.
    match tokio::time::timeout(idle, upstream.fill_buf()).await {
        Ok(Ok(_)) => ctx
            .metrics
            .upstream_first_byte
            .observe(connecting.elapsed().as_secs_f64()),
        Ok(Err(e)) => {
            return Err(Refusal::Upstream(UpstreamFailure::Answer {
                authority: target.authority(),
                why: e.to_string(),
            }))
        }
        Err(_) => {
            return Err(Refusal::Upstream(UpstreamFailure::Silent {
                authority: target.authority(),
                after: idle,
            }))
        }
    }
    let mut rewriter = match &ctx.gopher_public {
        Some((host, port)) if rewrite_menus && request.answer_is_menu() => Some(Rewriting {
            menu: MenuRewriter::new(host, *port),
            out: Vec::new(),
        }),
        _ => None,
    };
    let (bytes, ended) = stream(&mut upstream, client.get_mut(), idle, &mut rewriter).await;
    ctx.metrics
        .upstream_duration
        .observe(connecting.elapsed().as_secs_f64());
    Ok(Outcome {
        bytes,
        cut: ended == Ended::UpstreamFailed,
        ..Outcome::new(Fate::Relayed, None, ended.detail())
    })
}

/// A menu rewritten on its way to the client, its items pointing back at the
/// proxy (`gopher.public_host`): the pump's [`Transform`] for Gopher.
struct Rewriting {
    menu: MenuRewriter,
    out: Vec<u8>,
}

impl Transform for Rewriting {
    fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> &'a [u8] {
        self.out.clear();
        self.menu.feed(chunk, &mut self.out);
        &self.out
    }

    fn finish(&mut self) -> &[u8] {
        self.out.clear();
        self.menu.finish(&mut self.out);
        &self.out
    }
}
