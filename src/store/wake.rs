//! Waking waiters when another proxy frees what they wait for: a lease
//! released (the concurrency cap), a robots.txt written (the fetch lock). One
//! subscription per proxy to the fleet's wake-up channel; each message names a
//! topic, and the local waiters on that topic are woken. No polling: a waiter
//! sleeps until its topic is named, with a deadline as a safety net for a
//! message lost while the subscription was down.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Store;

/// Topics with local waiters, each with how many watch it.
#[derive(Default)]
pub(super) struct Wakers {
    topics: Mutex<HashMap<String, (Arc<Notify>, usize)>>,
}

/// Watching one topic; the topic is forgotten when its last watcher goes.
pub(super) struct Watch<'a> {
    wakers: &'a Wakers,
    topic: String,
    pub notify: Arc<Notify>,
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        let mut topics = self.wakers.lock();
        if let Some((_, count)) = topics.get_mut(&self.topic) {
            *count -= 1;
            if *count == 0 {
                topics.remove(&self.topic);
            }
        }
    }
}

impl Wakers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<Notify>, usize)>> {
        self.topics.lock().unwrap_or_else(|e| e.into_inner())
    }

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
            wakers: self,
            topic,
            notify,
        }
    }

    fn wake(&self, topic: &str) {
        if let Some((notify, _)) = self.lock().get(topic) {
            notify.notify_waiters();
        }
    }

    /// Every waiter looks again (after the subscription was lost).
    fn wake_all(&self) {
        for (notify, _) in self.lock().values() {
            notify.notify_waiters();
        }
    }
}

/// Holds the subscription, subscribing again after the store comes back.
pub(super) async fn listen(store: Arc<Store>, stop: CancellationToken) {
    let channel = store.channel();
    loop {
        let subscribed = async {
            let mut pubsub = store.client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let subscribed = tokio::select! {
            _ = stop.cancelled() => return,
            s = tokio::time::timeout(store.config.timeout, subscribed) => s,
        };
        if let Ok(Ok(mut pubsub)) = subscribed {
            // Anything freed before the subscription started is looked at again.
            store.wakers.wake_all();
            let mut messages = pubsub.on_message();
            loop {
                let message = tokio::select! {
                    _ = stop.cancelled() => return,
                    m = messages.next() => m,
                };
                match message {
                    Some(m) => {
                        if let Ok(topic) = std::str::from_utf8(m.get_payload_bytes()) {
                            store.wakers.wake(topic);
                        }
                    }
                    None => break,
                }
            }
        }
        store.wakers.wake_all();
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
