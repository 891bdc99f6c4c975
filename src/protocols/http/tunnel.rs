//! A web tunnel: `CONNECT host:port` on the HTTP listener, answered at once
//! where the proxy would never connect, else `200`, its TLS ended with a web
//! leaf and its requests served as the listener's, bound to its host; and a
//! drop-in's TLS that is plainly the web's, served the same way.

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

use super::answer::Body;
use super::serve::{serve_connection, Bound, Requests};
use super::wire::{self, Asked, BadRequest};
use crate::bots::BotId;
use crate::context::Context;
use crate::metrics::{Listener, TlsSide};
use crate::proxy::Conn;
use crate::refusal::Refusal;
use crate::target::{canonical_host, Scheme, Target};
use crate::tls::leaves::LeafError;
use crate::tls::Authority;

/// A drop-in's TLS connection that is plainly the web's (SOCKS5, the
/// transparent listener): ended with the web leaf for `host`, then served
/// as a tunnel's, its bot picked as the connection says (its SOCKS5 user,
/// its address).
pub async fn serve_dropin_tls(
    start: tokio_rustls::StartHandshake<tokio::net::TcpStream>,
    conn: Conn<'_>,
    ctx: &Arc<Context>,
    authority: &Arc<Authority>,
    (host, port): (&str, u16),
) {
    let peer = conn.peer;
    // A client that connected by address names the host by SNI (it
    // resolved the name itself): that host is what it asks for, and what
    // its certificate must name.
    let sni = start
        .client_hello()
        .server_name()
        .map(|n| canonical_host(n).unwrap_or_else(|_| n.to_string()));
    let dest = crate::addr::ip_literal(host);
    let (host, sni) = match (sni, dest.is_some()) {
        (Some(named), true) => (named, None),
        (sni, _) => (host.to_string(), sni),
    };
    let tls = match authority.web_server_config(&host, peer.ip()) {
        Ok(tls) => tls,
        Err(e) => {
            tracing::info!(%peer, host = %host, error = %e, "HTTPS drop-in: no certificate; closed");
            return;
        }
    };
    let accept = start.into_stream(tls);
    let tls = match tokio::time::timeout_at(conn.deadline, accept).await {
        Ok(Ok(tls)) => tls,
        _ => {
            tracing::debug!(%peer, host = %host, "HTTPS drop-in: the client's TLS failed");
            return;
        }
    };
    ctx.admission
        .metrics
        .tls_handshake(TlsSide::Listener, tls.get_ref().1.handshake_kind());
    let bound = Bound::To {
        scheme: Scheme::Https,
        host,
        port,
        sni,
        dest,
    };
    serve_connection(tls, conn, ctx, (bound, None, None)).await
}

/// A tunnel (`CONNECT host:port`), once its `200` has been sent: its TLS
/// ended with the web leaf for `host`, then HTTP/1.1 inside, each request
/// decided as one on the listener is.
/// (Boxed, and `Send` by its signature: a tunnel serves a connection whose
/// requests may open a tunnel.)
fn tunnel(
    upgrade: hyper::upgrade::OnUpgrade,
    tls: Arc<rustls::ServerConfig>,
    (ctx, peer, bot): (Arc<Context>, SocketAddr, BotId),
    (host, port): (String, u16),
) -> futures_util::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        let Ok(upgraded) = upgrade.await else {
            return;
        };
        let deadline = ctx.admission.config.limits.request_timeout;
        let accept = tokio_rustls::TlsAcceptor::from(tls).accept(TokioIo::new(upgraded));
        let tls = match tokio::time::timeout(deadline, accept).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::info!(%peer, host = %host, error = %e, "CONNECT: the client's TLS failed");
                return;
            }
            Err(_) => {
                tracing::info!(%peer, host = %host, "CONNECT: no TLS handshake in time");
                return;
            }
        };
        ctx.admission
            .metrics
            .tls_handshake(TlsSide::Listener, tls.get_ref().1.handshake_kind());
        let sni = tls
            .get_ref()
            .1
            .server_name()
            .map(|n| canonical_host(n).unwrap_or_else(|_| n.to_string()));
        let conn = Conn::accepted((peer, Listener::Http), deadline);
        let bound = Bound::To {
            scheme: Scheme::Https,
            host,
            port,
            sni,
            dest: None,
        };
        serve_connection(tls, conn, &ctx, (bound, None, Some(bot))).await
    })
}

impl Requests {
    /// `CONNECT host:port`: refused at once where the proxy would never
    /// connect (the address rules, the ports), else `200` and the tunnel.
    pub(super) async fn connect(
        &self,
        mut request: Request<Incoming>,
        conn: &Conn<'_>,
    ) -> Response<Body> {
        let picked = self.pick_bot(&request);
        let bot = picked.as_ref().ok().copied();
        let (host, port) = match wire::asked(request.method(), request.uri()) {
            Ok(Asked::Connect { host, port }) => (host, port),
            Ok(Asked::Url(_)) => unreachable!("a CONNECT asks for a tunnel"),
            Err(e) => {
                let refusal = Refusal::Malformed(e.into());
                return self.refuse(conn, (bot, None), &refusal, true);
            }
        };
        let target = Target::with_path(Scheme::Https, host.clone(), port, "/")
            .expect("a canonical host and the root path");
        let refused = |refusal: Refusal| self.refuse(conn, (bot, Some(&target)), &refusal, true);
        let bot = match picked {
            Ok(bot) => bot,
            Err(denied) => return refused(Refusal::Denied(denied)),
        };
        if let Err(e) = self.ctx.admission.upstream.resolve(&host, port).await {
            return refused(Refusal::from(e));
        }
        let Some(authority) = &self.authority else {
            return refused(Refusal::Malformed(BadRequest::Upgrade("CONNECT").into()));
        };
        let tls = match authority.web_server_config(&host, self.peer.ip()) {
            Ok(tls) => tls,
            Err(LeafError::TooMany) => {
                return refused(Refusal::SlowDown(crate::refusal::SlowDown {
                    retry_after: std::time::Duration::from_secs(60),
                    why: crate::refusal::Busy::Certificates,
                }))
            }
            Err(LeafError::Tls(e)) => {
                tracing::warn!(host = %host, error = %e, "a web certificate could not be issued");
                return refused(Refusal::Malformed(BadRequest::Upgrade("CONNECT").into()));
            }
        };
        let upgrade = hyper::upgrade::on(&mut request);
        let tunnel = tunnel(
            upgrade,
            tls,
            (self.ctx.clone(), self.peer, bot),
            (host, port),
        );
        *self.tunnel.lock().unwrap_or_else(|e| e.into_inner()) = Some(tokio::spawn(tunnel));
        Response::new(Body::Full(None))
    }
}
