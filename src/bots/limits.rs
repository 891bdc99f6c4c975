//! A bot's limits as the operator writes them (`[bot]`, `[[bots]]`), parsed
//! and bounded: pure values, no I/O (what the steps do with them is in
//! `bot_limits`).

use std::fmt;
use std::time::Duration;

/// Seconds in a day.
pub(crate) const DAY: u64 = 86_400;

/// One bot's limits, as configured (every one off by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BotLimits {
    /// A floor under this bot's spacing at each server (`min_delay`).
    pub min_delay: Duration,
    /// The longest its requests wait for their turn (`max_wait`: its
    /// crawler's own patience), whatever the protocol; `None`: the
    /// protocol's (`politeness.max_wait`, `politeness.web_max_wait`).
    pub max_wait: Option<Duration>,
    /// Requests of this bot in flight per server, at most.
    pub concurrency: Option<usize>,
    /// This bot's starts across all servers, at most.
    pub rate: Option<Rate>,
    /// Starts per server in any 24 hours, at most.
    pub daily_requests_per_server: Option<u32>,
    /// No starts in these windows of the UTC day.
    pub quiet_hours: Vec<DayWindow>,
    /// Whether robots.txt and these limits are enforced, or only reported.
    pub mode: Mode,
    /// Whether its uploads (a Spartan request with data, `titan://`) are
    /// relayed (still decided by robots.txt) or refused (the default).
    pub uploads: bool,
    /// The web: the `User-Agent` its requests carry, whatever the client
    /// sent (`None`: its product token), so the server's logs name the
    /// robots.txt group the proxy decided with.
    pub user_agent: Option<String>,
    /// The web: the methods it may use (`http_methods`); others get `405`.
    pub http_methods: HttpMethods,
    /// The web: whether it signs its requests (Web Bot Auth), naming which
    /// key directory (`web_bot_auth`, `signature_agent`).
    pub signing: crate::identity::Signing,
}

/// `http_methods`: the HTTP methods a bot may use, `GET` and `HEAD` unless
/// set. Tokens, upper case as RFC 9110 writes them; `CONNECT` is how a
/// tunnel opens, never a method to relay.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpMethods(Vec<String>);

/// The most methods one bot may list.
pub const MAX_HTTP_METHODS: usize = 16;

impl Default for HttpMethods {
    fn default() -> HttpMethods {
        HttpMethods(vec!["GET".into(), "HEAD".into()])
    }
}

impl HttpMethods {
    /// The list as written: each a method token (`GET`, `POST`, …), at most
    /// [`MAX_HTTP_METHODS`], none twice, not `CONNECT`, not empty.
    pub fn parse(items: &[String]) -> Result<HttpMethods, String> {
        if items.is_empty() {
            return Err("no method: a bot needs one (GET) to fetch anything".into());
        }
        if items.len() > MAX_HTTP_METHODS {
            return Err(format!(
                "{} methods: at most {MAX_HTTP_METHODS}",
                items.len()
            ));
        }
        let mut methods: Vec<String> = Vec::with_capacity(items.len());
        for item in items {
            let token = item.as_str();
            let is_token = !token.is_empty()
                && token.len() <= 32
                && token
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !is_token {
                return Err(format!("{token:?} is no HTTP method"));
            }
            if token != token.to_ascii_uppercase() {
                return Err(format!(
                    "{token:?}: methods are case-sensitive; write {:?}",
                    token.to_ascii_uppercase()
                ));
            }
            if token == "CONNECT" {
                return Err("CONNECT opens a tunnel, whose requests are decided one by one; it is no method to allow".into());
            }
            if methods.iter().any(|m| m == token) {
                return Err(format!("{token} is listed twice"));
            }
            methods.push(token.to_string());
        }
        Ok(HttpMethods(methods))
    }

    pub fn allows(&self, method: &str) -> bool {
        self.0.iter().any(|m| m == method)
    }

    pub fn all(&self) -> &[String] {
        &self.0
    }
}

/// `mode`: what the proxy does with what robots.txt and the bot's limits
/// would refuse or delay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Refuse or delay it (the default).
    #[default]
    Enforce,
    /// Relay it at once, and log and count what would have happened
    /// (the address rules, access and input checks still apply).
    Report,
}

impl Mode {
    pub fn parse(text: &str) -> Result<Mode, String> {
        match text {
            "enforce" => Ok(Mode::Enforce),
            "report" => Ok(Mode::Report),
            _ => Err(format!("{text:?}: \"enforce\" or \"report\"")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Report => "report",
        }
    }
}

/// Where the time of day comes from (`Config::wall_clock`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WallClock {
    /// The system's clock, read when the proxy starts.
    #[default]
    System,
    /// This many seconds after the Unix epoch when the proxy starts (tests,
    /// or replaying a day).
    StartingAt(Duration),
}

/// The most a daily budget may be.
pub const MAX_BUDGET: u32 = 1_000_000;

/// The most starts a rate may allow in its window: the log holds one instant
/// per start.
pub const MAX_COUNT: u32 = 100_000;

/// `N/s`, `N/min` or `N/h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad = || format!("{text:?} is not a rate (write e.g. \"10/s\", \"30/min\", \"500/h\")");
        let (count, unit) = text.trim().split_once('/').ok_or_else(bad)?;
        let count = count.trim();
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let count: u32 = count
            .parse()
            .map_err(|_| format!("{text:?}: at most {MAX_COUNT} starts"))?;
        let per = match unit.trim() {
            "s" => Duration::from_secs(1),
            "min" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        if count == 0 || count > MAX_COUNT {
            return Err(format!("{text:?}: from 1 to {MAX_COUNT} starts"));
        }
        Ok(Rate { count, per })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "s",
            60 => "min",
            _ => "h",
        };
        write!(f, "{}/{unit}", self.count)
    }
}

impl serde::Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `HH:MM-HH:MM` of the UTC day: from the first minute, up to (not
/// including) the second; a start after the end crosses midnight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DayWindow {
    /// Seconds after midnight.
    from: u32,
    to: u32,
}

impl DayWindow {
    /// `22:00-06:00`; the two ends differ (a whole day is no window: that
    /// bot should not be configured at all).
    pub fn parse(text: &str) -> Result<DayWindow, String> {
        let bad =
            || format!("{text:?} is not a window of the day (write e.g. \"22:00-06:00\", UTC)");
        let (from, to) = text.trim().split_once('-').ok_or_else(bad)?;
        let minute = |t: &str| -> Option<u32> {
            let (h, m) = t.trim().split_once(':')?;
            let digits =
                |s: &str| (1..=2).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
            if !digits(h) || m.len() != 2 || !digits(m) {
                return None;
            }
            let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
            (h < 24 && m < 60).then_some(h * 3600 + m * 60)
        };
        let (from, to) = (minute(from).ok_or_else(bad)?, minute(to).ok_or_else(bad)?);
        if from == to {
            return Err(format!("{text:?} starts where it ends"));
        }
        Ok(DayWindow { from, to })
    }

    /// True when `windows` together leave no minute of the day (a bot with
    /// them could never start).
    pub fn cover_the_day(windows: &[DayWindow]) -> bool {
        // Windows begin and end on a minute: looking at each minute is exact.
        (0..DAY / 60).all(|m| {
            windows
                .iter()
                .any(|w| w.left(Duration::from_secs(m * 60)).is_some())
        })
    }

    /// If `unix` falls in the window: how long until it ends.
    pub fn left(&self, unix: Duration) -> Option<Duration> {
        let now = (unix.as_secs() % DAY) as u32;
        let inside = match self.from < self.to {
            true => (self.from..self.to).contains(&now),
            false => now >= self.from || now < self.to,
        };
        inside.then(|| {
            let end = (u64::from(self.to) + DAY - u64::from(now)) % DAY;
            Duration::from_secs(end) - Duration::from_nanos(u64::from(unix.subsec_nanos()))
        })
    }
}

impl fmt::Display for DayWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hm = |s: u32| (s / 3600, s / 60 % 60);
        let ((fh, fm), (th, tm)) = (hm(self.from), hm(self.to));
        write!(f, "{fh:02}:{fm:02}-{th:02}:{tm:02}")
    }
}

impl serde::Serialize for DayWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The default of `limits.max_budget_pairs`.
pub const BUDGET_PAIRS: usize = 20_000;

/// The most `limits.max_budget_pairs` may be (a pair's day takes at most
/// about 2.5 KiB of memory, and a line of `state_dir/budgets` of at most
/// 6,691 bytes).
pub const MAX_BUDGET_PAIRS: usize = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_print() {
        assert_eq!(
            Rate::parse("10/s").unwrap(),
            Rate {
                count: 10,
                per: Duration::from_secs(1)
            }
        );
        assert_eq!(Rate::parse(" 30 / min ").unwrap().to_string(), "30/min");
        assert_eq!(Rate::parse("500/h").unwrap().per, Duration::from_secs(3600));
        for bad in [
            "",
            "10",
            "0/s",
            "-1/s",
            "1.5/s",
            "10/d",
            "10/sec",
            "100001/s",
            "99999999999/s",
            "/s",
            "+1/s",
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn windows_parse_and_print() {
        let w = DayWindow::parse("22:00-06:00").unwrap();
        assert_eq!(w.to_string(), "22:00-06:00");
        assert_eq!(
            DayWindow::parse(" 9:30 - 17:05 ").unwrap().to_string(),
            "09:30-17:05"
        );
        for bad in [
            "",
            "22-06",
            "24:00-01:00",
            "10:60-11:00",
            "10:00",
            "10:00-10:00",
            "-1:00-2:00",
            "10:0-11:00",
            "+1:00-2:00",
        ] {
            assert!(DayWindow::parse(bad).is_err(), "{bad:?}");
        }
    }
}
