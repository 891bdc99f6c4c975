//! Robots.txt outcomes in fleet mode (`[store] url`): one fetch per host for
//! the whole fleet, its outcome shared through the store (docs/architecture.md,
//! "Fleet mode"). While the store does not answer, `on_unavailable` decides:
//! "slow down" for every request (`refuse`), or this process fetches on its
//! own (`local`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::entry::{newest, store_down, Good};
use super::{Entry, Local, Miss, Outcomes, Settings};
use crate::fetch::FetchOutcome;
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
                let good = newest(local_good, stored.and_then(|st| s.good_from(st.good)));
                let outcome = self.here.fetch_outcome(&miss).await;
                if store.refuses() {
                    // The store went away during the fetch, which the gate
                    // therefore refused: not an outcome to keep.
                    return store_down();
                }
                let _ = lock.write(&s.record(&outcome)).await;
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
    /// What the fleet is told about an outcome.
    fn record(&self, outcome: &FetchOutcome) -> Record {
        let keep_good = self.config.ttl.saturating_add(self.config.max_stale);
        let (kind, why, body, fresh_for) = match outcome {
            FetchOutcome::Found(body) | FetchOutcome::FoundFor(body, _) => (
                Kind::Found,
                "",
                body.clone(),
                outcome.fresh_for(self.config.ttl),
            ),
            FetchOutcome::Missing(why) | FetchOutcome::TooManyRedirects(why) => {
                (Kind::Missing, why.as_str(), Vec::new(), self.config.ttl)
            }
            FetchOutcome::Unreachable { why, retry_after } => (
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
        }
    }

    /// A body the store kept, parsed, with when it was fetched.
    fn good_from(&self, good: Option<(Vec<u8>, Duration)>) -> Option<Good> {
        let (body, age) = good?;
        let at = Instant::now().checked_sub(age)?;
        Some(super::entry::good(body, at))
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
        let good = newest(local_good, self.good_from(stored.good));
        self.entry_at((outcome, scheme), (fetched, stored.fresh_for), good)
    }
}
