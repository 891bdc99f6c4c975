//! robots.txt outcomes shared by the fleet: what the last fetch of a host
//! ended in, until when it is fresh (on the store's clock), and the last good
//! body for stale-if-error; a lock with a token so that one proxy fetches
//! while the others wait for its answer (woken when it is written).
//!
//! The raw body is stored, not the parsed rules: each proxy parses and
//! compiles it for its own bots behind its in-process cache.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;

use super::{micros, Store, StoreError};
use crate::metrics::StoreOp;

/// How a fetch ended, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Found,
    /// No robots.txt (a redirect loop included).
    Missing,
    /// The host could not be asked.
    Unreachable,
}

impl Kind {
    fn code(self) -> &'static str {
        match self {
            Kind::Found => "f",
            Kind::Missing => "m",
            Kind::Unreachable => "u",
        }
    }

    fn from_code(code: &[u8]) -> Option<Kind> {
        match code {
            b"f" => Some(Kind::Found),
            b"m" => Some(Kind::Missing),
            b"u" => Some(Kind::Unreachable),
            _ => None,
        }
    }
}

/// One fetch's outcome, to be written.
#[derive(Clone, Debug)]
pub struct Record {
    pub kind: Kind,
    /// Why (missing, unreachable).
    pub why: String,
    /// The body, for `Found`.
    pub body: Vec<u8>,
    /// How long it answers for the whole fleet.
    pub fresh_for: Duration,
    /// How long a good body is kept past its fetch, for stale-if-error.
    pub keep_good: Duration,
    /// The good body's validators (`ETag`, `Last-Modified`), for the next
    /// proxy's conditional fetch.
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// What the store holds for a host.
#[derive(Clone, Debug)]
pub struct Stored {
    pub kind: Kind,
    pub why: String,
    /// How much longer it is fresh (zero: stale).
    pub fresh_for: Duration,
    /// The last good body and how long ago it was fetched.
    pub good: Option<(Vec<u8>, Duration)>,
    /// Its validators, as written (the cache checks them).
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

const READ: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local v = redis.call('HMGET', KEYS[1], 'k', 'why', 'until', 'body', 'good_at', 'etag', 'lm')
return {string.format('%.0f', now), v[1], v[2], v[3], v[4], v[5], v[6], v[7]}
"#;

const WRITE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local fresh, keep_good = tonumber(ARGV[3]), tonumber(ARGV[5])
redis.call('HSET', KEYS[1], 'k', ARGV[1], 'why', ARGV[2], 'until', string.format('%.0f', now + fresh))
if ARGV[1] == 'f' then
  redis.call('HSET', KEYS[1], 'body', ARGV[4], 'good_at', string.format('%.0f', now))
  redis.call('HDEL', KEYS[1], 'etag', 'lm')
  if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'etag', ARGV[8]) end
  if ARGV[9] ~= '' then redis.call('HSET', KEYS[1], 'lm', ARGV[9]) end
elseif ARGV[1] == 'm' then
  redis.call('HDEL', KEYS[1], 'body', 'good_at', 'etag', 'lm')
end
local keep = fresh
local good_at = tonumber(redis.call('HGET', KEYS[1], 'good_at'))
if good_at and good_at == good_at and good_at >= 0 and good_at <= now then
  keep = math.max(keep, good_at + keep_good - now)
end
redis.call('PEXPIRE', KEYS[1], math.floor(keep / 1000) + 1000)
if ARGV[6] ~= '' and redis.call('GET', KEYS[2]) == ARGV[6] then redis.call('DEL', KEYS[2]) end
redis.call('PUBLISH', ARGV[7], KEYS[1])
return 1
"#;

const UNLOCK: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], KEYS[2])
  return 1
end
return 0
"#;

fn scripts() -> &'static (Script, Script, Script) {
    static SCRIPTS: std::sync::OnceLock<(Script, Script, Script)> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| (Script::new(READ), Script::new(WRITE), Script::new(UNLOCK)))
}

type Fields = (
    String,
    Option<Vec<u8>>,
    Option<String>,
    Option<String>,
    Option<Vec<u8>>,
    Option<String>,
    Option<String>,
    Option<String>,
);

impl Store {
    fn robots_keys(&self, tag: &str) -> (String, String) {
        (self.key(tag, "robots"), self.key(tag, "robots-lock"))
    }

    /// What the fleet knows about `tag`'s robots.txt, if anything.
    pub async fn read_robots(&self, tag: &str) -> Result<Option<Stored>, StoreError> {
        let (key, _) = self.robots_keys(tag);
        let mut conn = self.connection();
        let (now, kind, why, until, body, good_at, etag, last_modified): Fields = self
            .run(StoreOp::Robots, async move {
                scripts().0.key(&key).invoke_async(&mut conn).await
            })
            .await?;
        let Some(kind) = kind.as_deref().and_then(Kind::from_code) else {
            return Ok(None);
        };
        let number = |s: Option<&str>| s.and_then(|s| s.parse::<u64>().ok());
        let now = number(Some(&now)).ok_or(StoreError::Shape("the store's clock"))?;
        // What another client may have written is checked: a freshness past
        // the longest one the proxy writes, or a fetch in the future, is
        // junk, and junk reads as "stale, no good copy" (fetched again).
        let never = super::micros(super::NEVER);
        let mut junk = false;
        let fresh_for = match until.as_deref() {
            None => Duration::ZERO,
            Some(u) => match number(Some(u)) {
                Some(u) if u.saturating_sub(now) <= never => {
                    Duration::from_micros(u.saturating_sub(now))
                }
                _ => {
                    junk = true;
                    Duration::ZERO
                }
            },
        };
        let good = match (body, good_at.as_deref()) {
            (Some(body), Some(at)) => match number(Some(at)) {
                Some(at) if at <= now => Some((body, Duration::from_micros(now - at))),
                _ => {
                    junk = true;
                    None
                }
            },
            _ => None,
        };
        if junk {
            self.metrics.store_event(crate::metrics::StoreEvent::Junk);
            tracing::warn!(key = %tag, "the fleet store's robots.txt record holds times that are no numbers in bounds (written by another client?): read as stale");
        }
        // Validators belong to the good body: none without it.
        let (etag, last_modified) = match good {
            Some(_) => (etag, last_modified),
            None => (None, None),
        };
        Ok(Some(Stored {
            kind,
            why: why.unwrap_or_default(),
            fresh_for,
            good,
            etag,
            last_modified,
        }))
    }

    /// Takes the fetch lock of `tag` for at most `hold`: `Some(token)` if this
    /// proxy is to fetch, `None` if another one is fetching.
    pub async fn lock_robots(
        &self,
        tag: &str,
        hold: Duration,
    ) -> Result<Option<String>, StoreError> {
        let (_, lock) = self.robots_keys(tag);
        let token = self.lease_name();
        let mut conn = self.connection();
        let ms = (micros(hold) / 1000).max(1);
        let t = token.clone();
        let set: Option<String> = self
            .run(StoreOp::Robots, async move {
                redis::cmd("SET")
                    .arg(&lock)
                    .arg(&t)
                    .arg("NX")
                    .arg("PX")
                    .arg(ms)
                    .query_async(&mut conn)
                    .await
            })
            .await?;
        Ok(set.map(|_| token))
    }

    /// Writes an outcome, lets go of the lock when `token` holds it, and wakes
    /// the proxies waiting for it.
    pub async fn write_robots(
        &self,
        tag: &str,
        record: &Record,
        token: Option<&str>,
    ) -> Result<(), StoreError> {
        let (key, lock) = self.robots_keys(tag);
        let never = micros(super::NEVER);
        let mut conn = self.connection();
        let mut call = scripts().1.key(&key);
        call.key(&lock)
            .arg(record.kind.code())
            .arg(&record.why)
            .arg(micros(record.fresh_for).min(never))
            .arg(&record.body[..])
            .arg(micros(record.keep_good).min(never))
            .arg(token.unwrap_or(""))
            .arg(self.channel())
            .arg(record.etag.as_deref().unwrap_or(""))
            .arg(record.last_modified.as_deref().unwrap_or(""));
        self.run(StoreOp::Robots, async move {
            call.invoke_async::<i64>(&mut conn).await
        })
        .await
        .map(drop)
    }

    /// Forgets `tag`'s outcome (an operator's action): the next proxy to be
    /// asked fetches it again. A fetch in progress keeps its lock.
    pub async fn forget_robots(&self, tag: &str) -> Result<(), StoreError> {
        let (key, _) = self.robots_keys(tag);
        self.delete(StoreOp::Robots, key).await
    }

    /// Lets go of the lock without writing (the fetch was given up).
    async fn unlock_robots(&self, tag: &str, token: &str) -> Result<(), StoreError> {
        let (key, lock) = self.robots_keys(tag);
        let mut conn = self.connection();
        let mut call = scripts().2.key(&lock);
        call.key(&key).arg(token).arg(self.channel());
        self.run(StoreOp::Robots, async move {
            call.invoke_async::<i64>(&mut conn).await
        })
        .await
        .map(drop)
    }

    /// What to do about `tag`'s robots.txt: use the fleet's fresh copy, or
    /// fetch it. Another proxy's fetch in progress is waited for (woken when
    /// it is written or its lock let go) until `deadline`; a waiter that
    /// outlives it fetches itself, without the lock.
    pub async fn robots_or_turn(
        self: &Arc<Self>,
        tag: &str,
        hold: Duration,
        deadline: tokio::time::Instant,
    ) -> Result<RobotsTurn, StoreError> {
        let (key, _) = self.robots_keys(tag);
        let watch = self.wakers.watch(key);
        loop {
            // Listening before reading: a write in between is not missed.
            let written = watch.notify.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            let stored = self.read_robots(tag).await?;
            if let Some(fresh) = stored.as_ref().filter(|s| !s.fresh_for.is_zero()) {
                return Ok(RobotsTurn::Fresh(fresh.clone()));
            }
            if let Some(token) = self.lock_robots(tag, hold).await? {
                let lock = self.fetch_lock(tag, Some(token));
                // Another proxy may have fetched, written and let go between
                // the read above and this lock: read again before fetching,
                // or the server gets a second fetch. (Dropping the lock lets go.)
                let stored = self.read_robots(tag).await?;
                if let Some(fresh) = stored.as_ref().filter(|s| !s.fresh_for.is_zero()) {
                    return Ok(RobotsTurn::Fresh(fresh.clone()));
                }
                return Ok(RobotsTurn::Fetch { lock, stored });
            }
            if tokio::time::timeout_at(deadline, written).await.is_err() {
                return Ok(RobotsTurn::Fetch {
                    lock: self.fetch_lock(tag, None),
                    stored,
                });
            }
        }
    }
}

/// [`Store::robots_or_turn`]'s answer.
pub enum RobotsTurn {
    /// The fleet's copy, fresh.
    Fresh(Stored),
    /// This proxy fetches, holding `lock` (or not, when it waited it out);
    /// `stored` is what the store had (for its good body).
    Fetch {
        lock: FetchLock,
        stored: Option<Stored>,
    },
}

impl Store {
    fn fetch_lock(self: &Arc<Self>, tag: &str, token: Option<String>) -> FetchLock {
        FetchLock {
            store: self.clone(),
            tag: tag.to_string(),
            token,
        }
    }
}

/// The fetch lock while this proxy fetches. [`FetchLock::write`] shares the
/// outcome and lets go; a fetch given up (its client hung up) lets go when
/// dropped, so the fleet's waiters fetch at once instead of waiting the
/// lock out.
pub struct FetchLock {
    store: Arc<Store>,
    tag: String,
    token: Option<String>,
}

impl FetchLock {
    pub async fn write(mut self, record: &Record) -> Result<(), StoreError> {
        let token = self.token.take();
        self.store
            .write_robots(&self.tag, record, token.as_deref())
            .await
    }
}

impl Drop for FetchLock {
    fn drop(&mut self) {
        let Some(token) = self.token.take() else {
            return;
        };
        let (store, tag) = (self.store.clone(), std::mem::take(&mut self.tag));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = store.unlock_robots(&tag, &token).await;
            });
        }
    }
}
