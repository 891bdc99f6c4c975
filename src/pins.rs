//! Certificate pins, trust on first use: `host:port` → the SHA-256 of the
//! certificate the proxy first met there. A capsule that shows another one
//! later is refused until an operator forgets its pin (the admin listener's
//! `POST /api/pins/forget`).
//!
//! Pins last: each change is appended to a journal in the state directory
//! (`pins`, one tab-separated line per pin or forget), which is read back and
//! compacted at start. In fleet mode the store holds the fleet's pins and this
//! process's map stands in while the store does not answer.
//!
//! Appending a line is one small `write(2)` to the page cache, made on the
//! request path that met a new capsule: no fsync, so a crash can lose the last
//! pins, which are then taken again on first use.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::store::Store;

/// The most pins kept. Past it, capsules not yet pinned are trusted per
/// connection (as on first use) and a warning is logged once.
pub const MAX_PINS: usize = 1_000_000;

/// The most bytes of journal read at start (a pin line is about 100 bytes).
const MAX_JOURNAL_BYTES: u64 = 256 * 1024 * 1024;

/// The journal's name in the state directory.
pub const JOURNAL: &str = "pins";

/// A capsule that shows another certificate than the one pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub pinned: String,
}

pub struct Pins {
    map: Mutex<HashMap<(String, u16), String>>,
    journal: Option<Mutex<File>>,
    path: Option<PathBuf>,
    /// Fleet mode: the fleet's pins.
    store: Option<Arc<Store>>,
    full_warned: std::sync::atomic::AtomicBool,
}

impl Default for Pins {
    fn default() -> Pins {
        Pins::in_memory()
    }
}

impl Pins {
    /// Pins forgotten when the process ends.
    pub fn in_memory() -> Pins {
        Pins {
            map: Mutex::new(HashMap::new()),
            journal: None,
            path: None,
            store: None,
            full_warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Pins kept in `state_dir`: the journal is read (at most
    /// `MAX_JOURNAL_BYTES`, `MAX_PINS` pins; lines that do not parse are
    /// skipped and counted in the log), written back compacted, and appended to
    /// from then on.
    pub fn open(state_dir: &Path) -> std::io::Result<Pins> {
        std::fs::create_dir_all(state_dir)?;
        let path = state_dir.join(JOURNAL);
        let mut map = HashMap::new();
        let mut skipped = 0usize;
        match crate::state::open(&path) {
            Ok(file) => {
                let reader = BufReader::new(file.take(MAX_JOURNAL_BYTES));
                for line in reader.split(b'\n') {
                    let line = line?;
                    match parse_line(&line) {
                        Some(Change::Pin(host, port, fp)) => {
                            if map.len() < MAX_PINS || map.contains_key(&(host.clone(), port)) {
                                map.insert((host, port), fp);
                            }
                        }
                        Some(Change::Forget(host, port)) => {
                            map.remove(&(host, port));
                        }
                        None => skipped += 1,
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        if skipped > 0 {
            tracing::warn!(
                journal = %path.display(),
                skipped,
                "certificate pins: lines that do not parse were skipped"
            );
        }
        // Compacted: one line per pin, written to a fresh name and renamed
        // over (never through a symlink planted in the state directory).
        crate::state::write_with(&path, 0o600, |out| {
            for ((host, port), fp) in &map {
                out.write_all(pin_line(host, *port, fp).as_bytes())?;
            }
            Ok(())
        })?;
        let journal = crate::state::append(&path)?;
        Ok(Pins {
            map: Mutex::new(map),
            journal: Some(Mutex::new(journal)),
            path: Some(path),
            store: None,
            full_warned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Fleet mode: the store's pins come first.
    pub fn with_store(mut self, store: Option<Arc<Store>>) -> Pins {
        self.store = store;
        self
    }

    /// Where the journal is kept, if anywhere.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Holds `host:port` to the certificate first seen there: `Ok` when `seen`
    /// is that one (or is pinned now), `Err` with the pinned one otherwise.
    pub async fn check(&self, host: &str, port: u16, seen: &str) -> Result<(), Mismatch> {
        let fleet = match &self.store {
            Some(store) if store.is_up() => store.pin(host, port, seen).await.ok(),
            _ => None,
        };
        let key = (host.to_string(), port);
        let mut map = self.lock();
        if let Some(pinned) = fleet {
            if map.get(&key) != Some(&pinned) {
                self.record(&mut map, key.clone(), pinned);
            }
        }
        match map.get(&key) {
            Some(pinned) if pinned != seen => Err(Mismatch {
                pinned: pinned.clone(),
            }),
            Some(_) => Ok(()),
            None => {
                self.record(&mut map, key, seen.to_string());
                Ok(())
            }
        }
    }

    /// The pin of `host:port`, if any.
    pub fn get(&self, host: &str, port: u16) -> Option<String> {
        self.lock().get(&(host.to_string(), port)).cloned()
    }

    /// How many capsules are pinned.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets `host:port`'s pin here, in the journal and (fleet mode) in the
    /// store: the next connection pins what it is shown. Returns whether this
    /// process had one.
    pub async fn forget(&self, host: &str, port: u16) -> bool {
        if let Some(store) = &self.store {
            if let Err(e) = store.forget_pin(host, port).await {
                tracing::warn!(host, port, error = %e, "forgetting the fleet's pin failed");
            }
        }
        let had = self.lock().remove(&(host.to_string(), port)).is_some();
        self.append(&format!("forget\t{host}\t{port}\n"));
        had
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, u16), String>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a pin, within `MAX_PINS`, and journals it.
    fn record(&self, map: &mut HashMap<(String, u16), String>, key: (String, u16), fp: String) {
        if map.len() >= MAX_PINS && !map.contains_key(&key) {
            if !self
                .full_warned
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                tracing::warn!(
                    max = MAX_PINS,
                    "certificate pins: the table is full; capsules met from now on are not pinned"
                );
            }
            return;
        }
        self.append(&pin_line(&key.0, key.1, &fp));
        map.insert(key, fp);
    }

    fn append(&self, line: &str) {
        let Some(journal) = &self.journal else {
            return;
        };
        let mut file = journal.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::warn!(error = %e, "certificate pins: the journal could not be written");
        }
    }
}

enum Change {
    Pin(String, u16, String),
    Forget(String, u16),
}

fn pin_line(host: &str, port: u16, fp: &str) -> String {
    format!("pin\t{host}\t{port}\t{fp}\n")
}

/// One journal line. Hosts are canonical (no whitespace); fingerprints are 64
/// hex digits.
fn parse_line(line: &[u8]) -> Option<Change> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.trim_end_matches('\r').split('\t');
    let kind = fields.next()?;
    let host = fields.next().filter(|h| valid_host(h))?.to_string();
    let port: u16 = fields.next()?.parse().ok()?;
    match (kind, fields.next(), fields.next()) {
        ("pin", Some(fp), None) if fp.len() == 64 && fp.bytes().all(|b| b.is_ascii_hexdigit()) => {
            Some(Change::Pin(host, port, fp.to_ascii_lowercase()))
        }
        ("forget", None, None) => Some(Change::Forget(host, port)),
        _ => None,
    }
}

fn valid_host(h: &str) -> bool {
    !h.is_empty() && h.len() <= 255 && !h.bytes().any(|b| b.is_ascii_whitespace() || b < 0x20)
}

#[cfg(test)]
mod tests {
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
