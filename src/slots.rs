//! Connection slots: how many client connections the proxy serves at once, in
//! all (`limits.max_connections`, shared by the proxy listeners) and per client
//! (`limits.max_connections_per_client`), so that one client cannot take the
//! proxy from the others. A client is its IPv4 address, or its IPv6 /64 (what
//! one host or one customer gets); an IPv4-mapped IPv6 address is its IPv4.
//!
//! Also the process's file-descriptor budget: the soft limit is raised to the
//! hard one at start, and `max_connections` kept under what it allows.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Who counts as one client.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct ClientKey(IpAddr);

impl ClientKey {
    /// The client's address as it is counted: its IPv4, or its IPv6 /64.
    pub fn ip(self) -> IpAddr {
        self.0
    }

    pub fn of(ip: IpAddr) -> ClientKey {
        match crate::addr::unmapped(ip) {
            IpAddr::V6(v6) => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                ClientKey(IpAddr::V6(prefix.into()))
            }
            v4 => ClientKey(v4),
        }
    }
}

/// Connections open per client, capped.
pub struct PerClient {
    /// Changed by a reload; connections already open keep their places.
    cap: std::sync::atomic::AtomicUsize,
    open: Mutex<HashMap<ClientKey, usize>>,
}

/// One client connection's place; given back on drop.
pub struct ClientSlot {
    owner: Arc<PerClient>,
    key: ClientKey,
}

impl PerClient {
    pub fn new(cap: usize) -> Arc<PerClient> {
        Arc::new(PerClient {
            cap: std::sync::atomic::AtomicUsize::new(cap.max(1)),
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A reload's cap: it applies to the next connection.
    pub fn set_cap(&self, cap: usize) {
        self.cap
            .store(cap.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// A place for one more connection from `ip`, or `None` when the client
    /// already holds `cap` of them.
    pub fn try_take(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let key = ClientKey::of(ip);
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= self.cap.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        *n += 1;
        Some(ClientSlot {
            owner: self.clone(),
            key,
        })
    }

    /// Clients with a connection open now.
    pub fn clients(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key);
            }
        }
    }
}

tokio::task_local! {
    /// The per-client place of the connection this task serves, until its
    /// answer is complete.
    static CLIENT: std::cell::RefCell<Option<ClientSlot>>;
}

/// Runs `serve` holding `slot` until the connection's answer is complete
/// ([`answered`]) or `serve` ends, whichever comes first.
pub fn holding_client<F: std::future::Future>(
    slot: ClientSlot,
    serve: F,
) -> impl std::future::Future<Output = F::Output> {
    CLIENT.scope(std::cell::RefCell::new(Some(slot)), serve)
}

/// The connection served by this task has its whole answer (our side is shut
/// down or cut): its place under the per-client cap is given back now, not
/// after the drain that waits for the client to close. A client that reads
/// its answer and connects again at once must not find its old connection
/// still counted. (The connection keeps its place under `max_connections`,
/// which counts descriptors, until it is closed.)
pub fn answered() {
    let _ = CLIENT.try_with(|slot| slot.borrow_mut().take());
}

/// File descriptors kept aside for listeners, the state files, the resolver
/// and the metrics listener's connections.
pub const FD_RESERVE: u64 = 128;

/// Raises the soft limit on open files to the hard limit; returns the limit in
/// force (or `None` where it cannot be read).
pub fn raise_fd_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return Some(hard);
    }
    Some(soft)
}

/// The most connections `fd_limit` descriptors can serve: each connection
/// holds its client socket and an upstream socket (and, while it fetches a
/// robots.txt, a third briefly).
pub fn connections_for(fd_limit: u64) -> usize {
    let usable = fd_limit.saturating_sub(FD_RESERVE) / 3;
    usize::try_from(usable).unwrap_or(usize::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_64() {
        let k = |s: &str| ClientKey::of(s.parse().unwrap());
        assert_eq!(k("2001:db8:1:2::1"), k("2001:db8:1:2:ffff::9"));
        assert_ne!(k("2001:db8:1:2::1"), k("2001:db8:1:3::1"));
        assert_eq!(k("::ffff:10.0.0.1"), k("10.0.0.1"));
        assert_ne!(k("10.0.0.1"), k("10.0.0.2"));
    }

    #[test]
    fn the_cap_is_per_client_and_slots_come_back() {
        let per = PerClient::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let one = per.try_take(a).unwrap();
        let _two = per.try_take(a).unwrap();
        assert!(per.try_take(a).is_none(), "a third from the same client");
        assert!(per.try_take(b).is_some(), "another client is not affected");
        drop(one);
        assert!(per.try_take(a).is_some());
        assert_eq!(per.clients(), 1);
    }

    #[test]
    fn the_fd_budget() {
        assert_eq!(connections_for(1024), (1024 - 128) / 3);
        assert_eq!(connections_for(10), 1);
        assert!(raise_fd_limit().unwrap() >= 256);
    }
}
