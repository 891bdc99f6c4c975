//! Daily budgets across restarts: the counts are written to
//! `state_dir/budgets` every few seconds when they changed, and once more
//! when the proxy stops, and read at start (a stop by SIGKILL loses at most
//! the last few seconds of counts). One line per bucket:
//! `bot <TAB> server <TAB> bucket <TAB> count`, the server as `a/ADDR` or
//! `h/host` (a file from before gates were per machine, `a/ADDR:PORT` or
//! `h/scheme://host:port`, is read by its address or host). A line that does
//! not read so, or a bucket already past, is left out; the file is read up to
//! 64 MiB.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Clock, Ledger};
use crate::politeness::Alias;
use crate::target::{canonical_host, Target};

/// The file's name in the state directory.
pub const FILE: &str = "budgets";
const CAP: u64 = 64 << 20;
/// How often changed counts are written.
pub const SAVE_EVERY: Duration = Duration::from_secs(5);

fn alias_text(alias: &Alias) -> String {
    match alias {
        Alias::Addr(ip) => format!("a/{ip}"),
        Alias::Name(host) => format!("h/{host}"),
    }
}

fn alias_from(text: &str) -> Option<Alias> {
    if let Some(addr) = text.strip_prefix("a/") {
        let ip = addr
            .parse::<IpAddr>()
            .or_else(|_| addr.parse::<SocketAddr>().map(|a| a.ip()))
            .ok()?;
        return Some(Alias::Addr(ip.to_canonical()));
    }
    let name = text.strip_prefix("h/")?;
    let host = match Target::parse(name) {
        Ok(target) => target.host,
        Err(_) => canonical_host(name).ok()?,
    };
    Some(Alias::Name(host))
}

impl Ledger {
    /// The ledger, with the budgets `state_dir` kept (none if there is no
    /// file yet). A file that cannot be read is an error naming it.
    pub fn open(
        state_dir: &Path,
        clock: Clock,
        store: Option<Arc<crate::store::Store>>,
    ) -> std::io::Result<Arc<Ledger>> {
        let path = state_dir.join(FILE);
        let ledger = Ledger::new(clock, Some(path.clone()), store);
        if let Some(text) = crate::state::read_optional(&path, CAP)? {
            let now = clock.unix().as_secs();
            let (mut kept, mut skipped) = (0usize, 0usize);
            for line in text.lines().filter(|l| !l.is_empty()) {
                let mut fields = line.split('\t');
                let parsed = (|| {
                    let bot = fields.next()?;
                    let alias = alias_from(fields.next()?)?;
                    let bucket: u64 = fields.next()?.parse().ok()?;
                    let count: u32 = fields.next()?.parse().ok()?;
                    fields
                        .next()
                        .is_none()
                        .then_some((bot, alias, bucket, count))
                })();
                match parsed {
                    Some((bot, alias, bucket, count)) => {
                        kept += usize::from(ledger.budget.restore(bot, alias, bucket, count, now))
                    }
                    None => skipped += 1,
                }
            }
            if skipped > 0 {
                tracing::warn!(path = %path.display(), skipped, "budget lines that do not read as counts were left out");
            }
            tracing::debug!(path = %path.display(), kept, "daily budgets read");
        }
        Ok(ledger)
    }

    /// Writes the counts if they changed since the last write.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let changes = self.changes.load(Ordering::Acquire);
        if changes == self.saved.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut text = String::new();
        self.budget
            .each(self.clock.unix().as_secs(), |bot, alias, bucket, count| {
                let _ = writeln!(text, "{bot}\t{}\t{bucket}\t{count}", alias_text(alias));
            });
        crate::state::write(path, text.as_bytes(), 0o600)?;
        self.saved.store(changes, Ordering::Release);
        Ok(())
    }

    /// Saves every [`SAVE_EVERY`] until `stop`, then once more.
    pub async fn keeper(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(SAVE_EVERY) => {}
            }
            self.save_or_warn();
        }
        self.save_or_warn();
    }

    pub fn save_or_warn(&self) {
        if let Err(e) = self.save() {
            let path = self.path.as_deref().map(PathBuf::from).unwrap_or_default();
            tracing::warn!(path = %path.display(), error = %e, "daily budgets could not be written");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_read_back_as_written() {
        for text in ["a/127.0.0.1", "a/::1", "h/example.org", "h/localhost"] {
            let alias = alias_from(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(alias_text(&alias), text);
        }
        // A file from before gates were per machine: its address or host.
        for (old, now) in [
            ("a/127.0.0.1:1965", "a/127.0.0.1"),
            ("a/[::1]:70", "a/::1"),
            ("a/[::ffff:127.0.0.1]:70", "a/127.0.0.1"),
            ("h/gemini://example.org:1965", "h/example.org"),
            ("h/gopher://LocalHost:70", "h/localhost"),
        ] {
            let alias = alias_from(old).unwrap_or_else(|| panic!("{old}"));
            assert_eq!(alias_text(&alias), now);
        }
        for bad in [
            "",
            "a/",
            "a/localhost:70",
            "x/127.0.0.1:70",
            "h/not a url",
            "127.0.0.1:70",
        ] {
            assert!(alias_from(bad).is_none(), "{bad:?}");
        }
    }
}
