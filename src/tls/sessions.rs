//! The upstream TLS sessions the proxy keeps to resume: rustls' in-memory
//! store, but with as many TLS 1.3 tickets per capsule as requests may be in
//! flight to it.
//!
//! A TLS 1.3 ticket is used once (RFC 8446, C.4), and rustls' own store keeps
//! at most 8 per server. With `politeness.per_host_concurrency` above a few,
//! more handshakes than that start at once against one capsule: the ones
//! that find no ticket make a full handshake (the capsule signs, the proxy
//! verifies the signature). Measured with 16 in flight to agate: 1,662 of
//! 12,474 upstream handshakes were full with rustls' store, against 2 (the
//! first ones) with this one (docs/dev/performance.md).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;
use rustls::NamedGroup;

/// Tickets kept per capsule at least: rustls' own number.
pub const MIN_TICKETS: usize = 8;
/// And at most, whatever the concurrency: a ticket holds a copy of the
/// capsule's certificate chain (about 1 KiB with the ticket itself), so a
/// store full of capsules holds at most [`super::UPSTREAM_SESSIONS`] × 64 of
/// them (about 64 MiB) and, at the default concurrency of 1, × 8.
pub const MAX_TICKETS: usize = 64;

/// The tickets to keep per capsule for `concurrency` requests in flight to
/// it: two for each (a capsule may hand out a ticket per connection while
/// as many are being taken), within [`MIN_TICKETS`]..=[`MAX_TICKETS`].
pub fn tickets_for(concurrency: usize) -> usize {
    concurrency
        .saturating_mul(2)
        .clamp(MIN_TICKETS, MAX_TICKETS)
}

#[derive(Default)]
struct Server {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    /// Oldest first; the newest is used first, as rustls does.
    tls13: VecDeque<Tls13ClientSessionValue>,
}

/// Sessions of at most `servers` capsules (the least recently used leave
/// first), `tickets` TLS 1.3 tickets each. Keyed by the name as text, so a
/// lookup (two or three a handshake) borrows it instead of copying it.
pub struct UpstreamSessions {
    servers: moka::sync::Cache<String, Arc<Mutex<Server>>>,
    tickets: usize,
}

impl std::fmt::Debug for UpstreamSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamSessions")
            .field("servers", &self.servers.entry_count())
            .field("tickets", &self.tickets)
            .finish()
    }
}

impl UpstreamSessions {
    pub fn new(servers: usize, tickets: usize) -> UpstreamSessions {
        UpstreamSessions {
            servers: moka::sync::Cache::builder()
                .max_capacity(servers as u64)
                .build(),
            tickets: tickets.max(1),
        }
    }

    fn server(&self, name: &ServerName<'_>) -> Option<Arc<Mutex<Server>>> {
        self.servers.get(name.to_str().as_ref())
    }

    fn server_or_new(&self, name: &ServerName<'_>) -> Arc<Mutex<Server>> {
        let name = name.to_str();
        if let Some(server) = self.servers.get(name.as_ref()) {
            return server;
        }
        self.servers.get_with(name.into_owned(), Default::default)
    }
}

/// A poisoned lock only means a panic elsewhere mid-update of plain data.
fn lock(server: &Mutex<Server>) -> std::sync::MutexGuard<'_, Server> {
    server.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClientSessionStore for UpstreamSessions {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        lock(&self.server_or_new(&name)).kx_hint = Some(group);
    }

    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.server(name).and_then(|s| lock(&s).kx_hint)
    }

    fn set_tls12_session(&self, name: ServerName<'static>, value: Tls12ClientSessionValue) {
        lock(&self.server_or_new(&name)).tls12 = Some(value);
    }

    fn tls12_session(&self, name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.server(name).and_then(|s| lock(&s).tls12.clone())
    }

    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        if let Some(s) = self.server(name) {
            lock(&s).tls12 = None;
        }
    }

    fn insert_tls13_ticket(&self, name: ServerName<'static>, value: Tls13ClientSessionValue) {
        let server = self.server_or_new(&name);
        let mut server = lock(&server);
        if server.tls13.len() >= self.tickets {
            server.tls13.pop_front();
        }
        server.tls13.push_back(value);
    }

    fn take_tls13_ticket(&self, name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.server(name).and_then(|s| lock(&s).tls13.pop_back())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_follow_the_concurrency_within_bounds() {
        assert_eq!(tickets_for(1), MIN_TICKETS);
        assert_eq!(tickets_for(16), 32);
        assert_eq!(tickets_for(1024), MAX_TICKETS);
        assert_eq!(tickets_for(usize::MAX), MAX_TICKETS);
    }

    /// Moves what `from` has to send into `to`, in memory.
    fn pump(from: &mut rustls::Connection, to: &mut rustls::Connection) {
        let mut wire = Vec::new();
        while from.wants_write() {
            from.write_tls(&mut wire).unwrap();
        }
        let mut rest = &wire[..];
        while !rest.is_empty() {
            to.read_tls(&mut rest).unwrap();
            to.process_new_packets().unwrap();
        }
    }

    /// A capsule that hands out a hundred tickets a connection leaves the
    /// proxy holding its bound of them.
    #[test]
    fn a_capsule_flooding_tickets_fills_only_its_bound() {
        let dir = std::env::temp_dir().join(format!("sessions-flood-{}", std::process::id()));
        let names = ["localhost".to_string()];
        let identity = crate::tls::load_or_generate(&dir, &names).unwrap();
        let mut capsule = (*crate::tls::server_config(identity).unwrap()).clone();
        capsule.send_tls13_tickets = 100;
        let capsule = Arc::new(capsule);
        let store = Arc::new(UpstreamSessions::new(4, tickets_for(4)));
        let mut client = (*crate::tls::client_config().unwrap()).clone();
        client.resumption = rustls::client::Resumption::store(store.clone());
        let client = Arc::new(client);
        let name = ServerName::try_from("localhost").unwrap();
        for _ in 0..3 {
            let c = rustls::ClientConnection::new(client.clone(), name.clone()).unwrap();
            let s = rustls::ServerConnection::new(capsule.clone()).unwrap();
            let (mut c, mut s): (rustls::Connection, rustls::Connection) = (c.into(), s.into());
            for _ in 0..16 {
                pump(&mut c, &mut s);
                pump(&mut s, &mut c);
            }
            assert!(!c.is_handshaking());
        }
        let _ = std::fs::remove_dir_all(&dir);
        let kept = store.server(&name).map(|s| lock(&s).tls13.len());
        assert_eq!(kept, Some(MIN_TICKETS));
    }

    #[test]
    fn servers_are_bounded() {
        let store = UpstreamSessions::new(4, 8);
        for i in 0..100 {
            let name = ServerName::try_from(format!("capsule{i}.example")).unwrap();
            store.set_kx_hint(name, NamedGroup::X25519);
        }
        store.servers.run_pending_tasks();
        assert!(store.servers.entry_count() <= 4);
    }
}
