//! Quiet hours: windows of the UTC day in which a bot starts nothing
//! (`quiet_hours = ["22:00-06:00"]`; a window may cross midnight).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::{wait_for, Blocked, Ledger};
use crate::admission::{Asked, Hold, Limit};
use crate::refusal::{BotLimit, Refusal};

const DAY: u64 = 86_400;

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

/// When the windows that hold `unix` have all ended (windows may overlap or
/// follow each other): `None` if none holds it.
fn quiet_for(windows: &[DayWindow], unix: Duration) -> Option<Duration> {
    let mut waited = Duration::ZERO;
    // Each step leaves one window; more steps than windows would be a loop
    // through the whole day (windows covering it all, refused at config).
    for _ in 0..=windows.len() {
        let at = unix + waited;
        match windows.iter().filter_map(|w| w.left(at)).max() {
            Some(left) => waited += left,
            None => return (!waited.is_zero()).then_some(waited),
        }
    }
    Some(waited)
}

/// The step: each bot's windows, by bot id.
pub(super) struct QuietHours {
    windows: Vec<Vec<DayWindow>>,
    ledger: Arc<Ledger>,
}

impl QuietHours {
    pub(super) fn new(windows: Vec<Vec<DayWindow>>, ledger: Arc<Ledger>) -> QuietHours {
        QuietHours { windows, ledger }
    }
}

impl Limit for QuietHours {
    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let windows = self.windows.get(asked.bot).map_or(&[][..], Vec::as_slice);
            if windows.is_empty() {
                return Ok(None);
            }
            let clock = *self.ledger.clock();
            wait_for(
                &self.ledger,
                asked.deadline,
                BotLimit::QuietHours,
                || match quiet_for(windows, clock.unix()) {
                    None => Ok(None),
                    Some(left) => Err(Blocked::Until(clock.instant_at(clock.unix() + left))),
                },
            )
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(h: u64, m: u64, s: u64) -> Duration {
        Duration::from_secs(20_000 * DAY + h * 3600 + m * 60 + s)
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

    #[test]
    fn across_midnight() {
        let w = DayWindow::parse("22:00-06:00").unwrap();
        assert_eq!(w.left(at(21, 59, 59)), None);
        assert_eq!(w.left(at(22, 0, 0)), Some(Duration::from_secs(8 * 3600)));
        assert_eq!(
            w.left(at(23, 30, 0)),
            Some(Duration::from_secs(6 * 3600 + 1800))
        );
        assert_eq!(w.left(at(0, 0, 0)), Some(Duration::from_secs(6 * 3600)));
        assert_eq!(w.left(at(5, 59, 59)), Some(Duration::from_secs(1)));
        assert_eq!(w.left(at(6, 0, 0)), None);
        assert_eq!(w.left(at(12, 0, 0)), None);
    }

    #[test]
    fn within_a_day() {
        let w = DayWindow::parse("09:00-17:00").unwrap();
        assert_eq!(w.left(at(8, 59, 59)), None);
        assert_eq!(w.left(at(9, 0, 0)), Some(Duration::from_secs(8 * 3600)));
        assert_eq!(w.left(at(17, 0, 0)), None);
        let half = at(16, 59, 59) + Duration::from_millis(500);
        assert_eq!(w.left(half), Some(Duration::from_millis(500)));
    }

    #[test]
    fn windows_that_follow_each_other_are_one() {
        let ws = [
            DayWindow::parse("22:00-23:00").unwrap(),
            DayWindow::parse("23:00-01:00").unwrap(),
            DayWindow::parse("00:30-02:00").unwrap(),
        ];
        assert_eq!(
            quiet_for(&ws, at(22, 30, 0)),
            Some(Duration::from_secs(3 * 3600 + 1800))
        );
        assert_eq!(quiet_for(&ws, at(2, 0, 0)), None);
        // Two windows covering the whole day end nowhere: bounded, not a loop.
        let all = [
            DayWindow::parse("00:00-12:00").unwrap(),
            DayWindow::parse("12:00-00:00").unwrap(),
        ];
        assert!(quiet_for(&all, at(3, 0, 0)).is_some());
    }
}
