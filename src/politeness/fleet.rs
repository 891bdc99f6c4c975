//! The gate in fleet mode (`[store] url`): a request's turn comes from the
//! store's shared gate instead of this process's (docs/architecture.md,
//! "Fleet mode"). While the store does not answer, `on_unavailable` decides:
//! "slow down" (`refuse`), or this process's own gate (`local`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::slowed::Site;
use super::{GateBy, Local, Permit, PlaceOf, SlowDown, Turns};
use crate::protocol::rules::{self, SiteBy};
use crate::store::{GateAsk, Lease, OnUnavailable, SlowedAs, Store};
use crate::target::Server;

/// A request admitted by the shared gate: its lease, and what an upstream's
/// "slow down" must name.
pub(super) struct Shared {
    store: Arc<Store>,
    lease: Lease,
    tag: String,
    /// Whose slow-down an upstream's answer sets.
    server: Named,
    delay: Duration,
}

/// A site's slow-down as the shared gate names it ([`SlowedAs`]), owned.
pub(super) struct Named {
    site: String,
    legacy: Option<String>,
}

impl Named {
    /// A web site: its host, and as a proxy of the previous version named
    /// it (`host:port`: this request's port); a small-web server:
    /// `host:port`.
    fn of(server: &Server) -> Named {
        Named {
            site: Site::of(&server.name).to_string(),
            legacy: (rules::of(server.name.scheme).site == SiteBy::Host)
                .then(|| format!("{}:{}", server.name.host, server.name.port)),
        }
    }

    fn as_slowed(&self) -> SlowedAs<'_> {
        SlowedAs {
            site: &self.site,
            legacy: self.legacy.as_deref(),
        }
    }
}

impl Shared {
    /// Tells the fleet the server said "slow down".
    pub(super) async fn slow_down(&self, seconds: Option<Duration>, max_delay: Option<Duration>) {
        let _ = self
            .store
            .slow_down(
                (&self.tag, self.server.as_slowed()),
                seconds,
                self.delay,
                max_delay,
            )
            .await;
    }

    /// Tells the fleet the server answered normally (a store call only when
    /// the shared gate was backed off).
    pub(super) async fn recovered(&self) {
        if self.lease.backed_off() {
            let _ = self
                .store
                .recovered((&self.tag, self.server.as_slowed()))
                .await;
        }
    }
}

/// Turns taken at the fleet's shared gate in the store, with this process's
/// gates as its shadow: every start the fleet lets through is noted there,
/// and while the store is down they answer (`on_unavailable = "local"`).
pub struct Fleet {
    store: Arc<Store>,
    here: Arc<Local>,
}

impl Fleet {
    pub fn new(store: Arc<Store>, here: Arc<Local>) -> Fleet {
        Fleet { store, here }
    }

    /// A request admitted by the shared gate of `tag`, holding `lease`.
    fn permit(&self, lease: Lease, (tag, server): (String, Named), delay: Duration) -> Permit {
        Permit {
            gate: self.here.clone(),
            id: 0,
            shared: Some(Box::new(Shared {
                store: self.store.clone(),
                lease,
                tag,
                server,
                delay,
            })),
            started: Instant::now(),
            behind: 0,
        }
    }
}

impl Turns for Fleet {
    fn admit<'a>(
        &'a self,
        server: &'a Server,
        spacing: (Option<Duration>, Duration),
        by: Option<Instant>,
        place: Option<PlaceOf<'a>>,
    ) -> BoxFuture<'a, Result<Permit, SlowDown>> {
        Box::pin(async move {
            match self.admit_shared(server, spacing, by, place).await {
                Some(turn) => turn,
                None => self.here.admit(server, spacing, by, place).await,
            }
        })
    }

    fn here(&self) -> &Arc<Local> {
        &self.here
    }
}

/// What a request asks the shared gate, under `config`, waiting no later
/// than `by`.
fn ask(
    config: &super::PolitenessConfig,
    delay: Duration,
    hold: Duration,
    by: Option<Instant>,
) -> GateAsk {
    let cap = config.max_slow_down;
    GateAsk {
        delay,
        hold: hold.max(delay),
        max_wait: config.max_wait_by(by),
        // The shared gate's back-off (a `44` without a number) doubles up
        // to `max_delay`, and never past `max_slow_down`.
        max_delay: Some(config.max_delay.map_or(cap, |m| m.min(cap))),
        concurrency: config.per_host_concurrency,
    }
}

/// The store's name for a server's gate. By address, the lowest of the
/// server's addresses (IPv4 before IPv6), IPv4-mapped read as IPv4: every
/// proxy picks the same one for the same addresses, so `localhost` and
/// `127.0.0.1` share one gate across the fleet as they do in one process.
/// No port and no scheme, as in one process: one machine, one gate.
pub fn fleet_tag(by: GateBy, server: &Server) -> String {
    let lowest = server.addrs.iter().map(|a| a.ip().to_canonical()).min();
    match (by.for_scheme(server.name.scheme), lowest) {
        (GateBy::Address, Some(ip)) => format!("a/{ip}"),
        _ => format!("h/{}", server.name.host),
    }
}

/// The answer while the store is down and requests are refused.
fn store_down(delay: Duration) -> SlowDown {
    SlowDown {
        retry_after: delay.max(Duration::from_secs(1)),
    }
}

impl Fleet {
    /// The shared gate's answer, or `None` when this process's gate is to
    /// answer (the store is down and `on_unavailable = "local"`). While the
    /// cap is full the request waits in the gate's line, in order across
    /// the fleet, its place kept there under `place` if it leaves.
    async fn admit_shared(
        &self,
        server: &Server,
        (delay, hold): (Option<Duration>, Duration),
        by: Option<Instant>,
        place: Option<PlaceOf<'_>>,
    ) -> Option<Result<super::Permit, SlowDown>> {
        let config = self.here.config().clone();
        let store = &self.store;
        let delay = delay.unwrap_or_else(|| config.delay_for(None));
        let local = store.config().on_unavailable == OnUnavailable::Local;
        if !store.is_up() {
            // Known down: no call that would wait for its deadline first.
            return if local {
                None
            } else {
                Some(Err(store_down(delay)))
            };
        }
        let tag = fleet_tag(config.key, server);
        let name = Named::of(server);
        match store
            .admit(
                (&tag, name.as_slowed()),
                ask(&config, delay, hold, by),
                place.map(|p| p.place().id()),
            )
            .await
        {
            Ok(Ok(lease)) => {
                let permit = self.permit(lease, (tag, name), delay);
                // Every start the fleet lets through (robots.txt fetches
                // too) is noted here: report mode's waits are counted from
                // it, and `on_unavailable = "local"` spaces from it.
                self.here.seen_start(permit.started, server, delay, hold);
                Some(Ok(permit))
            }
            Ok(Err(retry_after)) => Some(Err(SlowDown { retry_after })),
            Err(_) if local => None,
            Err(_) => Some(Err(store_down(delay))),
        }
    }
}
