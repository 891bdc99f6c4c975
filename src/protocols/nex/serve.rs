//! One Nex request: the path line, the shared checks, then the upstream's
//! document streamed back byte for byte; a refusal is a short text document
//! ([`crate::protocols::nex::wire::refusal_document`]).

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use crate::admission::Admitted;
use crate::bots::BotId;
use crate::context::Context;
use crate::metrics::{Listener, Protocol};
use crate::protocols::nex::wire::{parse_path_line, refusal_document, Request, MAX_REQUEST};
use crate::proxy::{
    self, ask_line, exchange, relay_line, Conn, Cut, Hangup, LineProtocol, Outcome, Streamed,
    Unparsed, Upstream, Verbatim,
};
use crate::refusal::{Malformed, Refusal};
use crate::target::Target;

/// Writes the answer to a refusal: a document whose first line names the
/// proxy's code for it (Gemini's status) and the refusal's text.
pub async fn answer<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    let code = refusal.family().code();
    let detail = refusal.detail();
    let _ = client.write_all(&refusal_document(code, &detail)).await;
    let _ = client.flush().await;
    Outcome::refused(refusal, Some(code.into()), detail)
}

/// Serves one Nex path line that reached `host:port` (SOCKS5, the
/// transparent listener).
pub fn serve_line<'a, S: AsyncRead + AsyncWrite + Cut + Unpin + 'a>(
    stream: S,
    conn: Conn<'a>,
    ctx: &'a Arc<Context>,
    (host, port): (&'a str, u16),
    listener: Listener,
) -> impl std::future::Future<Output = ()> + 'a {
    proxy::serve_line(stream, conn, ctx, Lines { host, port }, listener)
}

/// Nex as a line protocol, for a connection made to `host:port`.
struct Lines<'a> {
    host: &'a str,
    port: u16,
}

impl LineProtocol for Lines<'_> {
    type Request = Request;
    const PROTOCOL: Protocol = Protocol::Nex;
    const MAX_LINE: usize = MAX_REQUEST;
    const WHAT: &'static str = "path line";

    fn parse(&self, line: &[u8]) -> Result<Request, Unparsed> {
        if crate::protocol::sniff::looks_like_http(line) {
            return Err(Unparsed::Http);
        }
        parse_path_line(self.host, self.port, line)
            .map_err(|e| Unparsed::refused(Refusal::Malformed(Malformed::Target(e))))
    }

    fn into_target(request: Request) -> Target {
        request.target
    }

    async fn process<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        client: &mut BufReader<S>,
        request: (BotId, &Request),
        ctx: &Context,
    ) -> Outcome {
        process(client, request, ctx).await
    }

    async fn refuse<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
}

/// The shared checks, then the relay.
pub async fn process<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    (bot, request): (BotId, &Request),
    ctx: &Context,
) -> Outcome {
    let nex = Nex { ctx, request };
    exchange(ctx, (bot, &request.target), client, &nex).await
}

/// Nex's part of the exchange: the path sent, the document streamed back
/// byte for byte, a refusal as a short document. Its servers say nothing of
/// their load.
struct Nex<'a> {
    ctx: &'a Context,
    request: &'a Request,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Streamed<S> for Nex<'_> {
    type Head = Upstream;

    fn hangup(&self) -> Hangup {
        Hangup::OnError
    }

    async fn ask(&self, _: &mut BufReader<S>, admitted: &Admitted) -> Result<Upstream, Refusal> {
        let line = self.request.upstream_line();
        let what = (&self.request.target, line.as_slice(), "path");
        ask_line(what, admitted, self.ctx).await
    }

    async fn relay(&self, client: &mut BufReader<S>, upstream: Upstream) -> Outcome {
        relay_line(client, upstream, self.ctx, &mut Verbatim).await
    }

    async fn refuse(&self, client: &mut S, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
}
