//! Forgetting idle gates: those with nothing queued, nothing in flight and
//! their spacing past, a slice at a time so admissions never wait long
//! behind the sweeper; and places kept for a retry once they are due.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::local::{Gates, Local};

/// How many gates a sweep looks at per hold of the lock: about a
/// millisecond's work (0.3–0.4 µs a gate at a million gates), so
/// admissions never wait long behind the sweeper.
pub const SWEEP_SLICE: usize = 1024;

/// One sweep in progress: the gates there were when it began, not yet looked at.
pub struct Sweep<'a> {
    politeness: &'a Local,
    left: usize,
}

impl Sweep<'_> {
    /// Looks at the next [`SWEEP_SLICE`] gates under one hold of the lock,
    /// forgetting the idle ones. False when the sweep was already done.
    pub fn next_slice(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        let n = self.left.min(SWEEP_SLICE);
        let looked = self.politeness.sweep_slice(n);
        // Fewer gates than counted: another sweep took some; this one is done.
        self.left = if looked < n { 0 } else { self.left - n };
        true
    }
}

impl Local {
    /// Forgets gates with nothing queued, nothing in flight and their spacing
    /// past, with their aliases: every gate is looked at once, [`SWEEP_SLICE`]
    /// at a time, the lock let go between slices.
    pub fn sweep(&self) {
        let mut sweep = self.start_sweep();
        while sweep.next_slice() {}
    }

    /// A sweep over the gates there are now, to be done slice by slice with
    /// [`Sweep::next_slice`] (the sweeper yields to other tasks between them).
    /// Places kept for a retry and due are forgotten as it begins.
    pub fn start_sweep(&self) -> Sweep<'_> {
        let mut gates = self.lock();
        gates.places.expire(Instant::now());
        Sweep {
            politeness: self,
            left: gates.sweep_order.len(),
        }
    }

    /// Looks at the next `at_most` gates in sweep order under one hold of the
    /// lock, forgetting the idle ones; returns how many it looked at (fewer
    /// only when there are fewer gates).
    fn sweep_slice(&self, at_most: usize) -> usize {
        let now = Instant::now();
        let config = self.config.load();
        let mut gates = self.lock();
        let Gates {
            hosts,
            aliases,
            sweep_order,
            ..
        } = &mut *gates;
        let looked = at_most.min(sweep_order.len());
        for _ in 0..looked {
            let Some(id) = sweep_order.pop_front() else {
                break;
            };
            let Some(h) = hosts.get(&id) else {
                continue;
            };
            let idle = h.queue.is_empty()
                && h.in_flight == 0
                && h.next_start(h.hold).is_none_or(|t| t <= now)
                && h.slowed
                    .iter()
                    .all(|s| s.ready_at(h.hold, &config).is_none_or(|t| t <= now));
            if !idle {
                sweep_order.push_back(id);
                continue;
            }
            if let Some(h) = hosts.remove(&id) {
                for alias in &h.aliases {
                    aliases.remove(alias);
                }
            }
        }
        if sweep_order.capacity() > 4 * sweep_order.len().max(1024) {
            sweep_order.shrink_to_fit();
        }
        looked
    }

    /// Runs a sweep every `every` until `stop`, yielding to other tasks
    /// between slices. A slice that panics (it should not: its arithmetic
    /// saturates) is logged and the next sweep runs anyway, so idle hosts
    /// are always forgotten in the end.
    pub async fn sweeper(self: Arc<Self>, every: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(every) => {
                    let mut sweep = self.start_sweep();
                    while !stop.is_cancelled() {
                        let slice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sweep.next_slice()));
                        match slice {
                            Ok(true) => tokio::task::yield_now().await,
                            Ok(false) => break,
                            Err(_) => {
                                tracing::error!("politeness sweep panicked; the next one runs as planned");
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}
