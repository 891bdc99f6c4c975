//! Local waiters by topic: a request waiting for something another request
//! frees (a lease released in the fleet's store, a count given back in a
//! bot's limits) watches its topic, and is woken when the topic is named.
//! One `Notify` per topic with watchers, forgotten with its last watcher; a
//! wake-up names one topic, so waiters on others are not disturbed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Topics with local waiters, each with how many watch it.
#[derive(Default)]
pub struct Waiters {
    topics: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

/// Watching one topic; the topic is forgotten when its last watcher goes.
pub struct Watch<'a> {
    waiters: &'a Waiters,
    topic: String,
    pub notify: Arc<Notify>,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut topics = self.waiters.lock();
        if let Some((_, count)) = topics.get_mut(&self.topic) {
            *count -= 1;
            if *count == 0 {
                topics.remove(&self.topic);
            }
        }
    }
}

impl Waiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<Notify>, usize)>> {
        self.topics.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Watches `topic` (made if new).
    pub fn watch(&self, topic: String) -> Watch<'_> {
        let notify = {
            let mut topics = self.lock();
            let (notify, count) = topics
                .entry(topic.clone())
                .or_insert_with(|| (Arc::new(Notify::new()), 0));
            *count += 1;
            notify.clone()
        };
        Watch {
            waiters: self,
            topic,
            notify,
        }
    }

    /// Wakes the waiters on `topic`, if any.
    pub fn wake(&self, topic: &str) {
        if let Some((notify, _)) = self.lock().get(topic) {
            notify.notify_waiters();
        }
    }

    /// Every waiter looks again (after the subscription was lost).
    pub fn wake_all(&self) {
        for (notify, _) in self.lock().values() {
            notify.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wake_up_reaches_its_topic_only_and_a_topic_goes_with_its_watchers() {
        let waiters = Waiters::default();
        let (a, b) = (waiters.watch("a".into()), waiters.watch("b".into()));
        let (na, nb) = (a.notify.clone(), b.notify.clone());
        let (woken_a, woken_b) = (na.notified(), nb.notified());
        tokio::pin!(woken_a, woken_b);
        woken_a.as_mut().enable();
        woken_b.as_mut().enable();
        waiters.wake("a");
        waiters.wake("nobody");
        assert!(futures_util::poll!(woken_a.as_mut()).is_ready());
        assert!(futures_util::poll!(woken_b.as_mut()).is_pending());
        let again = waiters.watch("a".into());
        drop(a);
        assert_eq!(waiters.lock().len(), 2);
        drop((again, b));
        assert!(waiters.lock().is_empty());
    }
}
