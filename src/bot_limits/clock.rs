//! The time of day, for limits that name one (quiet hours, a day's budget):
//! the wall clock read once, then advanced by the runtime's clock, so a
//! test's paused and advanced time moves it too, and a jump of the system
//! clock does not (it is taken at the next start).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

use super::values::WallClock;

/// Seconds since the Unix epoch, now.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    at_start: Duration,
    start: Instant,
}

impl Clock {
    pub fn new(wall: WallClock) -> Clock {
        let at_start = match wall {
            WallClock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            WallClock::StartingAt(t) => t,
        };
        Clock {
            at_start,
            start: Instant::now(),
        }
    }

    /// Time since the Unix epoch.
    pub fn unix(&self) -> Duration {
        self.at_start.saturating_add(self.start.elapsed())
    }

    /// The runtime's instant at a given time since the epoch (the past is now).
    pub fn instant_at(&self, unix: Duration) -> Instant {
        let now = Instant::now();
        crate::politeness::after(now, unix.saturating_sub(self.unix()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn moves_with_the_runtime_clock() {
        let clock = Clock::new(WallClock::StartingAt(Duration::from_secs(1000)));
        tokio::time::advance(Duration::from_secs(90)).await;
        assert_eq!(clock.unix(), Duration::from_secs(1090));
        let later = clock.instant_at(Duration::from_secs(1100));
        assert_eq!(later - Instant::now(), Duration::from_secs(10));
        assert_eq!(clock.instant_at(Duration::from_secs(5)), Instant::now());
    }
}
