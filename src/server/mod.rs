//! Starting and stopping the proxy: bind the listeners, accept with a cap on
//! connections (each connection, TLS handshake included, runs in its own task:
//! a slow client never blocks an accept loop), and on shutdown stop accepting and
//! let requests in flight finish within a deadline.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accept::{next_connection, LogBudget};
use crate::access::Access;
use crate::config::Config;
use crate::context::{Context, Live};
use crate::listener::{Listener, Listens};
use crate::metrics::Rejection;
use crate::slots::{self, ClientSlot, PerClient};
use crate::tls::{self, TlsError};
use crate::transparent::Kernel;

mod generation;
mod robots;
use generation::Lasting;

#[derive(Debug, Error)]
pub enum StartError {
    #[error("the {listener} listener ({key}) cannot listen on {addr}: {source}{}", bind_hint(*addr, source))]
    Bind {
        listener: &'static str,
        key: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Preflight(#[from] crate::preflight::PreflightError),
    #[error(
        "limits.upstream_mark: cannot set mark {mark} on sockets ({source}); the proxy needs \
         CAP_NET_ADMIN (systemd: AmbientCapabilities=CAP_NET_ADMIN; docker: --cap-add NET_ADMIN)"
    )]
    Mark { mark: u32, source: std::io::Error },
    #[error("store.url: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("state_dir: the certificate pins ({path}) cannot be read or written: {source}")]
    Pins {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Key(#[from] crate::identity::key::KeyError),
    #[error("state_dir: the daily budgets ({path}) cannot be read: {source}")]
    Budgets {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The next step after a listener could not bind, where there is one.
fn bind_hint(addr: SocketAddr, error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::PermissionDenied if addr.port() < 1024 => {
            "; ports below 1024 need root or CAP_NET_BIND_SERVICE (systemd: \
             AmbientCapabilities=CAP_NET_BIND_SERVICE, which the shipped unit grants; \
             otherwise `setcap cap_net_bind_service=+ep` on the binary), or use a port above 1023"
                .to_string()
        }
        ErrorKind::AddrInUse => format!(
            "; another program listens there (`ss -ltnp 'sport = :{}'` names it)",
            addr.port()
        ),
        ErrorKind::AddrNotAvailable => {
            "; no interface of this machine has that address".to_string()
        }
        _ => String::new(),
    }
}

/// A running proxy.
pub struct Proxy {
    /// Where the listeners are bound (useful with port 0).
    pub listens: Listens,
    /// The drop-in CA's certificate, when a drop-in listener (SOCKS5,
    /// transparent) is on.
    pub ca_cert_path: Option<PathBuf>,
    /// The Gemini listener's certificate file and its SHA-256 fingerprint
    /// (as at start; a reload may change them: see [`Proxy::context`]).
    pub cert_path: PathBuf,
    pub cert_fingerprint: String,
    /// The context new connections get; a reload swaps it.
    live: Live,
    /// What lasts across reloads.
    lasting: Lasting,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    grace: std::time::Duration,
}

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Keys whose change needs a restart: their running values were kept.
    pub kept: Vec<&'static str>,
    /// The Gemini listener's certificate fingerprint now.
    pub cert_fingerprint: String,
}

impl Proxy {
    /// Binds the listeners and starts serving.
    pub async fn start(config: Config) -> Result<Proxy, StartError> {
        Proxy::start_with(config, Kernel::real()).await
    }

    /// [`Proxy::start`], with the transparent listener asking `kernel` where
    /// redirected connections were going (tests supply the answers).
    pub async fn start_with(config: Config, kernel: Kernel) -> Result<Proxy, StartError> {
        crate::preflight::check(&config)?;
        let (bound, listens) = bind_all(&config).await?;
        // The drop-in CA, for the listeners that end a client's TLS for any host.
        let authority = match listens.iter().any(|(l, _)| l.spec().drop_in) {
            true => Some(Arc::new(tls::Authority::load_or_generate(
                &config.state_dir,
            )?)),
            false => None,
        };
        let ca_cert_path = authority.as_ref().map(|ca| ca.cert_path.clone());
        write_listening(&config.state_dir, &listens);
        let (lasting, built) = Lasting::open(&config, listens).await?;
        let grace = config.limits.shutdown_grace;
        let max_connections = connection_cap(config.limits.max_connections);
        let context = lasting.install(config, built, 0);
        let cert_path = context.cert_path.clone();
        let cert_fingerprint = context.cert_fingerprint.clone();
        let live: Live = Arc::new(arc_swap::ArcSwap::from(context));

        let tracker = TaskTracker::new();
        let shutdown = lasting.shutdown.clone();
        // One cap for all crawler listeners: it bounds the proxy's sockets.
        let slots = Arc::new(Semaphore::new(max_connections));
        for (listener, socket) in bound {
            let drop_in = || authority.clone().expect("made for drop-in listeners");
            let kind = match listener {
                Listener::Gemini => Kind::Gemini,
                Listener::Gopher => Kind::Gopher,
                Listener::Socks5 => Kind::Socks(drop_in()),
                Listener::Transparent => Kind::Transparent(drop_in(), kernel.clone()),
                Listener::Http => Kind::Http(drop_in()),
                Listener::Admin => {
                    let admin = crate::admin::serve(
                        socket,
                        live.clone(),
                        shutdown.clone(),
                        tracker.clone(),
                    );
                    tracker.spawn(admin);
                    continue;
                }
                Listener::KeyDirectory => {
                    let live = live.clone();
                    let directory = crate::identity::directory::serve(
                        socket,
                        move || live.load().signers.clone(),
                        shutdown.clone(),
                        tracker.clone(),
                    );
                    tracker.spawn(directory);
                    continue;
                }
            };
            tracker.spawn(accept_loop(
                socket,
                kind,
                live.clone(),
                (slots.clone(), lasting.per_client.clone()),
                shutdown.clone(),
                tracker.clone(),
            ));
        }
        // Forget idle hosts now and then: per-host state stays bounded.
        let sweeper = lasting
            .politeness
            .clone()
            .sweeper(std::time::Duration::from_secs(30), shutdown.clone());
        tracker.spawn(sweeper);
        // The status page's queue lengths, looked at every second, and the
        // pages crawlers gave up (kept places never come back for).
        let sampler = live
            .load()
            .recent
            .clone()
            .sampler(lasting.politeness.clone(), shutdown.clone());
        tracker.spawn(sampler);
        // The bots' daily budgets, written to the state directory now and then.
        tracker.spawn(lasting.ledger.clone().keeper(shutdown.clone()));
        Ok(Proxy {
            listens,
            ca_cert_path,
            cert_path,
            cert_fingerprint,
            live,
            lasting,
            shutdown,
            tracker,
            grace,
        })
    }

    /// Where `listener` is bound.
    ///
    /// # Panics
    /// When that listener is off: [`Proxy::listens`] tells without panicking.
    pub fn addr(&self, listener: Listener) -> SocketAddr {
        match self.listens.get(listener) {
            Some(addr) => addr,
            None => panic!("the {} listener is off", listener.spec().title),
        }
    }

    /// The context new connections get now.
    pub fn context(&self) -> Arc<Context> {
        self.live.load_full()
    }

    /// Applies a new configuration (SIGHUP): bots, access rules, politeness,
    /// robots.txt settings, limits and certificates, for connections accepted
    /// from now on. Connections in flight keep the one they started with; the
    /// caches, gates and pins stay. Keys that need a restart keep their running
    /// values and are named in the answer. On an error nothing changes.
    pub async fn reload(&self, mut config: Config) -> Result<Reloaded, StartError> {
        let _one = self.lasting.reloading.lock().await;
        let running = self.context();
        let kept = config.keep_restart_only(&running.admission.config);
        let generation = self
            .lasting
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        let built = self.lasting.build(&config)?;
        let context = self.lasting.install(config, built, generation);
        let cert_fingerprint = context.cert_fingerprint.clone();
        self.live.store(context);
        Ok(Reloaded {
            kept,
            cert_fingerprint,
        })
    }

    /// Fleet mode: whether the store answered the last call (`None`: no store).
    pub fn store_is_up(&self) -> Option<bool> {
        self.lasting.store.as_ref().map(|s| s.is_up())
    }

    /// Stops accepting; requests in flight go on.
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }

    /// Waits until every request in flight has finished, or the grace period has
    /// passed. Returns false when requests were cut off.
    pub async fn drained(&self) -> bool {
        self.tracker.close();
        let drained = tokio::time::timeout(self.grace, self.tracker.wait())
            .await
            .is_ok();
        // What the requests of the grace spent.
        self.lasting.ledger.save_or_warn();
        drained
    }
}

/// Binds every listener the config turns on, in the table's order.
async fn bind_all(config: &Config) -> Result<(Vec<(Listener, TcpListener)>, Listens), StartError> {
    let mut bound = Vec::new();
    let mut listens = Listens::default();
    for (listener, addr) in config.listen.iter() {
        let (socket, local) = bind(listener, addr).await?;
        listens.set(listener, Some(local));
        bound.push((listener, socket));
    }
    Ok((bound, listens))
}

/// `STATE_DIR/listening`: where each listener is bound, a line each
/// (`listen.metrics 127.0.0.1:9770`), for what runs beside the proxy and
/// knows neither its flags nor its config: the container's HEALTHCHECK reads
/// the admin listener's address here. Rewritten at every start.
fn write_listening(state_dir: &std::path::Path, listens: &Listens) {
    let text: String = listens
        .iter()
        .map(|(l, addr)| format!("{} {addr}\n", l.spec().key))
        .collect();
    let path = state_dir.join(LISTENING);
    if let Err(e) = crate::state::write_unsynced(&path, text.as_bytes(), 0o644) {
        tracing::warn!(path = %path.display(), "cannot write where the listeners are: {e}");
    }
}

/// The file [`write_listening`] writes in the state directory.
pub use crate::state::LISTENING;

/// `limits.max_connections`, lowered to what the open-files limit allows
/// (raised first as far as it may be).
fn connection_cap(configured: usize) -> usize {
    let Some(fds) = slots::raise_fd_limit() else {
        return configured;
    };
    let budget = slots::connections_for(fds);
    if configured > budget {
        tracing::warn!(
            configured,
            serving = budget,
            open_files_limit = fds,
            "limits.max_connections lowered to what the open-files limit allows (3 descriptors per connection)"
        );
        return budget;
    }
    configured
}

async fn bind(
    listener: Listener,
    addr: SocketAddr,
) -> Result<(TcpListener, SocketAddr), StartError> {
    let bind_err = |source| StartError::Bind {
        listener: listener.spec().title,
        key: listener.spec().key,
        addr,
        source,
    };
    let socket = TcpListener::bind(addr).await.map_err(bind_err)?;
    let local = socket.local_addr().map_err(bind_err)?;
    Ok((socket, local))
}

/// What a listener speaks.
#[derive(Clone)]
enum Kind {
    /// (Its certificate is the context's: a reload may change it.)
    Gemini,
    Gopher,
    Socks(Arc<tls::Authority>),
    Transparent(Arc<tls::Authority>, Kernel),
    /// The web's forward proxy (its CA ends `CONNECT` tunnels' TLS).
    Http(Arc<tls::Authority>),
}

impl Kind {
    fn listener(&self) -> Listener {
        match self {
            Kind::Gemini => Listener::Gemini,
            Kind::Gopher => Listener::Gopher,
            Kind::Socks(_) => Listener::Socks5,
            Kind::Transparent(..) => Listener::Transparent,
            Kind::Http(_) => Listener::Http,
        }
    }

    /// May a client at `ip` use this listener? (docs/architecture.md, "Access")
    fn admits(&self, access: &Access, ip: std::net::IpAddr) -> bool {
        match self {
            Kind::Transparent(_, kernel) => {
                access.admits_redirected(ip, |ip| kernel.local.is_local(ip))
            }
            _ => access.admits(ip),
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    kind: Kind,
    live: Live,
    (slots, per_client): (Arc<Semaphore>, Arc<PerClient>),
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    // Refusals over the per-client cap are logged at most once a second.
    let mut last_warned: Option<tokio::time::Instant> = None;
    // Clients outside access.allow_from: each is logged, up to a budget per
    // second, so a scan of a public address cannot flood the log.
    let mut outsiders = LogBudget::new(20);
    loop {
        let Some((stream, peer)) = next_connection(&listener, &shutdown, "accept failed").await
        else {
            break;
        };
        // The config in place now (a reload may swap it): this connection keeps it.
        let ctx = live.load_full();
        let admitted = kind.admits(&ctx.admission.config.access, peer.ip());
        let Some(client_slot) = per_client.try_take(peer.ip()) else {
            over_client_cap(stream, peer, kind.listener(), &ctx, &mut last_warned);
            continue;
        };
        // At the cap, this connection waits for a slot and the listener accepts no
        // more meanwhile: further clients wait in the kernel's backlog. (A slot is
        // taken after accepting, not before: with one cap shared by two listeners,
        // an idle listener must not sit on a slot.)
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let _ = stream.set_nodelay(true);
        let kind = kind.clone();
        let open = ctx.admission.metrics.connection(kind.listener());
        let held = (permit, open);
        if !admitted {
            let logged = outsiders.note();
            tracker.spawn(outsider(
                kind,
                (stream, peer),
                ctx,
                (held, client_slot),
                logged,
            ));
            continue;
        }
        serve(kind, (stream, peer), ctx, (held, client_slot), &tracker);
    }
}

/// What an accepted connection holds until it ends: its place under the
/// connection cap, and its count in `connections_open`.
type Held = (
    tokio::sync::OwnedSemaphorePermit,
    crate::metrics::ConnectionGuard,
);

/// A client at its cap of connections: this one is closed at once, with a
/// warning at most once a second.
fn over_client_cap(
    stream: TcpStream,
    peer: SocketAddr,
    listener: Listener,
    ctx: &Context,
    last_warned: &mut Option<tokio::time::Instant>,
) {
    ctx.admission
        .metrics
        .rejected(listener, Rejection::ClientCap);
    if last_warned.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(1)) {
        *last_warned = Some(tokio::time::Instant::now());
        tracing::warn!(
            client = %peer.ip(),
            listener = %listener.as_str(),
            cap = ctx.admission.config.limits.max_connections_per_client,
            "a client at limits.max_connections_per_client; its further connections are closed at once"
        );
    }
    // A reset frees the socket at once (no TIME_WAIT on our side).
    let _ = stream.set_zero_linger();
}

/// A client outside access.allow_from: the protocol's refusal, nothing read,
/// fetched or sent upstream (docs/architecture.md, "Access"); logged when
/// `logged` (with how many were not).
fn outsider(
    kind: Kind,
    (stream, peer): (TcpStream, SocketAddr),
    ctx: Arc<Context>,
    held: (Held, ClientSlot),
    logged: Option<u64>,
) -> impl std::future::Future<Output = ()> {
    ctx.admission
        .metrics
        .rejected(kind.listener(), Rejection::Access);
    ctx.admission
        .metrics
        .access_refused(&crate::access::Denied::Address(peer.ip()));
    async move {
        let asked = turn_away(kind.clone(), stream, peer, &ctx).await;
        if let Some(suppressed) = logged {
            tracing::info!(
                client = %peer,
                listener = %kind.listener().as_str(),
                asked = asked.as_deref().unwrap_or(""),
                suppressed,
                "client outside access.allow_from refused"
            );
        }
        drop(held);
    }
}

/// Serves an admitted connection on a task of its own listener's size: a
/// task is as large as its future, and one future matching on the kind would
/// make every held Gopher request as large as a SOCKS5 one
/// (tests/footprint.rs). The per-client place is given back when the answer
/// is complete (`slots::answered`), the rest when the connection ends.
fn serve(
    kind: Kind,
    (stream, peer): (TcpStream, SocketAddr),
    ctx: Arc<Context>,
    (held, slot): (Held, ClientSlot),
    tracker: &TaskTracker,
) {
    match kind {
        Kind::Gemini => {
            let acceptor = ctx.gemini_tls.clone();
            let serve = crate::protocols::gemini::serve::serve::<crate::gateway::OtherProtocols>(
                stream, peer, acceptor, ctx,
            );
            tracker.spawn(holding(held, slots::holding_client(slot, serve)))
        }
        Kind::Gopher => {
            let serve = crate::protocols::gopher::serve::serve(stream, peer, ctx);
            tracker.spawn(holding(held, slots::holding_client(slot, serve)))
        }
        Kind::Socks(ca) => {
            let serve = crate::socks5::serve::serve(stream, peer, ctx, ca);
            tracker.spawn(holding(held, slots::holding_client(slot, serve)))
        }
        Kind::Transparent(ca, kernel) => {
            let serve = crate::transparent::serve::serve(stream, peer, ctx, (ca, kernel.original));
            tracker.spawn(holding(held, slots::holding_client(slot, serve)))
        }
        Kind::Http(ca) => {
            let serve = crate::protocols::http::serve::serve(stream, peer, ctx, ca);
            tracker.spawn(holding(held, slots::holding_client(slot, serve)))
        }
    };
}

/// Serves one connection, then gives back what it held: its slot under the
/// connection caps and its place in the open-connections gauge. A combinator,
/// not an `async fn`: one of those would keep `serve` twice (the argument and
/// the awaited future), doubling every held connection's task.
fn holding<H>(
    held: H,
    serve: impl std::future::Future<Output = ()>,
) -> impl std::future::Future<Output = ()> {
    use futures_util::FutureExt;
    serve.map(move |()| drop(held))
}

/// Answers a client outside `access.allow_from` in its listener's protocol.
/// Returns what it asked for, when the protocol says before the refusal (SOCKS5).
async fn turn_away(
    kind: Kind,
    stream: TcpStream,
    peer: SocketAddr,
    ctx: &Context,
) -> Option<String> {
    match kind {
        Kind::Gemini => {
            crate::protocols::gemini::serve::turn_away(stream, peer, ctx.gemini_tls.clone(), ctx)
                .await;
            None
        }
        Kind::Gopher => {
            crate::protocols::gopher::serve::turn_away(stream, peer).await;
            None
        }
        Kind::Socks(_) => crate::socks5::serve::turn_away(stream, ctx).await,
        Kind::Transparent(..) => {
            crate::transparent::serve::turn_away(stream).await;
            None
        }
        Kind::Http(_) => {
            crate::protocols::http::serve::turn_away(stream, peer).await;
            None
        }
    }
}
