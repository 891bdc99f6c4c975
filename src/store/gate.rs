//! The shared politeness gate: one server-side script per request start, on the
//! store's own clock (`TIME`), so the proxies' clocks do not matter.
//!
//! Per machine, a hash holds the latest start reserved (`last`) and the
//! latest real start (`st`), and, for each site on it that asked to be
//! slowed down (named as [`SlowedAs`] says: a web site by its host, a
//! small-web server by `host:port`), the "not before" of its `44 N`, its
//! `Retry-After` or its back-off (`nb/SITE`), its back-off factor after a
//! bare `44` (`bo/SITE`) and its own latest start (`ls/SITE`): a site's
//! slow-down holds back that site only, waited out before a start is
//! reserved for it (answer 5: ask again then), so it never pushes its
//! machine's next start; and looked at again by `START`, so one that came
//! while a reserved start slept holds it too. (`bo` and `nb` without a server:
//! written by proxies from before, still honoured.) A sorted set holds one
//! lease per request in flight, scored by when it expires. A reservation is spaced from both
//! `last` and `st`: a start recorded on a gate whose reservations had
//! expired (a request that slept past its plan) still counts.
//! The script drops expired leases (a proxy that died), then either
//! - reserves the next start (`last` + this request's spacing, not before `nb`)
//!   and answers how long to sleep until then, taking a lease;
//! - answers "full" when the leases reach the concurrency cap, with the time
//!   until the earliest lease expires: the waiter sleeps until a lease is
//!   released (the wake-up channel) or that time;
//! - answers "slow down" when the start would be more than `max_wait` away.
//!
//! A request in report mode asks as any other (with the proxy's own spacing
//! instead of robots.txt's): a server's slow-down and the concurrency cap
//! hold it too.
//!
//! A request that slept until its reserved start asks once more before it
//! starts (`START`): its lease must still be there, its site's not-before
//! past (else the lease is given back and it asks again), and the server's
//! latest real start (`st`) at least this request's spacing ago; else it
//! sleeps the rest. A proxy that woke late (a busy machine, a store reconnecting) thus
//! never passes its lateness on to the starts reserved after it. `START` and
//! a reservation that starts at once record their start in `st` and `last`.
//! Releasing a lease also moves `last` to the request's real start when that
//! was later (`RELEASE`). Releases go in batches (`batch`): one call per
//! gate for the leases given back there in the last 2 ms; it wakes the fleet
//! only when a reservation found the cap full since the last wake-up.
//!
//! Reservations at one gate that arrive while one is out ride together
//! (`ride`): one script call, looping over their names in the order they
//! came, each with its own answer. A reservation that finds the cap full
//! takes a ticket in the gate's line; with room, the cap goes to the waiters
//! still asking in ticket order, across the fleet (`LEAVE` takes out one
//! that stopped, keeping its ticket for its retry when it names a place).
//! All arithmetic is on microseconds below 2^53 (Lua
//! numbers are doubles): the caller caps every duration at `NEVER`.
//!
//! What another client may have written into these keys is checked: a value
//! that is no number in bounds (`nan`, `inf`, negative, text) fails closed:
//! the request is told to slow down and the gate is reset to "a start just
//! now" (counted, logged).
//!
//! A store that loses its data (a restart without persistence, a failover
//! that drops writes) must not let a server be asked early
//! (docs/architecture.md, "Fleet mode"):
//! - while the store is younger than a server's spacing (or the time the
//!   fleet needs to re-assert its running requests, if longer), a start there
//!   is reserved no earlier than the store's birth plus that time: every start
//!   made before it, by any proxy, was at most at its birth;
//! - the same from the last time this proxy's health check found the store
//!   broken (`Store::since_break`: no answer, a restart, another master): a
//!   replica promoted in a failover is old, but may lack the writes its
//!   master made last, all made before the master stopped answering. That
//!   holds if every proxy's health check sees the master gone before its
//!   replica is promoted: the failover's detection time
//!   (`cluster-node-timeout`, Sentinel's `down-after-milliseconds`) must be
//!   longer than a health check's period plus `[store] timeout`;
//! - a request that slept until its reserved start checks that the store
//!   still holds its lease before starting (`START`); if not, it asks again;
//!   if it does, it still starts no earlier than the break's rule above;
//! - a lease renewal re-adds a lease the store lost, with its start, at once
//!   when the proxy sees the store's run id change;
//! - a reservation whose call passed its deadline is taken back (`CANCEL`),
//!   so a call that ran late inside the store leaves no lease behind.

use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use tokio::time::Instant;

use super::batch::{Group, Item};
use super::{micros, Store, StoreError};
use crate::metrics::{StoreEvent, StoreOp};

/// What a request asks the shared gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GateAsk {
    /// This request's spacing (its bot's Crawl-delay, clamped).
    pub delay: Duration,
    /// The longest spacing any bot asks for here: the gate is kept that long.
    pub hold: Duration,
    pub max_wait: Duration,
    pub max_delay: Option<Duration>,
    pub concurrency: usize,
}

/// Whose own slow-down holds a request at a gate, as the gate's fields name
/// it: its site (a web site's host, a small-web server's `host:port`), and
/// the name a proxy of the previous version kept the same slow-down under,
/// when it differs (a web site's `host:port`, this request's port): read
/// and written too, so a fleet mid-upgrade holds the site for both.
#[derive(Clone, Copy, Debug)]
pub struct SlowedAs<'a> {
    pub site: &'a str,
    pub legacy: Option<&'a str>,
}

impl SlowedAs<'_> {
    fn legacy(&self) -> &str {
        self.legacy.unwrap_or("")
    }
}

/// The reservations that ride together (`ride`): same keys, same ask.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Ride {
    gate: String,
    leases: String,
    /// The site asking: its own slow-down holds it.
    server: String,
    /// The previous version's name for it ("" when none).
    legacy: String,
    ask: GateAsk,
}

/// The reservations at one gate waiting on one another's call.
pub(super) type GateRides = super::ride::Rides<Ride, Asking, Answer>;

/// One reservation riding: its lease's name, how long it may wait, and its
/// name in the gate's line.
pub(super) type Asking = (String, Duration, String);

/// The most reservations one call carries.
const RIDERS: usize = 128;

const RESERVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local delay, cap = tonumber(ARGV[1]), tonumber(ARGV[2])
local lease, hold, max_delay, never = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local warm = tonumber(ARGV[7])
local broke = tonumber(ARGV[8])
-- The site asking (a web site's host, a small-web server's host:port): its
-- own slow-down, kept in fields of its gate named after it; and the name a
-- proxy of the previous version kept it under (a web site's host:port for
-- this request's port; empty when the same), read and written too.
local srv, old = ARGV[9], ARGV[10]
-- The line (KEYS[5]: each waiter's ticket), the waiters still asking
-- (KEYS[6]: until when, ARGV[11] from each asking) and the places kept for
-- waiters that left (KEYS[7]: until when): a cap with room goes first to the
-- waiters still asking whose tickets are older, across the fleet.
local alive_for = tonumber(ARGV[11])
local function num(v, top)
  local n = tonumber(v)
  if n == nil or n ~= n or n < 0 or n > top then return nil end
  return n
end
local function fmt(n) return string.format('%.0f', n) end
-- Read once per call; each reservation below works on these and the
-- writes go out once at the end.
local held, bad = redis.call('ZCARD', KEYS[2]), 0
if held > 0 then
  held = held - redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  bad = redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. fmt(now + 2 * never), '+inf')
  held = held - bad
end
local cancels = redis.call('EXISTS', KEYS[3]) == 1
-- Waiters no longer asking, with no place kept, leave the line; so do
-- places kept past their time.
if redis.call('EXISTS', KEYS[5]) == 1 then
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)) do
    redis.call('ZREM', KEYS[6], m)
    if not redis.call('ZSCORE', KEYS[7], m) then redis.call('ZREM', KEYS[5], m) end
  end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now)) do
    redis.call('ZREM', KEYS[7], m)
    if not redis.call('ZSCORE', KEYS[6], m) then redis.call('ZREM', KEYS[5], m) end
  end
end
-- How many waiters still asking hold older tickets than `waiter`'s (all
-- of them, when it has none yet).
local function ahead_of(waiter)
  local mine = tonumber(redis.call('ZSCORE', KEYS[5], waiter))
  if not mine then return redis.call('ZCARD', KEYS[6]) end
  local n = 0
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(' .. fmt(mine))) do
    local a = tonumber(redis.call('ZSCORE', KEYS[6], m))
    if a and a > now then n = n + 1 end
  end
  return n
end
-- In line: a ticket (its old one, if it has one: a kept place), asking.
local tick, lined = 0, false
local function enlist(waiter)
  if not redis.call('ZSCORE', KEYS[5], waiter) then
    tick = tick + 1
    redis.call('ZADD', KEYS[5], fmt(now + tick), waiter)
  end
  redis.call('ZADD', KEYS[6], fmt(now + alive_for), waiter)
  redis.call('ZREM', KEYS[7], waiter)
  lined = true
end
local function forget(waiter)
  redis.call('ZREM', KEYS[5], waiter)
  redis.call('ZREM', KEYS[6], waiter)
  redis.call('ZREM', KEYS[7], waiter)
end
local g = redis.call('HMGET', KEYS[1], 'last', 'bo', 'nb', 'ra', 'st')
local last, bo, nb = num(g[1], now + never), num(g[2], 1048576), num(g[3], now + never)
local st = num(g[5], now + never)
local function own(name)
  local s = redis.call('HMGET', KEYS[1], 'nb/' .. name, 'bo/' .. name, 'ls/' .. name)
  local nb, bo, ls = num(s[1], now + never), num(s[2], 1048576), num(s[3], now + never)
  return nb, bo, ls, (s[1] and not nb) or (s[2] and not (bo and bo >= 1)) or (s[3] and not ls)
end
local function later(a, b) if a and b then return math.max(a, b) end return a or b end
local snb, sbo, sls, sjunk = own(srv)
if old ~= '' then
  -- The two names' holds together: the later not-before, the larger
  -- back-off from the later start.
  local onb, obo, ols, ojunk = own(old)
  snb, sbo, sls, sjunk = later(snb, onb), later(sbo, obo), later(sls, ols), sjunk or ojunk
end
local names = {srv}
if old ~= '' then names[2] = old end
local junk = bad > 0 or (g[1] and not last) or (g[2] and not (bo and bo >= 1)) or (g[3] and not nb) or (g[5] and not st)
  or sjunk
local srv_started = nil
-- A gate the store does not know (or one a renewal re-asserted): the
-- store's own age bounds its first start.
local up, ra = nil, g[4]
if not g[1] and not g[2] and not g[3] and not g[5] or ra then
  up = tonumber(string.match(redis.call('INFO', 'server'), 'uptime_in_seconds:(%d+)'))
end
local moved, started, waiting = false, false, false
local adds, soonest, first = {}, nil, nil
local gate_keep, leases_keep = 0, 0
local function one(name, max_wait, waiter)
  if cancels and redis.call('SISMEMBER', KEYS[3], name) == 1 then return 4, 0, 1 end
  if junk then
    junk = false
    redis.call('HSET', KEYS[1], 'last', fmt(now))
    redis.call('HDEL', KEYS[1], 'bo', 'nb', 'st')
    for _, n in ipairs(names) do redis.call('HDEL', KEYS[1], 'nb/' .. n, 'bo/' .. n, 'ls/' .. n) end
    redis.call('PEXPIRE', KEYS[1], math.floor(math.max(hold, delay) / 1000) + 1000)
    last, bo, nb, st, snb, sbo, sls = now, nil, nil, nil, nil, nil, nil
    return 3, math.max(delay, 1000000), 1
  end
  if held >= cap then
    if first == nil then
      local f = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
      first = tonumber(f[2]) or false
    end
    local expires = first or soonest
    if soonest and expires then expires = math.min(expires, soonest) end
    waiting = true
    enlist(waiter)
    return 0, (expires or now) - now, 1
  end
  -- Room, but older waiters still asking come first: in line, woken by
  -- the next release or their leaving (or asking again by then).
  if redis.call('ZCARD', KEYS[6]) > 0 and ahead_of(waiter) >= cap - held then
    waiting = true
    enlist(waiter)
    return 0, math.floor(alive_for / 3), 1
  end
  -- The server's own slow-down (its `44 N`, or its back-off from its last
  -- start) is waited out before a start is reserved, so it never holds
  -- back the other servers on its machine.
  local sb = sbo or 1
  local own = snb
  if sb > 1 and sls then
    local sp = math.max(delay, 1000000) * sb
    if max_delay > 0 then sp = math.min(sp, math.max(max_delay, delay)) end
    own = math.max(own or 0, sls + math.min(sp, never))
  end
  if own and own > now then
    if own - now > max_wait then return 2, own - now, sb end
    return 5, own - now, sb
  end
  -- (A gate's own `bo` and `nb`: written by proxies from before slow-downs
  -- were per server.)
  local b = bo or 1
  local spacing = delay
  if b > 1 then
    spacing = math.max(delay, 1000000) * b
    if max_delay > 0 then spacing = math.min(spacing, math.max(max_delay, delay)) end
  end
  spacing = math.min(spacing, never)
  local start = now
  if last then start = math.max(start, last + spacing) end
  if st then start = math.max(start, st + spacing) end
  if nb then start = math.max(start, nb) end
  local w = math.max(warm, spacing)
  local young = nil
  if broke < w then young = broke end
  if up and up * 1000000 < w then
    young = math.min(young or never, up * 1000000)
  elseif up and ra then
    redis.call('HDEL', KEYS[1], 'ra')
    ra = nil
  end
  if young then start = math.max(start, now - young + w) end
  local wait = start - now
  if wait > max_wait then return 2, wait, b end
  if wait == 0 then st, started = now, true end
  last, moved = start, true
  local ends = start + lease
  local keep = wait + math.max(hold, spacing)
  if nb then keep = math.max(keep, nb - now) end
  gate_keep = math.max(gate_keep, math.floor(keep / 1000) + 1000)
  leases_keep = math.max(leases_keep, math.floor((wait + lease) / 1000) + 1000)
  forget(waiter)
  adds[#adds + 1] = fmt(ends)
  adds[#adds + 1] = name
  soonest = math.min(soonest or ends, ends)
  held = held + 1
  if sb > 1 then sls, srv_started = start, start end
  return 1, wait, math.max(b, sb)
end
local out = {}
for i = 12, #ARGV - 2, 3 do
  local what, micros, b = one(ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2])
  out[#out + 1] = what
  out[#out + 1] = micros
  out[#out + 1] = b
end
if lined then
  local want = math.floor(alive_for / 1000) + 1000
  for k = 5, 6 do
    if redis.call('PTTL', KEYS[k]) < want then redis.call('PEXPIRE', KEYS[k], want) end
  end
end
if moved then
  if started then
    redis.call('HSET', KEYS[1], 'last', fmt(last), 'st', fmt(st))
  else
    redis.call('HSET', KEYS[1], 'last', fmt(last))
  end
end
for _, n in ipairs(names) do
  if srv_started then redis.call('HSET', KEYS[1], 'ls/' .. n, fmt(srv_started)) end
  if snb and snb <= now then redis.call('HDEL', KEYS[1], 'nb/' .. n) end
end
if #adds > 0 then redis.call('ZADD', KEYS[2], unpack(adds)) end
-- The times to live: long enough for the latest start reserved.
if gate_keep > 0 then
  redis.call('PEXPIRE', KEYS[1], gate_keep)
  redis.call('PEXPIRE', KEYS[2], leases_keep)
end
if waiting then redis.call('SET', KEYS[4], '1', 'PX', math.floor(lease / 1000) + 1000) end
return out
"#;

/// Renews a running request's lease; re-adds it, with its start, when the
/// store lost it (a restart): the request is still running and still counts
/// against the cap, and the next start is still spaced from it. Marks the
/// gate `ra` (re-asserted), so reservations there keep the warm-up.
/// `ARGV[3]`: microseconds since the request started; `ARGV[4]`: how long the
/// gate is kept.
const RENEW: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local lease, hold = tonumber(ARGV[2]), tonumber(ARGV[4])
local added = redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease), ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < math.floor(lease / 1000) + 1000 then
  redis.call('PEXPIRE', KEYS[1], math.floor(lease / 1000) + 1000)
end
if added == 1 then
  local started = now - tonumber(ARGV[3])
  local last = tonumber(redis.call('HGET', KEYS[2], 'last'))
  if not last or started > last then
    redis.call('HSET', KEYS[2], 'last', string.format('%.0f', started))
  end
  local st = tonumber(redis.call('HGET', KEYS[2], 'st'))
  if not st or started > st then
    redis.call('HSET', KEYS[2], 'st', string.format('%.0f', started))
  end
  redis.call('HSET', KEYS[2], 'ra', '1')
  if redis.call('PTTL', KEYS[2]) < math.floor(hold / 1000) + 1000 then
    redis.call('PEXPIRE', KEYS[2], math.floor(hold / 1000) + 1000)
  end
end
return added
"#;

/// The last word before a request that slept starts: `-1` when the store no
/// longer holds its lease (it restarted: ask again); `-2` when its site
/// asked to be slowed down while it slept (`nb/` of `ARGV[7]`, or of
/// `ARGV[8]`, the previous version's name, when not empty; a junk one
/// counts): its lease is given back (waking the fleet as a release does,
/// `ARGV[9]`: the channel) and it asks again, to be held or told to slow
/// down; else how long to sleep
/// still, so that this start is at least `ARGV[2]` after the server's latest
/// real start (`st`); `0`: start now (recorded in `st` and `last`). A junk
/// `st` (another client's write) reads as a start just now: fail closed.
/// The gate is kept at least `ARGV[6]` (the longest spacing asked here)
/// after a start it records: a request that slept longer than its
/// reservation planned (the break's rule) may find the gate expired, and
/// must not leave a start without a time to live, nor one the next
/// reservation cannot see.
const START: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then return -1 end
local delay, never = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 7, 8 do
  if ARGV[i] ~= '' then
    local v = redis.call('HGET', KEYS[1], 'nb/' .. ARGV[i])
    local nb = tonumber(v)
    if v and (nb == nil or nb ~= nb or nb < 0 or nb > now + never or nb > now) then
      redis.call('ZREM', KEYS[2], ARGV[1])
      if redis.call('DEL', KEYS[3]) == 1 then redis.call('PUBLISH', ARGV[9], KEYS[2]) end
      return -2
    end
  end
end
local broke, warm, hold = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local w = math.max(warm, delay)
if broke < w then return math.max(w - broke, 1) end
local function record()
  redis.call('HSET', KEYS[1], 'st', string.format('%.0f', now))
  local last = tonumber(redis.call('HGET', KEYS[1], 'last'))
  if not last or now > last then redis.call('HSET', KEYS[1], 'last', string.format('%.0f', now)) end
  local keep = math.floor(math.max(hold, delay) / 1000) + 1000
  if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
end
local v = redis.call('HGET', KEYS[1], 'st')
local st = tonumber(v)
if v and (st == nil or st ~= st or st < 0 or st > now + never) then
  record()
  return math.max(delay, 1)
end
if st and now < st + delay then return st + delay - now end
record()
return 0
"#;

/// Takes back reservations the proxy gave up on (`ARGV[3..]`: their
/// names): each one's lease if the reservation ran, else a mark (kept
/// `ARGV[2]` ms) that makes it do nothing if it runs later. Wakes the fleet
/// (`ARGV[1]`: the channel) when a lease went.
const CANCEL: &str = r#"
local gone = 0
for i = 3, #ARGV do
  if redis.call('ZREM', KEYS[1], ARGV[i]) == 1 then
    gone = gone + 1
  else
    redis.call('SADD', KEYS[2], ARGV[i])
    redis.call('PEXPIRE', KEYS[2], ARGV[2])
  end
end
if gone > 0 then redis.call('PUBLISH', ARGV[1], KEYS[1]) end
return gone
"#;

/// Releases a batch of leases at one gate (`ARGV[2..]`: each lease's name,
/// then microseconds since its request started, on the proxy's monotonic
/// clock), and moves `last` to the latest actual start when it was later
/// than reserved (a proxy woke late): the next start is spaced from when the
/// server really saw it. Wakes the fleet (`ARGV[1]`: the channel) only when
/// a reservation found the cap full since the last wake-up (`KEYS[3]`).
const RELEASE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local latest, gone = nil, 0
for i = 2, #ARGV - 1, 2 do
  local started = now - tonumber(ARGV[i + 1])
  if not latest or started > latest then latest = started end
  gone = gone + redis.call('ZREM', KEYS[1], ARGV[i])
end
local last = tonumber(redis.call('HGET', KEYS[2], 'last'))
if last and latest and latest > last then
  redis.call('HSET', KEYS[2], 'last', string.format('%.0f', latest))
end
if gone > 0 and redis.call('DEL', KEYS[3]) == 1 then redis.call('PUBLISH', ARGV[1], KEYS[1]) end
return gone
"#;

/// An upstream's "slow down", for the site `ARGV[5]` only (a web site's
/// host, a small-web server's host:port; and `ARGV[6]`, the name a proxy of
/// the previous version reads it under, when not empty): its own `nb/` (not
/// before) or `bo/` (back-off, spaced from its own latest start `ls/`) in
/// its gate. A back-off also holds the site until its doubled spacing from
/// now (`nb/`), so a request that reserved its start before it came is held
/// when it wakes (`START`).
const SLOW_DOWN: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local seconds, delay, max_delay, never = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local names = {ARGV[5]}
if ARGV[6] ~= '' then names[2] = ARGV[6] end
-- Holds each name until `until_` at least; how long the latest hold lasts.
local function hold(until_)
  local latest = until_
  for _, n in ipairs(names) do
    local nb = until_
    local old = tonumber(redis.call('HGET', KEYS[1], 'nb/' .. n))
    if old and old == old and old <= now + never then nb = math.max(nb, old) end
    redis.call('HSET', KEYS[1], 'nb/' .. n, string.format('%.0f', nb))
    latest = math.max(latest, nb)
  end
  return latest - now
end
local keep
if seconds >= 0 then
  keep = hold(now + math.min(seconds, never))
else
  local bo = tonumber(redis.call('HGET', KEYS[1], 'bo/' .. names[1])) or 1
  if not (bo == bo and bo >= 1 and bo <= 1048576) then bo = 1 end
  if not (max_delay > 0 and delay * bo >= max_delay) and bo < 1048576 then bo = bo * 2 end
  local sp = math.max(delay, 1000000) * bo
  if max_delay > 0 then sp = math.min(sp, math.max(max_delay, delay)) end
  sp = math.min(sp, never)
  for _, n in ipairs(names) do
    redis.call('HSET', KEYS[1], 'bo/' .. n, bo)
    if not tonumber(redis.call('HGET', KEYS[1], 'ls/' .. n)) then
      redis.call('HSET', KEYS[1], 'ls/' .. n, string.format('%.0f', now))
    end
  end
  keep = math.max(hold(now + sp), math.min(math.max(delay, 1000000) * bo, never))
end
local ttl = redis.call('PTTL', KEYS[1])
local want = math.floor(keep / 1000) + 1000
if ttl < want then redis.call('PEXPIRE', KEYS[1], want) end
return 1
"#;

/// Waiters in a gate's line that stopped asking (`ARGV[4..]`: their names;
/// their clients left, or their bounds passed): no longer counted ahead of
/// anyone; each one's ticket kept `ARGV[3]` µs for its retry (0: dropped).
/// Wakes the fleet (`ARGV[1]`: the channel, `ARGV[2]`: the leases' key) when
/// a waiter still asking left and someone waits: those behind may go now.
const LEAVE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local keep, left = tonumber(ARGV[3]), 0
for i = 4, #ARGV do
  left = left + redis.call('ZREM', KEYS[2], ARGV[i])
  if keep > 0 and redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[3], string.format('%.0f', now + keep), ARGV[i])
  else
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('ZREM', KEYS[3], ARGV[i])
  end
end
if keep > 0 then
  local want = math.floor(keep / 1000) + 1000
  for _, k in ipairs({KEYS[1], KEYS[3]}) do
    if redis.call('PTTL', k) < want then redis.call('PEXPIRE', k, want) end
  end
end
if left > 0 and redis.call('DEL', KEYS[4]) == 1 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return left
"#;

/// Scripts are sent by hash and loaded on first use (`EVALSHA`, then `EVAL`).
struct Scripts {
    reserve: Script,
    start: Script,
    renew: Script,
    release: Script,
    cancel: Script,
    slow_down: Script,
    leave: Script,
}

fn scripts() -> &'static Scripts {
    static SCRIPTS: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        reserve: Script::new(RESERVE),
        start: Script::new(START),
        renew: Script::new(RENEW),
        release: Script::new(RELEASE),
        cancel: Script::new(CANCEL),
        slow_down: Script::new(SLOW_DOWN),
        leave: Script::new(LEAVE),
    })
}

/// The gate's answer to one request.
#[derive(Clone, Copy, Debug)]
pub(super) enum Answer {
    /// Start after sleeping this long; the lease is taken. With whether the
    /// server's spacing is backed off (an upstream `44` without a number).
    Go(Duration, bool),
    /// The cap is full: look again when a lease is released, at the latest after this.
    Full(Duration),
    /// The start would be this far away: more than `max_wait`.
    SlowDown(Duration),
    /// The server's own slow-down lets it start no sooner than this: ask
    /// again then (nothing was reserved).
    NotBefore(Duration),
    /// The gate held junk (reset now): slow down this long.
    Junk(Duration),
}

/// A reservation slept on, or whose call is out: taken back (`CANCEL`) when
/// dropped still held.
struct Reserved<'a> {
    store: &'a Arc<Store>,
    leases: &'a str,
    name: &'a str,
    held: bool,
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        // (A runtime that is itself ending has no place for the call.)
        if self.held && tokio::runtime::Handle::try_current().is_ok() {
            self.store.cancel(self.leases, self.name);
        }
    }
}

/// A reservation making its own call (it found none out at its gate): hands
/// on the riders that queued behind it when done; taken back if dropped
/// while its call is out (the client left: it may still run in the store).
struct Leading<'a> {
    out: Reserved<'a>,
    key: &'a Ride,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        // (Then `out` takes the reservation back if its call was still out.)
        let store = self.out.store;
        if store.rides.hand_on(self.key) && tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(store.clone().send_rides(self.key.clone()));
        }
    }
}

/// Where a request that slept until its reserved start stands.
enum Turn {
    /// It starts now.
    Start,
    /// The store lost its lease (it restarted): ask again.
    Lost,
    /// Its site asked to be slowed down while it slept: the lease is given
    /// back; ask again (to be held, or told to slow down).
    Held,
    /// A start ahead ran late; the rest of the wait (this long) passes the
    /// deadline: slow down.
    Late(Duration),
}

/// What `START` answers a request that slept until its reserved start.
enum Starting {
    /// Sleep this much longer (zero: it started).
    After(Duration),
    /// The store no longer holds its lease (it restarted).
    Lost,
    /// Its site asked to be slowed down meanwhile: its lease was given back.
    Held,
}

impl Ride {
    fn slowed_as(&self) -> SlowedAs<'_> {
        SlowedAs {
            site: &self.server,
            legacy: (!self.legacy.is_empty()).then_some(self.legacy.as_str()),
        }
    }
}

/// The longest a waiter for a full cap sleeps without a wake-up before asking
/// again: the safety net for a release message lost on the way.
const FULL_RECHECK: Duration = Duration::from_secs(2);

/// A waiter in a gate's line that has not asked for this long (its proxy
/// died) is no longer counted ahead of anyone: three of its rechecks.
const ALIVE: Duration = Duration::from_secs(6);

/// A request's name in its gate's line, while it waits there: told to the
/// store when it stops asking (`LEAVE`), its ticket kept for `keep` (its
/// place, for a retry) or dropped.
struct InLine<'a> {
    store: &'a Arc<Store>,
    waiter: &'a str,
    keep: Duration,
    /// Its gate's leases key, while it is in line (a reservation answered
    /// "full", and none has let it go since): only a request that waits
    /// pays for the copy.
    joined: Option<String>,
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        let Some(leases) = self.joined.take() else {
            return;
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let store = self.store;
        let [line, alive, kept] = store.line_keys(&leases);
        let group = Group {
            script: &scripts().leave,
            keys: vec![line, alive, kept, store.waiting_key(&leases)],
            args: vec![
                store.channel(),
                leases,
                micros(self.keep.min(super::NEVER)).to_string(),
            ],
            op: StoreOp::Gate,
        };
        let item = Item {
            name: self.waiter.to_string(),
            started: None,
        };
        store.at_once(LEAVE, group, item);
    }
}

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
    renewal: super::renew::Renewal,
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
        self.store.renewals.stop(&mut self.renewal);
        let leases = std::mem::take(&mut self.key);
        let waiting = self.store.waiting_key(&leases);
        let group = Group {
            script: &scripts().release,
            keys: vec![leases, std::mem::take(&mut self.gate), waiting],
            args: vec![self.store.channel()],
            op: StoreOp::Gate,
        };
        let item = Item {
            name: std::mem::take(&mut self.name),
            started: Some(self.started),
        };
        self.store.leave(group, item);
    }
}

impl Store {
    /// The gate's keys for a server tag: its hash and its leases.
    fn gate_keys(&self, tag: &str) -> (String, String) {
        (self.key(tag, "gate"), self.key(tag, "leases"))
    }

    /// The gate's line: tickets, waiters still asking, places kept
    /// (beside the leases: one hash tag).
    fn line_keys(&self, leases: &str) -> [String; 3] {
        ["line", "alive", "kept"].map(|k| format!("{leases}-{k}"))
    }

    /// Marks "a reservation found the cap full": a release then wakes the
    /// fleet (beside the leases: one hash tag).
    fn waiting_key(&self, leases: &str) -> String {
        format!("{leases}-waiting")
    }

    /// A reservation at a server's gate: alone, its own call at once; while
    /// another call is out there, it rides with the others asking the same
    /// in the next one (`ride`).
    async fn reserve(
        self: &Arc<Self>,
        (gate, leases): (&str, &str),
        (server, ask): (SlowedAs<'_>, &GateAsk),
        (name, waiter): (&str, &str),
    ) -> Result<Answer, StoreError> {
        // Each request's own `max_wait` (what is left of it) rides with its
        // name: the rest of the ask is the same for a bot at a server.
        let key = Ride {
            gate: gate.to_string(),
            leases: leases.to_string(),
            server: server.site.to_string(),
            legacy: server.legacy().to_string(),
            ask: GateAsk {
                max_wait: Duration::ZERO,
                ..*ask
            },
        };
        if self.rides.lead(&key) {
            return self.lead(key, ask, (name, waiter)).await;
        }
        let asking = (name.to_string(), ask.max_wait, waiter.to_string());
        let (answer, first) = self.rides.join(&key, asking);
        if first {
            tokio::spawn(self.clone().send_rides(key));
        }
        answer
            .await
            .unwrap_or(Err(StoreError::Shape("a reservation without an answer")))
    }

    /// The call of a reservation that found none out at its gate (`key`):
    /// its own, at once; the riders that queued behind it are handed on
    /// when it is back, and it is taken back if dropped while out.
    async fn lead(
        self: &Arc<Self>,
        key: Ride,
        ask: &GateAsk,
        (name, waiter): (&str, &str),
    ) -> Result<Answer, StoreError> {
        let mut leading = Leading {
            out: Reserved {
                store: self,
                leases: &key.leases,
                name,
                held: true,
            },
            key: &key,
        };
        let alone = [(name, ask.max_wait, waiter)];
        let answer = self
            .reserve_many((&key.gate, &key.leases), (key.slowed_as(), ask), &alone)
            .await
            .and_then(|mut each| each.remove(0));
        leading.out.held = false;
        answer
    }

    /// Sends the reservations queued on `key`, one call per load, until
    /// none is left. A rider that left (its client went) while its
    /// reservation was out gets it taken back, if it may have taken a lease.
    async fn send_rides(self: Arc<Self>, key: Ride) {
        loop {
            let riders = self.rides.take(&key, RIDERS);
            if riders.is_empty() {
                return;
            }
            let asks: Vec<(&str, Duration, &str)> = riders
                .iter()
                .map(|((name, max_wait, waiter), _)| (name.as_str(), *max_wait, waiter.as_str()))
                .collect();
            let answers = self
                .reserve_many((&key.gate, &key.leases), (key.slowed_as(), &key.ask), &asks)
                .await;
            for (i, ((name, _, _), rider)) in riders.into_iter().enumerate() {
                let answer = match &answers {
                    Ok(each) => each[i].clone(),
                    Err(e) => Err(e.clone()),
                };
                let leased = !matches!(
                    answer,
                    Ok(Answer::Full(_)
                        | Answer::SlowDown(_)
                        | Answer::NotBefore(_)
                        | Answer::Junk(_))
                );
                if rider.send(answer).is_err() && leased {
                    self.cancel(&key.leases, &name);
                }
            }
        }
    }

    /// One run of the reservation script on a server's keys, for the
    /// reservations `asks` (each a name, how long it may wait, and its name
    /// in the gate's line) asking the rest of `ask`; an answer for each, in
    /// order (an error for one taken back before it ran).
    async fn reserve_many(
        &self,
        (gate, leases): (&str, &str),
        (server, ask): (SlowedAs<'_>, &GateAsk),
        asks: &[(&str, Duration, &str)],
    ) -> Result<Vec<Result<Answer, StoreError>>, StoreError> {
        let never = micros(super::NEVER);
        let capped = |d: Duration| micros(d).min(never);
        let line = self.line_keys(leases);
        let mut conn = self.connection();
        let mut call = scripts().reserve.key(gate);
        call.key(leases)
            .key(self.cancelled_key(leases))
            .key(self.waiting_key(leases))
            .key(&line[0])
            .key(&line[1])
            .key(&line[2])
            .arg(capped(ask.delay))
            .arg(ask.concurrency.max(1))
            .arg(capped(self.config.lease))
            .arg(capped(ask.hold))
            .arg(ask.max_delay.map_or(0, capped))
            .arg(never)
            .arg(capped(self.reassert_within()))
            .arg(self.since_break().map_or(never, capped))
            .arg(server.site)
            .arg(server.legacy())
            .arg(capped(ALIVE));
        for (name, max_wait, waiter) in asks {
            call.arg(*name).arg(capped(*max_wait)).arg(*waiter);
        }
        let flat: Vec<i64> = self
            .run(
                StoreOp::Gate,
                async move { call.invoke_async(&mut conn).await },
            )
            .await?;
        if flat.len() != 3 * asks.len() {
            return Err(StoreError::Shape("the gate script's verdicts"));
        }
        Ok(flat
            .chunks(3)
            .map(|v| {
                let (what, micros, backoff) = (v[0], v[1], v[2]);
                let d = Duration::from_micros(micros.max(0).unsigned_abs());
                match what {
                    1 => Ok(Answer::Go(d, backoff > 1)),
                    0 => Ok(Answer::Full(d)),
                    2 => Ok(Answer::SlowDown(d)),
                    5 => Ok(Answer::NotBefore(d)),
                    3 => Ok(Answer::Junk(d)),
                    4 => Err(StoreError::Shape("a reservation taken back before it ran")),
                    _ => Err(StoreError::Shape("the gate script's verdict")),
                }
            })
            .collect())
    }

    /// Where reservations given up on are marked (beside the leases: one
    /// hash tag).
    fn cancelled_key(&self, leases: &str) -> String {
        format!("{leases}-cancelled")
    }

    /// Takes back the reservation `name` after its call failed or passed its
    /// deadline: it may still run inside the store later, and must not leave
    /// a lease no one releases. At once, on the same connection (so after
    /// the reservation, if that was sent); again while the store does not
    /// answer (a reservation the store ran just before its master died has
    /// its lease on the replica promoted after).
    fn cancel(self: &Arc<Self>, leases: &str, name: &str) {
        let group = Group {
            script: &scripts().cancel,
            keys: vec![leases.to_string(), self.cancelled_key(leases)],
            args: vec![
                self.channel(),
                // Longer than any reservation can sit in the store's queue.
                (micros(self.config.lease.max(Duration::from_secs(60))) / 1000).to_string(),
            ],
            op: StoreOp::Gate,
        };
        let item = Item {
            name: name.to_string(),
            started: None,
        };
        // Counted when sent: its answer may itself come after the deadline.
        self.metrics.store_event(StoreEvent::Cancelled);
        self.at_once(CANCEL, group, item);
    }

    /// Asks to start on the lease `name` reserved before a sleep (`START`):
    /// how much longer to sleep (zero: start now), or why it may not.
    async fn start(
        &self,
        (gate, leases): (&str, &str),
        (name, server): (&str, SlowedAs<'_>),
        (delay, hold): (Duration, Duration),
    ) -> Result<Starting, StoreError> {
        let never = micros(super::NEVER);
        let mut conn = self.connection();
        let mut call = scripts().start.key(gate);
        call.key(leases)
            .key(self.waiting_key(leases))
            .arg(name)
            .arg(micros(delay).min(never))
            .arg(never)
            .arg(self.since_break().map_or(never, |d| micros(d).min(never)))
            .arg(micros(self.reassert_within()).min(never))
            .arg(micros(hold).min(never))
            .arg(server.site)
            .arg(server.legacy())
            .arg(self.channel());
        let rest: i64 = self
            .run(
                StoreOp::Gate,
                async move { call.invoke_async(&mut conn).await },
            )
            .await?;
        Ok(match rest {
            -1 => Starting::Lost,
            -2 => Starting::Held,
            rest => Starting::After(Duration::from_micros(rest.max(0).unsigned_abs())),
        })
    }

    /// Sleeps until a reserved start, then asks the store to start (`START`)
    /// until it agrees, the lease is lost, or the rest would pass `deadline`
    /// (the lease is then given back).
    async fn sleep_to_start(
        self: &Arc<Self>,
        keys: (&str, &str),
        (name, server): (&str, SlowedAs<'_>),
        wait: Duration,
        ask: &GateAsk,
        deadline: Instant,
    ) -> Result<Turn, StoreError> {
        // Given back if this future is dropped while it sleeps (the client
        // left, the proxy shuts down): no lease is left to block the cap.
        let mut reserved = Reserved {
            store: self,
            leases: keys.1,
            name,
            held: true,
        };
        let mut rest = wait;
        while !rest.is_zero() {
            if Instant::now() + rest > deadline {
                // A start ahead ran later than this request may still wait.
                return Ok(Turn::Late(rest.max(ask.delay)));
            }
            tokio::time::sleep(rest).await;
            rest = match self
                .start(keys, (name, server), (ask.delay, ask.hold))
                .await
            {
                Ok(Starting::After(more)) => more,
                Ok(Starting::Lost) => {
                    reserved.held = false;
                    return Ok(Turn::Lost);
                }
                Ok(Starting::Held) => {
                    reserved.held = false;
                    return Ok(Turn::Held);
                }
                Err(e) => return Err(e),
            };
        }
        reserved.held = false;
        Ok(Turn::Start)
    }

    /// Waits for this request's turn at the shared gate of `tag`: `Ok(Ok)`
    /// with its lease once it may start, `Ok(Err(retry_after))` when it would
    /// wait past `max_wait`, `Err` when the store does not answer. While the
    /// cap is full it waits in the gate's line, served in order across the
    /// fleet; `place` (who asked for what, the same on every proxy) names it
    /// there, so that a request that leaves keeps its ticket for `max_wait`
    /// and the same one asked again, through any proxy, takes it back.
    pub async fn admit(
        self: &Arc<Self>,
        (tag, server): (&str, SlowedAs<'_>),
        ask: GateAsk,
        place: Option<String>,
    ) -> Result<Result<Lease, Duration>, StoreError> {
        let deadline = Instant::now() + ask.max_wait.min(super::NEVER);
        let (gate, leases) = self.gate_keys(tag);
        let watch = self.wakers.watch(leases.clone());
        let keep = place.as_ref().map_or(Duration::ZERO, |_| ask.max_wait);
        let waiter = place.unwrap_or_else(|| self.lease_name());
        let mut in_line = InLine {
            store: self,
            waiter: &waiter,
            keep,
            joined: None,
        };
        loop {
            let name = self.lease_name();
            // Listening before asking: a release between the answer and the
            // sleep is not missed.
            let released = watch.notify.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            let answer = match self
                .reserve((&gate, &leases), (server, &ask), (&name, &waiter))
                .await
            {
                Ok(answer) => answer,
                Err(e) => {
                    self.cancel(&leases, &name);
                    return Err(e);
                }
            };
            match answer {
                Answer::Go(wait, backed_off) => {
                    // Out of the line (the script took it out).
                    in_line.joined = None;
                    // A zero wait started in the script (a sleep would still
                    // wait for the timer's next millisecond tick).
                    let turn = if wait.is_zero() {
                        Turn::Start
                    } else {
                        self.sleep_to_start((&gate, &leases), (&name, server), wait, &ask, deadline)
                            .await?
                    };
                    match turn {
                        Turn::Start => {
                            return Ok(Ok(self.lease((leases, gate), name, backed_off, ask.hold)))
                        }
                        Turn::Late(rest) => return Ok(Err(rest)),
                        Turn::Lost => {
                            self.metrics.store_event(StoreEvent::LeaseLost);
                            tracing::info!(gate = %tag, "a reserved start the fleet store no longer holds (it restarted): asking again");
                        }
                        // Asked again: the site's slow-down now holds it,
                        // or it is told to slow down.
                        Turn::Held => {}
                    }
                }
                Answer::SlowDown(wait) => return Ok(Err(wait)),
                Answer::NotBefore(wait) => {
                    if Instant::now() + wait > deadline {
                        return Ok(Err(wait));
                    }
                    tokio::time::sleep(wait).await;
                }
                Answer::Junk(wait) => return Ok(Err(self.junk(tag, wait))),
                Answer::Full(expires) => {
                    if in_line.joined.is_none() {
                        in_line.joined = Some(leases.clone());
                    }
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

    /// The gate at `tag` held junk, reset by the script: counted and logged;
    /// the request slows down `wait`.
    fn junk(&self, tag: &str, wait: Duration) -> Duration {
        self.metrics.store_event(StoreEvent::Junk);
        tracing::warn!(gate = %tag, "the fleet store held values that are no numbers in bounds at this gate (written by another client?): reset; this request slows down");
        wait
    }

    /// A lease taken by the script for a request starting now, renewed every
    /// third of its life and at once when the store restarts (re-added with
    /// its start if the store lost it).
    fn lease(
        self: &Arc<Self>,
        (key, gate): (String, String),
        name: String,
        backed_off: bool,
        hold: Duration,
    ) -> Lease {
        let (k, g, n) = (key.clone(), gate.clone(), name.clone());
        let started = std::time::Instant::now();
        let never = micros(super::NEVER);
        let renewal = self.renewing(StoreOp::Gate, move |store| {
            let mut call = scripts().renew.key(&k);
            call.key(&g)
                .arg(&n)
                .arg(micros(store.config.lease))
                .arg(micros(started.elapsed()))
                .arg(micros(hold).min(never));
            call
        });
        Lease {
            store: self.clone(),
            key,
            gate,
            name,
            started,
            renewal,
            backed_off,
        }
    }

    /// An upstream said "slow down" to a request through `tag`: with a number,
    /// nothing starts there before it has passed, for every proxy; without,
    /// the spacing doubles (up to `max_delay`).
    pub async fn slow_down(
        &self,
        (tag, server): (&str, SlowedAs<'_>),
        seconds: Option<Duration>,
        delay: Duration,
        max_delay: Option<Duration>,
    ) -> Result<(), StoreError> {
        let never = micros(super::NEVER);
        let (gate, _) = self.gate_keys(tag);
        let mut conn = self.connection();
        let mut call = scripts().slow_down.key(&gate);
        call.arg(seconds.map_or(-1, |s| micros(s).min(never) as i64))
            .arg(micros(delay).min(never))
            .arg(max_delay.map_or(0, |d| micros(d).min(never)))
            .arg(never)
            .arg(server.site)
            .arg(server.legacy());
        self.run(StoreOp::SlowDown, async move {
            call.invoke_async::<i64>(&mut conn).await
        })
        .await
        .map(drop)
    }

    /// The upstream `server` answered normally through `tag`: its back-off
    /// ends (and the gate's own, from a proxy before slow-downs were per
    /// server).
    pub async fn recovered(&self, (tag, server): (&str, SlowedAs<'_>)) -> Result<(), StoreError> {
        let (gate, _) = self.gate_keys(tag);
        let mut conn = self.connection();
        let mut call = redis::cmd("HDEL");
        call.arg(&gate).arg("bo");
        for name in std::iter::once(server.site).chain(server.legacy) {
            call.arg(format!("bo/{name}")).arg(format!("ls/{name}"));
        }
        self.run(StoreOp::SlowDown, async move {
            call.query_async::<i64>(&mut conn).await
        })
        .await
        .map(drop)
    }
}
