//! Daily budgets across restarts: the counts are written to
//! `state_dir/budgets` every few seconds when they changed, and once more
//! when the proxy stops, and read at start (a stop by SIGKILL loses at most
//! the last few seconds of counts).
//!
//! One line per (bot, server) pair, its day in it:
//! `bot <TAB> server <TAB> first <TAB> offset:count,offset:count,…`: `first`
//! is the pair's oldest bucket still counting (5-minute buckets since the
//! epoch), each offset a bucket after it (`0` is `first`). The server is
//! `a/ADDR` or `h/host`. A pair has at most [`MAX_BUCKETS`] buckets, so a
//! line is at most [`MAX_LINE`] bytes, and the file at most
//! `limits.max_budget_pairs` lines: the reader reads that much
//! ([`read_bound`]) and leaves the rest, saying so, as it leaves out a line
//! that does not read so, a bucket past or not yet begun, and a pair past
//! the book's bound. A file from before (one line per bucket:
//! `bot <TAB> server <TAB> bucket <TAB> count`, the server maybe
//! `a/ADDR:PORT` or `h/scheme://host:port`) is read as well.

use std::fmt::Write as _;
use std::io::{BufRead, Read as _};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::budget::{Restored, MAX_BUCKETS};
use super::{Clock, Ledger};
use crate::politeness::Alias;
use crate::target::{canonical_host, Target, MAX_HOST};

/// The file's name in the state directory.
pub const FILE: &str = "budgets";

/// The longest server field: `h/` and the longest host a target may name.
const MAX_SERVER: usize = 2 + MAX_HOST;

/// The longest line the writer makes: a bot's name (64 bytes), a server, the
/// first bucket, and [`MAX_BUCKETS`] of `offset:count,` (each number at most
/// 10 digits), tabs and the line end.
pub const MAX_LINE: usize =
    crate::config::MAX_BOT_NAME + 1 + MAX_SERVER + 1 + 10 + 1 + MAX_BUCKETS * (10 + 1 + 10 + 1) + 1;

/// The most bytes read of a file for a book of `max_pairs` pairs: every
/// pair's line at its longest. What the writer can make, the reader reads.
pub fn read_bound(max_pairs: usize) -> u64 {
    (max_pairs as u64).saturating_mul(MAX_LINE as u64)
}

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

/// A line's bot, server and buckets `(bucket, count)`.
type Line<'a> = (&'a str, Alias, Vec<(u64, u32)>);

/// A line's pair and buckets `(bucket, count)`, or `None` if it does not
/// read as one (either form).
fn parse_line(line: &str) -> Option<Line<'_>> {
    let mut fields = line.split('\t');
    let bot = fields.next().filter(|b| crate::config::valid_bot_name(b))?;
    let alias = alias_from(fields.next()?)?;
    let first: u64 = fields.next()?.parse().ok()?;
    let counts = fields.next()?;
    if fields.next().is_some() {
        return None;
    }
    // The form from before: one bucket, its count.
    if !counts.contains(':') {
        return Some((bot, alias, vec![(first, counts.parse().ok()?)]));
    }
    let mut buckets = Vec::new();
    for item in counts.split(',') {
        if buckets.len() == MAX_BUCKETS {
            return None;
        }
        let (offset, count) = item.split_once(':')?;
        let offset: u64 = offset.parse().ok()?;
        buckets.push((first.checked_add(offset)?, count.parse().ok()?));
    }
    Some((bot, alias, buckets))
}

/// What a read of the file kept and left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadBack {
    /// Lines whose starts were kept.
    pub kept: usize,
    /// Lines that do not read as a pair's counts.
    pub malformed: usize,
    /// Lines of a pair past the book's bound.
    pub over_bound: usize,
    /// Bytes past [`read_bound`], not read.
    pub unread: bool,
}

impl Ledger {
    /// The ledger, with the budgets `state_dir` kept (none if there is no
    /// file yet), counting at most `max_pairs` pairs. A file that cannot be
    /// opened is an error naming it.
    pub fn open(
        state_dir: &Path,
        clock: Clock,
        shared: Box<dyn super::SharedCounts>,
        max_pairs: usize,
    ) -> std::io::Result<Arc<Ledger>> {
        let path = state_dir.join(FILE);
        let ledger = Ledger::new(clock, Some(path.clone()), shared);
        ledger.budget.set_max_pairs(max_pairs);
        let file = match crate::state::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ledger),
            Err(e) => return Err(e),
        };
        let read = ledger.read_budgets(std::io::BufReader::new(file))?;
        if read.malformed + read.over_bound > 0 || read.unread {
            tracing::warn!(
                path = %path.display(),
                malformed = read.malformed,
                over_bound = read.over_bound,
                unread = read.unread,
                max_pairs,
                "budget lines left out: not counts, past limits.max_budget_pairs, or past the bytes such a file may hold"
            );
        }
        tracing::debug!(path = %path.display(), kept = read.kept, "daily budgets read");
        Ok(ledger)
    }

    /// Reads budgets kept by [`Ledger::write_budgets`] (or by a version
    /// before) into the book: at most [`read_bound`] bytes of it, a line at
    /// most [`MAX_LINE`] bytes.
    pub fn read_budgets(&self, from: impl BufRead) -> std::io::Result<ReadBack> {
        let now = self.clock.unix().as_secs();
        let bound = read_bound(self.budget.max_pairs());
        let mut from = from.take(bound);
        let mut read = ReadBack::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut from)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') && n > MAX_LINE {
                // A line longer than any the writer makes: the rest of it
                // is skipped.
                read.malformed += 1;
                from.skip_until(b'\n')?;
                continue;
            }
            let text = std::str::from_utf8(&line)
                .ok()
                .map(|l| l.trim_end_matches('\n'));
            if text.is_some_and(str::is_empty) {
                continue;
            }
            match text.and_then(parse_line) {
                Some((bot, alias, buckets)) => match self.budget.restore(bot, alias, &buckets, now)
                {
                    Restored::Kept => read.kept += 1,
                    Restored::Past => {}
                    Restored::Full => read.over_bound += 1,
                },
                None => read.malformed += 1,
            }
        }
        // Anything past the bound is not read.
        read.unread = from.limit() == 0 && !from.into_inner().fill_buf()?.is_empty();
        Ok(read)
    }

    /// The budgets as the file keeps them: a line per pair.
    pub fn write_budgets(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let mut line = String::new();
        let mut result = Ok(());
        self.budget
            .each(self.clock.unix().as_secs(), |bot, alias, buckets| {
                line.clear();
                let mut first = None;
                for (bucket, count) in buckets {
                    let first = *first.get_or_insert_with(|| {
                        let _ = write!(line, "{bot}\t{}\t{bucket}\t", alias_text(alias));
                        bucket
                    });
                    let sep = if line.ends_with('\t') { "" } else { "," };
                    let _ = write!(line, "{sep}{}:{count}", bucket.saturating_sub(first));
                }
                line.push('\n');
                if result.is_ok() {
                    result = out.write_all(line.as_bytes());
                }
            });
        result
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
        crate::state::write_with(path, 0o600, |out| self.write_budgets(out))?;
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
    use crate::admission::Usage;

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

    use super::super::values::{WallClock, DAY};

    const T0: u64 = 20_000 * DAY;

    fn ledger(max_pairs: usize) -> Arc<Ledger> {
        let ledger = Ledger::new(
            Clock::new(WallClock::StartingAt(Duration::from_secs(T0))),
            None,
            Box::new(super::super::Alone),
        );
        ledger.set_max_budget_pairs(max_pairs);
        ledger
    }

    fn text(ledger: &Ledger) -> String {
        let mut out = Vec::new();
        ledger.write_budgets(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The file at its worst: every pair of a full book with the longest
    /// bot name, the longest host, a day of buckets each at the largest
    /// count. Each line is within [`MAX_LINE`], the whole within
    /// [`read_bound`], and a fresh process reads every pair back.
    #[test]
    fn the_worst_file_the_writer_makes_is_read_back_whole() {
        // docs/guide/bots.md and config/robots-proxy.toml state it.
        assert_eq!(MAX_LINE, 6691);
        let pairs = 1000;
        let full = ledger(pairs);
        let bot = "b".repeat(crate::config::MAX_BOT_NAME);
        let now = T0;
        let day: Vec<(u64, u32)> = (0..MAX_BUCKETS as u64)
            .map(|i| (now / super::super::budget::BUCKET - i, u32::MAX))
            .collect();
        for i in 0..pairs {
            let label = format!("h{i:0>62}");
            let host = [&label[..], &label[..], &label[..], &label[..61]].join(".");
            assert_eq!(host.len(), crate::target::MAX_HOST);
            assert_eq!(canonical_host(&host).unwrap(), host);
            let kept = full.budget.restore(&bot, Alias::Name(host), &day, now);
            assert_eq!(kept, Restored::Kept);
        }
        assert_eq!(
            full.budget
                .restore(&bot, Alias::Name("one.more".into()), &day, now),
            Restored::Full
        );
        let written = text(&full);
        assert_eq!(written.lines().count(), pairs);
        let longest = written.lines().map(|l| l.len() + 1).max().unwrap();
        assert!(longest <= MAX_LINE, "{longest} > {MAX_LINE}");
        assert!(written.len() as u64 <= read_bound(pairs));
        let again = ledger(pairs);
        let read = again.read_budgets(written.as_bytes()).unwrap();
        assert_eq!(
            read,
            ReadBack {
                kept: pairs,
                ..ReadBack::default()
            }
        );
        assert_eq!(text(&again).len(), written.len());
        assert_eq!(again.budget.pairs(), pairs);
    }

    /// A line per bucket (the form before), as a bot with many servers
    /// used through a day left it, reads back as a line per pair.
    #[test]
    fn a_file_of_the_form_before_reads_back_compact() {
        let bucket = T0 / super::super::budget::BUCKET;
        let mut old = String::new();
        for server in 0..50u32 {
            for b in 0..288 {
                let ip = std::net::Ipv4Addr::from(0x0a00_0000 + server);
                old += &format!("default\ta/{ip}:1965\t{}\t1\n", bucket - b);
            }
        }
        let l = ledger(100);
        let read = l.read_budgets(old.as_bytes()).unwrap();
        assert_eq!(read.kept, 50 * 288);
        assert_eq!(
            (read.malformed, read.over_bound, read.unread),
            (0, 0, false)
        );
        let new = text(&l);
        assert_eq!(new.lines().count(), 50);
        assert!(new.len() * 5 < old.len(), "{} vs {}", new.len(), old.len());
        assert!(new
            .lines()
            .all(|line| line.starts_with("default\ta/10.0.0.")));
        assert_eq!(l.budget_used("default", 100).len(), 50);
        assert!(l.budget_used("default", 1)[0].1 == 288);
    }

    /// A file that is not what the writer makes: too many pairs, a line too
    /// long, bytes past the bound, buckets from the future or out of range,
    /// names no bot may have. What fits is kept, the rest left out and
    /// counted; nothing fails.
    #[test]
    fn a_hostile_file_is_read_for_what_fits() {
        let bucket = T0 / super::super::budget::BUCKET;
        let mut file = String::new();
        for i in 0..5 {
            file += &format!("bot\ta/10.0.0.{i}\t{bucket}\t0:1\n");
        }
        file += &format!("bot\ta/10.0.1.1\t{bucket}\t{}\n", "0:1,".repeat(MAX_LINE));
        file += &format!("bot\ta/10.0.1.2\t{}\t0:1\n", bucket + 5);
        file += &format!("bot\ta/10.0.1.3\t{bucket}\t0:1,18446744073709551615:1\n");
        file += &format!("{}\ta/10.0.1.4\t{bucket}\t0:1\n", "b".repeat(65));
        file += &format!("b\tt\ta/10.0.1.4\t{bucket}\t0:1\n");
        let l = ledger(3);
        let read = l.read_budgets(file.as_bytes()).unwrap();
        assert_eq!(read.kept, 3);
        assert_eq!(l.budget.pairs(), 3);
        assert!(read.over_bound >= 1);
        // Past the bound's bytes: not read, and said.
        let big = format!("bot\ta/10.0.0.1\t{bucket}\t0:1\n").repeat(2 * MAX_LINE);
        let one = ledger(1);
        let read = one.read_budgets(big.as_bytes()).unwrap();
        assert!(read.unread && read.kept >= 1, "{read:?}");
        assert_eq!(one.budget.pairs(), 1);
    }
}
