//! One config generation: what a config decides is built anew ([`Built`]:
//! the listener's TLS, the upstream, the fetchers), and the parts that last
//! across reloads ([`Lasting`]) are told the new settings before the new
//! [`Context`] goes live (docs/architecture.md, "Reload").

use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;

use super::robots::ByProtocol;
use super::StartError;
use crate::cache::{self, RobotsCache};
use crate::config::Config;
use crate::context::Context;
use crate::egress::Reach;
use crate::fetch::Polite;
use crate::listener::{Listener, Listens};
use crate::metrics::Metrics;
use crate::pins::{self, Pins};
use crate::politeness::{self, Politeness};
use crate::slots::PerClient;
use crate::store::Store;
use crate::tls;
use crate::upstream::Upstream;

/// What a reload keeps: state (caches, gates, pins, counters) and what is
/// bound to the process (listeners' addresses, the store, the drop-in CA).
#[derive(Clone)]
pub(super) struct Lasting {
    pub(super) metrics: Arc<Metrics>,
    pub(super) robots: Arc<RobotsCache>,
    pub(super) politeness: Arc<Politeness>,
    pub(super) pins: Arc<Pins>,
    /// Fleet mode: the store the gate, the cache and the pins share.
    pub(super) store: Option<Arc<Store>>,
    pub(super) per_client: Arc<PerClient>,
    /// Idle upstream connections kept for reuse.
    pub(super) kept: Arc<crate::kept::Kept>,
    /// Where the listeners are bound: the proxy's own addresses, never an upstream.
    pub(super) listens: Listens,
    pub(super) generation: Arc<std::sync::atomic::AtomicU64>,
    pub(super) recent: Arc<crate::recent::Recent>,
    pub(super) started: std::time::Instant,
    pub(super) guesses: Arc<crate::guesses::Guesses>,
    /// What the bots' own limits have counted (in flight, starts).
    pub(super) ledger: Arc<crate::bot_limits::Ledger>,
    /// Cancelled when the proxy shuts down: requests waiting for their turn
    /// are answered "slow down" then, not cut at the end of the grace.
    pub(super) shutdown: tokio_util::sync::CancellationToken,
    /// One reload at a time.
    pub(super) reloading: Arc<tokio::sync::Mutex<()>>,
}

/// What a config decides that is built anew by each reload.
pub(super) struct Built {
    pub(super) gemini_tls: TlsAcceptor,
    cert_path: PathBuf,
    cert_fingerprint: String,
    upstream: Arc<Upstream>,
    pub(super) fetcher: Arc<dyn crate::fetch::RobotsFetcher>,
    /// The bots' Web Bot Auth keys (read or made in the state directory).
    signers: Arc<crate::identity::Signers>,
}

impl Built {
    /// Everything that can fail, before anything running is told.
    pub(super) fn new(
        config: &Config,
        own: &Listens,
        pins: &Arc<Pins>,
        (politeness, metrics): (&Arc<Politeness>, &Arc<Metrics>),
    ) -> Result<Built, StartError> {
        let gemini_ips: Vec<_> = config
            .listen
            .get(Listener::Gemini)
            .map(|a| a.ip())
            .into_iter()
            .collect();
        let identity = match &config.tls.cert_and_key {
            Some((cert, key)) => crate::preflight::tls_identity(cert, key)?,
            None => tls::load_or_generate(
                &config.state_dir,
                &tls::certificate_names(&config.tls.hostnames, &gemini_ips),
            )?,
        };
        let cert_path = identity.cert_path.clone();
        let cert_fingerprint = tls::fingerprint(&identity.chain[0]);
        let gemini_tls = TlsAcceptor::from(tls::server_config(identity)?);
        let limits = &config.limits;
        let reach = Reach {
            allow_private: limits.allow_private_upstreams,
            ports: limits.upstream_ports.clone(),
            own: own.iter().map(|(_, addr)| addr).collect(),
            deny: Arc::new(limits.deny_hosts.clone()),
        };
        let tickets = tls::sessions::tickets_for(config.politeness.per_host_concurrency);
        let web_roots = tls::web::read_roots(&config.http.all_extra_roots())?;
        let upstream = Upstream::new(reach, limits.connect_timeout)?
            .with_tickets(tickets)?
            .with_web_roots(web_roots)
            .with_mark(limits.upstream_mark)
            .map_err(|source| StartError::Mark {
                mark: limits.upstream_mark.unwrap_or(0),
                source,
            })?
            .with_pins(pins.clone())
            .with_metrics(metrics.clone());
        let upstream = Arc::new(upstream);
        let fetcher = Arc::new(Polite {
            inner: ByProtocol::new(&upstream, config),
            gate: politeness.clone(),
            metrics: metrics.clone(),
        });
        let signers = crate::identity::Signers::load(
            &config.state_dir,
            config
                .bots
                .all()
                .iter()
                .map(|b| (b.name.as_str(), &b.limits.signing)),
        )?;
        Ok(Built {
            gemini_tls,
            cert_path,
            cert_fingerprint,
            upstream,
            fetcher,
            signers: Arc::new(signers),
        })
    }
}

/// Where the gate's turns, the robots.txt outcomes, the pins and the bots'
/// limit counts are kept:
/// this process, or the fleet's store. Chosen here, once; their owners never
/// ask which.
struct Backends {
    /// The gate's backend, given this process's gates.
    turns: Box<dyn FnOnce(Arc<politeness::Local>) -> Box<dyn politeness::Turns>>,
    outcomes: Box<dyn cache::Outcomes>,
    /// The pins' keeper, given the book read from the state directory.
    pins: Box<dyn FnOnce(pins::Book) -> Box<dyn pins::Keeper>>,
    counts: Box<dyn crate::bot_limits::SharedCounts>,
}

impl Backends {
    fn new(store: Option<&Arc<Store>>) -> Backends {
        match store {
            None => Backends {
                turns: Box::new(|here| Box::new(here)),
                outcomes: Box::<cache::Local>::default(),
                pins: Box::new(|book| Box::new(pins::Local(book))),
                counts: Box::new(crate::bot_limits::Alone),
            },
            Some(store) => Backends {
                turns: {
                    let store = store.clone();
                    Box::new(move |here| Box::new(politeness::Fleet::new(store, here)))
                },
                outcomes: Box::new(cache::Fleet::new(store.clone())),
                pins: {
                    let store = store.clone();
                    Box::new(move |book| Box::new(pins::Fleet::new(store, book)))
                },
                counts: Box::new(crate::bot_limits::SharedFleet(store.clone())),
            },
        }
    }
}

impl Lasting {
    /// What the first config builds and every later one keeps: the metrics,
    /// the store (fleet mode), the pins, the gates, the robots.txt cache; and
    /// that config's [`Built`].
    pub(super) async fn open(
        config: &Config,
        listens: Listens,
    ) -> Result<(Lasting, Built), StartError> {
        let bot_names: Vec<&str> = config.bots.all().iter().map(|b| b.name.as_str()).collect();
        let metrics = Arc::new(Metrics::with(&bot_names, config.metrics_per_host));
        let shutdown = tokio_util::sync::CancellationToken::new();
        // Fleet mode: the gate, robots.txt and pins shared through the store.
        let store = match &config.store {
            Some(store) => {
                Some(Store::open(store.clone(), metrics.clone(), shutdown.clone()).await?)
            }
            None => None,
        };
        let backends = Backends::new(store.as_ref());
        let book =
            crate::pins::Book::open(&config.state_dir).map_err(|source| StartError::Pins {
                path: config.state_dir.join(crate::pins::JOURNAL),
                source,
            })?;
        let pins = Pins::kept_by((backends.pins)(book));
        let here = Arc::new(politeness::Local::new(config.politeness.clone()));
        let politeness = Politeness::kept_by((backends.turns)(here));
        let pins = Arc::new(pins);
        let clock = crate::bot_limits::Clock::new(config.wall_clock);
        let ledger = crate::bot_limits::Ledger::open(
            &config.state_dir,
            clock,
            backends.counts,
            config.limits.max_budget_pairs,
        )
        .map_err(|source| StartError::Budgets {
            path: config.state_dir.join(crate::bot_limits::BUDGETS_FILE),
            source,
        })?;
        let built = Built::new(config, &listens, &pins, (&politeness, &metrics))?;
        let robots = Arc::new(
            RobotsCache::new(
                built.fetcher.clone(),
                config.robots.clone(),
                config.bots.profiles(),
            )
            .with_outcomes(backends.outcomes, config.politeness.max_wait),
        );
        let lasting = Lasting {
            metrics,
            robots,
            politeness,
            pins,
            store,
            per_client: PerClient::new(config.limits.max_connections_per_client),
            listens,
            generation: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            recent: Arc::new(crate::recent::Recent::new()),
            kept: Arc::default(),
            guesses: Arc::default(),
            ledger,
            shutdown,
            started: std::time::Instant::now(),
            reloading: Arc::new(tokio::sync::Mutex::new(())),
        };
        Ok((lasting, built))
    }

    pub(super) fn build(&self, config: &Config) -> Result<Built, StartError> {
        Built::new(
            config,
            &self.listens,
            &self.pins,
            (&self.politeness, &self.metrics),
        )
    }

    /// The context for `config` as generation `generation`: the lasting parts
    /// learn the new settings, and new connections will get it.
    pub(super) fn install(&self, config: Config, built: Built, generation: u64) -> Arc<Context> {
        self.robots.reconfigure(
            built.fetcher,
            config.robots.clone(),
            config.bots.profiles(),
            (generation, config.politeness.max_wait),
        );
        self.politeness.set_config(config.politeness.clone());
        self.per_client
            .set_cap(config.limits.max_connections_per_client);
        let names: Vec<&str> = config.bots.all().iter().map(|b| b.name.as_str()).collect();
        self.metrics.set_bots(&names);
        // Menus are rewritten on the Gopher listener only.
        let gopher_public = self.listens.get(Listener::Gopher).map(|gopher| {
            (
                config
                    .gopher_public_host
                    .clone()
                    .unwrap_or_else(|| gopher.ip().to_string()),
                config.gopher_public_port.unwrap_or(gopher.port()),
            )
        });
        // A reload that lowers the bound counts no new pair until the book
        // is under it; the pairs counted stay.
        self.ledger
            .set_max_budget_pairs(config.limits.max_budget_pairs);
        let limits = crate::bot_limits::steps(
            &config.bots,
            &config.hosts,
            self.politeness.config().key,
            &self.ledger,
        );
        let config = Arc::new(config);
        let admission = crate::admission::Admission {
            config,
            upstream: built.upstream,
            robots: self.robots.clone(),
            politeness: self.politeness.clone(),
            metrics: self.metrics.clone(),
            limits,
            generation,
            shutdown: self.shutdown.clone(),
        };
        Arc::new(Context {
            gopher_public,
            gemini_tls: built.gemini_tls,
            cert_path: built.cert_path,
            cert_fingerprint: built.cert_fingerprint,
            recent: self.recent.clone(),
            listens: self.listens,
            started: self.started,
            guesses: self.guesses.clone(),
            admission,
            store: self.store.clone(),
            kept: self.kept.clone(),
            signers: built.signers,
        })
    }
}
