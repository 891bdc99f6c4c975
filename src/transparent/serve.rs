//! The transparent listener: connections the kernel redirected here
//! (docs/architecture.md, "Transparent mode"). Where each was going comes from
//! the kernel (`transparent::OriginalDestination`); from there it is the drop-in
//! path SOCKS5 takes: the first bytes decide the protocol, then access rules,
//! bot, robots.txt, politeness, refusal or relay.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpStream;

use crate::context::Context;
use crate::dropin::{self, Destination};
use crate::metrics::{Listener, Rejection};
use crate::proxy::{close, Conn};
use crate::target::ip_host;
use crate::tls::Authority;
use crate::transparent::OriginalDestination;

/// Serves one redirected connection.
pub async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    (authority, kernel): (Arc<Authority>, Arc<dyn OriginalDestination>),
) {
    let conn = Conn::accepted(
        (peer, crate::metrics::Listener::Transparent),
        ctx.admission.config.limits.request_timeout,
    );
    let original = match kernel.original_destination(&stream) {
        Ok(addr) => addr,
        Err(e) => {
            tracing::info!(%peer, error = %e, "a connection on the transparent listener that was not redirected; closed");
            ctx.admission
                .metrics
                .rejected(Listener::Transparent, Rejection::NotRedirected);
            close(&mut stream).await;
            return;
        }
    };
    // A connection made straight to the listener names the listener itself
    // (or another of the proxy's): serving it would be a loop.
    if ctx.admission.upstream.reach().is_own(original) {
        tracing::warn!(%peer, destination = %original, "a connection whose original destination is the proxy itself; closed (no loops)");
        ctx.admission
            .metrics
            .rejected(Listener::Transparent, Rejection::Destination);
        close(&mut stream).await;
        return;
    }
    let dest = Destination {
        host: ip_host(original.ip()),
        port: original.port(),
    };
    dropin::serve(
        stream,
        conn,
        &ctx,
        &authority,
        (dest, Listener::Transparent),
    )
    .await;
}

/// A client outside `access.allow_from`: closed at once, nothing read. (It
/// does not know it reached a proxy, and answering in its protocol would mean
/// ending its TLS for a host it never asked the proxy for.)
pub async fn turn_away(mut stream: TcpStream) {
    close(&mut stream).await;
}
