//! Lease renewals. Every lease this proxy holds in the store (a request's
//! place at a gate, a bot's running count) is registered here while it is
//! held, and one task renews them all: each one once a third of its life
//! has passed since it was taken or last renewed (looked for every 24th of
//! a lease's life, so at most 0.375 of it passes without one); and every
//! one at once when the health check sees the store restart or fail over
//! (the scripts re-add a lease the store lost). A request thus costs no task of its own: registering
//! and forgetting a lease is a map insert and remove.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use tokio_util::sync::CancellationToken;

use super::Store;
use crate::metrics::StoreOp;

/// Makes one renewal call for a lease.
pub(super) type Call = dyn Fn(&Store) -> redis::ScriptInvocation<'static> + Send + Sync;

/// The most renewal calls out at once.
const AT_ONCE: usize = 64;

struct Entry {
    op: StoreOp,
    call: Arc<Call>,
    renewed: Instant,
}

/// The leases held, by a number of their own.
#[derive(Default)]
pub(super) struct Renewals {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Entry>>,
}

/// A lease's place among the renewals, forgotten by `Renewals::stop` (its
/// holder's drop calls it). One word: it is part of every running request
/// (tests/footprint.rs).
pub(super) struct Renewal {
    /// 0 once stopped (the first id is 1).
    id: u64,
}

impl Renewals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a lease just taken: `call` renews it until `stop`.
    pub(super) fn add(&self, op: StoreOp, call: Arc<Call>) -> Renewal {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Entry {
            op,
            call,
            renewed: Instant::now(),
        };
        self.lock().insert(id, entry);
        Renewal { id }
    }

    /// No more renewals for this lease (it was released, or turned into
    /// something that needs none). Again: nothing.
    pub(super) fn stop(&self, renewal: &mut Renewal) {
        let id = std::mem::take(&mut renewal.id);
        if id != 0 {
            self.lock().remove(&id);
        }
    }

    /// The leases to renew now: not renewed for `age` (all of them when
    /// `all`), marked renewed.
    fn due(&self, age: Duration, all: bool) -> Vec<(u64, StoreOp, Arc<Call>)> {
        let now = Instant::now();
        self.lock()
            .iter_mut()
            .filter(|(_, e)| all || now.duration_since(e.renewed) >= age)
            .map(|(id, e)| {
                e.renewed = now;
                (*id, e.op, e.call.clone())
            })
            .collect()
    }

    /// Whether the lease `id` is still held.
    fn held(&self, id: u64) -> bool {
        self.lock().contains_key(&id)
    }

    /// How many leases are held (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// How long a lease goes without a renewal: a third of its life.
fn every(lease: Duration) -> Duration {
    lease / 3
}

/// How often the renewal task looks: an eighth of `every` (at least 10 ms).
fn tick(lease: Duration) -> Duration {
    (every(lease) / 8).max(Duration::from_millis(10))
}

/// The renewal task of `store`, until `stop`.
pub(super) async fn run(store: Arc<Store>, stop: CancellationToken) {
    let (every, tick) = (every(store.config.lease), tick(store.config.lease));
    let mut restarts = store.restarts.subscribe();
    loop {
        let all = tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(tick) => false,
            changed = restarts.changed() => {
                if changed.is_err() {
                    return;
                }
                true
            }
        };
        let due = store.renewals.due(every, all);
        for load in due.chunks(AT_ONCE) {
            join_all(load.iter().map(|(id, op, call)| {
                let store = &store;
                async move {
                    // Released since it was found due: a renewal sent now
                    // could reach the store after the release and re-add it.
                    // (Checked and sent in one poll: a release after this
                    // goes out behind it, in the next batch.)
                    if !store.renewals.held(*id) {
                        return;
                    }
                    let mut conn = store.connection();
                    let call = call(store);
                    let _ = store
                        .run(
                            *op,
                            async move { call.invoke_async::<i64>(&mut conn).await },
                        )
                        .await;
                }
            }))
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing() -> Arc<Call> {
        static SCRIPT: std::sync::LazyLock<redis::Script> =
            std::sync::LazyLock::new(|| redis::Script::new("return 1"));
        Arc::new(|_: &Store| SCRIPT.prepare_invoke())
    }

    #[test]
    fn a_lease_is_held_until_stopped() {
        let renewals = Renewals::default();
        let mut a = renewals.add(StoreOp::Gate, nothing());
        let mut b = renewals.add(StoreOp::Limit, nothing());
        assert_eq!(renewals.len(), 2);
        renewals.stop(&mut a);
        renewals.stop(&mut a);
        assert_eq!(renewals.len(), 1);
        renewals.stop(&mut b);
        assert_eq!(renewals.len(), 0);
        assert_eq!(size_of::<Renewal>(), size_of::<u64>());
    }

    #[test]
    fn only_the_leases_not_renewed_lately_are_due_unless_all_are() {
        let renewals = Renewals::default();
        let _a = renewals.add(StoreOp::Gate, nothing());
        assert!(renewals.due(Duration::from_secs(60), false).is_empty());
        assert_eq!(renewals.due(Duration::ZERO, false).len(), 1);
        // Marked renewed: due again only when all are.
        assert!(renewals.due(Duration::from_secs(60), false).is_empty());
        assert_eq!(renewals.due(Duration::from_secs(60), true).len(), 1);
    }
}
