//! The web's way in: HTTP/1.1 connections (hyper's server, keep-alive),
//! each request decided on its own. On the HTTP listener a request names an
//! absolute `http://` or `https://` URL; a connection made for one server
//! (a drop-in's port 80) carries origin-form requests for that server, and a
//! `Host` naming another is answered `421`. Each request: its target, its
//! method, a loop through `Via`; admission (robots.txt, the bot's limits,
//! the host's turn); the relay ([`super::relay`]) or the refusal's answer
//! ([`super::answer`]); then its count and its log line. `CONNECT` opens a
//! tunnel ([`super::tunnel`]).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

use super::answer::{refused, Body};
use super::exchange::{Asking, Web};
use super::wire::{self, Asked, BadRequest, MAX_HEADERS, MAX_HEADER_BYTES};
use crate::access::Denied;
use crate::bots::{BotId, Presented};
use crate::context::Context;
use crate::metrics::Listener;
use crate::proxy::stalled::WriteDeadline;
use crate::proxy::{exchange, Conn, Said};
use crate::refusal::{Malformed, ProxyRule, Refusal};
use crate::target::{Scheme, Target};
use crate::tls::Authority;

/// Where a connection's requests go.
#[derive(Clone, Debug)]
pub enum Bound {
    /// Anywhere: each request names its absolute URL (the HTTP listener).
    Anywhere,
    /// The one server the connection was made for (a drop-in's port, a
    /// tunnel): origin-form requests, and a `Host` that names it.
    To {
        scheme: Scheme,
        host: String,
        port: u16,
        /// A tunnel's TLS server name, when the client sent one: naming
        /// another host than the tunnel's, its requests are answered `421`.
        sni: Option<String>,
        /// The address a drop-in's client connected to (SOCKS5 by address,
        /// transparent): a request naming a host (by `Host`, by TLS server
        /// name) is for that host if the name resolves to this address,
        /// else `421`.
        dest: Option<std::net::IpAddr>,
    },
}

/// One connection's requests, as each is served.
pub(super) struct Requests {
    pub(super) ctx: Arc<Context>,
    pub(super) peer: SocketAddr,
    pub(super) listener: Listener,
    pub(super) bound: Bound,
    /// Picked at its first request (by its `Proxy-Authorization` where
    /// `[socks5] users` are configured, else its address) and kept: its
    /// requests are one bot's, a tunnel's too. A refused pick is not kept:
    /// the client may send its credentials on the next request.
    pub(super) bot: std::sync::OnceLock<BotId>,
    /// Who the client is, as far as its connection says (its address; the
    /// SOCKS5 user it logged in as, for a drop-in).
    pub(super) socks5_user: Option<String>,
    /// The CA that ends a tunnel's TLS (the HTTP listener's connections).
    pub(super) authority: Option<Arc<Authority>>,
    /// The tunnel this connection became (`CONNECT`), served to its end
    /// before the connection lets go of its slot.
    pub(super) tunnel: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Serves one HTTP/1.1 connection: its requests, one after another, until
/// the client closes it, an answer closes it, or it idles past
/// `limits.request_timeout` between requests.
pub async fn serve_connection<S>(
    stream: S,
    conn: Conn<'_>,
    ctx: &Arc<Context>,
    (bound, authority, inherited): (Bound, Option<Arc<Authority>>, Option<BotId>),
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let bot = std::sync::OnceLock::new();
    if let Some(inherited) = inherited {
        let _ = bot.set(inherited);
    }
    let requests = Arc::new(Requests {
        ctx: ctx.clone(),
        peer: conn.peer,
        listener: conn.listener,
        bound,
        bot,
        socks5_user: conn.socks5_user.map(str::to_string),
        authority,
        tunnel: std::sync::Mutex::new(None),
    });
    let served = requests.clone();
    let service = hyper::service::service_fn(move |request| {
        let requests = served.clone();
        async move { Ok::<_, Infallible>(requests.serve(request).await) }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(ctx.admission.config.limits.request_timeout)
        .max_buf_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADERS)
        .keep_alive(true);
    let stream = WriteDeadline::new(stream, ctx.admission.config.limits.idle_timeout);
    let connection = http.serve_connection(TokioIo::new(stream), service);
    if let Err(e) = connection.with_upgrades().await {
        tracing::debug!(peer = %conn.peer, error = %e, "HTTP connection ended");
    }
    let tunnel = requests
        .tunnel
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(tunnel) = tunnel {
        let _ = tunnel.await;
    }
}

/// Serves the HTTP listener's connection from `peer`; `authority` ends its
/// tunnels' TLS.
pub async fn serve(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    authority: Arc<Authority>,
) {
    let conn = Conn::accepted(
        (peer, Listener::Http),
        ctx.admission.config.limits.request_timeout,
    );
    serve_connection(stream, conn, &ctx, (Bound::Anywhere, Some(authority), None)).await
}

/// Answers a client outside `access.allow_from` on the HTTP listener: `403`
/// to its first request, nothing read past its header, then closed.
pub async fn turn_away(stream: tokio::net::TcpStream, peer: SocketAddr) {
    let service = hyper::service::service_fn(move |_request| async move {
        let refusal = Refusal::Denied(Denied::Address(peer.ip()));
        Ok::<_, Infallible>(refused(&refusal, true))
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(std::time::Duration::from_secs(10))
        .max_buf_size(MAX_HEADER_BYTES)
        .keep_alive(false);
    let _ = http.serve_connection(TokioIo::new(stream), service).await;
}

impl Requests {
    async fn serve(&self, request: Request<Incoming>) -> Response<Body> {
        let started = Instant::now();
        let conn = Conn {
            peer: self.peer,
            listener: self.listener,
            socks5_user: None,
            cert: Presented::NotTls,
            started,
            deadline: started + self.ctx.admission.config.limits.request_timeout,
        };
        // A request with a body the proxy does not read ends its connection
        // once answered: the body is never taken for the next request.
        let unread_body = has_body(&request);
        if request.method() == hyper::Method::CONNECT && matches!(self.bound, Bound::Anywhere) {
            return self.connect(request, &conn).await;
        }
        let target = match self.target(&request) {
            Ok(target) => target,
            Err(refusal) => {
                let bot = self.bot.get().copied();
                return self.refuse(&conn, (bot, None), &refusal, unread_body);
            }
        };
        if let Err(refusal) = self.resolves_to_dest(&target).await {
            let bot = self.bot.get().copied();
            return self.refuse(&conn, (bot, Some(&target)), &refusal, unread_body);
        }
        let bot = match self.pick_bot(&request) {
            Ok(bot) => bot,
            Err(denied) => {
                let refusal = Refusal::Denied(denied);
                return self.refuse(&conn, (None, Some(&target)), &refusal, unread_body);
            }
        };
        if let Some(refusal) = self.ahead_of_admission(&request, bot) {
            return self.refuse(&conn, (Some(bot), Some(&target)), &refusal, unread_body);
        }
        // A bot that signs when challenged may ask a bodiless GET or HEAD
        // again, signed: its head is kept for that.
        let retryable = !unread_body
            && matches!(*request.method(), hyper::Method::GET | hyper::Method::HEAD)
            && self
                .ctx
                .signers
                .get(bot)
                .is_some_and(|s| s.when == crate::identity::When::Challenged);
        let (parts, body) = request.into_parts();
        let again = retryable.then(|| parts.clone());
        let method = parts.method.clone();
        let request = Request::from_parts(parts, http_body_util::BodyExt::boxed(body));
        let mut asking = Asking {
            request: Some(request),
            again,
        };
        let web = Web {
            ctx: &self.ctx,
            conn,
            bot,
            target: &target,
            method,
            unread_body,
            retryable,
            tallied: Default::default(),
        };
        exchange(&self.ctx, (bot, &target), &mut asking, &web).await
    }

    /// On a connection made to an address, a request for a host by name
    /// (its `Host`, the TLS server name) is that host's only if the name
    /// resolves to the address the client connected to: else `421`, as a
    /// request for another host is. (Resolved through the proxy's own
    /// resolver and its cache, which admission asks next.)
    async fn resolves_to_dest(&self, target: &Target) -> Result<(), Refusal> {
        let Bound::To {
            dest: Some(dest), ..
        } = &self.bound
        else {
            return Ok(());
        };
        if crate::addr::ip_literal(&target.host).is_some() {
            return Ok(());
        }
        let upstream = &self.ctx.admission.upstream;
        let addrs = upstream.resolve(&target.host, target.port).await?;
        let dest = dest.to_canonical();
        match addrs.iter().any(|a| a.ip().to_canonical() == dest) {
            true => Ok(()),
            false => Err(Refusal::ProxyRule(ProxyRule::OtherHost {
                expected: dest.to_string(),
                port: target.port,
                named: format!(
                    "{}:{} (which does not resolve to the address the client connected to)",
                    target.host, target.port
                ),
            })),
        }
    }

    /// The request's canonical target, or why it has none.
    fn target(&self, request: &Request<Incoming>) -> Result<Target, Refusal> {
        let malformed = |e: BadRequest| Refusal::Malformed(Malformed::from(e));
        match &self.bound {
            Bound::Anywhere => match wire::asked(request.method(), request.uri()) {
                Ok(Asked::Url(target)) => Ok(target),
                Ok(Asked::Connect { .. }) => Err(malformed(BadRequest::Upgrade("CONNECT"))),
                Err(e) => Err(malformed(e)),
            },
            Bound::To {
                scheme,
                host,
                port,
                sni,
                dest,
            } => {
                if request.method() == hyper::Method::CONNECT {
                    return Err(malformed(BadRequest::Upgrade("CONNECT inside a tunnel")));
                }
                if let Some(sni) = sni.as_ref().filter(|sni| *sni != host) {
                    return Err(Refusal::ProxyRule(ProxyRule::OtherHost {
                        expected: host.clone(),
                        port: *port,
                        named: format!("{sni} (by TLS server name)"),
                    }));
                }
                let named = wire::host_named(*scheme, request.uri(), request.headers())
                    .map_err(malformed)?;
                // A connection made to an address, whose request names a
                // host on its port: that host, if it resolves there
                // ([`Requests::resolves_to_dest`]).
                let by_address = dest.is_some() && crate::addr::ip_literal(host).is_some();
                let mut on = host.as_str();
                if let Some((named, named_port)) = &named {
                    if (named.as_str(), *named_port) != (host.as_str(), *port) {
                        let by_name = by_address
                            && *named_port == *port
                            && crate::addr::ip_literal(named).is_none();
                        if !by_name {
                            return Err(Refusal::ProxyRule(ProxyRule::OtherHost {
                                expected: host.clone(),
                                port: *port,
                                named: format!("{named}:{named_port}"),
                            }));
                        }
                        on = named;
                    }
                }
                wire::on_server(*scheme, (on, *port), request.uri()).map_err(malformed)
            }
        }
    }

    /// The connection's bot: kept from its first request, else picked now
    /// as `access` says, from this request's `Proxy-Authorization` when
    /// `[socks5] users` are configured (each check throttled as a SOCKS5
    /// login is), else from the client's address.
    pub(super) fn pick_bot<B>(&self, request: &Request<B>) -> Result<BotId, Denied> {
        if let Some(bot) = self.bot.get() {
            return Ok(*bot);
        }
        let config = &self.ctx.admission.config;
        let ip = self.peer.ip();
        let user = match (&self.socks5_user, config.socks5_users.is_empty()) {
            (Some(user), _) => Some(user.clone()),
            (None, true) => None,
            (None, false) => {
                let denied = |why: &str| {
                    tracing::info!(client = %self.peer, why, "web client refused: 407");
                    self.ctx
                        .admission
                        .metrics
                        .access_refused(&Denied::ProxyAuth);
                    Denied::ProxyAuth
                };
                let Some((name, pass)) = wire::basic_credentials(request.headers()) else {
                    return Err(denied("no Proxy-Authorization: Basic"));
                };
                if !self.ctx.guesses.take(ip) {
                    return Err(denied("too many wrong passwords; throttled"));
                }
                match crate::access::user_of(&config.socks5_users, &name, &pass) {
                    Some(user) => {
                        self.ctx.guesses.succeeded(ip);
                        Some(user.clone())
                    }
                    None => return Err(denied("a user and password [socks5] users does not list")),
                }
            }
        };
        let client = crate::bots::Client {
            addr: ip,
            socks5_user: user.as_deref(),
            cert: Presented::NotTls,
        };
        match config.access.identify(&config.bots, &client) {
            Ok(bot) => Ok(*self.bot.get_or_init(|| bot)),
            Err(denied) => {
                self.ctx.admission.metrics.access_refused(&denied);
                Err(denied)
            }
        }
    }

    /// What is refused before robots.txt is asked: a protocol switch, a
    /// request that already came through this proxy.
    fn ahead_of_admission(&self, request: &Request<Incoming>, bot: BotId) -> Option<Refusal> {
        let methods = &self.ctx.admission.config.bots.get(bot).limits.http_methods;
        if !methods.allows(request.method().as_str()) {
            return Some(Refusal::ProxyRule(ProxyRule::Method {
                method: request.method().to_string(),
                allowed: methods.all().to_vec(),
            }));
        }
        if request.headers().contains_key(header::UPGRADE) {
            return Some(Refusal::Malformed(BadRequest::Upgrade("Upgrade").into()));
        }
        if wire::looped(request.headers(), wire::pseudonym()) {
            return Some(Refusal::ProxyRule(ProxyRule::Loop));
        }
        None
    }

    /// Answers a refusal, and counts and logs the request.
    pub(super) fn refuse(
        &self,
        conn: &Conn,
        (bot, target): (Option<BotId>, Option<&Target>),
        refusal: &Refusal,
        unread_body: bool,
    ) -> Response<Body> {
        let request = (conn, bot, target);
        super::exchange::refuse(&self.ctx, request, refusal, (unread_body, Said::default()))
    }
}

/// Whether a request carries a body (or asks to send one).
fn has_body<B>(request: &Request<B>) -> bool {
    let headers = request.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers.contains_key(header::EXPECT)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}
