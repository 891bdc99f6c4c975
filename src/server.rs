//! Starting and stopping the proxy: bind, accept with a cap on connections (each
//! connection, TLS handshake included, runs in its own task: a slow client never
//! blocks the accept loop), and on shutdown stop accepting and let requests in
//! flight finish within a deadline.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::cache::RobotsCache;
use crate::config::Config;
use crate::fetch::gemini::GeminiRobots;
use crate::proxy::{serve_gemini, Context};
use crate::tls::{self, TlsError};
use crate::upstream::Upstream;

#[derive(Debug, Error)]
pub enum StartError {
    #[error("listening on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// A running proxy.
pub struct Proxy {
    /// Where the Gemini listener is bound (useful with port 0).
    pub gemini_addr: SocketAddr,
    /// The listener's certificate file and its SHA-256 fingerprint.
    pub cert_path: PathBuf,
    pub cert_fingerprint: String,
    pub context: Arc<Context>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    grace: std::time::Duration,
}

impl Proxy {
    /// Binds the listeners and starts serving.
    pub async fn start(config: Config) -> Result<Proxy, StartError> {
        let identity = match &config.tls.cert_and_key {
            Some((cert, key)) => tls::load_identity(cert, key)?,
            None => tls::load_or_generate(&config.state_dir, &config.tls.hostnames)?,
        };
        let cert_path = identity.cert_path.clone();
        let cert_fingerprint = tls::fingerprint(&identity.chain[0]);
        let acceptor = TlsAcceptor::from(tls::server_config(identity)?);

        let listener = TcpListener::bind(config.gemini_listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: config.gemini_listen,
                source,
            })?;
        let gemini_addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: config.gemini_listen,
            source,
        })?;

        let limits = &config.limits;
        let upstream = Arc::new(Upstream::new(
            limits.allow_private_upstreams,
            limits.connect_timeout,
            vec![gemini_addr],
        )?);
        let name_bot = (config.robots.name_bot_in_request && !config.bot.token().is_empty())
            .then(|| config.bot.token().to_string());
        let fetcher = GeminiRobots::new(upstream.clone(), config.robots.fetch_timeout, name_bot);
        let gemini_robots =
            RobotsCache::new(Arc::new(fetcher), config.robots.clone(), config.bot.clone());
        let grace = limits.shutdown_grace;
        let max_connections = limits.max_connections;
        let context = Arc::new(Context {
            config,
            upstream,
            gemini_robots,
        });

        let shutdown = CancellationToken::new();
        let tracker = TaskTracker::new();
        tracker.spawn(accept_loop(
            listener,
            acceptor,
            context.clone(),
            Arc::new(Semaphore::new(max_connections)),
            shutdown.clone(),
            tracker.clone(),
        ));
        Ok(Proxy {
            gemini_addr,
            cert_path,
            cert_fingerprint,
            context,
            shutdown,
            tracker,
            grace,
        })
    }

    /// Stops accepting; requests in flight go on.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Waits until every request in flight has finished, or the grace period has
    /// passed. Returns false when requests were cut off.
    pub async fn drained(&self) -> bool {
        self.tracker.close();
        tokio::time::timeout(self.grace, self.tracker.wait())
            .await
            .is_ok()
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ctx: Arc<Context>,
    slots: Arc<Semaphore>,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    loop {
        // At the cap, stop accepting: new clients wait in the kernel's backlog.
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: back off, stay up.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (acceptor, ctx) = (acceptor.clone(), ctx.clone());
        tracker.spawn(async move {
            serve_gemini(stream, peer, acceptor, ctx).await;
            drop(permit);
        });
    }
}
