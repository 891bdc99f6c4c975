//! The SOCKS5 drop-in listener, for crawlers that know no Gemini or Gopher proxy
//! (docs/architecture.md, "Drop-in mode"). After `CONNECT host:port` the first bytes decide:
//! a TLS ClientHello is Gemini, whose TLS the proxy ends itself with a certificate
//! for that host issued by its own CA; anything else is a Gopher selector line for
//! that host (`dropin.rs`, shared with the transparent listener). Ports are hints
//! only. From there each request is handled as its protocol's listener handles
//! it: robots.txt, politeness, refusals, relay.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::access::Denied;
use crate::context::Context;
use crate::dropin::{self, Destination};
use crate::metrics::{Listener, Rejection, SocksAuthFailure};
use crate::proxy::{close, Conn};
use crate::socks5::wire::{self as socks5, handshake, reply, send_reply, Connect, SocksError};
use crate::target::canonical_host;
use crate::tls::Authority;

pub async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    authority: Arc<Authority>,
) {
    let mut conn = Conn::accepted(
        (peer, crate::metrics::Listener::Socks5),
        ctx.admission.config.limits.request_timeout,
    );
    let deadline = conn.deadline;
    let take_check = || ctx.guesses.take(peer.ip());
    let users = &ctx.admission.config.socks5_users;
    let connect = match tokio::time::timeout_at(deadline, handshake(&mut stream, users, take_check))
        .await
    {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            let failure = match e {
                SocksError::BadCredentials => {
                    let spent = ctx.guesses.spent(peer.ip());
                    Some((SocksAuthFailure::BadCredentials, spent))
                }
                SocksError::Throttled => Some((SocksAuthFailure::Throttled, true)),
                SocksError::NoAcceptableMethod => Some((SocksAuthFailure::NoMethod, false)),
                _ => None,
            };
            if let Some((failure, _)) = failure {
                ctx.admission.metrics.socks5_auth_failed(failure);
            }
            // Failed logins are logged under a budget of lines a second.
            if let Some(suppressed) = ctx.guesses.log_line() {
                let spent = failure.is_some_and(|(_, spent)| spent);
                tracing::info!(%peer, error = %e, budget_spent = spent, suppressed, "SOCKS5 handshake refused");
            }
            close(&mut stream).await;
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "SOCKS5 handshake timed out");
            return;
        }
    };
    if connect.user.is_some() {
        ctx.guesses.succeeded(peer.ip());
    }
    let Connect { user, dest } = connect;
    conn.socks5_user = user.as_deref();
    // No bot for this client, whatever certificate it might show: refused now,
    // in SOCKS terms.
    if !ctx.admission.config.bots.could_pick(&conn.client()) {
        tracing::info!(%peer, user = user.as_deref().unwrap_or(""), "SOCKS5 client is no configured bot; refused");
        ctx.admission
            .metrics
            .rejected(Listener::Socks5, Rejection::Access);
        ctx.admission.metrics.access_refused(&Denied::NoBot);
        let _ = send_reply(&mut stream, reply::NOT_ALLOWED).await;
        return;
    }
    let host = match canonical_host(&dest.host) {
        Ok(h) => h,
        Err(e) => {
            tracing::info!(%peer, host = %dest.host, error = %e, "SOCKS5 CONNECT to a bad host");
            let _ = send_reply(&mut stream, reply::HOST_UNREACHABLE).await;
            return;
        }
    };
    // The proxy's own rules on where it connects, told in SOCKS terms (0x02,
    // "not allowed by ruleset") before the client sends anything: the port
    // always, the address when the client gave one.
    if let Err(why) = ctx.admission.upstream.reach().check_host(&host, dest.port) {
        tracing::info!(%peer, host = %host, port = dest.port, %why, "SOCKS5 CONNECT refused");
        ctx.admission
            .metrics
            .rejected(Listener::Socks5, Rejection::Destination);
        let _ = send_reply(&mut stream, reply::NOT_ALLOWED).await;
        return;
    }
    if send_reply(&mut stream, reply::SUCCEEDED).await.is_err() {
        return;
    }
    let dest = Destination {
        host,
        port: dest.port,
    };
    dropin::serve(stream, conn, &ctx, &authority, (dest, Listener::Socks5)).await;
}

/// A client outside `access.allow_from`: its CONNECT is answered `0x02`
/// ("not allowed by ruleset") and nothing else happens. Returns where it asked to go.
pub async fn turn_away(mut stream: TcpStream, ctx: &Context) -> Option<String> {
    let deadline = tokio::time::Instant::now() + ctx.admission.config.limits.request_timeout;
    let dest = tokio::time::timeout_at(deadline, socks5::turn_away(&mut stream)).await;
    close(&mut stream).await;
    match dest {
        Ok(Ok(d)) => Some(format!("{}:{}", d.host, d.port)),
        _ => None,
    }
}
