//! An admitted web request, relayed: over a connection kept from an earlier
//! request to the same server (its name, scheme and port) at one of the
//! addresses this request was admitted to ([`crate::kept`]: reused across
//! requests and bots, HTTP/1.1 keep-alive, kept once an answer has been read
//! whole and the server did not say `close`), else a new one: plain TCP for
//! `http://` and TLS verified against the roots for `https://`. A keep-alive
//! client naming another host never reaches this one's connection. The
//! request's hop-by-hop headers dropped, `Host` set from the target, `Via`
//! added; the answer's head within `limits.idle_timeout` ([`ask`]),
//! its body streamed with each frame within it. The politeness slot and the
//! bot's holds are kept until the body has been relayed.
//!
//! A bot that signs (Web Bot Auth, [`crate::identity`]) has each request
//! signed ("always"), or a `GET`/`HEAD` the server challenged (`401`, `403`
//! or `429` with `Accept-Signature`, [`challenges`]) asked again, signed, as
//! a new request ("challenged": the exchange's verdict, in `exchange.rs`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use hyper::body::{Body as HttpBody, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, Version};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Sleep};

use super::client::{self, Connection, Sender};
use super::wire;
use crate::admission::Admitted;
use crate::bots::{Bot, BotId};
use crate::context::Context;
use crate::proxy::Tally;
use crate::refusal::{Refusal, UpstreamFailure};
use crate::target::{Resource, Scheme, Target};
use crate::upstream::Trust;

/// A request body on its way upstream: the client's, or none (a signed
/// retry of a challenged `GET` or `HEAD`).
pub type RelayBody = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// No body.
pub fn no_body() -> RelayBody {
    use http_body_util::BodyExt;
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// An upstream connection that may be kept for the next request to its
/// server ([`crate::kept`]): what sends on it, its task, where it goes.
pub struct KeptConn {
    sender: Sender<RelayBody>,
    /// Its task, held: the connection lives as long as this (or, over
    /// HTTP/2, any sender sharing it).
    connection: std::sync::Arc<Connection>,
    /// `None`: unknown, so never kept.
    peer: Option<std::net::SocketAddr>,
}

impl KeptConn {
    /// Another sender on this connection, if it can be shared (HTTP/2).
    fn shared(&self) -> Option<KeptConn> {
        Some(KeptConn {
            sender: self.sender.shared()?,
            connection: self.connection.clone(),
            peer: self.peer,
        })
    }

    /// Kept for other requests to `server` while this one runs, if it can
    /// be shared (HTTP/2: requests at once on one connection).
    fn share(&self, ctx: &Context, server: &crate::target::HostKey) {
        if let (Some(shared), Some(peer)) = (self.shared(), self.peer) {
            let in_flight = ctx.admission.config.politeness.per_host_concurrency;
            ctx.kept.put(server, peer, shared, in_flight);
        }
    }
}

/// What sending on a connection gave.
enum Sent {
    Answered(Response<Incoming>),
    /// The connection could not take the request (closed meanwhile): given
    /// back unsent, with the refusal it means if no other connection does.
    Unsent(Request<RelayBody>, Refusal),
}

/// `asked` sent on `kept`, in its HTTP's form, answered within `idle`; or
/// the refusal saying why not.
async fn send(
    kept: &mut KeptConn,
    mut asked: Request<RelayBody>,
    target: &Target,
    idle: Duration,
) -> Result<Sent, Refusal> {
    fit(&mut asked, &kept.sender, target);
    let failed = |why: String| {
        Refusal::Upstream(UpstreamFailure::Answer {
            authority: target.authority(),
            why,
        })
    };
    let sent = match tokio::time::timeout(idle, kept.sender.try_send(asked)).await {
        Ok(Ok(response)) => Ok(Sent::Answered(response)),
        Ok(Err(mut e)) => match e.take_message() {
            Some(unsent) => Ok(Sent::Unsent(unsent, failed(e.into_error().to_string()))),
            None => Err(failed(e.into_error().to_string())),
        },
        Err(_) => Err(Refusal::Upstream(UpstreamFailure::Silent {
            authority: target.authority(),
            after: idle,
        })),
    };
    // A connection that failed a request is asked nothing more: an HTTP/2
    // one is shared (kept while this request ran), and is closed for all.
    if sent.is_err() {
        kept.connection.close();
    }
    sent
}

/// `request` in the form `sender`'s HTTP sends it: HTTP/1.1 in origin form
/// with `Host`; HTTP/2 with the target's scheme and authority in the URI
/// (its `:scheme` and `:authority`) and no `Host`. A request already in
/// that form ([`upstream_request`] makes HTTP/1.1's) is left as it is.
fn fit(request: &mut Request<RelayBody>, sender: &Sender<RelayBody>, target: &Target) {
    let wanted = match sender {
        Sender::H1(_) => Version::HTTP_11,
        Sender::H2(_) => Version::HTTP_2,
    };
    if request.version() == wanted {
        return;
    }
    let path = request
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.as_str().to_string());
    let authority = wire::host_header(target);
    let (version, uri) = match sender {
        Sender::H1(_) => {
            if let Ok(host) = HeaderValue::from_str(&authority) {
                request.headers_mut().insert(header::HOST, host);
            }
            (Version::HTTP_11, path)
        }
        Sender::H2(_) => {
            request.headers_mut().remove(header::HOST);
            (
                Version::HTTP_2,
                format!("{}://{authority}{path}", target.scheme.as_str()),
            )
        }
    };
    *request.version_mut() = version;
    *request.uri_mut() = uri.parse().unwrap_or_else(|_| hyper::Uri::from_static("/"));
}

/// The fields signing a request for `target` with `signer` now.
fn sign(headers: &mut hyper::HeaderMap, signer: &crate::identity::Signer, target: &Target) {
    use crate::identity::{directory, sign};
    let signed = sign::request(
        &signer.key,
        &signer.agent,
        &wire::host_header(target),
        directory::unix_now(),
        &directory::nonce(),
    );
    // The proxy's signature replaces whatever the client sent.
    for (name, value) in [
        ("signature-agent", signed.signature_agent),
        ("signature-input", signed.signature_input),
        ("signature", signed.signature),
    ] {
        headers.remove(name);
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
}

/// A request for `target` as it goes upstream: origin-form, HTTP/1.1,
/// without the hops' headers, `Host` naming the target, this hop in `Via`,
/// and the bot's `User-Agent` (`user_agent`, else its product token; a bot
/// with neither leaves the client's).
pub fn upstream_request<B>(request: Request<B>, target: &Target, bot: &Bot) -> Request<B> {
    let (mut parts, body) = request.into_parts();
    wire::strip_hop_by_hop(&mut parts.headers);
    let user_agent = match &bot.limits.user_agent {
        Some(ua) => Some(ua.as_str()),
        None => Some(bot.profile.token()).filter(|t| !t.is_empty()),
    };
    if let Some(ua) = user_agent.and_then(|ua| HeaderValue::from_str(ua).ok()) {
        parts.headers.insert(header::USER_AGENT, ua);
    }
    if let Ok(host) = HeaderValue::from_str(&wire::host_header(target)) {
        parts.headers.insert(header::HOST, host);
    }
    // A bot that declares uses has each page's head read before it is
    // relayed: asked in codings that can be read.
    if !bot.profile.uses().is_empty() {
        super::page::readable_codings(&mut parts.headers);
    }
    wire::add_via(&mut parts.headers, Version::HTTP_11, wire::pseudonym());
    let path = match &target.resource {
        Resource::Path(p) => p.as_str(),
        _ => "/",
    };
    parts.uri = path
        .parse()
        .unwrap_or_else(|_| hyper::Uri::from_static("/"));
    parts.version = Version::HTTP_11;
    Request::from_parts(parts, body)
}

/// The upstream's answer, up to its head: the connection it came on and
/// when connecting began.
pub struct Answered {
    pub response: Response<Incoming>,
    pub connection: KeptConn,
    pub connecting: Instant,
}

/// Sends `request` of `bot` to the admitted server (`signed`: with the
/// bot's signature, whatever its `web_bot_auth` says) and reads the
/// answer's head: over a kept connection to the server first, else a new
/// one; a refusal while nothing has been answered.
pub async fn ask(
    ctx: &Context,
    request: Request<RelayBody>,
    (bot, target): (BotId, &Target),
    admitted: &Admitted,
    signed: bool,
) -> Result<Answered, Refusal> {
    let idle = ctx.admission.config.limits.idle_timeout;
    let connecting = Instant::now();
    let upstream = &ctx.admission.upstream;
    let addrs = &admitted.server.addrs;
    let server = &admitted.server.name;
    let mut asked = upstream_request(request, target, ctx.admission.config.bots.get(bot));
    let signer = ctx.signers.get(bot);
    if let Some(signer) = signer.filter(|s| signed || s.when == crate::identity::When::Always) {
        sign(asked.headers_mut(), signer, target);
    }
    let answered = |response, connection| {
        ctx.admission
            .metrics
            .upstream_first_byte
            .observe(connecting.elapsed().as_secs_f64());
        Ok(Answered {
            response,
            connection,
            connecting,
        })
    };
    // A kept connection to this server first: a request it could not
    // take (closed meanwhile) comes back unsent, and goes on a new one.
    while let Some(mut kept) = ctx.kept.take::<KeptConn>(server, addrs) {
        // Ready once its last answer has been read; closed meanwhile: the next.
        let ready = tokio::time::timeout(Duration::from_secs(1), kept.sender.ready()).await;
        if !matches!(ready, Ok(Ok(()))) {
            continue;
        }
        kept.share(ctx, server);
        match send(&mut kept, asked, target, idle).await? {
            Sent::Answered(response) => return answered(response, kept),
            Sent::Unsent(unsent, _) => asked = unsent,
        }
    }
    let ((sender, connection), peer) = match target.scheme {
        Scheme::Https => {
            let tls = upstream
                .connect_tls(&target.host, target.port, addrs, Trust::RootsOfferingH2)
                .await
                .map_err(Refusal::from)?;
            let peer = tls.get_ref().0.peer_addr().ok();
            let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            (handshake(tls, target, h2).await?, peer)
        }
        _ => {
            let tcp = upstream
                .connect_tcp(&target.host, addrs)
                .await
                .map_err(Refusal::from)?;
            let peer = tcp.peer_addr().ok();
            (handshake(tcp, target, false).await?, peer)
        }
    };
    let mut kept = KeptConn {
        sender,
        connection: std::sync::Arc::new(connection),
        peer,
    };
    kept.share(ctx, server);
    match send(&mut kept, asked, target, idle).await? {
        Sent::Answered(response) => answered(response, kept),
        Sent::Unsent(_, refusal) => Err(refusal),
    }
}

/// Whether an answer challenges the client to sign (RFC 9421 §5: an
/// `Accept-Signature` on `401`, `403` or `429`).
pub fn challenges(parts: &hyper::http::response::Parts) -> bool {
    matches!(parts.status.as_u16(), 401 | 403 | 429)
        && parts.headers.contains_key("accept-signature")
}

/// HTTP/1.1, or HTTP/2 when the server chose it (`h2`), over an upstream
/// connection; or the refusal saying why not.
async fn handshake<S>(
    stream: S,
    target: &Target,
    h2: bool,
) -> Result<(Sender<RelayBody>, Connection), Refusal>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let opened = match h2 {
        true => client::open_h2(stream)
            .await
            .map(|(s, c)| (Sender::H2(s), c)),
        false => client::open(stream).await.map(|(s, c)| (Sender::H1(s), c)),
    };
    opened.map_err(|e| {
        Refusal::Upstream(UpstreamFailure::Answer {
            authority: target.authority(),
            why: e.to_string(),
        })
    })
}

/// The upstream's body on its way to the client, holding what the request
/// holds (its politeness slot, the bot's holds) until it has ended.
pub struct Relayed {
    body: Incoming,
    /// A page's head, read before it was relayed (for a bot that declares
    /// uses): relayed first.
    head: std::collections::VecDeque<Frame<Bytes>>,
    idle: Duration,
    /// When the upstream has been silent for `idle`.
    timer: Pin<Box<Sleep>>,
    connecting: Instant,
    /// Its upstream connection: kept for the next request to `server` when
    /// the body ended cleanly and `keep`, else closed when the body is dropped.
    upstream: Option<KeptConn>,
    keep: bool,
    server: crate::target::HostKey,
    /// Its count and its log line.
    tally: Tally,
    /// Its permit and holds, given back when the body is dropped.
    _admitted: Admitted,
    ended: bool,
}

impl Relayed {
    /// The body of `answered`'s answer (its `head` read already, for a
    /// page), kept for the next request to its server once read whole
    /// unless `keep` is false; `admitted` held until it ends.
    pub fn new(
        (body, head): (Incoming, std::collections::VecDeque<Frame<Bytes>>),
        (connection, connecting, keep): (KeptConn, Instant, bool),
        admitted: Admitted,
        tally: Tally,
    ) -> Relayed {
        let idle = tally.ctx().admission.config.limits.idle_timeout;
        Relayed {
            body,
            head,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            connecting,
            upstream: Some(connection),
            keep,
            server: admitted.server.name.clone(),
            tally,
            _admitted: admitted,
            ended: false,
        }
    }

    /// The upstream stopped mid-answer: counted, and the client's
    /// connection cut (hyper aborts it on a body error) so the client can
    /// tell the answer is incomplete.
    fn cut(&mut self, why: String) -> std::io::Error {
        self.ended = true;
        // Not to be asked again (an HTTP/2 one is shared: closed for all).
        if let Some(kept) = self.upstream.take() {
            kept.connection.close();
        }
        self.tally.cut(why.clone());
        self.tally.count();
        std::io::Error::other(why)
    }

    fn done(&mut self) {
        self.ended = true;
        if let Some(kept) = self.upstream.take() {
            // An HTTP/2 connection was kept, shared, when this request began.
            let shared = kept.sender.is_shared();
            if let Some(peer) = kept.peer.filter(|_| self.keep && !shared) {
                if !kept.sender.is_closed() {
                    let ctx = self.tally.ctx();
                    let in_flight = ctx.admission.config.politeness.per_host_concurrency;
                    ctx.kept.put(&self.server, peer, kept, in_flight);
                }
            }
        }
        self.tally
            .ctx()
            .admission
            .metrics
            .upstream_duration
            .observe(self.connecting.elapsed().as_secs_f64());
        self.tally.count();
    }
}

impl HttpBody for Relayed {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if let Some(frame) = this.head.pop_front() {
            if let Some(data) = frame.data_ref() {
                this.tally.outcome.bytes += data.len() as u64;
            }
            if this.head.is_empty() && this.body.is_end_stream() {
                this.done();
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        match Pin::new(&mut this.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.tally.outcome.bytes += data.len() as u64;
                }
                let next = Instant::now() + this.idle;
                this.timer.as_mut().reset(next);
                // Its last frame: done now, so the connection is kept
                // before the client, having it all, asks again.
                if this.body.is_end_stream() {
                    this.done();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let why = format!("upstream failed mid-answer ({e}); the client connection is cut");
                Poll::Ready(Some(Err(this.cut(why))))
            }
            Poll::Ready(None) => {
                this.done();
                Poll::Ready(None)
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    let why = format!(
                        "upstream sent nothing for {:?} mid-answer; the client connection is cut",
                        this.idle
                    );
                    Poll::Ready(Some(Err(this.cut(why))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (self.head.is_empty() && self.body.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.body.size_hint();
        let head: u64 = self
            .head
            .iter()
            .filter_map(|f| f.data_ref().map(|d| d.len() as u64))
            .sum();
        if head > 0 {
            // The upper bound first: it may never be below the lower.
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper.saturating_add(head));
            }
            hint.set_lower(hint.lower().saturating_add(head));
        }
        hint
    }
}

impl Drop for Relayed {
    fn drop(&mut self) {
        // An answer with nothing (more) to read is never polled to its end.
        if !self.ended && self.head.is_empty() && self.body.is_end_stream() {
            self.done();
        }
        if !self.ended {
            self.tally.outcome.detail = "client stopped reading".into();
        }
    }
}
