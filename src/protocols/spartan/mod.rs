//! Spartan, as one unit: its wire format ([`wire`]: the request line and its
//! data, status lines), serving a request that reached a Spartan port
//! through SOCKS5 or the transparent listener and answering each fate
//! ([`serve`]), and fetching a capsule's robots.txt over Spartan ([`robots`]).

pub mod robots;
pub mod serve;
pub mod wire;

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::net::TcpStream;

use crate::config::Config;
use crate::context::Context;
use crate::fetch::RobotsFetcher;
use crate::metrics::Listener;
use crate::protocol::Protocol;
use crate::proxy::{Conn, Dest, Plain, Served};
use crate::upstream::Upstream;

/// Spartan's row in the table of protocols (`protocols::ALL`).
pub struct Spartan;

impl Served for Spartan {
    fn protocol(&self) -> Protocol {
        Protocol::Spartan
    }

    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
        Box::new(robots::SpartanRobots::new(
            upstream.clone(),
            config.robots.fetch_timeout,
        ))
    }

    fn plain(&self) -> Option<&dyn Plain> {
        Some(self)
    }
}

impl Plain for Spartan {
    fn serve_plain<'a>(
        &self,
        stream: TcpStream,
        conn: Conn<'a>,
        ctx: &'a Arc<Context>,
        (host, port): Dest<'a>,
        listener: Listener,
    ) -> BoxFuture<'a, ()> {
        Box::pin(serve::serve_line(stream, conn, ctx, (host, port), listener))
    }
}
