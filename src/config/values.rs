//! Values as the file writes them, and their bounds: durations (parsed and
//! printed here, nowhere else), counts, listen addresses, log filters. Every
//! bound of every key is in [`bound`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::{invalid, ConfigError};

/// Parses `500ms`, `10s`, `1.5s`, `5m`, `24h`, `7d`, `0s`; a number too large
/// for a `Duration` gives `Duration::MAX` (which no key accepts).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86400.0,
        _ => return None,
    };
    // Too long for a Duration is still a duration, just out of every key's range.
    Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX))
}

/// The range a duration key accepts: beyond it a value is a mistake (a year of
/// Crawl-delay, a timeout of centuries) that would also overflow the clocks and
/// caches it feeds. Zero is allowed where `min` is zero.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    min: Duration,
    max: Duration,
}

pub(super) const DAY: u64 = 86_400;

/// A duration key: `default` when unset, else parsed and checked against `span`;
/// an error names the key and the bound.
pub(super) fn duration(
    key: &'static str,
    value: Option<&str>,
    default: Duration,
    span: Span,
) -> Result<Duration, ConfigError> {
    let Some(text) = value else {
        return Ok(default);
    };
    let d = parse_duration(text).ok_or_else(|| {
        invalid(
            key,
            format!("invalid duration {text:?} (write e.g. 500ms, 10s, 5m, 24h, 7d)"),
        )
    })?;
    if d < span.min || d > span.max {
        let range = match span.min.is_zero() {
            true => format!("at most {}", format_duration(span.max)),
            false => format!(
                "from {} to {}",
                format_duration(span.min),
                format_duration(span.max)
            ),
        };
        return Err(invalid(key, format!("{text:?} is out of range: {range}")));
    }
    Ok(d)
}

/// A count key: `default` when unset, else within `min..=max`.
pub(super) fn count<T: Copy + PartialOrd + std::fmt::Display>(
    key: &'static str,
    value: Option<T>,
    default: T,
    (min, max): (T, T),
) -> Result<T, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if v >= min && v <= max => Ok(v),
        Some(v) => Err(invalid(
            key,
            format!("{v} is out of range: from {min} to {max}"),
        )),
    }
}

const fn span(min_ms: u64, max_s: u64) -> Span {
    Span {
        min: Duration::from_millis(min_ms),
        max: Duration::from_secs(max_s),
    }
}

/// Every bound in one place (docs/guide/configuration.md lists them).
pub(super) mod bound {
    use super::{span, Span, DAY};
    pub const TTL: Span = span(1000, 365 * DAY);
    pub const MAX_STALE: Span = span(0, 365 * DAY);
    pub const UNREACHABLE_RETRY: Span = span(1000, 7 * DAY);
    pub const TIMEOUT: Span = span(1, 3600);
    pub const IDLE_TIMEOUT: Span = span(1, DAY);
    pub const SHUTDOWN_GRACE: Span = span(0, 3600);
    pub const DELAY: Span = span(0, DAY);
    pub const MAX_WAIT: Span = span(0, DAY);
    pub const HORIZON: Span = span(0, DAY);
    pub const MAX_SLOW_DOWN: Span = span(1000, 30 * DAY);
    pub const WEB_BACKOFF: Span = span(1000, DAY);
    pub const WEB_BACKOFF_FORGIVE: Span = span(1000, 7 * DAY);
    /// Percent; `politeness::MAX_BACKOFF_JITTER` as a percentage.
    pub const WEB_BACKOFF_JITTER: (u32, u32) = (0, 50);
    pub const CACHE_BYTES: (u64, u64) = (1 << 20, 1 << 40);
    pub const MAX_CONNECTIONS: (usize, usize) = (1, 1 << 20);
    pub const BUDGET_PAIRS: (usize, usize) = (1, crate::bots::limits::MAX_BUDGET_PAIRS);
    pub const WORKER_THREADS: (usize, usize) = (1, 1024);
    pub const PER_HOST_CONCURRENCY: (usize, usize) = (1, 1024);
    pub const PER_HOST_LIMIT: (usize, usize) = (1, 100_000);
    pub const STORE_TIMEOUT: Span = span(10, 60);
    pub const LEASE: Span = span(1000, 3600);
    pub const DAILY_REQUESTS: (u32, u32) = (1, crate::bots::limits::MAX_BUDGET);
    /// Windows in one bot's `quiet_hours`.
    pub const QUIET_HOURS: usize = 24;
}

/// A value set by a flag of `run` or by a file key: the flag wins. Returns the
/// name to blame in an error, and the value if either was set.
pub(super) fn flag_or_key<'a, T: std::ops::Deref<Target = str>>(
    flag: (&'static str, &'a Option<String>),
    key: (&'static str, &'a Option<T>),
) -> (&'static str, Option<&'a str>) {
    match flag.1 {
        Some(f) => (flag.0, Some(f.as_str())),
        None => (key.0, key.1.as_deref()),
    }
}

pub(super) fn address(key: &'static str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        invalid(
            key,
            format!("invalid address {value:?} (write e.g. 127.0.0.1:1965 or [::1]:1965)"),
        )
    })
}

/// A level, or a `tracing` filter whose every directive ends in `=LEVEL` or is
/// a level. `EnvFilter` itself reads a lone word such as `verbose` as a target
/// name, which would silence every other line: a typo must not do that.
pub(super) fn valid_log_filter(text: &str) -> bool {
    let level = |l: &str| {
        ["off", "error", "warn", "info", "debug", "trace"]
            .iter()
            .any(|k| l.eq_ignore_ascii_case(k))
    };
    !text.trim().is_empty()
        && text.split(',').all(|directive| {
            let directive = directive.trim();
            match directive.rsplit_once('=') {
                Some((target, l)) => !target.is_empty() && level(l),
                None => level(directive),
            }
        })
        && tracing_subscriber::EnvFilter::try_new(text).is_ok()
}

/// Where state lives when neither the config nor `--state-dir` says, and
/// what said so; with neither `XDG_STATE_HOME` nor `HOME` there is no place
/// that is the user's own, and guessing one (the working directory) would
/// scatter certificates and pins wherever the proxy was started.
pub(super) fn default_state_dir() -> Result<(PathBuf, &'static str), ConfigError> {
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok((PathBuf::from(dir).join("robots-proxy"), "$XDG_STATE_HOME"));
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => Ok((
            PathBuf::from(home).join(".local/state/robots-proxy"),
            "$HOME",
        )),
        None => Err(invalid(
            "state_dir",
            "neither HOME nor XDG_STATE_HOME is set, so there is no default place for the \
             certificate and pins: give one with --state-dir DIR (or state_dir in the config)",
        )),
    }
}

/// A duration the way the config file writes it: `0s`, `500ms`, `10s`, `24h`, `7d`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    for (unit, size) in [
        ("d", 86_400_000u128),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms % size == 0 {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}
