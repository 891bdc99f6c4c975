//! The recent history the status page draws, each bounded in length and in
//! time: a server's request starts (by which bot, against which spacing) and
//! its queue length, a bot's requests per minute by decision. Times are
//! tokio's clock, so paused-time tests see them move.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::fate::Class;

/// How far back the pictures go.
pub const WINDOW: Duration = Duration::from_secs(3600);

/// The most starts remembered per server.
pub const MAX_STARTS: usize = 64;

/// The most queue-length changes remembered per server.
pub const MAX_QUEUE_POINTS: usize = 240;

/// One request start at a server.
#[derive(Clone, Debug)]
pub struct Start {
    /// When its gate let it start.
    pub at: Instant,
    pub bot: Arc<str>,
    /// The spacing it kept from the start before it (its bot's, there).
    pub spacing: Duration,
    /// A bot in report mode: started at once, whatever the spacing.
    pub reported: bool,
}

/// A server's recent starts and queue lengths.
#[derive(Clone, Debug, Default)]
pub struct Series {
    pub starts: VecDeque<Start>,
    /// `(when, requests waiting)`, one point per change.
    pub queue: VecDeque<(Instant, u32)>,
}

impl Series {
    pub fn started(&mut self, start: Start) {
        if self.starts.len() == MAX_STARTS {
            self.starts.pop_front();
        }
        self.starts.push_back(start);
    }

    /// The queue held `waiting` requests at `at`; kept when it changed.
    pub fn queue_seen(&mut self, at: Instant, waiting: u32) {
        if self.queue.back().is_some_and(|(_, n)| *n == waiting) {
            return;
        }
        // The last point before the window stays: the line starts at its value.
        while self.queue.len() >= MAX_QUEUE_POINTS
            || self
                .queue
                .get(1)
                .is_some_and(|(t, _)| at.saturating_duration_since(*t) > WINDOW)
        {
            self.queue.pop_front();
        }
        self.queue.push_back((at, waiting));
    }

    /// The requests waiting, last seen (0 when never seen).
    pub fn waiting(&self) -> u32 {
        self.queue.back().map_or(0, |(_, n)| *n)
    }

    /// When the last request started.
    pub fn last_start(&self) -> Option<Instant> {
        self.starts.back().map(|s| s.at)
    }
}

/// Requests in one minute, by decision ([`Class::index`]).
pub type PerClass = [u32; Class::ALL.len()];

/// A bot's last hour: `(minutes ago, requests by decision)`, oldest first.
pub type LastHour = Vec<(u64, PerClass)>;

/// A bot's requests per minute by decision ([`Class`]), the last hour.
#[derive(Clone, Debug, Default)]
pub struct Minutes {
    /// `(minute, counts by class)`, oldest first, only minutes with requests.
    buckets: VecDeque<(u64, PerClass)>,
}

impl Minutes {
    /// Minutes kept: the window and the minute in progress.
    const KEPT: u64 = WINDOW.as_secs() / 60;

    pub fn count(&mut self, minute: u64, class: Class) {
        match self.buckets.back_mut() {
            Some((m, counts)) if *m == minute => {
                counts[class.index()] = counts[class.index()].saturating_add(1)
            }
            _ => {
                let mut counts = [0; Class::ALL.len()];
                counts[class.index()] = 1;
                self.buckets.push_back((minute, counts));
            }
        }
        while self
            .buckets
            .front()
            .is_some_and(|(m, _)| minute - m >= Self::KEPT)
        {
            self.buckets.pop_front();
        }
    }

    /// The last hour as of `minute`: `(minutes ago, counts by class)`,
    /// oldest first.
    pub fn last_hour(&self, minute: u64) -> LastHour {
        self.buckets
            .iter()
            .filter(|(m, _)| *m <= minute && minute - m < Self::KEPT)
            .map(|(m, c)| (minute - m, *c))
            .collect()
    }

    /// The minute of the last request.
    pub fn last(&self) -> Option<u64> {
        self.buckets.back().map(|(m, _)| *m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_are_bounded() {
        let mut s = Series::default();
        let t = Instant::now();
        for i in 0..(MAX_STARTS as u64 * 3) {
            s.started(Start {
                at: t + Duration::from_secs(i),
                bot: "b".into(),
                spacing: Duration::ZERO,
                reported: false,
            });
        }
        assert_eq!(s.starts.len(), MAX_STARTS);
        assert_eq!(
            s.last_start(),
            Some(t + Duration::from_secs(MAX_STARTS as u64 * 3 - 1))
        );
    }

    #[test]
    fn the_queue_keeps_changes_within_the_window_and_a_bound() {
        let mut s = Series::default();
        let t = Instant::now();
        s.queue_seen(t, 0);
        s.queue_seen(t + Duration::from_secs(1), 0);
        assert_eq!(s.queue.len(), 1, "no change, no point");
        s.queue_seen(t + Duration::from_secs(2), 3);
        s.queue_seen(t + WINDOW * 2, 1);
        // The point before the window (3 waiting) stays: the line starts there.
        assert_eq!(
            s.queue.iter().map(|(_, n)| *n).collect::<Vec<_>>(),
            vec![3, 1]
        );
        for i in 0..(MAX_QUEUE_POINTS as u32 * 2) {
            s.queue_seen(t + WINDOW * 2 + Duration::from_millis(i.into()), i % 7);
        }
        assert!(s.queue.len() <= MAX_QUEUE_POINTS);
        assert_eq!(s.waiting(), (MAX_QUEUE_POINTS as u32 * 2 - 1) % 7);
    }

    #[test]
    fn minutes_count_by_class_and_forget_past_the_hour() {
        let mut m = Minutes::default();
        m.count(10, Class::Allowed);
        m.count(10, Class::Allowed);
        m.count(10, Class::Disallowed);
        m.count(12, Class::Slowed);
        assert_eq!(m.last_hour(12), vec![(2, [2, 1, 0, 0]), (0, [0, 0, 1, 0])]);
        m.count(75, Class::Error);
        assert_eq!(m.last_hour(75), vec![(0, [0, 0, 0, 1])]);
        assert_eq!(m.last(), Some(75));
    }
}
