//! A protocol as the proxy's wiring sees it: its name, how its robots.txt
//! is fetched, and whether and how a plain-text connection to one of its
//! ports is served. Each protocol's folder implements it once
//! (`protocols/NAME/mod.rs`); `protocols::ALL` is the table the robots.txt
//! fetcher by scheme (`server/robots.rs`) and the drop-in dispatch
//! (`dropin.rs`) are derived from, so a new protocol is a row there, not an
//! arm in each.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::net::TcpStream;

use super::Conn;
use crate::config::Config;
use crate::context::Context;
use crate::fetch::RobotsFetcher;
use crate::metrics::Listener;
use crate::protocol::Protocol;
use crate::tls::Authority;
use crate::upstream::Upstream;

/// Where a drop-in connection was headed: its canonical host and port.
pub type Dest<'a> = (&'a str, u16);

/// One protocol the proxy serves, as the wiring sees it.
pub trait Served: Sync {
    /// Its name (the `protocol` label, its `[ports]` key, its scheme).
    fn protocol(&self) -> Protocol;

    /// Its robots.txt fetcher, connecting through `upstream`, each fetch
    /// within `config`'s `robots.fetch_timeout`.
    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher>;

    /// How a plain-text connection to one of its ports is served; `None`
    /// for a TLS protocol (plain text there takes the drop-in's own rule).
    fn plain(&self) -> Option<&dyn Plain>;

    /// How a drop-in connection whose TLS is plainly this protocol's (by
    /// ALPN or port) is served; `None` where the drop-in's own rule serves
    /// TLS (Gemini's, the default) or the protocol has no TLS.
    fn over_tls(&self) -> Option<&dyn OverTls> {
        None
    }
}

/// A protocol whose drop-in connections are TLS the proxy ends itself.
pub trait OverTls: Sync {
    /// Ends the client's TLS (`start`: its ClientHello read) with a
    /// certificate of `authority` for `dest`, then serves the connection.
    fn serve_tls<'a>(
        &self,
        start: tokio_rustls::StartHandshake<TcpStream>,
        conn: Conn<'a>,
        ctx: &'a Arc<Context>,
        to: (&'a Arc<Authority>, Dest<'a>),
    ) -> BoxFuture<'a, ()>;
}

/// A protocol spoken in plain text on its ports.
pub trait Plain: Sync {
    /// Serves a plain-text connection that reached `dest` through a drop-in
    /// listener (SOCKS5, transparent). The arguments are handed straight
    /// on, so the connection is held once (tests/footprint.rs).
    fn serve_plain<'a>(
        &self,
        stream: TcpStream,
        conn: Conn<'a>,
        ctx: &'a Arc<Context>,
        dest: Dest<'a>,
        listener: Listener,
    ) -> BoxFuture<'a, ()>;
}
