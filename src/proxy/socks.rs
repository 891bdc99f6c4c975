//! The SOCKS5 drop-in listener, for crawlers that know no Gemini or Gopher proxy
//! (design.md, "Drop-in mode"). After `CONNECT host:port` the first bytes decide:
//! a TLS ClientHello is Gemini, whose TLS the proxy ends itself with a certificate
//! for that host issued by its own CA; anything else is a Gopher selector line for
//! that host. Ports are hints only. From there each request is handled as its
//! protocol's listener handles it: robots.txt, politeness, refusals, relay.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::{close, gemini, gopher, log, Context};
use crate::protocol::gopher::{error_menu, Request, MAX_REQUEST};
use crate::protocol::socks5::{handshake, looks_like_tls, reply, send_reply};
use crate::protocol::{read_line, LineError};
use crate::target::{canonical_host, Resource, Scheme, Target};
use crate::tls::Authority;

pub async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    ctx: Arc<Context>,
    authority: Arc<Authority>,
) {
    let started = Instant::now();
    let deadline = started + ctx.config.limits.request_timeout;
    let dest =
        match tokio::time::timeout_at(deadline, handshake(&mut stream, &ctx.config.socks5_users))
            .await
        {
            Ok(Ok(d)) => d,
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
    let host = match canonical_host(&dest.host) {
        Ok(h) => h,
        Err(e) => {
            tracing::info!(%peer, host = %dest.host, error = %e, "SOCKS5 CONNECT to a bad host");
            let _ = send_reply(&mut stream, reply::HOST_UNREACHABLE).await;
            return;
        }
    };
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
        let config = match authority.server_config(&host) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "drop-in TLS setup failed");
                return;
            }
        };
        let tls = match tokio::time::timeout_at(deadline, TlsAcceptor::from(config).accept(stream))
            .await
        {
            Ok(Ok(tls)) => tls,
            _ => {
                tracing::debug!(%peer, "drop-in TLS handshake failed");
                return;
            }
        };
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
        gemini::serve_tls(
            tls,
            peer,
            &ctx,
            Some((&names, dest.port)),
            started,
            deadline,
        )
        .await;
    } else {
        serve_selector(stream, peer, &ctx, host, dest.port, started, deadline).await;
    }
}

/// A plain Gopher selector line for the CONNECT target.
async fn serve_selector(
    stream: TcpStream,
    peer: SocketAddr,
    ctx: &Arc<Context>,
    host: String,
    port: u16,
    started: Instant,
    deadline: Instant,
) {
    let mut client = BufReader::with_capacity(MAX_REQUEST + 2, stream);
    let left = deadline.saturating_duration_since(Instant::now());
    let line = match read_line(&mut client, MAX_REQUEST, left).await {
        Ok(line) => line,
        Err(LineError::TooLong(max)) => {
            let text = format!("400 Bad Request: selector line longer than {max} bytes");
            let _ = tokio::io::AsyncWriteExt::write_all(client.get_mut(), &error_menu(&text)).await;
            close(client.get_mut()).await;
            return;
        }
        Err(e) => {
            tracing::info!(%peer, error = %e, "SOCKS5 client sent neither TLS nor a selector line; closed");
            return;
        }
    };
    let (selector, after_tab) = match memchr::memchr(b'\t', &line) {
        Some(tab) => (line[..tab].to_vec(), Some(line[tab + 1..].to_vec())),
        None => (line, None),
    };
    if selector
        .iter()
        .chain(after_tab.iter().flatten())
        .any(|&b| b == b'\r' || b == 0)
    {
        let text = "400 Bad Request: CR or NUL inside the selector";
        let _ = tokio::io::AsyncWriteExt::write_all(client.get_mut(), &error_menu(text)).await;
        close(client.get_mut()).await;
        return;
    }
    let request = Request {
        target: Target {
            scheme: Scheme::Gopher,
            host,
            port,
            // Requests carry no item type; through SOCKS the answer is relayed as it is.
            resource: Resource::Gopher {
                item_type: b'0',
                selector,
                search: None,
            },
            had_userinfo: false,
            had_fragment: false,
        },
        after_tab,
    };
    let outcome = gopher::process(&mut client, &request, ctx, false).await;
    log(
        &ctx.metrics,
        "gopher",
        peer,
        Some(&request.target),
        started,
        &outcome,
    );
    close(client.get_mut()).await;
}
