//! Idle upstream connections kept for reuse (the web's HTTP/1.1 keep-alive),
//! whatever the protocol: each kept under its server's name with the address
//! it is connected to, handed out only to a request admitted to that server
//! whose addresses still include it (a reload's address rules or a new
//! lookup never ride an old connection), newest first. Bounded: per server,
//! [`Kept::per_server`] or as many as may be in flight to it at once
//! (`politeness.per_host_concurrency`, up to [`Kept::total`]), whichever is
//! more, and [`Kept::total`] in all, each for at most [`Kept::idle_for`];
//! past that, or when the bound is full, it is closed (dropped). The politeness gate still decides when each request
//! starts: a kept connection only saves the handshake.

use std::any::Any;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::target::HostKey;

/// One kept connection: what it is (the protocol's own type), where it is
/// connected, and since when it is idle.
struct Idle {
    conn: Box<dyn Any + Send>,
    peer: SocketAddr,
    since: Instant,
}

pub struct Kept {
    idle: Mutex<HashMap<HostKey, Vec<Idle>>>,
    pub per_server: usize,
    pub total: usize,
    pub idle_for: Duration,
}

impl Default for Kept {
    fn default() -> Kept {
        Kept::new(4, 256, Duration::from_secs(30))
    }
}

impl Kept {
    pub fn new(per_server: usize, total: usize, idle_for: Duration) -> Kept {
        Kept {
            idle: Mutex::new(HashMap::new()),
            per_server,
            total,
            idle_for,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<HostKey, Vec<Idle>>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The newest idle connection of type `T` to `server` at one of `addrs`,
    /// if any (expired ones on the way are closed).
    pub fn take<T: Any + Send>(&self, server: &HostKey, addrs: &[SocketAddr]) -> Option<T> {
        let now = Instant::now();
        let mut idle = self.lock();
        let list = idle.get_mut(server)?;
        let mut found = None;
        while let Some(kept) = list.pop() {
            if now.duration_since(kept.since) >= self.idle_for || !addrs.contains(&kept.peer) {
                continue;
            }
            if let Ok(conn) = kept.conn.downcast::<T>() {
                found = Some(*conn);
                break;
            }
        }
        if list.is_empty() {
            idle.remove(server);
        }
        found
    }

    /// Keeps `conn` (to `server`, connected to `peer`) for the next request,
    /// unless the bounds are full; the expired are closed first. `in_flight`
    /// is how many requests may run at once to `server`: as many may be kept.
    pub fn put<T: Any + Send>(
        &self,
        server: &HostKey,
        peer: SocketAddr,
        conn: T,
        in_flight: usize,
    ) {
        let now = Instant::now();
        let mut idle = self.lock();
        idle.retain(|_, list| {
            list.retain(|k| now.duration_since(k.since) < self.idle_for);
            !list.is_empty()
        });
        let count: usize = idle.values().map(Vec::len).sum();
        let here = idle.get(server).map_or(0, Vec::len);
        if count >= self.total || here >= self.per_server.max(in_flight) {
            return;
        }
        idle.entry(server.clone()).or_default().push(Idle {
            conn: Box::new(conn),
            peer,
            since: now,
        });
    }

    /// How many are kept now.
    pub fn len(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Scheme;

    fn key(host: &str) -> HostKey {
        HostKey {
            scheme: Scheme::Http,
            host: host.into(),
            port: 80,
        }
    }

    fn addr(last: u8) -> SocketAddr {
        SocketAddr::from(([192, 0, 2, last], 80))
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_connection_goes_to_its_own_server_at_an_address_still_allowed() {
        let kept = Kept::new(2, 3, Duration::from_secs(30));
        kept.put(&key("a.example"), addr(1), 1u32, 1);
        assert_eq!(kept.take::<u32>(&key("b.example"), &[addr(1)]), None);
        assert_eq!(
            kept.take::<u32>(&key("a.example"), &[addr(2)]),
            None,
            "its address is no longer the server's"
        );
        kept.put(&key("a.example"), addr(1), 2u32, 1);
        assert_eq!(
            kept.take::<u64>(&key("a.example"), &[addr(1)]),
            None,
            "another kind"
        );
        kept.put(&key("a.example"), addr(1), 3u32, 1);
        assert_eq!(kept.take::<u32>(&key("a.example"), &[addr(1)]), Some(3));
        assert!(kept.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn kept_connections_are_bounded_in_number_and_idle_time() {
        let kept = Kept::new(2, 3, Duration::from_secs(30));
        for n in 0..5u32 {
            kept.put(&key("a.example"), addr(1), n, 1);
        }
        assert_eq!(kept.len(), 2, "at most per_server");
        kept.put(&key("b.example"), addr(2), 9u32, 1);
        kept.put(&key("c.example"), addr(3), 9u32, 1);
        assert_eq!(kept.len(), 3, "at most total");
        tokio::time::advance(Duration::from_secs(31)).await;
        assert_eq!(
            kept.take::<u32>(&key("a.example"), &[addr(1)]),
            None,
            "idle too long"
        );
        kept.put(&key("d.example"), addr(4), 1u32, 1);
        assert_eq!(kept.len(), 1, "the expired were closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_taking_requests_at_once_keeps_as_many_connections() {
        let kept = Kept::new(2, 10, Duration::from_secs(30));
        for n in 0..8u32 {
            kept.put(&key("a.example"), addr(1), n, 6);
        }
        assert_eq!(kept.len(), 6, "per_host_concurrency 6: six kept");
        for n in 0..8u32 {
            kept.put(&key("b.example"), addr(2), n, 64);
        }
        assert_eq!(kept.len(), 10, "never more than total");
    }
}
