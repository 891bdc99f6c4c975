//! Gopher, as one unit: its wire format ([`wire`]: selectors, error menus),
//! its menus as they stream ([`menu`]: cut into items, rewritten), serving
//! a request on the Gopher listener and answering each fate ([`serve`]), and
//! fetching a gopherhole's robots.txt ([`robots`]: `/robots.txt`, then the
//! fallbacks).

pub mod menu;
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

/// Gopher's row in the table of protocols (`protocols::ALL`).
pub struct Gopher;

impl Served for Gopher {
    fn protocol(&self) -> Protocol {
        Protocol::Gopher
    }

    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
        Box::new(robots::GopherRobots::new(
            upstream.clone(),
            config.robots.fetch_timeout,
        ))
    }

    fn plain(&self) -> Option<&dyn Plain> {
        Some(self)
    }
}

impl Plain for Gopher {
    fn serve_plain<'a>(
        &self,
        stream: TcpStream,
        conn: Conn<'a>,
        ctx: &'a Arc<Context>,
        (host, port): Dest<'a>,
        listener: Listener,
    ) -> BoxFuture<'a, ()> {
        Box::pin(serve::serve_line(
            stream,
            conn,
            ctx,
            move |line: &[u8]| wire::parse_selector_line(host, port, line),
            listener,
        ))
    }
}
