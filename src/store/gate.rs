//! The shared politeness gate: one server-side script per request start, on the
//! store's own clock (`TIME`), so the proxies' clocks do not matter.
//!
//! Per server, a hash holds the latest start reserved (`last`), the back-off
//! factor (`bo`) and the "not before" of an upstream `44 N` (`nb`); a sorted
//! set holds one lease per request in flight, scored by when it expires.
//! The script drops expired leases (a proxy that died), then either
//! - reserves the next start (`last` + this request's spacing, not before `nb`)
//!   and answers how long to sleep until then, taking a lease;
//! - answers "full" when the leases reach the concurrency cap, with the time
//!   until the earliest lease expires: the waiter sleeps until a lease is
//!   released (the wake-up channel) or that time;
//! - answers "slow down" when the start would be more than `max_wait` away.
//!
//! Releasing a lease moves `last` to the request's real start when it woke
//! late (`RELEASE`), so lateness is not passed on to the next request.
//!
//! Starts are reserved in the order the script runs: roughly first come, first
//! served across the fleet. All arithmetic is on microseconds below 2^53 (Lua
//! numbers are doubles): the caller caps every duration at `politeness::NEVER`.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use tokio::time::Instant;

use super::{micros, Store, StoreError};
use crate::metrics::StoreOp;

/// What a request asks the shared gate.
#[derive(Clone, Copy, Debug)]
pub struct GateAsk {
    /// This request's spacing (its bot's Crawl-delay, clamped).
    pub delay: Duration,
    /// The longest spacing any bot asks for here: the gate is kept that long.
    pub hold: Duration,
    pub max_wait: Duration,
    pub max_delay: Option<Duration>,
    pub concurrency: usize,
}

const RESERVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local delay, max_wait, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local lease, hold, max_delay, never = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= cap then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  return {0, tonumber(first[2]) - now, 1}
end
local g = redis.call('HMGET', KEYS[1], 'last', 'bo', 'nb')
local bo = tonumber(g[2]) or 1
local spacing = delay
if bo > 1 then
  spacing = math.max(delay, 1000000) * bo
  if max_delay > 0 then spacing = math.min(spacing, math.max(max_delay, delay)) end
end
spacing = math.min(spacing, never)
local start = now
if g[1] then start = math.max(start, tonumber(g[1]) + spacing) end
if g[3] then start = math.max(start, tonumber(g[3])) end
local wait = start - now
if wait > max_wait then return {2, wait, bo} end
redis.call('HSET', KEYS[1], 'last', string.format('%.0f', start))
redis.call('ZADD', KEYS[2], string.format('%.0f', start + lease), ARGV[4])
local keep = wait + math.max(hold, spacing)
if g[3] then keep = math.max(keep, tonumber(g[3]) - now) end
redis.call('PEXPIRE', KEYS[1], math.floor(keep / 1000) + 1000)
redis.call('PEXPIRE', KEYS[2], math.floor((wait + lease) / 1000) + 1000)
return {1, wait, bo}
"#;

const RENEW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease = tonumber(ARGV[2])
local renewed = redis.call('ZADD', KEYS[1], 'XX', 'CH', string.format('%.0f', now + lease), ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl >= 0 and ttl < math.floor(lease / 1000) + 1000 then
  redis.call('PEXPIRE', KEYS[1], math.floor(lease / 1000) + 1000)
end
return renewed
"#;

/// Releases a lease, and moves `last` to the request's actual start when it
/// was later than reserved (the proxy woke late): the next start is spaced
/// from when the server really saw this one. `ARGV[3]`: microseconds since
/// the request started, on the proxy's monotonic clock.
const RELEASE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local started = now - tonumber(ARGV[3])
local last = tonumber(redis.call('HGET', KEYS[2], 'last'))
if last and started > last then
  redis.call('HSET', KEYS[2], 'last', string.format('%.0f', started))
end
local gone = redis.call('ZREM', KEYS[1], ARGV[1])
if gone == 1 then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return gone
"#;

const SLOW_DOWN: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local seconds, delay, max_delay, never = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local keep
if seconds >= 0 then
  local nb = now + math.min(seconds, never)
  local old = tonumber(redis.call('HGET', KEYS[1], 'nb'))
  if old then nb = math.max(nb, old) end
  redis.call('HSET', KEYS[1], 'nb', string.format('%.0f', nb))
  keep = nb - now
else
  local bo = tonumber(redis.call('HGET', KEYS[1], 'bo')) or 1
  if not (max_delay > 0 and delay * bo >= max_delay) and bo < 1048576 then bo = bo * 2 end
  redis.call('HSET', KEYS[1], 'bo', bo)
  keep = math.min(math.max(delay, 1000000) * bo, never)
end
local ttl = redis.call('PTTL', KEYS[1])
local want = math.floor(keep / 1000) + 1000
if ttl < want then redis.call('PEXPIRE', KEYS[1], want) end
return 1
"#;

/// Scripts are sent by hash and loaded on first use (`EVALSHA`, then `EVAL`).
struct Scripts {
    reserve: Script,
    renew: Script,
    release: Script,
    slow_down: Script,
}

fn scripts() -> &'static Scripts {
    static SCRIPTS: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        reserve: Script::new(RESERVE),
        renew: Script::new(RENEW),
        release: Script::new(RELEASE),
        slow_down: Script::new(SLOW_DOWN),
    })
}

/// The gate's answer to one request.
enum Answer {
    /// Start after sleeping this long; the lease is taken. With whether the
    /// server's spacing is backed off (an upstream `44` without a number).
    Go(Duration, bool),
    /// The cap is full: look again when a lease is released, at the latest after this.
    Full(Duration),
    /// The start would be this far away: more than `max_wait`.
    SlowDown(Duration),
}

/// The longest a waiter for a full cap sleeps without a wake-up before asking
/// again: the safety net for a release message lost on the way.
const FULL_RECHECK: Duration = Duration::from_secs(2);

/// A request's place in the cap, held while it runs: renewed in the
/// background, released when dropped. If the proxy dies, it expires.
pub struct Lease {
    store: Arc<Store>,
    /// The leases' key and the gate's.
    key: String,
    gate: String,
    name: String,
    /// When the request really started (it woke from its wait).
    started: std::time::Instant,
    renewal: tokio::task::AbortHandle,
    backed_off: bool,
}

impl Lease {
    /// The server's spacing was backed off when this request was admitted:
    /// a normal answer should end that.
    pub fn backed_off(&self) -> bool {
        self.backed_off
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewal.abort();
        let (store, name) = (self.store.clone(), self.name.clone());
        let (key, gate) = (self.key.clone(), self.gate.clone());
        let since_start = micros(self.started.elapsed());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let mut conn = store.connection();
                let mut call = scripts().release.key(&key);
                call.key(&gate)
                    .arg(&name)
                    .arg(store.channel())
                    .arg(since_start);
                let _ = store
                    .run(StoreOp::Gate, async move {
                        call.invoke_async::<i64>(&mut conn).await
                    })
                    .await;
            });
        }
    }
}

impl Store {
    /// The gate's keys for a server tag: its hash and its leases.
    fn gate_keys(&self, tag: &str) -> (String, String) {
        (self.key(tag, "gate"), self.key(tag, "leases"))
    }

    /// One run of the reservation script on a server's keys.
    async fn reserve(
        &self,
        (gate, leases): (&str, &str),
        ask: &GateAsk,
        name: &str,
    ) -> Result<Answer, StoreError> {
        let never = micros(crate::politeness::NEVER);
        let capped = |d: Duration| micros(d).min(never);
        let mut conn = self.connection();
        let mut call = scripts().reserve.key(gate);
        call.key(leases)
            .arg(capped(ask.delay))
            .arg(capped(ask.max_wait))
            .arg(ask.concurrency.max(1))
            .arg(name)
            .arg(capped(self.config.lease))
            .arg(capped(ask.hold))
            .arg(ask.max_delay.map_or(0, capped))
            .arg(never);
        let (what, micros, backoff): (i64, i64, i64) = self
            .run(
                StoreOp::Gate,
                async move { call.invoke_async(&mut conn).await },
            )
            .await?;
        let d = Duration::from_micros(micros.max(0).unsigned_abs());
        match what {
            1 => Ok(Answer::Go(d, backoff > 1)),
            0 => Ok(Answer::Full(d)),
            2 => Ok(Answer::SlowDown(d)),
            _ => Err(StoreError::Shape("the gate script's verdict")),
        }
    }

    /// Waits for this request's turn at the shared gate of `tag`: `Ok(Ok)`
    /// with its lease once it may start, `Ok(Err(retry_after))` when it would
    /// wait past `max_wait`, `Err` when the store does not answer.
    pub async fn admit(
        self: &Arc<Self>,
        tag: &str,
        ask: GateAsk,
    ) -> Result<Result<Lease, Duration>, StoreError> {
        let deadline = Instant::now() + ask.max_wait.min(crate::politeness::NEVER);
        let name = self.lease_name();
        let (gate, leases) = self.gate_keys(tag);
        let watch = self.wakers.watch(leases.clone());
        loop {
            // Listening before asking: a release between the answer and the
            // sleep is not missed.
            let released = watch.notify.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            match self.reserve((&gate, &leases), &ask, &name).await? {
                Answer::Go(wait, backed_off) => {
                    let mut lease = self.lease((leases, gate), name, backed_off);
                    // A zero sleep would still wait for the timer's next
                    // millisecond tick.
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    lease.started = std::time::Instant::now();
                    return Ok(Ok(lease));
                }
                Answer::SlowDown(wait) => return Ok(Err(wait)),
                Answer::Full(expires) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Ok(Err(ask.delay.max(Duration::from_secs(1))));
                    }
                    let until = (now + expires.min(FULL_RECHECK)).min(deadline);
                    let _ = tokio::time::timeout_at(until, released).await;
                }
            }
        }
    }

    /// A lease taken by the script, renewed every third of its life.
    fn lease(
        self: &Arc<Self>,
        (key, gate): (String, String),
        name: String,
        backed_off: bool,
    ) -> Lease {
        let (store, k, n) = (self.clone(), key.clone(), name.clone());
        let every = (self.config.lease / 3).max(Duration::from_millis(100));
        let renewal = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let mut conn = store.connection();
                let mut call = scripts().renew.key(&k);
                call.arg(&n).arg(micros(store.config.lease));
                let _ = store
                    .run(StoreOp::Gate, async move {
                        call.invoke_async::<i64>(&mut conn).await
                    })
                    .await;
            }
        })
        .abort_handle();
        Lease {
            store: self.clone(),
            key,
            gate,
            name,
            started: std::time::Instant::now(),
            renewal,
            backed_off,
        }
    }

    /// An upstream said "slow down" to a request through `tag`: with a number,
    /// nothing starts there before it has passed, for every proxy; without,
    /// the spacing doubles (up to `max_delay`).
    pub async fn slow_down(
        &self,
        tag: &str,
        seconds: Option<Duration>,
        delay: Duration,
        max_delay: Option<Duration>,
    ) -> Result<(), StoreError> {
        let never = micros(crate::politeness::NEVER);
        let (gate, _) = self.gate_keys(tag);
        let mut conn = self.connection();
        let mut call = scripts().slow_down.key(&gate);
        call.arg(seconds.map_or(-1, |s| micros(s).min(never) as i64))
            .arg(micros(delay).min(never))
            .arg(max_delay.map_or(0, |d| micros(d).min(never)))
            .arg(never);
        self.run(StoreOp::SlowDown, async move {
            call.invoke_async::<i64>(&mut conn).await
        })
        .await
        .map(drop)
    }

    /// An upstream answered normally through `tag`: the back-off ends.
    pub async fn recovered(&self, tag: &str) -> Result<(), StoreError> {
        let (gate, _) = self.gate_keys(tag);
        let mut conn = self.connection();
        self.run(StoreOp::SlowDown, async move {
            redis::cmd("HDEL")
                .arg(&gate)
                .arg("bo")
                .query_async::<i64>(&mut conn)
                .await
        })
        .await
        .map(drop)
    }
}
