//! Nex, as one unit: its wire format ([`wire`]: the path line, the refusal
//! document, directory listings), serving a request that reached a Nex port
//! through SOCKS5 or the transparent listener and answering each fate
//! ([`serve`]), and fetching robots.txt over Nex ([`robots`]).

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

/// Nex's row in the table of protocols (`protocols::ALL`).
pub struct Nex;

impl Served for Nex {
    fn protocol(&self) -> Protocol {
        Protocol::Nex
    }

    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
        Box::new(robots::NexRobots::new(
            upstream.clone(),
            config.robots.fetch_timeout,
        ))
    }

    fn plain(&self) -> Option<&dyn Plain> {
        Some(self)
    }
}

impl Plain for Nex {
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
