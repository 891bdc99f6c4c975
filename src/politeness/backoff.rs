//! The web's back-off: a site that answers `429` or `503` without a
//! `Retry-After` it can be held to is not asked again for a while, the way
//! the careful web crawlers do (StormCrawler: 60 s, doubling to a day,
//! forgiven after 30 quiet minutes, with 10 % jitter). Each answer in a row
//! doubles the hold, at most `politeness.max_slow_down`; one more than
//! `forgive` after the last starts again from `first`. (A `Retry-After`
//! holds the site until then instead; Gemini's `44` keeps its own rule.)
//! Pure: no I/O; the jitter's randomness is given.

use std::time::Duration;

use super::slowed::Site;

/// `[politeness]`'s back-off keys.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WebBackoff {
    /// The first hold (`web_backoff`).
    pub first: Duration,
    /// Quiet time after which the next answer starts from `first` again
    /// (`web_backoff_forgive`).
    pub forgive: Duration,
    /// Each hold is off by at most this fraction either way
    /// (`web_backoff_jitter`, 0 to 0.5), so proxies and sites do not fall
    /// into step.
    pub jitter: f64,
}

impl Default for WebBackoff {
    fn default() -> WebBackoff {
        WebBackoff {
            first: Duration::from_secs(60),
            forgive: Duration::from_secs(30 * 60),
            jitter: 0.1,
        }
    }
}

/// The most a jitter may be, either way.
pub const MAX_JITTER: f64 = 0.5;

impl WebBackoff {
    /// The hold after the `level`th such answer in a row (1, 2, …): `first`
    /// doubled `level − 1` times, at most `cap`, then moved by `noise`
    /// (−1 to 1) times the jitter, and still at most `cap`.
    pub fn hold(&self, level: u32, cap: Duration, noise: f64) -> Duration {
        let doublings = level.saturating_sub(1).min(63);
        let base = self
            .first
            .saturating_mul(1u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX))
            .min(cap);
        let factor = 1.0 + self.jitter.clamp(0.0, MAX_JITTER) * noise.clamp(-1.0, 1.0);
        base.mul_f64(factor).min(cap)
    }

    /// The level of the next answer after one at `level` `since` ago.
    pub fn next_level(&self, level: u32, since: Option<Duration>) -> u32 {
        match since {
            Some(quiet) if quiet < self.forgive => level.saturating_add(1),
            _ => 1,
        }
    }
}

/// The most sites whose back-off level is remembered: past it, those
/// forgiven are dropped, and a site not remembered starts from `first`.
pub const MAX_REMEMBERED: usize = 65_536;

/// Each site's back-off level (its host name: every port, both schemes,
/// as its gate) and when its last `429` or `503` came, kept apart from the
/// gates: a request admitted by the fleet's gate has no gate here, and its
/// site must back off all the same.
#[derive(Default)]
pub struct Levels(std::collections::HashMap<Site, (u32, tokio::time::Instant)>);

impl Levels {
    /// The level of a `429`/`503` from `site` now, noted.
    pub fn next(&mut self, key: Site, backoff: &WebBackoff, now: tokio::time::Instant) -> u32 {
        let before = self.0.get(&key).copied();
        let level = backoff.next_level(
            before.map_or(0, |(level, _)| level),
            before.map(|(_, last)| now.saturating_duration_since(last)),
        );
        if before.is_none() && self.0.len() >= MAX_REMEMBERED {
            self.0
                .retain(|_, (_, last)| now.saturating_duration_since(*last) < backoff.forgive);
            if self.0.len() >= MAX_REMEMBERED {
                return level;
            }
        }
        self.0.insert(key, (level, now));
        level
    }
}

/// A number from −1 to 1, different each call (std's per-map random keys:
/// no generator to keep, and enough for a jitter).
pub fn noise() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    let x = h.finish() >> 11;
    (x as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(host: &str) -> Site {
        Site::of(&crate::target::HostKey {
            scheme: crate::target::Scheme::Https,
            host: host.into(),
            port: 443,
        })
    }

    #[test]
    fn it_doubles_to_the_cap_and_is_forgiven() {
        let b = WebBackoff {
            jitter: 0.0,
            ..WebBackoff::default()
        };
        let day = Duration::from_secs(86_400);
        let holds: Vec<u64> = (1..=12).map(|l| b.hold(l, day, 0.0).as_secs()).collect();
        assert_eq!(holds[..6], [60, 120, 240, 480, 960, 1920]);
        assert_eq!(holds[11], 86_400, "capped by max_slow_down");
        assert_eq!(b.hold(u32::MAX, day, 0.0), day, "no overflow");
        assert_eq!(b.next_level(3, Some(Duration::from_secs(60))), 4);
        assert_eq!(
            b.next_level(3, Some(Duration::from_secs(1800))),
            1,
            "forgiven"
        );
        assert_eq!(b.next_level(3, None), 1);
    }

    /// Hostile sites answering 429 by the thousand cannot grow the levels
    /// past their bound; a site past it starts from the first hold.
    #[test]
    fn the_levels_are_bounded() {
        let b = WebBackoff::default();
        let now = tokio::time::Instant::now();
        let mut levels = Levels::default();
        for i in 0..MAX_REMEMBERED + 10 {
            assert_eq!(levels.next(site(&format!("h{i}")), &b, now), 1);
        }
        assert_eq!(levels.0.len(), MAX_REMEMBERED);
        assert_eq!(
            levels.next(site("h1"), &b, now),
            2,
            "one remembered doubles"
        );
        // Forgiven ones make room.
        let later = now + b.forgive;
        assert_eq!(levels.next(site("new"), &b, later), 1);
        assert_eq!(levels.0.len(), 1);
    }

    #[test]
    fn the_jitter_stays_within_its_fraction_and_the_cap() {
        let b = WebBackoff::default();
        let cap = Duration::from_secs(86_400);
        assert_eq!(b.hold(1, cap, -1.0), Duration::from_secs(54));
        assert_eq!(b.hold(1, cap, 1.0), Duration::from_secs(66));
        assert_eq!(b.hold(20, cap, 1.0), cap);
        for _ in 0..1000 {
            let n = noise();
            assert!((-1.0..=1.0).contains(&n));
            let h = b.hold(1, cap, n).as_secs_f64();
            assert!((54.0..=66.0).contains(&h), "{h}");
        }
        let wild = WebBackoff { jitter: 7.0, ..b };
        assert!(
            wild.hold(1, cap, -1.0) >= Duration::from_secs(30),
            "jitter clamped to 0.5"
        );
    }
}
