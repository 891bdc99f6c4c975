//! Robots.txt outcomes in fleet mode (`[store] url`): one fetch per host for
//! the whole fleet, its outcome shared through the store (docs/architecture.md,
//! "Fleet mode"). While the store does not answer, `on_unavailable` decides:
//! "slow down" for every request (`refuse`), or this process fetches on its
//! own (`local`).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::entry::{newest, store_down, Good};
use super::{Entry, Local, Miss, Outcomes, Settings};
use crate::fetch::{FetchOutcome, Validators};
use crate::store::{Kind, Record, RobotsTurn, Store, Stored};
use crate::target::HostKey;

/// Outcomes shared by the fleet through the store; what this process
/// fetches itself (its turn for the fleet, or the store down with
/// `on_unavailable = "local"`) it fetches and counts as [`Local`] does.
pub struct Fleet {
    store: Arc<Store>,
    here: Local,
}

impl Fleet {
    pub fn new(store: Arc<Store>) -> Fleet {
        Fleet {
            store,
            here: Local::default(),
        }
    }

    /// The fleet's fresh copy, else this process fetches (once for the
    /// fleet: the others wait for its outcome) and shares what it got.
    async fn shared_entry(&self, miss: Miss<'_>) -> Entry {
        let (store, s) = (&self.store, miss.settings);
        if store.refuses() {
            return store_down();
        }
        if !store.is_up() {
            return self.here.fetch(&miss).await;
        }
        let tag = format!("r/{}", miss.server.name);
        let deadline = Instant::now() + s.lock_hold;
        let turn = store.robots_or_turn(&tag, s.lock_hold, deadline).await;
        let local_good = miss.previous.and_then(|p| p.good.clone());
        match turn {
            Ok(RobotsTurn::Fresh(stored)) => {
                s.entry_from_stored(stored, (local_good, miss.server.name.scheme))
            }
            Ok(RobotsTurn::Fetch { lock, stored }) => {
                // The newest copy this process or the fleet holds: asked
                // about by its validators, a `304` renews it.
                let known = newest(local_good, stored.and_then(|st| s.good_from(st)));
                let outcome = self.here.fetch_outcome_since(&miss, known.as_ref()).await;
                if store.refuses() {
                    // The store went away during the fetch, which the gate
                    // therefore refused: not an outcome to keep.
                    return store_down();
                }
                // The fleet is told the body (a `304`'s: the renewed one).
                let good = known;
                let _ = lock.write(&s.record(&outcome, good.as_ref())).await;
                s.entry_at(
                    (outcome, miss.server.name.scheme),
                    (Instant::now(), s.config.ttl),
                    good,
                )
            }
            Err(_) if store.refuses() => store_down(),
            Err(_) => self.here.fetch(&miss).await,
        }
    }
}

impl Outcomes for Fleet {
    fn entry<'a>(&'a self, miss: Miss<'a>) -> BoxFuture<'a, Entry> {
        Box::pin(self.shared_entry(miss))
    }

    fn forget<'a>(&'a self, key: &'a HostKey) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let _ = self.store.forget_robots(&format!("r/{key}")).await;
        })
    }

    fn fetch_count(&self) -> u64 {
        self.here.fetch_count()
    }
}

impl Settings {
    /// What the fleet is told about an outcome (`good`: the copy a `304`
    /// renews).
    fn record(&self, outcome: &FetchOutcome, good: Option<&Good>) -> Record {
        let keep_good = self.config.ttl.saturating_add(self.config.max_stale);
        let validators = match (outcome, good) {
            (FetchOutcome::FoundFor(_, _, validators), _) => Some(validators),
            (FetchOutcome::NotModified(_), Some(good)) => Some(&good.validators),
            _ => None,
        };
        let (kind, why, body, fresh_for) = match (outcome, good) {
            (FetchOutcome::Found(body) | FetchOutcome::FoundFor(body, ..), _) => (
                Kind::Found,
                "",
                body.clone(),
                outcome.fresh_for(self.config.ttl),
            ),
            (FetchOutcome::NotModified(_), Some(good)) => (
                Kind::Found,
                "",
                good.body.to_vec(),
                outcome.fresh_for(self.config.ttl),
            ),
            (FetchOutcome::NotModified(_), None) => (
                Kind::Unreachable,
                "robots.txt answered 304 to an unconditional request",
                Vec::new(),
                self.retry(None),
            ),
            (FetchOutcome::Missing(why) | FetchOutcome::TooManyRedirects(why), _) => {
                (Kind::Missing, why.as_str(), Vec::new(), self.config.ttl)
            }
            (FetchOutcome::Unreachable { why, retry_after }, _) => (
                Kind::Unreachable,
                why.as_str(),
                Vec::new(),
                self.retry(*retry_after),
            ),
        };
        Record {
            kind,
            why: why.to_string(),
            body,
            fresh_for,
            keep_good,
            etag: validators.and_then(|v| v.etag.as_deref().map(String::from)),
            last_modified: validators.and_then(|v| v.last_modified.as_deref().map(String::from)),
        }
    }

    /// The body the store kept, parsed, with when it was fetched and its
    /// validators (unusable ones, written by another client, dropped).
    fn good_from(&self, stored: Stored) -> Option<Good> {
        let (body, age) = stored.good?;
        let at = Instant::now().checked_sub(age)?;
        let validators = Validators::new(stored.etag.as_deref(), stored.last_modified.as_deref());
        Some(super::entry::good(body, at, validators))
    }

    /// The entry for what another proxy fetched.
    fn entry_from_stored(
        &self,
        stored: Stored,
        (local_good, scheme): (Option<Good>, crate::target::Scheme),
    ) -> Entry {
        let fetched_ago = stored.good.as_ref().map(|(_, age)| *age);
        let outcome = match stored.kind {
            Kind::Found => match &stored.good {
                Some((body, _)) => FetchOutcome::Found(body.clone()),
                None => FetchOutcome::unreachable("the fleet's copy has no body"),
            },
            Kind::Missing => FetchOutcome::Missing(stored.why.clone()),
            Kind::Unreachable => FetchOutcome::Unreachable {
                why: stored.why.clone(),
                retry_after: Some(stored.fresh_for),
            },
        };
        let fetched = fetched_ago
            .and_then(|age| Instant::now().checked_sub(age))
            .unwrap_or_else(Instant::now);
        let fresh_for = stored.fresh_for;
        let good = newest(local_good, self.good_from(stored));
        self.entry_at((outcome, scheme), (fetched, fresh_for), good)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn settings() -> Settings {
        struct Never;
        impl crate::fetch::RobotsFetcher for Never {
            fn fetch<'a>(
                &'a self,
                _: &'a crate::target::Server,
                _: Option<&'a str>,
            ) -> crate::fetch::FetchFuture<'a> {
                Box::pin(async { FetchOutcome::unreachable("never") })
            }
        }
        let config = super::super::tests::config();
        Settings::new(
            Arc::new(Never),
            config,
            Vec::new(),
            (0, Duration::from_secs(5)),
        )
    }

    /// The fleet is told the body a `304` renewed, never an empty "found".
    #[tokio::test(start_paused = true)]
    async fn a_304_tells_the_fleet_the_renewed_body() {
        let s = settings();
        let good = super::super::entry::good(
            b"User-agent: *\nDisallow: /p\n".to_vec(),
            Instant::now(),
            crate::fetch::Validators::new(Some("\"v1\""), None),
        );
        let kept = s.record(
            &FetchOutcome::NotModified(Duration::from_secs(600)),
            Some(&good),
        );
        assert_eq!(kept.kind, Kind::Found);
        assert_eq!(kept.body, b"User-agent: *\nDisallow: /p\n");
        assert_eq!(kept.fresh_for, Duration::from_secs(600));
        assert_eq!(
            kept.etag.as_deref(),
            Some("\"v1\""),
            "the renewed copy's validator"
        );
        let unasked = s.record(&FetchOutcome::NotModified(Duration::from_secs(600)), None);
        assert_eq!(unasked.kind, Kind::Unreachable);
        assert!(unasked.body.is_empty());
    }

    /// A copy the fleet kept carries its validators to the next proxy's
    /// conditional fetch; ones another client wrote that no server would
    /// send are dropped.
    #[tokio::test(start_paused = true)]
    async fn the_fleets_copy_keeps_its_validators() {
        let s = settings();
        let found = FetchOutcome::FoundFor(
            b"User-agent: *\nDisallow: /p\n".to_vec(),
            Duration::from_secs(600),
            Validators::new(Some("\"v2\""), Some("Wed, 25 Nov 2026 10:00:00 GMT")),
        );
        let record = s.record(&found, None);
        assert_eq!(record.etag.as_deref(), Some("\"v2\""));
        assert_eq!(
            record.last_modified.as_deref(),
            Some("Wed, 25 Nov 2026 10:00:00 GMT")
        );
        let stored = |etag: &str| Stored {
            kind: Kind::Found,
            why: String::new(),
            fresh_for: Duration::ZERO,
            good: Some((record.body.clone(), Duration::from_secs(5))),
            etag: Some(etag.into()),
            last_modified: None,
        };
        let good = s.good_from(stored("\"v2\"")).unwrap();
        assert_eq!(good.validators.etag.as_deref(), Some("\"v2\""));
        let junk = s.good_from(stored("\"v2\"\r\nX-Injected: 1")).unwrap();
        assert!(
            junk.validators.is_empty(),
            "a validator with control bytes is not sent"
        );
        let long = s.good_from(stored(&"x".repeat(4096))).unwrap();
        assert!(long.validators.is_empty());
    }
}
