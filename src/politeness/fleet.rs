//! The gate in fleet mode (`[store] url`): a request's turn comes from the
//! store's shared gate instead of this process's (docs/architecture.md,
//! "Fleet mode"). While the store does not answer, `on_unavailable` decides:
//! "slow down" (`refuse`), or this process's own gate (`local`).

use std::sync::Arc;
use std::time::Duration;

use super::{GateBy, Politeness, SlowDown};
use crate::store::{GateAsk, Lease, OnUnavailable, Store};
use crate::target::Server;

/// A request admitted by the shared gate: its lease, and what an upstream's
/// "slow down" must name.
pub(super) struct Shared {
    lease: Lease,
    tag: String,
    delay: Duration,
}

/// The store's name for a server's gate. By address, the lowest of the
/// server's addresses (IPv4 before IPv6), IPv4-mapped read as IPv4: every
/// proxy picks the same one for the same addresses, so `localhost` and
/// `127.0.0.1` share one gate across the fleet as they do in one process.
pub fn fleet_tag(by: GateBy, server: &Server) -> String {
    let lowest = server
        .addrs
        .iter()
        .map(|a| std::net::SocketAddr::new(a.ip().to_canonical(), a.port()))
        .min();
    match (by, lowest) {
        (GateBy::Address, Some(addr)) => format!("a/{addr}"),
        _ => format!("h/{}", server.name),
    }
}

/// The answer while the store is down and requests are refused.
fn store_down(delay: Duration) -> SlowDown {
    SlowDown {
        retry_after: delay.max(Duration::from_secs(1)),
    }
}

impl Politeness {
    /// The shared gate's answer, or `None` when this process's gate is to
    /// answer (the store is down and `on_unavailable = "local"`).
    pub(super) async fn admit_shared(
        self: &Arc<Self>,
        store: &Arc<Store>,
        server: &Server,
        delay: Option<Duration>,
        hold: Duration,
    ) -> Option<Result<super::Permit, SlowDown>> {
        let config = self.config.load_full();
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
        let ask = GateAsk {
            delay,
            hold: hold.max(delay),
            max_wait: config.max_wait,
            max_delay: config.max_delay,
            concurrency: config.per_host_concurrency,
        };
        let tag = fleet_tag(config.key, server);
        match store.admit(&tag, ask).await {
            Ok(Ok(lease)) => Some(Ok(super::Permit {
                gate: self.clone(),
                id: 0,
                shared: Some(Shared { lease, tag, delay }),
            })),
            Ok(Err(retry_after)) => Some(Err(SlowDown { retry_after })),
            Err(_) if local => None,
            Err(_) => Some(Err(store_down(delay))),
        }
    }
}

impl super::Permit {
    /// The upstream answered "slow down" (Gemini `44`): with a number, nothing
    /// starts at this server before it has passed; without, its spacing
    /// doubles. In fleet mode, for every proxy.
    /// The fleet is told before the client hears the `44`, so a client
    /// that retries at once through another proxy is held too.
    pub async fn slow_down(&self, seconds: Option<Duration>) {
        self.gate.slow_down(self.id, seconds);
        if let (Some(shared), Some(store)) = (&self.shared, &self.gate.store) {
            let max_delay = self.gate.config.load().max_delay;
            let _ = store
                .slow_down(&shared.tag, seconds, shared.delay, max_delay)
                .await;
        }
    }

    /// The upstream answered normally: a back-off ends (a store call only
    /// when the shared gate was backed off).
    pub async fn recovered(&self) {
        self.gate.recovered(self.id);
        if let (Some(shared), Some(store)) = (&self.shared, &self.gate.store) {
            if shared.lease.backed_off() {
                let _ = store.recovered(&shared.tag).await;
            }
        }
    }
}
