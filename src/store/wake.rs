//! Waking waiters when another proxy frees what they wait for: a lease
//! released (the concurrency cap), a robots.txt written (the fetch lock). One
//! subscription per proxy to the fleet's wake-up channel; each message names a
//! topic, and the local waiters on that topic are woken. No polling: a waiter
//! sleeps until its topic is named, with a deadline as a safety net for a
//! message lost while the subscription was down.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::Store;

/// Holds the subscription, subscribing again after the store comes back (on
/// the next seed node of a Cluster, the master the Sentinels name now).
pub(super) async fn listen(store: Arc<Store>, stop: CancellationToken) {
    let channel = store.channel();
    for attempt in 0usize.. {
        let subscribed = async {
            let client = store.link.pubsub_client(attempt).ok_or_else(|| {
                redis::RedisError::from((redis::ErrorKind::Io, "no master known yet"))
            })?;
            let mut pubsub = client.get_async_pubsub().await?;
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
