//! Hours of the UTC day: the bot's quiet hours, in which it starts nothing
//! (`quiet_hours = ["22:00-06:00"]`; a window may cross midnight), and
//! robots.txt's `Visit-time`, outside which it starts nothing at that host.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::values::DayWindow;
use super::{wait_for, Blocked, Ledger, PerBot};
use crate::admission::{Asked, Hold, Limit};
use crate::cache::Rules;
use crate::refusal::{BotLimit, Refusal};

/// When the windows that hold `unix` have all ended (windows may overlap or
/// follow each other): `None` if none holds it.
pub(super) fn quiet_for(windows: &[DayWindow], unix: Duration) -> Option<Duration> {
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
    pub(super) windows: PerBot<Vec<DayWindow>>,
    pub(super) ledger: Arc<Ledger>,
}

impl Limit for QuietHours {
    fn applies(&self, asked: &Asked<'_>) -> bool {
        self.windows.get(asked.bot).is_some()
    }

    fn foresee(&self, asked: &Asked<'_>) -> Option<Refusal> {
        let (_, windows) = self.windows.get(asked.bot)?;
        let clock = *self.ledger.clock();
        let ends =
            quiet_for(windows, clock.unix()).map(|left| clock.instant_at(clock.unix() + left));
        super::beyond(asked.deadline, BotLimit::QuietHours, ends)
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Some((_, windows)) = self.windows.get(asked.bot) else {
                return Ok(None);
            };
            let clock = *self.ledger.clock();
            wait_for(
                &self.ledger,
                (None, asked.deadline),
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

/// The step for robots.txt's `Visit-time` (asked for every bot: the
/// windows are the host's, in the bot's policy).
pub(super) struct VisitTimes {
    pub(super) ledger: Arc<Ledger>,
}

impl Limit for VisitTimes {
    fn applies(&self, asked: &Asked<'_>) -> bool {
        matches!(&asked.robots.rules, Rules::Found { policies, .. }
            if policies.get(asked.bot).is_some_and(|p| p.has_visit_times()))
    }

    fn foresee(&self, asked: &Asked<'_>) -> Option<Refusal> {
        let Rules::Found { policies, .. } = &asked.robots.rules else {
            return None;
        };
        let clock = *self.ledger.clock();
        let (wait, window) = policies.get(asked.bot)?.visit_wait(clock.unix())?;
        let opens = clock.instant_at(clock.unix() + wait);
        super::beyond(asked.deadline, BotLimit::VisitTime(window), Some(opens))
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Rules::Found { policies, .. } = &asked.robots.rules else {
                return Ok(None);
            };
            let Some(policy) = policies.get(asked.bot) else {
                return Ok(None);
            };
            let clock = *self.ledger.clock();
            let Some((_, window)) = policy.visit_wait(clock.unix()) else {
                return Ok(None);
            };
            wait_for(
                &self.ledger,
                (None, asked.deadline),
                BotLimit::VisitTime(window),
                || match policy.visit_wait(clock.unix()) {
                    None => Ok(None),
                    Some((wait, _)) => Err(Blocked::Until(clock.instant_at(clock.unix() + wait))),
                },
            )
            .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bot_limits::values::DAY;

    fn at(h: u64, m: u64, s: u64) -> Duration {
        Duration::from_secs(20_000 * DAY + h * 3600 + m * 60 + s)
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
