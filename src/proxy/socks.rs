//! The SOCKS5 drop-in listener, for crawlers that know no Gemini or Gopher proxy
//! (docs/architecture.md, "Drop-in mode"). After `CONNECT host:port` the first bytes decide:
//! a TLS ClientHello is Gemini, whose TLS the proxy ends itself with a certificate
//! for that host issued by its own CA; anything else is a Gopher selector line for
//! that host. Ports are hints only. From there each request is handled as its
//! protocol's listener handles it: robots.txt, politeness, refusals, relay.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;

use super::{close, gemini, gopher, Conn, Context};
use crate::metrics::{Listener, Rejection};
use crate::protocol::gopher::parse_selector_line;
use crate::protocol::socks5::{self, handshake, looks_like_tls, reply, send_reply, Connect};
use crate::target::canonical_host;
use crate::tls::Authority;

pub async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    authority: Arc<Authority>,
) {
    let mut conn = Conn::accepted(peer, ctx.config.limits.request_timeout);
    let deadline = conn.deadline;
    let connect =
        match tokio::time::timeout_at(deadline, handshake(&mut stream, &ctx.config.socks5_users))
            .await
        {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                tracing::info!(%peer, error = %e, "SOCKS5 handshake refused");
                close(&mut stream).await;
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "SOCKS5 handshake timed out");
                return;
            }
        };
    let Connect { user, dest } = connect;
    conn.socks5_user = user.as_deref();
    // No bot for this client, whatever certificate it might show: refused now,
    // in SOCKS terms.
    if !ctx.config.bots.could_pick(&conn.client()) {
        tracing::info!(%peer, user = user.as_deref().unwrap_or(""), "SOCKS5 client is no configured bot; refused");
        ctx.metrics.rejected(Listener::Socks5, Rejection::Access);
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
    if let Err(why) = ctx.upstream.reach().check_host(&host, dest.port) {
        tracing::info!(%peer, host = %host, port = dest.port, %why, "SOCKS5 CONNECT refused");
        ctx.metrics
            .rejected(Listener::Socks5, Rejection::Destination);
        let _ = send_reply(&mut stream, reply::NOT_ALLOWED).await;
        return;
    }
    if send_reply(&mut stream, reply::SUCCEEDED).await.is_err() {
        return;
    }
    // Which protocol? Wait (within the deadline) for the client's first byte.
    let mut first = [0u8; 2];
    let n = match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => n,
        _ => {
            tracing::info!(%peer, host = %host, "SOCKS5 client sent neither TLS nor a selector line in time");
            return;
        }
    };
    if looks_like_tls(&first[..n]) {
        let start = match tokio::time::timeout_at(
            deadline,
            LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream),
        )
        .await
        {
            Ok(Ok(start)) => start,
            _ => {
                tracing::debug!(%peer, "drop-in TLS: no ClientHello");
                return;
            }
        };
        // A web client: HTTP by ALPN and nothing else, or a port of socks5.https_ports.
        let hello = start.client_hello();
        let offers_gemini_or_nothing = hello.alpn().is_none_or(|mut protocols| {
            protocols.any(|p| !matches!(p, b"h2" | b"http/1.1" | b"http/1.0"))
        });
        if !offers_gemini_or_nothing || ctx.config.socks5_https_ports.contains(dest.port) {
            tracing::info!(%peer, host = %host, port = dest.port, "HTTPS through SOCKS5; closed (Gemini and Gopher only)");
            ctx.metrics.rejected(Listener::Socks5, Rejection::Https);
            return;
        }
        let config = match authority.server_config(&host) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "drop-in TLS setup failed");
                return;
            }
        };
        let tls = match tokio::time::timeout_at(deadline, start.into_stream(config)).await {
            Ok(Ok(tls)) => tls,
            _ => {
                tracing::debug!(%peer, "drop-in TLS handshake failed");
                return;
            }
        };
        // The request may name the host the client connected to, or the one it
        // asked for by SNI (a client that resolved the name itself connects by address).
        conn.cert = gemini::presented(tls.get_ref().1);
        let mut names = vec![host];
        if let Some(sni) = tls
            .get_ref()
            .1
            .server_name()
            .and_then(|n| canonical_host(n).ok())
        {
            if !names.contains(&sni) {
                names.push(sni);
            }
        }
        gemini::serve_tls(tls, conn, &ctx, Some((&names, dest.port))).await;
    } else {
        // Requests carry no item type; through SOCKS the answer is relayed as
        // it is (the client's next request comes through SOCKS again).
        let parse = |line: &[u8]| parse_selector_line(&host, dest.port, line);
        gopher::serve_line(stream, conn, &ctx, parse, false).await;
    }
}

/// A client outside `access.allow_from`: its CONNECT is answered `0x02`
/// ("not allowed by ruleset") and nothing else happens. Returns where it asked to go.
pub async fn turn_away(mut stream: TcpStream, ctx: &Context) -> Option<String> {
    let deadline = tokio::time::Instant::now() + ctx.config.limits.request_timeout;
    let dest = tokio::time::timeout_at(deadline, socks5::turn_away(&mut stream)).await;
    close(&mut stream).await;
    match dest {
        Ok(Ok(d)) => Some(format!("{}:{}", d.host, d.port)),
        _ => None,
    }
}
