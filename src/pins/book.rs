//! This process's pins and their journal (see the parent module).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Mismatch, JOURNAL, MAX_PINS};

/// The most bytes of journal read at start (a pin line is about 100 bytes).
const MAX_JOURNAL_BYTES: u64 = 256 * 1024 * 1024;

/// This process's pins: a map, and the journal that keeps it.
pub struct Book {
    map: Mutex<HashMap<(String, u16), String>>,
    journal: Option<Mutex<File>>,
    path: Option<PathBuf>,
    full_warned: std::sync::atomic::AtomicBool,
}

impl Book {
    /// Pins forgotten when the process ends.
    pub fn in_memory() -> Book {
        Book {
            map: Mutex::new(HashMap::new()),
            journal: None,
            path: None,
            full_warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Pins kept in `state_dir`: the journal is read (at most
    /// `MAX_JOURNAL_BYTES`, `MAX_PINS` pins; lines that do not parse are
    /// skipped and counted in the log), written back compacted, and appended to
    /// from then on.
    pub fn open(state_dir: &Path) -> std::io::Result<Book> {
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
        Ok(Book {
            map: Mutex::new(map),
            journal: Some(Mutex::new(journal)),
            path: Some(path),
            full_warned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Where the journal is kept, if anywhere.
    pub(super) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Holds `host:port` to the certificate first seen there: `Ok` when `seen`
    /// is that one (or is pinned now), `Err` with the pinned one otherwise.
    /// `fleet`: what the fleet has pinned there, which this book takes first.
    pub(super) fn check(
        &self,
        host: &str,
        port: u16,
        seen: &str,
        fleet: Option<String>,
    ) -> Result<(), Mismatch> {
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
    pub(super) fn get(&self, host: &str, port: u16) -> Option<String> {
        self.lock().get(&(host.to_string(), port)).cloned()
    }

    /// How many capsules are pinned.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Forgets `host:port`'s pin here and in the journal. Returns whether
    /// there was one.
    pub(super) fn forget(&self, host: &str, port: u16) -> bool {
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
