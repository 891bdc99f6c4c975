//! Report mode (`mode = "report"` on a bot): what robots.txt and the bot's
//! own limits would have refused or delayed is relayed at once, and each
//! such request carries a [`Report`] of what would have happened: its log
//! line says it (`would=…`, `would_wait=…`) and
//! `robots_proxy_report_only_total{bot,reason}` counts it.
//!
//! Only robots.txt's word (its rules, preferences, Crawl-delay, Visit-time,
//! a robots.txt that cannot be fetched) and the bot's limits are reported
//! rather than enforced: access, the address rules, input checks, a fleet
//! store that does not answer and a shutdown still refuse. Pure: no I/O.

use std::fmt::Write as _;
use std::time::Duration;

use crate::refusal::{Busy, Refusal, SlowDown};

/// One thing that would have happened to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Would {
    /// Refused with this answer.
    Refuse(Refusal),
    /// Held this long first (for `reason`), then relayed.
    Wait(Duration, &'static str),
}

impl Would {
    /// The `reason` label of `robots_proxy_report_only_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            Would::Refuse(refusal) => reason(refusal),
            Would::Wait(_, reason) => reason,
        }
    }
}

/// The label of what refused: `disallowed`, `content_usage`,
/// `robots_unreachable`, `crawl_delay` (the host's turn too far away), or
/// the limit's key.
pub fn reason(refusal: &Refusal) -> &'static str {
    match refusal {
        Refusal::Disallowed(d) if d.usage.is_some() => "content_usage",
        Refusal::Disallowed(_) => "disallowed",
        Refusal::RobotsUnreachable(_) => "robots_unreachable",
        Refusal::Preference(_) => "response_preference",
        Refusal::SlowDown(s) => match s.why {
            Busy::Limit(limit) => limit.key(),
            _ => "crawl_delay",
        },
        _ => "other",
    }
}

/// Whether report mode relays what `refusal` would refuse: robots.txt's word
/// and the bot's limits; never the proxy's own rules.
pub fn reportable(refusal: &Refusal) -> bool {
    match refusal {
        Refusal::Disallowed(_) | Refusal::RobotsUnreachable(_) | Refusal::Preference(_) => true,
        Refusal::SlowDown(s) => matches!(s.why, Busy::Limit(_) | Busy::Turn),
        _ => false,
    }
}

/// What would have happened to one request of a bot in report mode (empty
/// for a request nothing would have changed, and for enforcing bots).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report(Vec<Would>);

impl Report {
    pub fn add(&mut self, would: Would) {
        self.0.push(would);
    }

    /// A limit that held the request: it would have waited `retry_after`
    /// when that is within `max_wait`, else been answered "slow down".
    pub fn held(&mut self, refusal: Refusal, max_wait: Duration) {
        match refusal.retry_after() {
            Some(wait) if wait <= max_wait => self.add(Would::Wait(wait, reason(&refusal))),
            _ => self.add(Would::Refuse(refusal)),
        }
    }

    /// The host's turn, `wait` away (for `reason`: `crawl_delay`,
    /// `min_delay`): waited for within `max_wait`, else "slow down".
    pub fn turn(&mut self, wait: Duration, max_wait: Duration, reason: &'static str) {
        match wait <= max_wait {
            true => self.add(Would::Wait(wait, reason)),
            false => self.add(Would::Refuse(Refusal::SlowDown(SlowDown {
                retry_after: wait,
                why: Busy::Turn,
            }))),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Would> {
        self.0.iter()
    }

    /// The log line's `would`: each refusal, `reason: answer`, `; ` between.
    pub fn would(&self) -> Option<String> {
        let mut out = String::new();
        for would in &self.0 {
            if let Would::Refuse(refusal) = would {
                if !out.is_empty() {
                    out.push_str("; ");
                }
                let _ = write!(out, "{}: {refusal}", reason(refusal));
            }
        }
        (!out.is_empty()).then_some(out)
    }

    /// The log line's `would_wait`: the longest wait, `3.2s (crawl_delay)`.
    pub fn would_wait(&self) -> Option<String> {
        self.0
            .iter()
            .filter_map(|w| match w {
                Would::Wait(d, reason) => Some((*d, *reason)),
                Would::Refuse(_) => None,
            })
            .max_by_key(|(d, _)| *d)
            .map(|(d, reason)| format!("{:.1}s ({reason})", d.as_secs_f64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusal::{BotLimit, Disallowed};

    #[test]
    fn a_report_reads_as_the_log_line_says() {
        let mut r = Report::default();
        assert_eq!((r.would(), r.would_wait()), (None, None));
        r.add(Would::Refuse(Refusal::Disallowed(Disallowed {
            host: "localhost".into(),
            port: 1965,
            bot: "examplebot".into(),
            rule: None,
            usage: None,
            stale: false,
        })));
        r.add(Would::Wait(Duration::from_millis(3200), "crawl_delay"));
        r.held(
            Refusal::SlowDown(SlowDown {
                retry_after: Duration::from_millis(500),
                why: Busy::Limit(BotLimit::QuietHours),
            }),
            Duration::from_secs(1),
        );
        r.held(
            Refusal::SlowDown(SlowDown {
                retry_after: Duration::from_secs(90),
                why: Busy::Limit(BotLimit::DailyBudget(5)),
            }),
            Duration::from_secs(1),
        );
        assert_eq!(
            r.would().unwrap(),
            "disallowed: robots.txt of localhost:1965 disallows this for examplebot; \
             daily_requests_per_server: slow down, retry in 90 s (this bot's \
             daily_requests_per_server = 5, used up here)"
        );
        assert_eq!(r.would_wait().unwrap(), "3.2s (crawl_delay)");
        let reasons: Vec<_> = r.iter().map(Would::reason).collect();
        assert_eq!(
            reasons,
            [
                "disallowed",
                "crawl_delay",
                "quiet_hours",
                "daily_requests_per_server"
            ]
        );
    }
}
