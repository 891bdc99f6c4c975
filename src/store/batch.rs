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
//! A call the store does not answer (it is down, or failing over) is sent
//! again every [`RETRY`] with what is queued since, for as long as its
//! leases could still be held (`[store] lease` from when they were left):
//! a lease given back while no master answered would otherwise fill a
//! server's cap on the master promoted after, until it expires. Sending
//! again is harmless: giving back a lease twice removes it once, a start
//! recorded twice in a rate's window is one entry (same name); a start
//! counted twice in a budget (an answer lost after the store ran the call)
//! errs on the strict side.

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

/// How often a call the store did not answer is sent again.
pub(super) const RETRY: Duration = Duration::from_millis(200);

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

/// An item with the time after which it is no longer worth sending (its
/// lease has expired in the store by then).
type Queued = (Item, Instant);

impl Item {
    /// Its arguments as they go to the store: the name, then the
    /// microseconds since `started` (now), if given.
    fn args(&self) -> (&str, Option<u64>) {
        (&self.name, self.started.map(|s| micros(s.elapsed())))
    }
}

/// The queue, shared by the requests (which add to it) and the sender.
#[derive(Default)]
pub(super) struct Batch {
    pending: Mutex<HashMap<Group, Vec<Queued>>>,
    /// Items of calls the store did not answer, sent again with the next
    /// batch or after [`RETRY`].
    again: Mutex<HashMap<Group, Vec<Queued>>>,
    wake: Notify,
    /// The sender has stopped: items are sent at once.
    closed: AtomicBool,
}

impl Batch {
    /// Queues `item` until `until`; handed back when the sender has stopped
    /// (send it yourself).
    fn push(&self, group: Group, item: Item, until: Instant) -> Result<(), (Group, Item)> {
        if self.closed.load(Ordering::Acquire) {
            return Err((group, item));
        }
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        let first = pending.is_empty();
        pending.entry(group).or_default().push((item, until));
        drop(pending);
        if first {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Everything queued, and every item to send again still worth it.
    fn drain(&self) -> HashMap<Group, Vec<Queued>> {
        let mut all = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        let again = std::mem::take(&mut *self.again.lock().unwrap_or_else(|e| e.into_inner()));
        let now = Instant::now();
        for (group, items) in again {
            let items = items.into_iter().filter(|(_, until)| *until > now);
            all.entry(group).or_default().extend(items);
        }
        all
    }

    /// Items of a call the store did not answer, for the next send.
    fn send_again(&self, group: Group, items: Vec<Queued>) {
        let mut again = self.again.lock().unwrap_or_else(|e| e.into_inner());
        again.entry(group).or_default().extend(items);
    }

    fn has_again(&self) -> bool {
        !self
            .again
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }
}

impl Store {
    /// Leaves `item` for the batch of `group`.
    pub(super) fn leave(self: &Arc<Self>, group: Group, item: Item) {
        let until = Instant::now() + self.config.lease;
        let Err((group, item)) = self.batch.push(group, item, until) else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            runtime.spawn(async move { store.send(group, vec![(item, until)]).await });
        }
    }

    /// Sends `item` at once, in the background, as a plain `EVAL` of
    /// `source` (the script of `group`): one command, on the connection the
    /// call it takes back went out on, so after it. `Script` would send
    /// `EVALSHA` and, to a store that does not know the script yet, `EVAL`
    /// after it, a second step a deadline could cut off. If the store does
    /// not answer, `item` is left to the batch, to be sent again.
    pub(super) fn at_once(self: &Arc<Self>, source: &'static str, group: Group, item: Item) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(source)
            .arg(group.keys.len())
            .arg(&group.keys)
            .arg(&group.args)
            .arg(item.args());
        let store = self.clone();
        runtime.spawn(async move {
            let mut conn = store.connection();
            let sent = store
                .run(group.op, async move {
                    cmd.query_async::<redis::Value>(&mut conn).await
                })
                .await;
            if sent.is_err() {
                store.leave(group, item);
            }
        });
    }

    /// One group's items, one script call per [`MOST`] of them; the items
    /// of the calls the store did not answer.
    async fn send(&self, group: Group, items: Vec<Queued>) -> (Group, Vec<Queued>) {
        let mut failed = Vec::new();
        for part in items.chunks(MOST) {
            let mut call = group.script.prepare_invoke();
            call.key(&group.keys).arg(&group.args);
            for (item, _) in part {
                call.arg(item.args());
            }
            let mut conn = self.connection();
            let sent = self
                .run(group.op, async move {
                    call.invoke_async::<i64>(&mut conn).await
                })
                .await;
            if sent.is_err() {
                failed.extend_from_slice(part);
            }
        }
        (group, failed)
    }

    /// Sends everything queued; what the store did not answer is kept to
    /// send again, unless the sender has stopped.
    async fn send_all(&self) {
        let groups = self.batch.drain();
        let failed = futures_util::future::join_all(
            groups
                .into_iter()
                .map(|(group, items)| self.send(group, items)),
        )
        .await;
        if self.batch.closed.load(Ordering::Acquire) {
            return;
        }
        for (group, items) in failed {
            if !items.is_empty() {
                self.batch.send_again(group, items);
            }
        }
    }
}

/// The sender: after the first item, [`WINDOW`] for more, then all at once
/// (with what the store did not answer before, which is also sent every
/// [`RETRY`]); on `stop`, what is left, and from then on each item is sent
/// at once.
pub(super) async fn send(store: Arc<Store>, stop: CancellationToken) {
    loop {
        let again = store.batch.has_again();
        tokio::select! {
            _ = store.batch.wake.notified() => {}
            _ = tokio::time::sleep(RETRY), if again => {}
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
