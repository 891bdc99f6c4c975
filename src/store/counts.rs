//! A bot's limits counted across the fleet (`concurrency`, `rate`,
//! `daily_requests_per_server` in fleet mode): one server-side script per
//! count taken, on the store's own clock (`TIME`), so three proxies give a
//! bot its budget once, not three times.
//!
//! Per count (a bot at a server, or a bot everywhere for `rate`), a sorted
//! set holds one lease per request counted and not yet started (or, for
//! `concurrency`, still running), scored by when it expires; what has
//! started is kept beside it:
//! - [`Window::Running`] (`concurrency`): nothing; a request counts while its
//!   lease is held;
//! - [`Window::Log`] (`rate`): a sorted set of starts scored by when they
//!   leave the window (exact, at most the rate's count of them);
//! - [`Window::Day`] (`daily_requests_per_server`): a hash of 5-minute
//!   buckets of the store's clock and their starts; a bucket stops counting a
//!   day after it ends, as in this process's ledger (at most 289 fields).
//!
//! `TAKE` drops what has expired, then counts the request (a lease) if the
//! count is under its bound, else answers when room comes: the time a start
//! leaves the window, or "when a request ends" (a lease released: the
//! wake-up channel, with a recheck as a safety net). `START` turns a lease
//! into a start, atomically; `RELEASE` gives a lease back. Leases are
//! renewed while held, re-added by a store that lost them (it restarted),
//! and expire with a proxy that died.
//!
//! A value another client wrote that is no number in bounds is removed; the
//! request that found it is told to slow down (counted as junk, logged).

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use tokio::time::Instant;

use super::batch::{Group, Item};
use super::{micros, Store, StoreError};
use crate::metrics::{StoreEvent, StoreOp};

/// What a count keeps of the requests that started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// Nothing: a request counts while it runs (`concurrency`).
    Running,
    /// Each start, for this long (`rate`).
    Log(Duration),
    /// Starts per 5-minute bucket, for a day after the bucket ends
    /// (`daily_requests_per_server`).
    Day,
}

impl Window {
    fn code(self) -> &'static str {
        match self {
            Window::Running => "n",
            Window::Log(_) => "l",
            Window::Day => "b",
        }
    }

    fn length(self) -> Duration {
        match self {
            Window::Running => Duration::ZERO,
            Window::Log(per) => per,
            Window::Day => Duration::from_secs(DAY),
        }
    }
}

const DAY: u64 = 86_400;
/// Seconds per bucket of a daily count.
const BUCKET: u64 = 300;

/// What a request asks of one count.
#[derive(Clone, Copy, Debug)]
pub struct CountAsk<'a> {
    /// Whose count (`bc/<bot>/<server>`, `br/<bot>`, `bd/<bot>/<server>`).
    pub tag: &'a str,
    /// Counted at most (requests running, or starts in the window).
    pub max: u32,
    pub window: Window,
}

const TAKE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local max, lease, kind = tonumber(ARGV[1]), tonumber(ARGV[3]), ARGV[4]
local window, bucket = tonumber(ARGV[5]), tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local bad = redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', now + 2 * lease), '+inf')
local held = redis.call('ZCARD', KEYS[1])
local starts, ends = 0, {}
if kind == 'l' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  bad = bad + redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. string.format('%.0f', now + window), '+inf')
  starts = redis.call('ZCARD', KEYS[2])
elseif kind == 'b' then
  local h = redis.call('HGETALL', KEYS[2])
  local top = math.floor(now / 1000000 / bucket)
  for i = 1, #h, 2 do
    local b, n = tonumber(h[i]), tonumber(h[i + 1])
    if b == nil or n == nil or b ~= b or n ~= n or b < 0 or b > top or b ~= math.floor(b) or n < 0 or n > 1000000000 then
      redis.call('HDEL', KEYS[2], h[i])
      bad = bad + 1
    else
      local expiry = ((b + 1) * bucket) * 1000000 + window
      if expiry <= now then
        redis.call('HDEL', KEYS[2], h[i])
      else
        starts = starts + n
        ends[#ends + 1] = {expiry, n}
      end
    end
  end
end
if bad > 0 then return {3, 1000000} end
if held + starts < max then
  redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], math.floor(lease / 1000) + 1000)
  return {1, 0}
end
local need = held + starts - max + 1
if need > starts then return {0, -1} end
if kind == 'l' then
  local e = redis.call('ZRANGE', KEYS[2], need - 1, need - 1, 'WITHSCORES')
  return {0, tonumber(e[2]) - now}
end
table.sort(ends, function(a, b) return a[1] < b[1] end)
local freed = 0
for _, e in ipairs(ends) do
  freed = freed + e[2]
  if freed >= need then return {0, e[1] - now} end
end
return {0, -1}
"#;

/// Turns a batch of leases (`ARGV[4..]`, their names) into starts (`rate`,
/// `daily_requests_per_server`), counted even if the store lost a lease (it
/// restarted): the request started.
const START: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local kind, window, bucket = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = #ARGV - 3
for i = 4, #ARGV do redis.call('ZREM', KEYS[1], ARGV[i]) end
if kind == 'l' then
  for i = 4, #ARGV do redis.call('ZADD', KEYS[2], string.format('%.0f', now + window), ARGV[i]) end
  redis.call('PEXPIRE', KEYS[2], math.floor(window / 1000) + 1000)
elseif kind == 'b' then
  redis.call('HINCRBY', KEYS[2], string.format('%.0f', math.floor(now / 1000000 / bucket)), n)
  redis.call('PEXPIRE', KEYS[2], math.floor(window / 1000) + bucket * 1000 + 1000)
end
return n
"#;

/// Renews a lease; re-adds it when the store lost it (it restarted): the
/// request is still counted.
const RENEW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease), ARGV[1])
if redis.call('PTTL', KEYS[1]) < math.floor(lease / 1000) + 1000 then
  redis.call('PEXPIRE', KEYS[1], math.floor(lease / 1000) + 1000)
end
return 1
"#;

/// Gives a batch of leases back (`ARGV[2..]`, their names), waking the
/// fleet's waiters on this count (`ARGV[1]`: the channel).
const RELEASE: &str = r#"
local gone = 0
for i = 2, #ARGV do gone = gone + redis.call('ZREM', KEYS[1], ARGV[i]) end
if gone > 0 then redis.call('PUBLISH', ARGV[1], KEYS[1]) end
return gone
"#;

struct Scripts {
    take: Script,
    start: Script,
    renew: Script,
    release: Script,
}

fn scripts() -> &'static Scripts {
    static SCRIPTS: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        take: Script::new(TAKE),
        start: Script::new(START),
        renew: Script::new(RENEW),
        release: Script::new(RELEASE),
    })
}

/// `TAKE`'s answer.
enum Taken {
    /// Counted: the lease is held.
    Counted,
    /// Full: a start leaves the window after this long.
    Room(Duration),
    /// Full of requests counted and not started: room comes when one of
    /// them is given back.
    WhenReleased,
    /// The count held junk (removed): slow down.
    Junk,
}

/// The longest a waiter sleeps without a wake-up before asking again: the
/// safety net for a release message lost on the way.
const RECHECK: Duration = Duration::from_secs(2);

/// A request counted across the fleet. Dropped before [`Counted::started`]
/// (or, for [`Window::Running`], whenever dropped), it is given back.
pub struct Counted {
    store: Arc<Store>,
    held: String,
    starts: String,
    name: String,
    window: Window,
    /// The lease is still held (not turned into a start, not released).
    holding: bool,
    renewal: super::renew::Renewal,
}

impl Counted {
    /// The request starts: a `rate` or daily count keeps its start; a
    /// running count keeps its lease until the request ends.
    pub fn started(&mut self) {
        if self.window == Window::Running || !self.holding {
            return;
        }
        self.holding = false;
        self.store.renewals.stop(&mut self.renewal);
        let group = Group {
            script: &scripts().start,
            keys: vec![self.held.clone(), self.starts.clone()],
            args: vec![
                self.window.code().into(),
                micros(self.window.length()).to_string(),
                BUCKET.to_string(),
            ],
            op: StoreOp::Limit,
        };
        self.store.leave(group, self.item());
    }

    fn item(&self) -> Item {
        Item {
            name: self.name.clone(),
            started: None,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.store.renewals.stop(&mut self.renewal);
        if self.holding {
            let group = Group {
                script: &scripts().release,
                keys: vec![self.held.clone()],
                args: vec![self.store.channel()],
                op: StoreOp::Limit,
            };
            self.store.leave(group, self.item());
        }
    }
}

impl Store {
    /// A count's keys for its tag: the leases and the starts.
    fn count_keys(&self, tag: &str) -> (String, String) {
        (self.key(tag, "held"), self.key(tag, "starts"))
    }

    /// Gives the lease `name` back at once, after a `TAKE` whose answer was
    /// lost (on the same connection, so after it), and again while the store
    /// does not answer. A `TAKE` the store ran later still, its script
    /// loaded afresh, leaves a lease that expires unrenewed after
    /// `[store] lease`.
    fn release_count(self: &Arc<Self>, held: &str, name: &str) {
        let group = Group {
            script: &scripts().release,
            keys: vec![held.to_string()],
            args: vec![self.channel()],
            op: StoreOp::Limit,
        };
        let item = Item {
            name: name.to_string(),
            started: None,
        };
        self.at_once(RELEASE, group, item);
    }

    /// One run of `TAKE`.
    async fn take_once(
        &self,
        (held, starts): (&str, &str),
        ask: &CountAsk<'_>,
        name: &str,
    ) -> Result<Taken, StoreError> {
        let mut conn = self.connection();
        let mut call = scripts().take.key(held);
        call.key(starts)
            .arg(ask.max)
            .arg(name)
            .arg(micros(self.config.lease))
            .arg(ask.window.code())
            .arg(micros(ask.window.length()))
            .arg(BUCKET);
        let (what, us): (i64, i64) = self
            .run(
                StoreOp::Limit,
                async move { call.invoke_async(&mut conn).await },
            )
            .await?;
        match what {
            1 => Ok(Taken::Counted),
            0 if us < 0 => Ok(Taken::WhenReleased),
            0 => Ok(Taken::Room(Duration::from_micros(us.unsigned_abs()))),
            3 => Ok(Taken::Junk),
            _ => Err(StoreError::Shape("the count script's verdict")),
        }
    }

    /// Counts a request across the fleet, waiting (until `deadline`) for
    /// room: `Ok(Ok)` counted; `Ok(Err(retry_after))` when room would come
    /// later than the deadline (or the count held junk: removed, counted);
    /// `Err` when the store does not answer.
    pub async fn count(
        self: &Arc<Self>,
        ask: CountAsk<'_>,
        deadline: Instant,
    ) -> Result<Result<Counted, Duration>, StoreError> {
        let (held, starts) = self.count_keys(ask.tag);
        let watch = self.wakers.watch(held.clone());
        loop {
            let name = self.lease_name();
            let released = watch.notify.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let now = Instant::now();
            match self.take_once((&held, &starts), &ask, &name).await {
                Ok(Taken::Counted) => return Ok(Ok(self.counted(held, starts, name, ask.window))),
                Ok(Taken::Room(room)) if now + room > deadline => return Ok(Err(room)),
                Ok(Taken::Room(room)) => {
                    // A start leaves the window then, or a request ends before.
                    let _ = tokio::time::timeout_at(now + room, released).await;
                }
                Ok(Taken::WhenReleased) => {
                    if now >= deadline {
                        return Ok(Err(Duration::from_secs(1)));
                    }
                    let until = (now + RECHECK).min(deadline);
                    let _ = tokio::time::timeout_at(until, released).await;
                    if Instant::now() >= deadline {
                        return Ok(Err(Duration::from_secs(1)));
                    }
                }
                Ok(Taken::Junk) => {
                    self.metrics.store_event(StoreEvent::Junk);
                    tracing::warn!(count = %ask.tag, "the fleet store held values that are no numbers in bounds in a bot's count (written by another client?): removed; this request slows down");
                    return Ok(Err(Duration::from_secs(1)));
                }
                Err(e) => {
                    // Its lease may have been taken: given back.
                    self.release_count(&held, &name);
                    return Err(e);
                }
            }
        }
    }

    /// A lease just taken, renewed every third of its life and at once when
    /// the store restarts (re-added if the store lost it).
    fn counted(
        self: &Arc<Self>,
        held: String,
        starts: String,
        name: String,
        window: Window,
    ) -> Counted {
        let (k, n) = (held.clone(), name.clone());
        let renewal = self.renewing(StoreOp::Limit, move |store| {
            let mut call = scripts().renew.key(&k);
            call.arg(&n).arg(micros(store.config.lease));
            call
        });
        Counted {
            store: self.clone(),
            held,
            starts,
            name,
            window,
            holding: true,
            renewal,
        }
    }
}
