//! The context a request is served in: the config of one generation and the
//! parts that last across reloads (caches, gates, pins, metrics), shared by
//! every connection accepted under that config.

use crate::admission::Admission;
use crate::listener::Listens;

/// What the proxy needs to serve a request; shared by the connections
/// accepted under one config. A reload makes a new one (the caches, gates,
/// pins and metrics in it are the same objects).
pub struct Context {
    /// Host and port that rewritten Gopher menus point at.
    /// `None`: the Gopher listener is off (menus are rewritten only there).
    pub gopher_public: Option<(String, u16)>,
    /// The Gemini listener's TLS (its certificate, the client-certificate check).
    pub gemini_tls: tokio_rustls::TlsAcceptor,
    /// The Gemini listener's certificate file and its SHA-256 fingerprint.
    pub cert_path: std::path::PathBuf,
    pub cert_fingerprint: String,
    /// What the proxy saw of each server lately (the status page).
    pub recent: std::sync::Arc<crate::recent::Recent>,
    /// Where the listeners are bound; when the process started.
    pub listens: Listens,
    pub started: std::time::Instant,
    /// Failed SOCKS5 logins per client (lasts across reloads).
    pub guesses: std::sync::Arc<crate::guesses::Guesses>,
    /// This generation's config, the robots.txt cache, the gates, the
    /// metrics, the upstream and the shutdown token, with which it admits a
    /// request: what a listener needs beyond them is the rest.
    pub admission: Admission,
    /// Fleet mode's store (lasts across reloads): its shape and health for
    /// the status page.
    pub store: Option<std::sync::Arc<crate::store::Store>>,
    /// Idle upstream connections kept for reuse (lasts across reloads).
    pub kept: std::sync::Arc<crate::kept::Kept>,
    /// The bots' Web Bot Auth signers, in the bots' order.
    pub signers: std::sync::Arc<crate::identity::Signers>,
}

/// The current [`Context`]: each new connection takes the one in place when
/// it is accepted and keeps it to its end (docs/architecture.md, "Reload").
pub type Live = std::sync::Arc<arc_swap::ArcSwap<Context>>;
