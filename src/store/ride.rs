//! Calls that overlap ride together: while a call for a key is out, the
//! requests that ask the same of the same keys queue, and go out as one call
//! when it returns. A request alone goes out at once (no window to wait out);
//! under load, one store call carries all the reservations that arrived at a
//! server's gate during the previous one, so the store's work and the round
//! trips grow with the calls, not with the requests.
//!
//! A request that finds no call out for its key leads: it makes its own call
//! at once, inline. Those that queue behind it get a sender task once it is
//! back; the sender takes the queue, makes the call, hands each rider its
//! own answer, and goes on until it finds the queue empty (the key is then
//! free again). What
//! to send and what to do with an answer whose rider left stays with the
//! caller (`gate`).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;

use tokio::sync::oneshot;

use super::StoreError;

/// One rider: what it asks (`I`), and where its answer goes.
pub(super) type Rider<I, T> = (I, oneshot::Sender<Result<T, StoreError>>);

/// The riders queued per key; a key is present while its sender runs.
pub(super) struct Rides<K, I, T> {
    queued: Mutex<HashMap<K, Vec<Rider<I, T>>>>,
}

impl<K, I, T> Default for Rides<K, I, T> {
    fn default() -> Self {
        Rides {
            queued: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone, I, T> Rides<K, I, T> {
    /// Queues `ask` on `key`: where its answer will come, and whether no
    /// sender runs for `key` (the caller starts one).
    pub(super) fn join(&self, key: &K, ask: I) -> (oneshot::Receiver<Result<T, StoreError>>, bool) {
        let (tx, rx) = oneshot::channel();
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let first = match queued.get_mut(key) {
            Some(riders) => {
                riders.push((ask, tx));
                false
            }
            None => {
                queued.insert(key.clone(), vec![(ask, tx)]);
                true
            }
        };
        (rx, first)
    }

    /// Takes `key` when no call for it is out: the caller makes its own
    /// call at once (no sender task to hop through); those who `join`
    /// meanwhile queue behind it. `false`: a call is out, join it.
    pub(super) fn lead(&self, key: &K) -> bool {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        if queued.contains_key(key) {
            return false;
        }
        queued.insert(key.clone(), Vec::new());
        true
    }

    /// The leader's call is back (or given up on): whether riders queued
    /// behind it (the caller starts a sender for them); if none, `key` is
    /// free again.
    pub(super) fn hand_on(&self, key: &K) -> bool {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        if queued.get(key).is_some_and(|riders| !riders.is_empty()) {
            return true;
        }
        queued.remove(key);
        false
    }

    /// The sender's next load: the riders queued on `key` (at most `most`),
    /// or none, and then `key` is free (the next rider starts a sender).
    pub(super) fn take(&self, key: &K, most: usize) -> Vec<Rider<I, T>> {
        let mut queued = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let Some(riders) = queued.get_mut(key) else {
            return Vec::new();
        };
        if riders.is_empty() {
            queued.remove(key);
            return Vec::new();
        }
        let n = riders.len().min(most);
        riders.drain(..n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_rider_starts_a_sender_the_next_ones_queue() {
        let rides: Rides<&str, &str, u32> = Rides::default();
        let (_a, first) = rides.join(&"gate", "a");
        assert!(first);
        let (_b, second) = rides.join(&"gate", "b");
        assert!(!second);
        let (_c, other) = rides.join(&"other", "c");
        assert!(other);
        let load: Vec<&str> = rides.take(&"gate", 8).into_iter().map(|r| r.0).collect();
        assert_eq!(load, ["a", "b"]);
        // Taken empty: the key is free, the next rider starts a sender.
        assert!(rides.take(&"gate", 8).is_empty());
        assert!(rides.join(&"gate", "d").1);
    }

    #[test]
    fn a_leader_calls_alone_and_hands_on_those_queued_behind_it() {
        let rides: Rides<&str, &str, u32> = Rides::default();
        assert!(rides.lead(&"gate"));
        assert!(!rides.lead(&"gate"));
        // Behind the leader: queued, no sender of its own.
        let (_b, first) = rides.join(&"gate", "b");
        assert!(!first);
        assert!(rides.hand_on(&"gate"));
        let load: Vec<&str> = rides.take(&"gate", 8).into_iter().map(|r| r.0).collect();
        assert_eq!(load, ["b"]);
        assert!(rides.take(&"gate", 8).is_empty());
        // Alone: back with nobody behind, the key is free at once.
        assert!(rides.lead(&"gate"));
        assert!(!rides.hand_on(&"gate"));
        assert!(rides.lead(&"gate"));
    }

    #[test]
    fn a_load_is_at_most_most() {
        let rides: Rides<u8, u8, u8> = Rides::default();
        let receivers: Vec<_> = (0..5).map(|i| rides.join(&0, i)).collect();
        assert_eq!(rides.take(&0, 2).len(), 2);
        assert_eq!(rides.take(&0, 2).len(), 2);
        assert_eq!(rides.take(&0, 2).len(), 1);
        assert!(rides.take(&0, 2).is_empty());
        drop(receivers);
    }
}
