//! One Spartan request: the request line (and its data, for a bot that may
//! upload), the shared checks, then the upstream's status line checked and
//! the answer streamed back byte for byte.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::admission::Admitted;
use crate::bots::BotId;
use crate::context::Context;
use crate::metrics::{Listener, Protocol};
use crate::protocol::read_line;
use crate::protocols::spartan::wire::{
    header, parse_header, parse_request_line, BadRequest, Data, Header, Request, MAX_HEADER,
    MAX_REQUEST,
};
use crate::proxy::{
    self, exchange, relay_answer, send_request, Conn, Cut, Hangup, LineProtocol, Outcome, Streamed,
    Unparsed,
};
use crate::refusal::{ProxyRule, Refusal, UpstreamFailure};
use crate::target::{canonical_host, Target};

/// The Spartan status for a refusal: its family's class. Refused,
/// malformed, no certificate are the client's: `4`; slow down, unreachable,
/// upstream failure the server side's: `5`.
pub fn status_for(refusal: &Refusal) -> u8 {
    refusal.family().class()
}

/// Writes the answer to a refusal: the status and the refusal's text (a
/// slow-down's says when to ask again).
pub async fn answer<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    let code = status_for(refusal);
    let detail = refusal.detail();
    let _ = client.write_all(&header(code, &detail)).await;
    let _ = client.flush().await;
    Outcome::refused(refusal, Some(code.into()), detail)
}

/// Serves one Spartan request line that reached `host:port` (SOCKS5, the
/// transparent listener). The line must name that host, unless the client
/// connected to an address (it resolved the name itself): then the name it
/// gives is the target, resolved and checked afresh.
pub fn serve_line<'a, S: AsyncRead + AsyncWrite + Cut + Unpin + 'a>(
    stream: S,
    conn: Conn<'a>,
    ctx: &'a Arc<Context>,
    (host, port): (&'a str, u16),
    listener: Listener,
) -> impl std::future::Future<Output = ()> + 'a {
    proxy::serve_line(stream, conn, ctx, Lines { host, port }, listener)
}

/// Spartan as a line protocol, for a connection made to `host:port`.
struct Lines<'a> {
    host: &'a str,
    port: u16,
}

impl LineProtocol for Lines<'_> {
    type Request = Request;
    const PROTOCOL: Protocol = Protocol::Spartan;
    const MAX_LINE: usize = MAX_REQUEST;
    const WHAT: &'static str = "request line";

    fn parse(&self, line: &[u8]) -> Result<Request, Unparsed> {
        if crate::protocol::sniff::looks_like_http(line) {
            return Err(Unparsed::Http);
        }
        let malformed = |e: BadRequest| Unparsed::refused(Refusal::Malformed(e.into()));
        let request = parse_request_line(self.port, line).map_err(malformed)?;
        let by_address =
            self.host.parse::<std::net::IpAddr>().is_ok() || self.host.starts_with('[');
        let expected = canonical_host(self.host).unwrap_or_default();
        if request.target.host != expected && !by_address {
            return Err(Unparsed::refused(Refusal::ProxyRule(
                ProxyRule::OtherHost {
                    expected,
                    port: self.port,
                    named: request.target.host.clone(),
                },
            )));
        }
        Ok(request)
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

/// An upload is refused before anything else for a bot that may not upload;
/// then the shared checks and the relay.
pub async fn process<S: AsyncRead + AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    (bot, request): (BotId, &Request),
    ctx: &Context,
) -> Outcome {
    if request.uploads() && !ctx.admission.config.bots.get(bot).limits.uploads {
        let refusal = Refusal::ProxyRule(ProxyRule::Upload {
            what: "a Spartan request with data",
        });
        return answer(client.get_mut(), &refusal).await;
    }
    // Data that follows the line is the request's own: nothing may read it
    // while the request waits.
    let hangup = match request.data {
        Data::Follows(_) => Hangup::Unwatched,
        _ => Hangup::OnError,
    };
    let spartan = Spartan {
        ctx,
        request,
        hangup,
    };
    exchange(ctx, (bot, &request.target), client, &spartan).await
}

/// Spartan's part of the exchange: the request (and its data) sent, the
/// status line checked, the answer streamed back byte for byte, a refusal
/// as a status line. Its statuses say nothing of the server's load.
struct Spartan<'a> {
    ctx: &'a Context,
    request: &'a Request,
    hangup: Hangup,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Streamed<S> for Spartan<'_> {
    type Head = Answered;

    fn hangup(&self) -> Hangup {
        self.hangup
    }

    async fn ask(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
    ) -> Result<Answered, Refusal> {
        ask(client, self.request, admitted, self.ctx).await
    }

    async fn relay(&self, client: &mut BufReader<S>, mut answered: Answered) -> Outcome {
        let line = (answered.line.as_slice(), answered.header.status);
        let upstream = &mut answered.upstream;
        relay_answer(
            upstream,
            client.get_mut(),
            line,
            self.ctx,
            answered.connecting,
        )
        .await
    }

    async fn refuse(&self, client: &mut S, refusal: &Refusal) -> Outcome {
        answer(client, refusal).await
    }
}

/// An upstream that has answered a Spartan request with a valid status
/// line; its body is still to be read.
pub struct Answered {
    pub upstream: BufReader<TcpStream>,
    /// The status line as it came (its end removed).
    pub line: Vec<u8>,
    pub header: Header,
    /// When connecting began.
    pub connecting: Instant,
}

/// Connects to the admitted server, sends the request (and the data that
/// follows it, from the client), and reads the status line, within the
/// idle deadline. Any failure is a refusal: nothing has been sent to the
/// client yet.
pub async fn ask<S: AsyncRead + Unpin>(
    client: &mut BufReader<S>,
    request: &Request,
    admitted: &Admitted,
    ctx: &Context,
) -> Result<Answered, Refusal> {
    let idle = ctx.admission.config.limits.idle_timeout;
    let target = &request.target;
    let authority = target.authority();
    let connecting = Instant::now();
    let upstream = ctx
        .admission
        .upstream
        .connect_tcp(&target.host, &admitted.server.addrs)
        .await
        .map_err(Refusal::from)?;
    let mut upstream = BufReader::with_capacity(16 * 1024, upstream);
    let head = request.upstream_head();
    let announced = match request.data {
        Data::Follows(n) => Some(n),
        _ => None,
    };
    send_request(
        client,
        upstream.get_mut(),
        (&head, announced),
        ctx,
        &authority,
    )
    .await?;
    let bad_answer = |why: String| {
        Refusal::Upstream(UpstreamFailure::Answer {
            authority: authority.clone(),
            why,
        })
    };
    let line = read_line(&mut upstream, MAX_HEADER, idle)
        .await
        .map_err(|e| bad_answer(e.to_string()))?;
    let header = parse_header(&line).map_err(|e| bad_answer(e.to_string()))?;
    ctx.admission
        .metrics
        .upstream_first_byte
        .observe(connecting.elapsed().as_secs_f64());
    Ok(Answered {
        upstream,
        line,
        header,
        connecting,
    })
}
