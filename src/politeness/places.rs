//! Places in line kept across a retry. A request that leaves its gate's
//! queue before its turn (its client hung up, or its bound passed) stops
//! holding anything at once: the requests behind it move up. What it leaves
//! is its ticket, kept under who asked for what ([`Place`]: the bot, the
//! method, the canonical URL) for as long as it could have waited (its
//! bound). The same bot asking for the same URL again within that time
//! re-enters the queue where it stood, ahead of everyone who came after it,
//! rather than at the end; a second copy asked while the first still waits
//! has no kept place and gets one of its own. At most
//! [`KEPT_PER_BOT`] places are kept per bot (the one due to be forgotten
//! first makes room), so a bot cannot grow the proxy's memory by asking.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher, Hash};

use tokio::time::Instant;

use super::slowed::Site;
use super::GateId;
use crate::target::{HostKey, Target};

/// At most this many places are kept per bot (the one due to be forgotten
/// first goes to make room): a crawl with this many pages in line at once
/// keeps every one across a retry.
pub const KEPT_PER_BOT: usize = 10_000;

/// Who asked for what: the place kept for it is found by it. Hashes, not
/// the names (a kept place costs no allocation), with the same key on every
/// proxy of a build, so a fleet's proxies name a place alike in their
/// shared line. A bot that chose URLs whose hashes collide would only make
/// two of its own requests share one place: the bot is in the hash, and a
/// proxy, not the client, says which bot asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Place {
    bot: u64,
    asked: u64,
}

/// The same keys on every proxy (`DefaultHasher::new`).
fn hasher() -> BuildHasherDefault<DefaultHasher> {
    BuildHasherDefault::default()
}

impl Place {
    /// The place of `bot`'s `method` request for `url` (its canonical parts,
    /// hashed as they are: no string is made of them).
    pub fn of(bot: &str, method: &str, url: impl Hash) -> Place {
        let bot = hasher().hash_one(bot);
        Place {
            bot,
            asked: hasher().hash_one((bot, method, url)),
        }
    }

    /// Its name in a fleet's shared line.
    pub fn id(&self) -> String {
        format!("p{:016x}{:016x}", self.bot, self.asked)
    }
}

/// A request's [`Place`], hashed only when one is needed (it left before
/// its turn, or a place is kept at its gate): most requests never wait, and
/// pay nothing for places.
#[derive(Clone, Copy, Debug)]
pub enum PlaceOf<'a> {
    Hashed(Place),
    /// `bot`'s `method` request for `target` (its canonical parts).
    Target {
        bot: &'a str,
        method: &'a str,
        target: &'a Target,
    },
}

impl PlaceOf<'_> {
    pub fn place(&self) -> Place {
        match *self {
            PlaceOf::Hashed(place) => place,
            PlaceOf::Target {
                bot,
                method,
                target,
            } => Place::of(
                bot,
                method,
                (target.scheme, &target.host, target.port, &target.resource),
            ),
        }
    }
}

impl From<Place> for PlaceOf<'_> {
    fn from(place: Place) -> Self {
        PlaceOf::Hashed(place)
    }
}

/// A place left in a gate's queue.
#[derive(Clone, Debug)]
pub(super) struct Kept {
    pub(super) gate: GateId,
    pub(super) ticket: u64,
    /// Forgotten then.
    pub(super) until: Instant,
    /// The server it was asked of: a site that closes (a slow-down past the
    /// horizon) drops its places, and one forgotten unused is a page given
    /// up there.
    pub(super) server: HostKey,
}

/// One bot's kept places, and the order they are due to be forgotten in.
#[derive(Default)]
struct OneBot {
    kept: HashMap<u64, Kept>,
    due: BTreeSet<(Instant, u64)>,
}

impl OneBot {
    fn remove(&mut self, asked: u64) -> Option<Kept> {
        let kept = self.kept.remove(&asked)?;
        self.due.remove(&(kept.until, asked));
        Some(kept)
    }

    /// Forgets the places due by `now`: pages given up, noted in `gone`.
    fn expire(&mut self, now: Instant, gone: &mut Vec<HostKey>) {
        while let Some(&(until, asked)) = self.due.first() {
            if until > now {
                break;
            }
            self.due.pop_first();
            gone.extend(self.kept.remove(&asked).map(|k| k.server));
        }
    }
}

/// Every bot's kept places (under the gates' lock: a place is taken and
/// the queue joined in one step).
#[derive(Default)]
pub(super) struct Places {
    bots: HashMap<u64, OneBot>,
    /// The servers of places forgotten unused (due, or to make room), until
    /// [`Places::given_up`] takes them.
    given_up: Vec<HostKey>,
}

impl Places {
    /// The ticket kept for `place` at `gate`, taken (a second copy finds
    /// none); `None` when there is none, it is due, or it was left at
    /// another gate (the host's addresses changed, or its gate was swept).
    pub(super) fn take(&mut self, place: Place, gate: GateId, now: Instant) -> Option<u64> {
        let bot = self.bots.get_mut(&place.bot)?;
        let kept = bot.remove(place.asked);
        if bot.kept.is_empty() {
            self.bots.remove(&place.bot);
        }
        kept.filter(|k| k.gate == gate && k.until > now)
            .map(|k| k.ticket)
    }

    /// Keeps `kept` for `place`: the bot's places due by `now` are
    /// forgotten first, and at [`KEPT_PER_BOT`] the one due first.
    pub(super) fn keep(&mut self, place: Place, kept: Kept, now: Instant) {
        if kept.until <= now {
            return;
        }
        let bot = self.bots.entry(place.bot).or_default();
        bot.expire(now, &mut self.given_up);
        bot.remove(place.asked);
        if bot.kept.len() >= KEPT_PER_BOT {
            if let Some((_, asked)) = bot.due.pop_first() {
                self.given_up
                    .extend(bot.kept.remove(&asked).map(|k| k.server));
            }
        }
        bot.due.insert((kept.until, place.asked));
        bot.kept.insert(place.asked, kept);
    }

    /// `site` at `gate` closed: the places kept there mean nothing now.
    pub(super) fn drop_site(&mut self, gate: GateId, site: &Site) {
        for bot in self.bots.values_mut() {
            let gone: Vec<u64> = bot
                .kept
                .iter()
                .filter(|(_, k)| k.gate == gate && site.holds(&k.server))
                .map(|(asked, _)| *asked)
                .collect();
            for asked in gone {
                bot.remove(asked);
            }
        }
        self.bots.retain(|_, b| !b.kept.is_empty());
    }

    /// Forgets every place due by `now` (the sweep).
    pub(super) fn expire(&mut self, now: Instant) {
        for bot in self.bots.values_mut() {
            bot.expire(now, &mut self.given_up);
        }
        self.bots.retain(|_, b| !b.kept.is_empty());
    }

    /// The places forgotten unused since last asked, the due ones first
    /// forgotten: each a page its crawler gave up, by server.
    pub(super) fn given_up(&mut self, now: Instant) -> Vec<HostKey> {
        self.expire(now);
        std::mem::take(&mut self.given_up)
    }

    /// No place is kept (a request need not hash its own to look).
    pub(super) fn is_empty(&self) -> bool {
        self.bots.is_empty()
    }

    /// Places kept now, for tests and the status page.
    pub(super) fn len(&self) -> usize {
        self.bots.values().map(|b| b.kept.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::{HostKey, Scheme};
    use std::time::Duration;

    fn server() -> HostKey {
        HostKey {
            scheme: Scheme::Https,
            host: "localhost".into(),
            port: 443,
        }
    }

    fn site() -> Site {
        Site::of(&server())
    }

    fn kept(gate: GateId, ticket: u64, until: Instant) -> Kept {
        Kept {
            gate,
            ticket,
            until,
            server: server(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_place_is_taken_once_at_its_gate_before_it_is_due() {
        let now = Instant::now();
        let later = now + Duration::from_secs(10);
        let mut places = Places::default();
        let a = Place::of("bot", "GET", "https://localhost/a");
        places.keep(a, kept(1, 7, later), now);
        assert_eq!(places.take(a, 2, now), None, "another gate");
        places.keep(a, kept(1, 7, later), now);
        assert_eq!(places.take(a, 1, now), Some(7));
        assert_eq!(places.take(a, 1, now), None, "taken once");
        places.keep(a, kept(1, 7, later), now);
        assert_eq!(places.take(a, 1, later), None, "due");
        assert_eq!(places.len(), 0);
        assert!(places.given_up(later).is_empty(), "asked again, if late");
        places.keep(a, kept(1, 7, later), now);
        assert_eq!(places.given_up(now), [], "not yet due");
        assert_eq!(places.given_up(later), [server()], "never asked again");
        assert_eq!(places.given_up(later), [], "told once");
    }

    #[test]
    fn who_asked_for_what_names_a_place() {
        let a = Place::of("bot", "GET", "https://localhost/a");
        assert_eq!(a, Place::of("bot", "GET", "https://localhost/a"));
        assert_ne!(a, Place::of("other", "GET", "https://localhost/a"));
        assert_ne!(a, Place::of("bot", "HEAD", "https://localhost/a"));
        assert_ne!(a, Place::of("bot", "GET", "https://localhost/b"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_bot_keeps_at_most_its_share_and_the_first_due_makes_room() {
        let now = Instant::now();
        let mut places = Places::default();
        for i in 0..KEPT_PER_BOT as u64 + 5 {
            let p = Place::of("bot", "GET", format!("https://localhost/{i}"));
            let until = now + Duration::from_secs(100 + i);
            places.keep(p, kept(1, i, until), now);
        }
        places.keep(
            Place::of("other", "GET", "https://localhost/0"),
            kept(1, 0, now + Duration::from_secs(1)),
            now,
        );
        assert_eq!(places.len(), KEPT_PER_BOT + 1);
        let first = Place::of("bot", "GET", "https://localhost/0");
        assert_eq!(places.take(first, 1, now), None, "made room");
        let last = Place::of(
            "bot",
            "GET",
            format!("https://localhost/{}", KEPT_PER_BOT + 4),
        );
        assert!(places.take(last, 1, now).is_some());
        assert_eq!(places.given_up(now).len(), 5, "the ones that made room");
        places.expire(now + Duration::from_secs(1));
        assert_eq!(places.given_up(now).len(), 1, "the other bot's, due");
        places.drop_site(1, &site());
        assert_eq!(places.len(), 0);
        assert_eq!(
            places.given_up(now).len(),
            0,
            "a closed site's are not given up"
        );
    }
}
