//! One request through the proxy, whatever the protocol: parse (per protocol) →
//! canonical target → admission (`admission`: address rules, robots.txt,
//! limits, the host's turn) → connect upstream → stream the answer back. Every
//! wait has a deadline; every read a byte cap. Each protocol turns a
//! [`Refusal`] into its own answer (Gemini status, Gopher type-3 menu).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader,
};
use tokio::time::Instant;

use crate::bots::{Client, Presented};
use crate::context::Context;
use crate::refusal::Refusal;

pub mod exchange;
pub mod line;
mod outcome;
mod served;
pub mod stalled;
mod streamed;
mod tally;
pub use exchange::{exchange, Attempt, Exchange, Load, Verdict};
pub use line::{ask_line, relay_line, serve_line, LineProtocol, Unparsed, Upstream};
pub use outcome::{client_left, Outcome, Said};
pub use served::{Dest, OverTls, Plain, Served};
pub use streamed::Streamed;
pub use tally::Tally;

/// One client connection as the request path sees it: who is asking, since
/// when, and until when its request must have arrived.
#[derive(Clone, Copy, Debug)]
pub struct Conn<'a> {
    pub peer: SocketAddr,
    /// The listener it came in on (its own label in the log line: the
    /// `protocol` is the server's).
    pub listener: crate::metrics::Listener,
    /// The SOCKS5 user it authenticated as.
    pub socks5_user: Option<&'a str>,
    /// Its client certificate, where the connection is TLS.
    pub cert: Presented,
    pub started: Instant,
    pub deadline: Instant,
}

impl<'a> Conn<'a> {
    /// A connection accepted now on `listener`, whose request must arrive
    /// within `request_timeout`.
    pub fn accepted(
        (peer, listener): (SocketAddr, crate::metrics::Listener),
        request_timeout: Duration,
    ) -> Conn<'a> {
        let started = Instant::now();
        Conn {
            peer,
            listener,
            socks5_user: None,
            cert: Presented::NotTls,
            started,
            deadline: started + request_timeout,
        }
    }

    /// What picks its bot.
    pub fn client(&self) -> Client<'a> {
        Client {
            addr: self.peer.ip(),
            socks5_user: self.socks5_user,
            cert: self.cert,
        }
    }
}

/// A client connection that can be ended so that the client sees its answer
/// is incomplete: Gemini without TLS `close_notify` (a clean TCP FIN after
/// it would look like a whole answer), Gopher with a TCP reset (a plain close
/// would look like a whole file).
pub trait Cut {
    fn cut(&mut self) -> impl std::future::Future<Output = ()> + Send;
}

impl Cut for tokio::net::TcpStream {
    async fn cut(&mut self) {
        // SO_LINGER 0: the close that follows (on drop) sends a reset.
        let _ = self.set_zero_linger();
    }
}

impl Cut for tokio_rustls::server::TlsStream<tokio::net::TcpStream> {
    async fn cut(&mut self) {
        // Ends the TCP stream under TLS: no close_notify is ever sent.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.get_mut().0.shutdown()).await;
    }
}

/// Ends the answer to the client (a clean close, or a cut when the upstream
/// failed mid-body). The request is counted first (in place before the
/// client can see the end), and logged after (once the client has its
/// answer, so the line adds nothing to its wait: as `tally` is dropped);
/// then waits briefly for the client to close.
pub async fn finish<S: AsyncRead + AsyncWrite + Cut + Unpin>(client: &mut S, mut tally: Tally) {
    // Given back before the client can see the end, so a client that
    // connects again the moment it does finds its place free.
    crate::slots::answered();
    tally.count();
    if tally.outcome.cut {
        tally.truncated();
        client.cut().await;
        drop(tally);
    } else {
        let _ = client.shutdown().await;
        drop(tally);
        drain(client).await;
    }
}

/// The buffer each client connection reads its request through. A request
/// line longer than this is read in several steps; a connection waiting for
/// its turn holds this much, so it stays small.
pub const CLIENT_BUFFER: usize = 512;

/// How a client's connection behaves while its request waits for its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hangup {
    /// End of stream means the client left (Gemini: clients do not half-close;
    /// a TLS close or a TCP close ends the connection).
    OnEof,
    /// Only an error means the client left (Gopher: tools such as `nc` and `socat`
    /// half-close after the selector and still read the answer).
    OnError,
    /// Nothing is read while the request waits: what the client sends next
    /// is the request's own data (a Spartan upload), relayed later.
    Unwatched,
}

/// Resolves when the client has gone away, as `hangup` reads it; never, otherwise.
/// Anything the client sends meanwhile is read and dropped (a request is one line).
pub async fn client_gone<R: AsyncRead + Unpin>(client: &mut R, hangup: Hangup) {
    if hangup == Hangup::Unwatched {
        return std::future::pending().await;
    }
    let mut buf = [0u8; 256];
    loop {
        match client.read(&mut buf).await {
            Ok(0) if hangup == Hangup::OnEof => return,
            Ok(0) => return std::future::pending().await,
            Ok(_) => continue,
            Err(_) => return,
        }
    }
}

/// How a relay ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The upstream finished its answer.
    Complete,
    /// The upstream stopped sending (idle deadline) or failed mid-answer.
    UpstreamFailed,
    /// The client stopped reading (idle deadline) or went away.
    ClientGone,
}

impl Ended {
    /// What the request's log line says of it.
    pub fn detail(self) -> String {
        match self {
            Ended::Complete => String::new(),
            Ended::UpstreamFailed => {
                "upstream stalled or failed mid-answer; the client connection is cut".into()
            }
            Ended::ClientGone => "client stopped reading".into(),
        }
    }
}

/// What the pump does to an answer's bytes on their way to the client: a
/// protocol that rewrites answers (Gopher's menus) supplies its own;
/// [`Verbatim`] passes them as they are.
pub trait Transform {
    /// The bytes to write for `chunk`.
    fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> &'a [u8];
    /// What is left to write once the upstream has finished.
    fn finish(&mut self) -> &[u8];
}

/// The answer as the upstream sent it.
pub struct Verbatim;

impl Transform for Verbatim {
    fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> &'a [u8] {
        chunk
    }

    fn finish(&mut self) -> &[u8] {
        &[]
    }
}

/// A transform where there is one, else the bytes as they are.
impl<T: Transform> Transform for Option<T> {
    fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> &'a [u8] {
        match self {
            Some(t) => t.feed(chunk),
            None => chunk,
        }
    }

    fn finish(&mut self) -> &[u8] {
        match self {
            Some(t) => t.finish(),
            None => &[],
        }
    }
}

/// Streams what `upstream` sends to `client` as it arrives, through
/// `transform`, never holding more than a buffer, each read and write within
/// `idle`. Returns the bytes written.
pub async fn stream<R, W, T>(
    upstream: &mut R,
    client: &mut W,
    idle: Duration,
    transform: &mut T,
) -> (u64, Ended)
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
    T: Transform,
{
    let mut bytes = 0u64;
    let ended = loop {
        let chunk = match tokio::time::timeout(idle, upstream.fill_buf()).await {
            Ok(Ok([])) => break Ended::Complete,
            Ok(Ok(chunk)) => chunk,
            // A server that closes without TLS close_notify has still sent its answer.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => break Ended::Complete,
            Ok(Err(_)) | Err(_) => break Ended::UpstreamFailed,
        };
        let n = chunk.len();
        let out = transform.feed(chunk);
        if !matches!(
            tokio::time::timeout(idle, client.write_all(out)).await,
            Ok(Ok(()))
        ) {
            return (bytes, Ended::ClientGone);
        }
        bytes += out.len() as u64;
        upstream.consume(n);
    };
    let rest = transform.finish();
    if !rest.is_empty() {
        if !matches!(
            tokio::time::timeout(idle, client.write_all(rest)).await,
            Ok(Ok(()))
        ) {
            return (bytes, Ended::ClientGone);
        }
        bytes += rest.len() as u64;
    }
    let _ = tokio::time::timeout(idle, client.flush()).await;
    (bytes, ended)
}

/// The end of a relay whose upstream answered with a status line (Gemini,
/// Spartan): the line (its end removed) is written to the client, then the
/// body byte for byte. `status`: as the log line shows it.
///
/// The line goes out with what of the body has already arrived behind it
/// (in the same read, for a small answer: all of it): one TLS record and one
/// write to the client where there were two. What has not arrived is not
/// waited for: a header is never held back for its body.
pub async fn relay_answer<R, W>(
    upstream: &mut BufReader<R>,
    client: &mut W,
    (line, status): (&[u8], u8),
    ctx: &Context,
    connecting: Instant,
) -> Outcome
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let idle = ctx.admission.config.limits.idle_timeout;
    let arrived = upstream.buffer();
    let mut head = Vec::with_capacity(line.len() + 2 + arrived.len());
    head.extend_from_slice(line);
    head.extend_from_slice(b"\r\n");
    head.extend_from_slice(arrived);
    let arrived = arrived.len();
    let mut outcome = Outcome::new(
        crate::fate::Fate::Relayed,
        Some(status.into()),
        String::new(),
    );
    if !matches!(
        tokio::time::timeout(idle, client.write_all(&head)).await,
        Ok(Ok(()))
    ) {
        outcome.detail = Ended::ClientGone.detail();
        return outcome;
    }
    upstream.consume(arrived);
    let (body, ended) = stream(upstream, client, idle, &mut Verbatim).await;
    ctx.admission
        .metrics
        .upstream_duration
        .observe(connecting.elapsed().as_secs_f64());
    outcome.bytes = head.len() as u64 + body;
    outcome.detail = ended.detail();
    outcome.cut = ended == Ended::UpstreamFailed;
    outcome
}

/// Ends a client connection politely: shut down our side, then read and drop
/// what the client may still send (at most 64 KiB, at most 1 s). Closing a socket
/// with unread input makes the kernel send a reset, which can destroy an answer
/// (a `3400` for an over-long line, say) before the client has read it.
pub async fn close<S: AsyncRead + AsyncWrite + Unpin>(client: &mut S) {
    crate::slots::answered();
    let _ = client.shutdown().await;
    drain(client).await;
}

/// Reads what the client still sends (64 KiB at most, for 1 s at most) until
/// it closes, so closing does not reset the connection under its answer.
async fn drain<S: AsyncRead + Unpin>(client: &mut S) {
    let ending = async {
        // Small: this buffer is part of every connection's future, waiting
        // ones included (tests/footprint.rs); clients rarely send anything here.
        let mut buf = [0u8; 512];
        let mut drained = 0;
        while drained < 64 * 1024 {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), ending).await;
}

/// Sends a request upstream: its `head` (the request line, and inline
/// data), then, for an upload, the `announced` bytes that follow it from the
/// client (its buffer first), each write within `idle`; counts what was sent
/// (once all of it was). A refusal names `authority`: the upstream could not take it, or the client
/// stopped sending before its announced end.
pub async fn send_request<S: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    upstream: &mut W,
    (head, announced): (&[u8], Option<u64>),
    ctx: &Context,
    authority: &str,
) -> Result<(), Refusal> {
    let idle = ctx.admission.config.limits.idle_timeout;
    let not_sent = || {
        Refusal::Upstream(crate::refusal::UpstreamFailure::Send {
            authority: authority.to_string(),
            what: "request",
        })
    };
    if !matches!(
        tokio::time::timeout(idle, upstream.write_all(head)).await,
        Ok(Ok(()))
    ) {
        return Err(not_sent());
    }
    if let Some(announced) = announced {
        match copy_exactly(client, upstream, announced, idle).await {
            Some(n) if n == announced => {}
            Some(sent) => {
                let short = crate::refusal::Malformed::ShortUpload { announced, sent };
                return Err(Refusal::Malformed(short));
            }
            None => return Err(not_sent()),
        }
    }
    let sent = head.len() as u64 + announced.unwrap_or(0);
    ctx.admission.metrics.bytes_to_upstream.inc_by(sent);
    Ok(())
}

/// Copies `n` bytes from the client (its buffer first) to the upstream, each
/// read and write within `idle`. `Some(copied)`: fewer than `n` when the
/// client stopped sending; `None`: the upstream could not take them.
async fn copy_exactly<S: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    client: &mut BufReader<S>,
    upstream: &mut W,
    n: u64,
    idle: Duration,
) -> Option<u64> {
    let mut copied = 0u64;
    while copied < n {
        let chunk = match tokio::time::timeout(idle, client.fill_buf()).await {
            Ok(Ok([])) | Ok(Err(_)) | Err(_) => return Some(copied),
            Ok(Ok(chunk)) => chunk,
        };
        let take = chunk.len().min((n - copied) as usize);
        if !matches!(
            tokio::time::timeout(idle, upstream.write_all(&chunk[..take])).await,
            Ok(Ok(()))
        ) {
            return None;
        }
        client.consume(take);
        copied += take as u64;
    }
    Some(copied)
}
