//! One Gopher request: the selector line (a Gopher URL), the shared checks, then
//! the upstream's answer streamed back: text and binary byte for byte, menus
//! (type 1, and the results of type 7) rewritten to point back through the proxy.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::access::Denied;
use crate::admission::Admitted;
use crate::bots::BotId;
use crate::context::Context;
use crate::fate::Fate;
use crate::metrics::{Listener, Protocol};
use crate::protocols::gopher::wire::{
    error_menu, parse_request, BadRequest, MenuRewriter, Request, MAX_REQUEST,
};
use crate::proxy::{
    self, ask_line, close, exchange, relay_line, Conn, Cut, Hangup, LineProtocol, Outcome,
    Streamed, Unparsed, Upstream,
};
use crate::refusal::{ProxyRule, Refusal};
use crate::target::Target;

/// The first line of the type-3 menu for a refusal (docs/guide/answers.md),
/// before its detail.
fn kind_for(refusal: &Refusal) -> &'static str {
    match refusal.fate() {
        Fate::Malformed => "400 Bad Request",
        Fate::ProxyRule | Fate::Disallowed | Fate::Denied | Fate::DenyHosts | Fate::Preference => {
            "403 Forbidden"
        }
        Fate::RobotsUnreachable | Fate::SlowDown => "503 Service Unavailable",
        Fate::UpstreamFailed | Fate::Relayed | Fate::ClientLeft => "502 Bad Gateway",
    }
}

/// A refusal as a Spartan status line: the family's class (`4` the
/// client's, `5` the server's) and the refusal's text.
async fn answer_in_spartan<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    let class = refusal.family().class();
    let detail = refusal.detail();
    let _ = client
        .write_all(&crate::protocol::status_line(class, &detail))
        .await;
    let _ = client.flush().await;
    Outcome::refused(refusal, Some(class.into()), detail)
}

async fn answer<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    // A Spartan request to a port the table does not list is answered in
    // Spartan: the client's own language, not a menu it would misread.
    // (Boxed: rare, and inline it would size every connection's future.)
    if let Refusal::ProxyRule(ProxyRule::Unlisted { .. }) = refusal {
        return Box::pin(answer_in_spartan(client, refusal)).await;
    }
    // The detail is formatted once: for the menu and for the log line.
    let detail = refusal.detail();
    let text = format!("{}: {detail}", kind_for(refusal));
    let _ = client.write_all(&error_menu(&text)).await;
    let _ = client.flush().await;
    Outcome::refused(refusal, None, detail)
}

/// Serves one client of the Gopher listener: one selector line (a Gopher URL),
/// one answer, menus rewritten to point back through the proxy.
pub async fn serve(stream: TcpStream, peer: SocketAddr, ctx: Arc<Context>) {
    let conn = Conn::accepted(
        (peer, crate::metrics::Listener::Gopher),
        ctx.admission.config.limits.request_timeout,
    );
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
pub fn serve_line<'a, S: AsyncRead + AsyncWrite + Cut + Unpin + 'a>(
    stream: S,
    conn: Conn<'a>,
    ctx: &'a Arc<Context>,
    parse: impl Fn(&[u8]) -> Result<Request, BadRequest> + 'a,
    listener: Listener,
) -> impl std::future::Future<Output = ()> + 'a {
    let lines = Lines {
        parse,
        rewrite_menus: listener == Listener::Gopher,
    };
    proxy::serve_line(stream, conn, ctx, lines, listener)
}

/// Gopher as a line protocol: how its lines are parsed, and whether menus
/// are rewritten.
struct Lines<F> {
    parse: F,
    rewrite_menus: bool,
}

impl<F: Fn(&[u8]) -> Result<Request, BadRequest>> LineProtocol for Lines<F> {
    type Request = Request;
    const PROTOCOL: Protocol = Protocol::Gopher;
    const MAX_LINE: usize = MAX_REQUEST;
    const WHAT: &'static str = "selector line";

    fn parse(&self, line: &[u8]) -> Result<Request, Unparsed> {
        (self.parse)(line).map_err(|e| match e {
            BadRequest::Http => Unparsed::Http,
            BadRequest::Unlisted { protocol, port } => {
                Unparsed::refused(Refusal::ProxyRule(ProxyRule::Unlisted {
                    protocol: protocol.as_str(),
                    port,
                }))
            }
            e => Unparsed::refused(Refusal::Malformed(e.into())),
        })
    }

    fn into_target(request: Request) -> Target {
        request.target
    }

    async fn process<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        client: &mut BufReader<S>,
        (bot, request): (BotId, &Request),
        ctx: &Context,
    ) -> Outcome {
        process(client, (bot, request), ctx, self.rewrite_menus).await
    }

    async fn refuse<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
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
    exchange(ctx, (bot, &request.target), client, &gopher).await
}

/// Gopher's part of the exchange: the selector sent, the answer streamed
/// back (menus through the rewriter for the Gopher listener's clients), a
/// refusal as a type-3 menu. Its servers say nothing of their load.
struct Gopher<'a> {
    ctx: &'a Context,
    request: &'a Request,
    rewrite_menus: bool,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Streamed<S> for Gopher<'_> {
    type Head = Upstream;

    fn hangup(&self) -> Hangup {
        Hangup::OnError
    }

    async fn ask(&self, _: &mut BufReader<S>, admitted: &Admitted) -> Result<Upstream, Refusal> {
        let line = self.request.upstream_line();
        let what = (&self.request.target, line.as_slice(), "selector");
        ask_line(what, admitted, self.ctx).await
    }

    async fn relay(&self, client: &mut BufReader<S>, upstream: Upstream) -> Outcome {
        let mut rewriter = match &self.ctx.gopher_public {
            Some((host, port)) if self.rewrite_menus && self.request.answer_is_menu() => {
                Some(MenuRewriter::new(host, *port))
            }
            _ => None,
        };
        relay_line(client, upstream, self.ctx, &mut rewriter).await
    }

    async fn refuse(&self, client: &mut S, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
}
