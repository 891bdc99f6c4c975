//! The web, as one unit: HTTP/1.1 read and written ([`wire`]: what a
//! request asks for, hop-by-hop headers, `Via`, the answer to each refusal),
//! connections served request by request ([`serve`]), an admitted request
//! relayed ([`relay`]), and robots.txt fetched over HTTP(S) ([`robots`],
//! RFC 9309). Two rows of the table of protocols: `http` and `https`.

pub mod answer;
pub mod client;
pub mod exchange;
pub mod page;
pub mod relay;
pub mod robots;
pub mod serve;
pub mod tunnel;
pub mod wire;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::net::TcpStream;

use crate::config::Config;
use crate::context::Context;
use crate::fetch::RobotsFetcher;
use crate::metrics::Listener;
use crate::protocol::Protocol;
use crate::proxy::{Conn, Dest, OverTls, Plain, Served};
use crate::target::Scheme;
use crate::upstream::Upstream;

fn fetcher(upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
    Box::new(robots::HttpRobots::new(
        upstream.clone(),
        config.robots.fetch_timeout,
        &config.http.robots_user_agent,
    ))
}

/// `http://`'s row in the table of protocols (`protocols::ALL`).
pub struct Http;

impl Served for Http {
    fn protocol(&self) -> Protocol {
        Protocol::Http
    }

    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
        fetcher(upstream, config)
    }

    fn plain(&self) -> Option<&dyn Plain> {
        Some(self)
    }
}

impl Plain for Http {
    /// A connection to a web server's port 80 (SOCKS5, transparent): its
    /// requests are for that server.
    fn serve_plain<'a>(
        &self,
        stream: TcpStream,
        conn: Conn<'a>,
        ctx: &'a Arc<Context>,
        (host, port): Dest<'a>,
        _: Listener,
    ) -> BoxFuture<'a, ()> {
        let bound = serve::Bound::To {
            scheme: Scheme::Http,
            host: host.to_string(),
            port,
            sni: None,
            dest: crate::addr::ip_literal(host),
        };
        Box::pin(serve::serve_connection(
            stream,
            conn,
            ctx,
            (bound, None, None),
        ))
    }
}

/// `https://`'s row in the table of protocols.
pub struct Https;

impl Served for Https {
    fn protocol(&self) -> Protocol {
        Protocol::Https
    }

    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
        fetcher(upstream, config)
    }

    /// TLS: plain text to an HTTPS port takes the drop-in's own rule.
    fn plain(&self) -> Option<&dyn Plain> {
        None
    }

    fn over_tls(&self) -> Option<&dyn OverTls> {
        Some(self)
    }
}

impl OverTls for Https {
    /// TLS to a web server through SOCKS5 or the transparent listener
    /// (HTTP by ALPN, or a port `[ports] https` lists): ended with the web
    /// leaf for the host the client connected to, its requests for that
    /// host, each decided.
    fn serve_tls<'a>(
        &self,
        start: tokio_rustls::StartHandshake<TcpStream>,
        conn: Conn<'a>,
        ctx: &'a Arc<Context>,
        (authority, (host, port)): (&'a Arc<crate::tls::Authority>, Dest<'a>),
    ) -> BoxFuture<'a, ()> {
        Box::pin(tunnel::serve_dropin_tls(
            start,
            conn,
            ctx,
            authority,
            (host, port),
        ))
    }
}
