//! The context a request is served in: the config of one generation and the
//! parts that last across reloads (caches, gates, pins, metrics), shared by
//! every connection accepted under that config.

use crate::admission::Admission;
use crate::cache::RobotsCache;
use crate::config::Config;
use crate::listener::Listens;
use crate::metrics::Metrics;
use crate::politeness::Politeness;
use crate::upstream::Upstream;

/// What the proxy needs to serve a request; shared by the connections
/// accepted under one config. A reload makes a new one (the caches, gates,
/// pins and metrics in it are the same objects).
pub struct Context {
    /// Shared with [`Context::admission`].
    pub config: std::sync::Arc<Config>,
    pub upstream: std::sync::Arc<Upstream>,
    /// robots.txt of every host, both protocols (the key holds the scheme).
    pub robots: std::sync::Arc<RobotsCache>,
    /// Host and port that rewritten Gopher menus point at.
    /// `None`: the Gopher listener is off (menus are rewritten only there).
    pub gopher_public: Option<(String, u16)>,
    /// Per-host spacing and concurrency, both protocols.
    pub politeness: std::sync::Arc<Politeness>,
    pub metrics: std::sync::Arc<Metrics>,
    /// The Gemini listener's TLS (its certificate, the client-certificate check).
    pub gemini_tls: tokio_rustls::TlsAcceptor,
    /// The Gemini listener's certificate file and its SHA-256 fingerprint.
    pub cert_path: std::path::PathBuf,
    pub cert_fingerprint: String,
    /// Which config this is: 0 at start, one more at each reload. Cached
    /// robots.txt is compiled for one generation's bots.
    pub generation: u64,
    /// What the proxy saw of each server lately (the status page).
    pub recent: std::sync::Arc<crate::recent::Recent>,
    /// Where the listeners are bound; when the process started.
    pub listens: Listens,
    pub started: std::time::Instant,
    /// Failed SOCKS5 logins per client (lasts across reloads).
    pub guesses: std::sync::Arc<crate::guesses::Guesses>,
    /// Admitting a request: its own value, over the same config, caches
    /// and gates as these fields.
    pub admission: Admission,
    /// Cancelled when the proxy shuts down (lasts across reloads).
    pub shutdown: tokio_util::sync::CancellationToken,
    /// Fleet mode's store (lasts across reloads): its shape and health for
    /// the status page.
    pub store: Option<std::sync::Arc<crate::store::Store>>,
}

/// The current [`Context`]: each new connection takes the one in place when
/// it is accepted and keeps it to its end (docs/architecture.md, "Reload").
pub type Live = std::sync::Arc<arc_swap::ArcSwap<Context>>;
