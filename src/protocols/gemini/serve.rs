//! One Gemini request: TLS, the request line, the shared checks, then the
//! upstream's answer streamed back (its header checked, then byte for byte).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::access::Denied;
use crate::admission::Admitted;
use crate::bots::{BotId, Fingerprint, Presented};
use crate::context::Context;
use crate::metrics::{Protocol, TlsSide};
use crate::protocols::gemini::answer::answer;
use crate::protocols::gemini::titan::Upload;
use crate::protocols::gemini::wire::{
    parse_header, parse_url, read_line, BadRequest, Header, LineError, MAX_HEADER, MAX_URL,
};
use crate::proxy::{
    self, close, exchange, finish, relay_answer, Conn, Cut, Hangup, Load, Outcome, Streamed, Tally,
    CLIENT_BUFFER,
};
use crate::refusal::{Malformed, ProxyRule, Refusal, UpstreamFailure};
use crate::target::{Scheme, Target};

/// Another protocol's URL on the Gemini listener (`gopher://`,
/// `spartan://`, `nex://`, as Gemini clients' proxy settings send them):
/// taken and served by a gateway the server wires in (`crate::gateway`), so
/// Gemini knows no other protocol.
pub trait OtherUrls: 'static {
    /// Such a request, parsed.
    type Request: Send + Sync;
    /// The request for `url` (`target` read from it); `None` when no
    /// protocol behind the gateway takes its scheme.
    fn request(url: &str, target: Target) -> Option<Result<Self::Request, Malformed>>;
    fn target(request: &Self::Request) -> &Target;
    /// Serves it to a client whose bot is `bot`, answering as Gemini.
    fn process<S: AsyncRead + AsyncWrite + Unpin + Send>(
        client: &mut BufReader<S>,
        bot: BotId,
        request: &Self::Request,
        ctx: &Context,
    ) -> impl std::future::Future<Output = Outcome> + Send;
}

/// Only Gemini's own URLs (a drop-in connection to a Gemini server).
pub enum GeminiOnly {}

impl OtherUrls for GeminiOnly {
    type Request = std::convert::Infallible;
    fn request(_: &str, _: Target) -> Option<Result<Self::Request, Malformed>> {
        None
    }
    fn target(request: &Self::Request) -> &Target {
        match *request {}
    }
    async fn process<S: AsyncRead + AsyncWrite + Unpin + Send>(
        _: &mut BufReader<S>,
        _: BotId,
        request: &Self::Request,
        _: &Context,
    ) -> Outcome {
        match *request {}
    }
}

/// Serves one client connection: TLS, one request, one answer; other
/// protocols' URLs through `O`.
pub async fn serve<O: OtherUrls>(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
    ctx: Arc<Context>,
) {
    // The handshake and the request line share one deadline: a client that
    // trickles bytes cannot hold a connection longer than that.
    let mut conn = Conn::accepted(
        (peer, crate::metrics::Listener::Gemini),
        ctx.admission.config.limits.request_timeout,
    );
    let Some(tls) = handshake(stream, &conn, &acceptor).await else {
        return;
    };
    ctx.admission
        .metrics
        .tls_handshake(TlsSide::Listener, tls.get_ref().1.handshake_kind());
    conn.cert = presented(tls.get_ref().1);
    serve_tls::<_, O>(tls, conn, &ctx, None).await;
}

async fn handshake(
    stream: TcpStream,
    conn: &Conn<'_>,
    acceptor: &TlsAcceptor,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let peer = conn.peer;
    match tokio::time::timeout_at(conn.deadline, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

/// The client certificate of a TLS connection, by its fingerprint.
pub fn presented(tls: &rustls::ServerConnection) -> Presented {
    match tls.peer_certificates().and_then(|chain| chain.first()) {
        Some(cert) => Presented::Cert(Fingerprint::of(cert.as_ref())),
        None => Presented::Nothing,
    }
}

/// A client outside `access.allow_from`: after the TLS handshake, `53` and
/// nothing else. Its request is not read.
pub async fn turn_away(stream: TcpStream, peer: SocketAddr, acceptor: TlsAcceptor, ctx: &Context) {
    let conn = Conn::accepted(
        (peer, crate::metrics::Listener::Gemini),
        ctx.admission.config.limits.request_timeout,
    );
    if let Some(mut tls) = handshake(stream, &conn, &acceptor).await {
        let refusal = Refusal::Denied(Denied::Address(peer.ip()));
        answer(&mut tls, &refusal).await;
        close(&mut tls).await;
    }
}

/// The request on an established TLS connection. `expected`: the names the
/// connection was made for (SOCKS5 drop-in mode: the CONNECT host and the SNI
/// name) and its port; a request naming another host is refused with `53`.
///
/// Not an `async fn`: the stream goes into its read buffer before the future
/// is made, so the future holds it once (an argument moved into a local
/// would be kept twice, about 1.2 KiB more a waiting connection).
pub fn serve_tls<'a, S, O>(
    tls: S,
    conn: Conn<'a>,
    ctx: &'a Arc<Context>,
    expected: Option<(&'a [String], u16)>,
) -> impl std::future::Future<Output = ()> + 'a
where
    S: AsyncRead + AsyncWrite + Cut + Unpin + Send + 'a,
    O: OtherUrls,
{
    // The buffer is sized to the request it must hold: a waiting request costs
    // this much, not the 8 KiB default (docs/architecture.md, "Memory per waiting request").
    // Small, as on Gopher: `read_line` gathers the request over several reads.
    let mut client = BufReader::with_capacity(CLIENT_BUFFER, tls);
    async move {
        let left = conn.deadline.saturating_duration_since(Instant::now());
        // Who is asking is known from the handshake: even a malformed request
        // counts for its bot.
        let who = ctx
            .admission
            .config
            .access
            .identify(&ctx.admission.config.bots, &conn.client());
        let bot = who.as_ref().ok().copied();
        let (target, outcome) = match read_line(&mut client, MAX_URL, left).await {
            Ok(line) => handle::<S, O>(&mut client, &line, ctx, who, expected).await,
            Err(LineError::TooLong(_)) => {
                let refusal = Refusal::Malformed(Malformed::TooLong {
                    what: "request",
                    max: MAX_URL,
                });
                (None, answer(client.get_mut(), &refusal).await)
            }
            Err(e) => {
                tracing::debug!(peer = %conn.peer, error = %e, "no request");
                return;
            }
        };
        // The `protocol` label is the server's: a gateway's request is its
        // URL's protocol's (a Titan upload, Gemini's).
        let protocol = target.as_ref().and_then(|t| Protocol::of(t.scheme));
        let protocol = protocol.unwrap_or(Protocol::Gemini);
        let tally = Tally::new(ctx.clone(), protocol, &conn, (bot, target), outcome);
        finish(client.get_mut(), tally).await;
    }
}

/// What a Gemini listener's client asked for.
enum Asked<O: OtherUrls> {
    Gemini(Target),
    Titan(Upload),
    /// Another protocol's URL, fetched over its protocol ([`OtherUrls`]).
    Other(O::Request),
}

impl<O: OtherUrls> Asked<O> {
    fn target(&self) -> &Target {
        match self {
            Asked::Gemini(target) => target,
            Asked::Titan(upload) => &upload.target,
            Asked::Other(request) => O::target(request),
        }
    }
}

/// The request line → what it asks for, or a `59`. Through a drop-in
/// connection to a Gemini server (`drop_in`), only Gemini's own URLs.
fn parse<O: OtherUrls>(line: &[u8], drop_in: bool) -> Result<Asked<O>, Refusal> {
    let malformed = |e: Malformed| Refusal::Malformed(e);
    let target = parse_url(line).map_err(|e| malformed(e.into()))?;
    // `parse_url` took it for UTF-8.
    let url = std::str::from_utf8(line).unwrap_or_default();
    match target.scheme {
        Scheme::Gemini => Ok(Asked::Gemini(target)),
        Scheme::Titan => Upload::parse(url)
            .map(Asked::Titan)
            .map_err(|e| malformed(e.into())),
        other if drop_in => Err(malformed(BadRequest::DropIn(other.as_str()).into())),
        other => match O::request(url, target) {
            Some(request) => request.map(Asked::Other).map_err(malformed),
            None => Err(malformed(BadRequest::NotGemini(other.as_str()).into())),
        },
    }
}

/// One request line from a client identified as `who`: parsed, refused if the
/// client may not use the proxy, its host checked against the connection's,
/// then admitted and relayed or refused.
async fn handle<S, O>(
    client: &mut BufReader<S>,
    line: &[u8],
    ctx: &Context,
    who: Result<BotId, Denied>,
    expected: Option<(&[String], u16)>,
) -> (Option<Target>, Outcome)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    O: OtherUrls,
{
    let (asked, bot) = match (parse::<O>(line, expected.is_some()), who) {
        (parsed, Err(denied)) => {
            ctx.admission.metrics.access_refused(&denied);
            let outcome = answer(client.get_mut(), &Refusal::Denied(denied)).await;
            return (parsed.ok().map(|a| a.target().clone()), outcome);
        }
        (Err(refusal), Ok(_)) => return (None, answer(client.get_mut(), &refusal).await),
        (Ok(asked), Ok(bot)) => (asked, bot),
    };
    let target = asked.target();
    if let Some((hosts, port)) = expected {
        if !hosts.contains(&target.host) || target.port != port {
            let refusal = Refusal::ProxyRule(ProxyRule::OtherHost {
                expected: hosts.join(" or "),
                port,
                named: target.authority(),
            });
            return (
                Some(target.clone()),
                answer(client.get_mut(), &refusal).await,
            );
        }
    }
    let outcome = match &asked {
        Asked::Gemini(target) => {
            let gemini = Gemini {
                ctx,
                target,
                upload: None,
                hangup: Hangup::OnEof,
            };
            exchange(ctx, (bot, target), client, &gemini).await
        }
        Asked::Titan(upload) if !ctx.admission.config.bots.get(bot).limits.uploads => {
            let refusal = Refusal::ProxyRule(ProxyRule::Upload {
                what: "a titan:// upload",
            });
            answer(client.get_mut(), &refusal).await
        }
        Asked::Titan(upload) => {
            // The data that follows the line is the upload's: nothing may
            // read it while the request waits.
            let gemini = Gemini {
                ctx,
                target: &upload.target,
                upload: Some(upload),
                hangup: Hangup::Unwatched,
            };
            exchange(ctx, (bot, &upload.target), client, &gemini).await
        }
        Asked::Other(request) => O::process(client, bot, request, ctx).await,
    };
    (Some(asked.target().clone()), outcome)
}

/// Gemini's part of the exchange: the URL (or a Titan upload's line and
/// data) sent, the header checked, the answer streamed back byte for byte,
/// a refusal as a status. A `44` asks its server's next start to wait: by its
/// seconds (the older spec), else by doubling the spacing (the newer one);
/// a success ends that.
struct Gemini<'a> {
    ctx: &'a Context,
    target: &'a Target,
    /// A Titan upload: its line and its data are sent instead.
    upload: Option<&'a Upload>,
    hangup: Hangup,
}

/// A capsule that has answered with a valid header; its body is still to be read.
struct Answered {
    upstream: BufReader<tokio_rustls::client::TlsStream<TcpStream>>,
    /// The header as it came (its end removed).
    line: Vec<u8>,
    header: Header,
    connecting: Instant,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Streamed<S> for Gemini<'_> {
    type Head = Answered;

    fn hangup(&self) -> Hangup {
        self.hangup
    }

    async fn ask(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
    ) -> Result<Answered, Refusal> {
        ask(client, (self.target, self.upload), admitted, self.ctx).await
    }

    fn load(&self, answered: &Answered) -> Load {
        let header = &answered.header;
        match header.class() {
            4 if header.status == 44 => Load::Busy(
                header
                    .meta
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .map(Duration::from_secs),
            ),
            2 => Load::Fine,
            _ => Load::Unsaid,
        }
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

/// Connects upstream, sends the canonical URL (a Titan upload's line, then
/// its data from the client), and reads the answer's header, checked. Any
/// failure is a refusal: nothing has been sent to the client yet.
async fn ask<S>(
    client: &mut BufReader<S>,
    (target, upload): (&Target, Option<&Upload>),
    admitted: &Admitted,
    ctx: &Context,
) -> Result<Answered, Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let idle = ctx.admission.config.limits.idle_timeout;
    let authority = target.authority();
    let connecting = Instant::now();
    let upstream = ctx
        .admission
        .upstream
        .connect_gemini_to(&target.host, target.port, &admitted.server.addrs)
        .await
        .map_err(Refusal::from)?;
    let mut upstream = BufReader::with_capacity(16 * 1024, upstream);
    let request = match upload {
        Some(upload) => upload.upstream_line(),
        None => format!("{}\r\n", target.url()),
    };
    let announced = upload.map(|u| u.size);
    let head = (request.as_bytes(), announced);
    proxy::send_request(client, upstream.get_mut(), head, ctx, &authority).await?;
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
    ctx.admission.metrics.gemini_status(header.status);
    Ok(Answered {
        upstream,
        line,
        header,
        connecting,
    })
}
