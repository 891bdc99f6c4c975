//! Any bytes as a `state_dir/budgets` file, read into a book of at most
//! 1-64 pairs (the first byte says how many). Reading never fails on what
//! the file holds; the book keeps at most its pairs; what it writes back is
//! a line per pair, each within the longest line, the whole within what the
//! reader reads; and that file reads back to itself.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use robots_proxy::bot_limits::{budgets_read_bound, Clock, Ledger, WallClock, BUDGETS_MAX_LINE};

/// Mid-bucket, so a run does not cross into the next one.
const T0: u64 = 20_000 * 86_400 + 150;

fn book(max_pairs: usize) -> std::sync::Arc<Ledger> {
    let ledger = Ledger::new(
        Clock::new(WallClock::StartingAt(Duration::from_secs(T0))),
        None,
        Box::new(robots_proxy::bot_limits::Alone),
    );
    ledger.set_max_budget_pairs(max_pairs);
    ledger
}

fn written(ledger: &Ledger) -> String {
    let mut out = Vec::new();
    ledger.write_budgets(&mut out).expect("writes to memory");
    String::from_utf8(out).expect("the file is UTF-8")
}

fn sorted(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

fuzz_target!(|data: &[u8]| {
    let max_pairs = usize::from(data.first().copied().unwrap_or(0) % 64) + 1;
    let first = book(max_pairs);
    let read = first
        .read_budgets(data.get(1..).unwrap_or_default())
        .expect("reads memory");
    assert!(read.kept <= data.len());
    let text = written(&first);
    let lines = text.lines().count();
    assert!(lines <= max_pairs, "{lines} lines for {max_pairs} pairs");
    assert!(text.lines().all(|l| l.len() < BUDGETS_MAX_LINE));
    assert!(text.len() as u64 <= budgets_read_bound(max_pairs));
    let second = book(max_pairs);
    let again = second.read_budgets(text.as_bytes()).expect("reads memory");
    assert_eq!(
        (again.kept, again.malformed, again.over_bound),
        (lines, 0, 0)
    );
    assert!(!again.unread);
    assert_eq!(sorted(&written(&second)), sorted(&text));
});
