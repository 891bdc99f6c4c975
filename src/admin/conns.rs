//! The admin listener's connections: at most [`MAX_CONNECTIONS`], and the
//! newest always gets in. When the table is full, the oldest connection that
//! is not answering a request right now (idle between requests, or still
//! sending its request: a client trickling a body) is cut to make room. So
//! clients that hold connections open without finishing a request cannot
//! keep a scrape or a health check out: those finish their request in a
//! moment and are then busy, which is never cut.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Connections the admin listener serves at once: a scraper needs one or two.
pub const MAX_CONNECTIONS: usize = 32;

struct Entry {
    id: u64,
    busy: Arc<AtomicBool>,
    cut: CancellationToken,
}

/// The open connections, oldest first.
#[derive(Default)]
pub struct Conns {
    open: Mutex<VecDeque<Entry>>,
    next: AtomicU64,
}

/// One connection's place: `cut` is cancelled when it is to make room;
/// dropped, the place is free.
pub struct Conn {
    id: u64,
    owner: Arc<Conns>,
    busy: Arc<AtomicBool>,
    pub cut: CancellationToken,
}

/// Marks the connection busy (answering a request whose head and body are
/// read) while it lives.
pub struct Busy(Arc<AtomicBool>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Conns {
    /// A place for a new connection, and whether another one was cut for it;
    /// `None` when every place is busy answering.
    pub fn admit(self: &Arc<Self>) -> Option<(Conn, bool)> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = false;
        if open.len() >= MAX_CONNECTIONS {
            let idle = open.iter().position(|e| !e.busy.load(Ordering::Acquire))?;
            if let Some(e) = open.remove(idle) {
                e.cut.cancel();
                evicted = true;
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let busy = Arc::new(AtomicBool::new(false));
        let cut = CancellationToken::new();
        open.push_back(Entry {
            id,
            busy: busy.clone(),
            cut: cut.clone(),
        });
        let conn = Conn {
            id,
            owner: self.clone(),
            busy,
            cut,
        };
        Some((conn, evicted))
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl Conn {
    /// A handle that marks this connection busy, for the request handler.
    pub fn marker(&self) -> Marker {
        Marker(self.busy.clone())
    }
}

/// Marks its connection busy from inside the request handler.
#[derive(Clone)]
pub struct Marker(Arc<AtomicBool>);

impl Marker {
    /// The connection is answering a request it has read whole: not to be
    /// cut until the returned guard is dropped.
    pub fn busy(&self) -> Busy {
        self.0.store(true, Ordering::Release);
        Busy(self.0.clone())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let mut open = self.owner.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = open.iter().position(|e| e.id == self.id) {
            open.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_gets_in_and_the_oldest_idle_is_cut() {
        let conns = Arc::new(Conns::default());
        let mut held: Vec<Conn> = (0..MAX_CONNECTIONS)
            .map(|_| conns.admit().unwrap().0)
            .collect();
        // The oldest is answering: the second oldest goes.
        let _answering = held[0].marker().busy();
        let (newest, evicted) = conns.admit().unwrap();
        assert!(evicted);
        assert!(!held[0].cut.is_cancelled());
        assert!(held[1].cut.is_cancelled());
        assert_eq!(conns.len(), MAX_CONNECTIONS);
        // Every place busy: nothing is cut, the newcomer waits its turn.
        let _all: Vec<Busy> = held[2..].iter().map(|c| c.marker().busy()).collect();
        let _newest_busy = newest.marker().busy();
        assert!(conns.admit().is_none());
        // A place given back is free.
        held.pop();
        assert!(matches!(conns.admit(), Some((_, false))));
    }
}
