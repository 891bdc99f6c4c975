//! What a request leaves for the store once it no longer waits on the
//! answer (a gate's lease given back, a count's lease given back or turned
//! into a start), sent in batches: the request's own path makes one call to
//! the store (its reservation), and what follows costs the store one script
//! call per server and batch, not one per request.
//!
//! The first item queued wakes a task that waits [`WINDOW`] for more, then
//! sends each group (one script on one key set, so one hash tag: one Cluster
//! slot) as one call, all groups at once on the multiplexed connection. A
//! lease given back [`WINDOW`] late holds its place in a full cap that much
//! longer; a start recorded late leaves a rate's window that much later (the
//! safe side). Once the proxy stops, what is left is sent, and what comes
//! after is sent at once, one call each.
//!
//! A batch the store does not answer is not sent again: its leases expire
//! unrenewed after `[store] lease`, as a single lost release would.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Script;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{micros, Store};
use crate::metrics::StoreOp;

/// How long the sender waits after the first item for more.
pub(super) const WINDOW: Duration = Duration::from_millis(2);

/// The most items one script call carries (its arguments stay small).
const MOST: usize = 128;

/// One script on one key set with the same first arguments: one call
/// carries all its items, each adding its own arguments after those.
#[derive(Clone)]
pub(super) struct Group {
    pub script: &'static Script,
    pub keys: Vec<String>,
    pub args: Vec<String>,
    /// What the call is counted as.
    pub op: StoreOp,
}

impl Group {
    fn id(&self) -> (&str, &[String], &[String]) {
        (self.script.get_hash(), &self.keys, &self.args)
    }
}

impl PartialEq for Group {
    fn eq(&self, other: &Group) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Group {}

impl std::hash::Hash for Group {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}

/// One request's part of a call: its lease's name, then, when `started` is
/// given, the microseconds since then at the time of sending (a gate's
/// release moves the server's last start to it when later).
#[derive(Clone, Debug)]
pub(super) struct Item {
    pub name: String,
    pub started: Option<Instant>,
}

/// The queue, shared by the requests (which add to it) and the sender.
#[derive(Default)]
pub(super) struct Batch {
    pending: Mutex<HashMap<Group, Vec<Item>>>,
    wake: Notify,
    /// The sender has stopped: items are sent at once.
    closed: AtomicBool,
}

impl Batch {
    /// Queues `item`; handed back when the sender has stopped (send it yourself).
    fn push(&self, group: Group, item: Item) -> Result<(), (Group, Item)> {
        if self.closed.load(Ordering::Acquire) {
            return Err((group, item));
        }
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let first = pending.is_empty();
        pending.entry(group).or_default().push(item);
        drop(pending);
        if first {
            self.wake.notify_one();
        }
        Ok(())
    }

    fn drain(&self) -> Vec<(Group, Vec<Item>)> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.drain().collect()
    }
}

impl Store {
    /// Leaves `item` for the batch of `group`.
    pub(super) fn leave(self: &Arc<Self>, group: Group, item: Item) {
        let Err((group, item)) = self.batch.push(group, item) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            runtime.spawn(async move { store.send(group, vec![item]).await });
        }
    }

    /// One group's items, one script call per [`MOST`] of them.
    async fn send(&self, group: Group, items: Vec<Item>) {
        for part in items.chunks(MOST) {
            let mut call = group.script.prepare_invoke();
            for key in &group.keys {
                call.key(key);
            }
            for arg in &group.args {
                call.arg(arg);
            }
            for item in part {
                call.arg(&item.name);
                if let Some(started) = item.started {
                    call.arg(micros(started.elapsed()));
                }
            }
            let mut conn = self.connection();
            let _ = self
                .run(group.op, async move {
                    call.invoke_async::<i64>(&mut conn).await
                })
                .await;
        }
    }

    async fn send_all(&self) {
        let groups = self.batch.drain();
        futures_util::future::join_all(
            groups
                .into_iter()
                .map(|(group, items)| self.send(group, items)),
        )
        .await;
    }
}

/// The sender: after the first item, [`WINDOW`] for more, then all at once;
/// on `stop`, what is left, and from then on each item is sent at once.
pub(super) async fn send(store: Arc<Store>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = store.batch.wake.notified() => {}
            _ = stop.cancelled() => break,
        }
        tokio::select! {
            _ = tokio::time::sleep(WINDOW) => {}
            _ = stop.cancelled() => break,
        }
        store.send_all().await;
    }
    store.batch.closed.store(true, Ordering::Release);
    store.send_all().await;
}
