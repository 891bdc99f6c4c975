//! The way in shared by the listeners that know where the client meant to go
//! but not what it speaks: SOCKS5 (from `CONNECT`) and the transparent listener
//! (from the kernel's original destination). docs/architecture.md, "Drop-in mode".
//! A TLS ClientHello is Gemini, whose TLS the proxy ends with a certificate
//! from its own CA for the SNI name (else the host), unless it is plainly the
//! web's (HTTP by ALPN, or a `[ports] https` port): then the `https` row
//! serves it (a web leaf, each request decided). Plain text takes the
//! protocol `[ports]` gives the destination port (Gopher, Spartan, Nex,
//! HTTP); to a port the table does not list, it is a Gopher
//! selector line, unless it reads as a Spartan request line: that is refused,
//! never relayed as a selector. From there each request takes its protocol's
//! path.

use std::sync::Arc;

use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;

use crate::context::Context;
use crate::metrics::{Listener, TlsSide};
use crate::protocol::sniff::{looks_like_tls, plainly_web};
use crate::protocol::Protocol;
use crate::protocols::gemini::serve as gemini;
use crate::protocols::gopher::serve as gopher;
use crate::protocols::gopher::wire::{parse_selector_line, BadRequest};
use crate::protocols::spartan::wire::looks_like_spartan;
use crate::proxy::Conn;
use crate::target::canonical_host;
use crate::tls::Authority;

/// Where the client meant to go: a canonical host and a port.
pub struct Destination {
    pub host: String,
    pub port: u16,
}

/// Serves one connection to `dest` whose protocol is not known yet.
pub async fn serve(
    stream: TcpStream,
    mut conn: Conn<'_>,
    ctx: &Arc<Context>,
    authority: &Arc<Authority>,
    (dest, listener): (Destination, Listener),
) {
    let (peer, deadline) = (conn.peer, conn.deadline);
    let Destination { host, port } = dest;
    // Which protocol? Wait (within the deadline) for the client's first byte.
    let mut first = [0u8; 2];
    let n = match tokio::time::timeout_at(deadline, stream.peek(&mut first)).await {
        Ok(Ok(n)) if n > 0 => n,
        _ => {
            tracing::info!(%peer, host = %host, listener = listener.as_str(), "client sent neither TLS nor a selector line in time");
            return;
        }
    };
    if !looks_like_tls(&first[..n]) {
        let listed = ctx.admission.config.ports.protocol_of(port);
        match listed.and_then(|p| crate::protocols::served(p).plain()) {
            Some(plain) => {
                plain
                    .serve_plain(stream, conn, ctx, (&host, port), listener)
                    .await
            }
            // Plain text to a TLS protocol's port (Gemini), or to a port the
            // table does not list: a Gopher selector, but never a Spartan
            // request passed on as one.
            None => {
                let parse = |line: &[u8]| match looks_like_spartan(line) {
                    true => Err(BadRequest::Unlisted {
                        protocol: Protocol::Spartan,
                        port,
                    }),
                    false => parse_selector_line(&host, port, line),
                };
                gopher::serve_line(stream, conn, ctx, parse, listener).await
            }
        }
        return;
    }
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
    let hello = start.client_hello();
    let web_port = ctx.admission.config.ports.protocol_of(port) == Some(Protocol::Https);
    // TLS that is plainly the web's goes to the row of `protocols::ALL`
    // that takes a drop-in's TLS (`https`).
    let web = plainly_web(hello.alpn(), port, web_port);
    if let Some(over_tls) = web
        .then(|| crate::protocols::served(Protocol::Https).over_tls())
        .flatten()
    {
        return over_tls
            .serve_tls(start, conn, ctx, (authority, (&host, port)))
            .await;
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
    ctx.admission
        .metrics
        .tls_handshake(TlsSide::Listener, tls.get_ref().1.handshake_kind());
    conn.cert = gemini::presented(tls.get_ref().1);
    // The request may name the host the client connected to, or the one it
    // asked for by SNI (a client that resolved the name itself connects by address).
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
    gemini::serve_tls::<_, gemini::GeminiOnly>(tls, conn, ctx, Some((&names, port))).await;
}
