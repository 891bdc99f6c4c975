//! The way a plain-TCP request of one line is served, whatever its protocol
//! (Gopher, Spartan, Nex): read the line within the connection's deadline,
//! know the bot, parse, then admission and the relay, or the protocol's
//! answer to a refusal; then the end of the connection, the log line and the
//! counts. Each protocol says how it parses, relays and refuses
//! ([`LineProtocol`]).

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::time::Instant;

use std::sync::Arc;

use tokio::net::TcpStream;

use super::{close, finish, stream, Conn, Cut, Ended, Outcome, Tally, Transform, CLIENT_BUFFER};
use crate::admission::Admitted;
use crate::bots::BotId;
use crate::context::Context;
use crate::fate::Fate;
use crate::metrics::{Listener, Protocol, Rejection};
use crate::protocol::{read_line, LineError};
use crate::refusal::{Malformed, Refusal, UpstreamFailure};
use crate::target::Target;

/// Why a line was not parsed into a request.
pub enum Unparsed {
    /// An HTTP request line: a web client, which no answer of ours would
    /// mean anything to. The connection is closed.
    Http,
    /// Refused, with this answer (boxed: the parse's result is held while
    /// the request waits, and a refusal is larger than a request).
    Refused(Box<Refusal>),
}

impl Unparsed {
    pub fn refused(refusal: Refusal) -> Unparsed {
        Unparsed::Refused(Box::new(refusal))
    }
}

/// One line-based protocol, as [`serve_line`] serves it.
pub trait LineProtocol {
    type Request;
    /// Its `protocol` label.
    const PROTOCOL: Protocol;
    /// The longest line it reads.
    const MAX_LINE: usize;
    /// What its line is called in a refusal ("selector line").
    const WHAT: &'static str;

    fn parse(&self, line: &[u8]) -> Result<Self::Request, Unparsed>;

    /// The request's target, for its count and log line (taken: the
    /// request is done with).
    fn into_target(request: Self::Request) -> Target;

    /// Admission, then the relay or the answer to its refusal.
    fn process<S: AsyncRead + AsyncWrite + Unpin>(
        &self,
        client: &mut BufReader<S>,
        request: (BotId, &Self::Request),
        ctx: &Context,
    ) -> impl std::future::Future<Output = Outcome>;

    /// Writes the protocol's answer to a refusal.
    fn refuse<W: AsyncWrite + Unpin>(
        client: &mut W,
        refusal: &Refusal,
    ) -> impl std::future::Future<Output = Outcome>;
}

/// Serves one line read from `stream` within the connection's deadline.
/// Callers hand their arguments straight on (a wrapper that is an `async fn`
/// would hold the stream and the connection twice: tests/footprint.rs).
pub async fn serve_line<S, P>(
    stream: S,
    conn: Conn<'_>,
    ctx: &Arc<Context>,
    proto: P,
    listener: Listener,
) where
    S: AsyncRead + AsyncWrite + Cut + Unpin,
    P: LineProtocol,
{
    let peer = conn.peer;
    // Small: `read_line` gathers a longer line over several reads, and a
    // waiting request holds this buffer (tests/footprint.rs).
    let mut client = BufReader::with_capacity(CLIENT_BUFFER, stream);
    let left = conn.deadline.saturating_duration_since(Instant::now());
    // Who is asking is known before its line is read: even a malformed
    // request counts for its bot.
    let who = ctx
        .admission
        .config
        .access
        .identify(&ctx.admission.config.bots, &conn.client());
    let bot = who.as_ref().ok().copied();
    let (request, outcome) = match read_line(&mut client, P::MAX_LINE, left).await {
        Ok(line) => match (proto.parse(&line), who) {
            (Err(Unparsed::Http), _) => {
                tracing::info!(%peer, listener = %listener.as_str(), protocol = P::PROTOCOL.as_str(), "an HTTP request; closed (the small web's protocols only)");
                ctx.admission.metrics.rejected(listener, Rejection::Http);
                close(client.get_mut()).await;
                return;
            }
            (parsed, Err(denied)) => {
                ctx.admission.metrics.access_refused(&denied);
                let outcome = P::refuse(client.get_mut(), &Refusal::Denied(denied)).await;
                (parsed.ok(), outcome)
            }
            (Ok(request), Ok(bot)) => {
                let outcome = proto.process(&mut client, (bot, &request), ctx).await;
                (Some(request), outcome)
            }
            (Err(Unparsed::Refused(refusal)), Ok(_)) => {
                let refusal = *refusal;
                (None, P::refuse(client.get_mut(), &refusal).await)
            }
        },
        Err(LineError::TooLong(max)) => {
            let refusal = Refusal::Malformed(Malformed::TooLong { what: P::WHAT, max });
            (None, P::refuse(client.get_mut(), &refusal).await)
        }
        Err(e) => {
            // A scanner that sends nothing is no request.
            tracing::debug!(%peer, error = %e, protocol = P::PROTOCOL.as_str(), "no request line; closed");
            return;
        }
    };
    let target = request.map(P::into_target);
    let tally = Tally::new(ctx.clone(), P::PROTOCOL, &conn, (bot, target), outcome);
    finish(client.get_mut(), tally).await;
}

/// An upstream that has begun to answer a one-line request: its first
/// bytes are in its buffer.
pub struct Upstream {
    pub stream: BufReader<TcpStream>,
    /// When connecting began.
    pub connecting: Instant,
}

/// The exchange of a one-line plain-TCP request (Gopher, Nex) up to its
/// answer's first byte: connects to the admitted server, sends `line`, and
/// waits for the first byte (a server that says nothing gets a refusal, not
/// an empty answer). `what`: the line's name in a refusal.
pub async fn ask_line(
    (target, line, what): (&Target, &[u8], &'static str),
    admitted: &Admitted,
    ctx: &Context,
) -> Result<Upstream, Refusal> {
    let idle = ctx.admission.config.limits.idle_timeout;
    let connecting = Instant::now();
    let upstream = ctx
        .admission
        .upstream
        .connect_tcp(&target.host, &admitted.server.addrs)
        .await
        .map_err(Refusal::from)?;
    let mut upstream = BufReader::with_capacity(16 * 1024, upstream);
    ctx.admission
        .metrics
        .bytes_to_upstream
        .inc_by(line.len() as u64);
    let sent = tokio::time::timeout(idle, upstream.get_mut().write_all(line)).await;
    if !matches!(sent, Ok(Ok(()))) {
        return Err(Refusal::Upstream(UpstreamFailure::Send {
            authority: target.authority(),
            what,
        }));
    }
    match tokio::time::timeout(idle, upstream.fill_buf()).await {
        Ok(Ok(_)) => ctx
            .admission
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
    Ok(Upstream {
        stream: upstream,
        connecting,
    })
}

/// The rest of a one-line request's answer, streamed to the client through
/// `transform`.
pub async fn relay_line<S: AsyncRead + AsyncWrite + Unpin, T: Transform>(
    client: &mut BufReader<S>,
    mut upstream: Upstream,
    ctx: &Context,
    transform: &mut T,
) -> Outcome {
    let idle = ctx.admission.config.limits.idle_timeout;
    let (bytes, ended) = stream(&mut upstream.stream, client.get_mut(), idle, transform).await;
    ctx.admission
        .metrics
        .upstream_duration
        .observe(upstream.connecting.elapsed().as_secs_f64());
    Outcome {
        bytes,
        cut: ended == Ended::UpstreamFailed,
        ..Outcome::new(Fate::Relayed, None, ended.detail())
    }
}
