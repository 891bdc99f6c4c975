//! Certificate pins, trust on first use: `host:port` → the SHA-256 of the
//! certificate the proxy first met there. A capsule that shows another one
//! later is refused until an operator forgets its pin (the admin listener's
//! `POST /api/pins/forget`).
//!
//! Pins last: each change is appended to a journal in the state directory
//! (`pins`, one tab-separated line per pin or forget), which is read back and
//! compacted at start (`book`). In fleet mode the store holds the fleet's
//! pins (`fleet`) and this process's book stands in while the store does not
//! answer: which of the two [`Keeper`]s is chosen once, at start.
//!
//! Appending a line is one small `write(2)` to the page cache, made on the
//! request path that met a new capsule: no fsync, so a crash can lose the last
//! pins, which are then taken again on first use.

use std::path::Path;

use futures_util::future::BoxFuture;

mod book;
mod fleet;
pub use book::Book;
pub use fleet::Fleet;

/// The most pins kept. Past it, capsules not yet pinned are trusted per
/// connection (as on first use) and a warning is logged once.
pub const MAX_PINS: usize = 1_000_000;

/// The journal's name in the state directory.
pub const JOURNAL: &str = "pins";

/// A capsule that shows another certificate than the one pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub pinned: String,
}

/// Who holds a capsule to its pin, and keeps the pins: this process's book
/// ([`Local`]), or the fleet's store with a book of its own standing in
/// ([`Fleet`]). One is chosen at start; the owner, [`Pins`], does not ask
/// which.
pub trait Keeper: Send + Sync {
    /// `Ok` when `seen` is what `host:port` is pinned to (or is pinned now).
    fn check<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        seen: &'a str,
    ) -> BoxFuture<'a, Result<(), Mismatch>>;
    /// Forgets `host:port`'s pin; whether this process had one.
    fn forget<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, bool>;
    /// The pins this process holds (its journal, what the status page shows).
    fn book(&self) -> &Book;
}

/// Pins kept by this process alone, in its book.
pub struct Local(pub Book);

impl Keeper for Local {
    fn check<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        seen: &'a str,
    ) -> BoxFuture<'a, Result<(), Mismatch>> {
        Box::pin(std::future::ready(self.0.check(host, port, seen, None)))
    }

    fn forget<'a>(&'a self, host: &'a str, port: u16) -> BoxFuture<'a, bool> {
        Box::pin(std::future::ready(self.0.forget(host, port)))
    }

    fn book(&self) -> &Book {
        &self.0
    }
}

pub struct Pins {
    keeper: Box<dyn Keeper>,
}

impl Default for Pins {
    fn default() -> Pins {
        Pins::in_memory()
    }
}

impl Pins {
    /// Pins forgotten when the process ends.
    pub fn in_memory() -> Pins {
        Pins::kept_by(Box::new(Local(Book::in_memory())))
    }

    /// Pins kept in `state_dir`: the journal is read (at most 256 MiB,
    /// `MAX_PINS` pins; lines that do not parse are skipped and counted in
    /// the log), written back compacted, and appended to from then on.
    pub fn open(state_dir: &Path) -> std::io::Result<Pins> {
        Ok(Pins::kept_by(Box::new(Local(Book::open(state_dir)?))))
    }

    /// Capsules held to their pins by `keeper`, which keeps them ([`Local`],
    /// or in fleet mode [`Fleet`]).
    pub fn kept_by(keeper: Box<dyn Keeper>) -> Pins {
        Pins { keeper }
    }

    /// Where the journal is kept, if anywhere.
    pub fn path(&self) -> Option<&Path> {
        self.keeper.book().path()
    }

    /// Holds `host:port` to the certificate first seen there: `Ok` when `seen`
    /// is that one (or is pinned now), `Err` with the pinned one otherwise.
    pub async fn check(&self, host: &str, port: u16, seen: &str) -> Result<(), Mismatch> {
        self.keeper.check(host, port, seen).await
    }

    /// The pin of `host:port` this process holds, if any.
    pub fn get(&self, host: &str, port: u16) -> Option<String> {
        self.keeper.book().get(host, port)
    }

    /// How many capsules this process has pinned.
    pub fn len(&self) -> usize {
        self.keeper.book().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets `host:port`'s pin here, in the journal and (fleet mode) in the
    /// store: the next connection pins what it is shown. Returns whether this
    /// process had one.
    pub async fn forget(&self, host: &str, port: u16) -> bool {
        self.keeper.forget(host, port).await
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pins-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[tokio::test]
    async fn pins_survive_a_restart_and_forgetting_lasts_too() {
        let d = dir("restart");
        let pins = Pins::open(&d).unwrap();
        assert_eq!(pins.check("capsule.example", 1965, A).await, Ok(()));
        assert_eq!(pins.check("other.example", 1965, B).await, Ok(()));
        drop(pins);
        let pins = Pins::open(&d).unwrap();
        assert_eq!(
            pins.check("capsule.example", 1965, B).await,
            Err(Mismatch { pinned: A.into() }),
            "a changed certificate is still refused after a restart"
        );
        assert!(pins.forget("capsule.example", 1965).await);
        assert!(!pins.forget("capsule.example", 1965).await);
        drop(pins);
        let pins = Pins::open(&d).unwrap();
        assert_eq!(pins.get("capsule.example", 1965), None);
        assert_eq!(pins.check("capsule.example", 1965, B).await, Ok(()));
        assert_eq!(pins.get("other.example", 1965).as_deref(), Some(B));
        // Compacted at start: one line per pin.
        drop(pins);
        let _ = Pins::open(&d).unwrap();
        let text = std::fs::read_to_string(d.join(JOURNAL)).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
    }

    /// A journal written by someone else, or cut by a crash, loads what parses
    /// and skips the rest.
    #[tokio::test]
    async fn a_damaged_journal_loads_what_parses() {
        let d = dir("damaged");
        std::fs::create_dir_all(&d).unwrap();
        let mut junk = format!("pin\tgood.example\t1965\t{A}\n");
        junk.push_str("pin\tbad port\t99999\tzz\n");
        junk.push_str(&format!("pin\tno.port\tx\t{A}\n"));
        junk.push_str(&format!("pin\tshort.fp\t1965\t{}\n", &A[..10]));
        junk.push_str("forget\n\u{0}\u{ff}binary\n");
        junk.push_str(&format!("pin\tcut.example\t1965\t{}", &B[..30]));
        std::fs::write(d.join(JOURNAL), junk).unwrap();
        let pins = Pins::open(&d).unwrap();
        assert_eq!(pins.len(), 1);
        assert_eq!(pins.get("good.example", 1965).as_deref(), Some(A));
    }
}
