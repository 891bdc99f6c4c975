//! Unit tests of [`super`].

use super::*;
use crate::protocol::rules::{self, Unsaid};
use crate::target::{HostKey, Scheme};
use tokio_util::sync::CancellationToken;

/// A server known by name only (no addresses: keyed by its name).
fn key(host: &str) -> Server {
    Server {
        name: HostKey {
            scheme: Scheme::Gemini,
            host: host.into(),
            port: 1965,
        },
        addrs: Vec::new(),
    }
}

fn config() -> PolitenessConfig {
    PolitenessConfig {
        default_delay: Duration::from_secs(1),
        min_delay: Duration::ZERO,
        max_delay: None,
        per_host_concurrency: 1,
        max_wait: Duration::from_secs(600),
        web_max_wait: Duration::from_secs(600),
        horizon: HORIZON,
        max_queued: queued_for(1024),
        max_slow_down: MAX_SLOW_DOWN,
        key: GateBy::Address,
        web_backoff: Default::default(),
    }
}

/// Starts `n` requests at once to one host; returns when each was admitted,
/// in seconds after the start. Each holds its slot for `hold`.
async fn burst(
    gate: &Arc<Politeness>,
    host: &str,
    n: usize,
    delay: Duration,
    hold: Duration,
) -> Vec<f64> {
    let t0 = Instant::now();
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (gate, k) = (gate.clone(), key(host));
            tokio::spawn(async move {
                let permit = gate.admit(&k, Some(delay)).await.unwrap();
                let at = t0.elapsed().as_secs_f64();
                tokio::time::sleep(hold).await;
                drop(permit);
                at
            })
        })
        .collect();
    let mut at = Vec::new();
    for t in tasks {
        at.push(t.await.unwrap());
    }
    at.sort_by(f64::total_cmp);
    at
}

#[tokio::test(start_paused = true)]
async fn starts_are_spaced_by_the_delay() {
    let gate = Politeness::new(config());
    let at = burst(
        &gate,
        "a",
        5,
        Duration::from_secs(10),
        Duration::from_millis(50),
    )
    .await;
    assert_eq!(at, [0.0, 10.0, 20.0, 30.0, 40.0]);
}

#[tokio::test(start_paused = true)]
async fn a_slow_request_holds_the_single_slot() {
    let gate = Politeness::new(config());
    // Delay 1 s, but each request takes 3 s: concurrency 1 spaces them by 3 s.
    let at = burst(
        &gate,
        "a",
        3,
        Duration::from_secs(1),
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(at, [0.0, 3.0, 6.0]);
}

#[tokio::test(start_paused = true)]
async fn concurrency_two_lets_two_run_at_once() {
    let gate = Politeness::new(PolitenessConfig {
        per_host_concurrency: 2,
        ..config()
    });
    let at = burst(&gate, "a", 4, Duration::ZERO, Duration::from_secs(5)).await;
    assert_eq!(at, [0.0, 0.0, 5.0, 5.0]);
}

#[tokio::test(start_paused = true)]
async fn another_host_is_not_slowed() {
    let gate = Politeness::new(config());
    let slow = {
        let gate = gate.clone();
        tokio::spawn(async move {
            burst(&gate, "slow", 3, Duration::from_secs(100), Duration::ZERO).await
        })
    };
    tokio::task::yield_now().await;
    let t0 = Instant::now();
    let _p = gate
        .admit(&key("fast"), Some(Duration::from_secs(100)))
        .await
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(slow.await.unwrap(), [0.0, 100.0, 200.0]);
}

/// A turn past the request's bound but within the horizon: it is held in
/// line until its bound, then told "slow down" with the wait left from its
/// place; past the horizon, at once with the whole wait.
#[tokio::test(start_paused = true)]
async fn past_max_wait_the_answer_comes_at_the_bound_or_at_once_past_the_horizon() {
    for (horizon, at, retry) in [(HORIZON, 25, 5), (Duration::ZERO, 0, 30)] {
        let gate = Politeness::new(PolitenessConfig {
            max_wait: Duration::from_secs(25),
            horizon,
            ..config()
        });
        let k = key("a");
        let d = Duration::from_secs(10);
        let first = gate.admit(&k, Some(d)).await.unwrap();
        drop(first);
        // Queue: waits of 10 and 20 s fit; the next would wait 30 s.
        let g1 = gate.clone();
        let k1 = k.clone();
        let second = tokio::spawn(async move { g1.admit(&k1, Some(d)).await.map(|_| ()) });
        let g2 = gate.clone();
        let k2 = k.clone();
        let third = tokio::spawn(async move { g2.admit(&k2, Some(d)).await.map(|_| ()) });
        tokio::task::yield_now().await;
        let t0 = Instant::now();
        let refused = gate.admit(&k, Some(d)).await.err().expect("slow down");
        assert_eq!(t0.elapsed(), Duration::from_secs(at), "{horizon:?}");
        assert_eq!(
            refused.retry_after,
            Duration::from_secs(retry),
            "{horizon:?}"
        );
        assert!(second.await.unwrap().is_ok());
        assert!(third.await.unwrap().is_ok());
    }
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_goes_away_gives_its_place_back() {
    let gate = Politeness::new(config());
    let k = key("a");
    let d = Duration::from_secs(10);
    drop(gate.admit(&k, Some(d)).await.unwrap());
    let g = gate.clone();
    let kk = k.clone();
    let quitter = tokio::spawn(async move { g.admit(&kk, Some(d)).await.map(|_| ()) });
    tokio::task::yield_now().await;
    assert_eq!(gate.usage().1, 1);
    quitter.abort();
    let _ = quitter.await;
    assert_eq!(gate.usage().1, 0, "the queue entry left with the waiter");
    // The next request takes the first free turn: 10 s after the first start.
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(d)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(10));
}

#[tokio::test(start_paused = true)]
async fn upstream_44_pushes_the_next_start_out() {
    let gate = Politeness::new(config());
    let k = key("a");
    let d = Duration::from_secs(2);
    let id = gate.admit(&k, Some(d)).await.unwrap().gate();
    gate.slow_down(id, &k.name, Some(Duration::from_secs(30)));
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(d)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(30));
    // Without a number: the spacing doubles (2 → 4 → 8 s), and resets on success.
    gate.slow_down(id, &k.name, None);
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(d)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(4));
    gate.slow_down(id, &k.name, None);
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(d)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(8));
    gate.recovered(id, &k.name);
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(d)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
}

/// A web server known by name.
fn web(host: &str) -> Server {
    Server {
        name: HostKey {
            scheme: Scheme::Https,
            host: host.into(),
            port: 443,
        },
        addrs: Vec::new(),
    }
}

/// The web's back-off: a `429`/`503` without `Retry-After` closes the site
/// 60 s, then 120 s, 240 s … (not a doubled spacing), up to
/// `max_slow_down`; a normal answer does not forgive it, 30 quiet minutes
/// do; another site on the same machine keeps its turns.
#[tokio::test(start_paused = true)]
async fn a_web_site_s_429_without_retry_after_closes_it_for_a_doubling_hold() {
    let gate = Politeness::new(PolitenessConfig {
        key: GateBy::Host,
        max_slow_down: Duration::from_secs(300),
        web_backoff: WebBackoff {
            jitter: 0.0,
            ..WebBackoff::default()
        },
        ..config()
    });
    let k = web("site");
    let d = Duration::from_secs(1);
    let mut holds = Vec::new();
    for _ in 0..4 {
        let id = gate.admit(&k, Some(d)).await.unwrap().gate();
        holds.push(gate.slow_down(id, &k.name, None).unwrap().as_secs());
        // A normal answer in between forgives nothing.
        gate.recovered(id, &k.name);
        let t0 = Instant::now();
        drop(gate.admit(&k, Some(d)).await.unwrap());
        assert_eq!(t0.elapsed().as_secs(), *holds.last().unwrap(), "{holds:?}");
    }
    assert_eq!(
        holds,
        [60, 120, 240, 300],
        "doubling, capped by max_slow_down"
    );
    // Quiet for the forgiving time: the next hold starts over.
    tokio::time::sleep(Duration::from_secs(30 * 60)).await;
    let id = gate.admit(&k, Some(d)).await.unwrap().gate();
    assert_eq!(
        gate.slow_down(id, &k.name, None),
        Some(Duration::from_secs(60))
    );
    // A Retry-After holds it until then instead, and returns no hold of its own.
    assert_eq!(
        gate.slow_down(id, &k.name, Some(Duration::from_secs(90))),
        None
    );
}

/// The jitter moves each hold by at most its fraction, and differs.
#[tokio::test(start_paused = true)]
async fn the_web_back_off_is_jittered() {
    let gate = Politeness::new(PolitenessConfig {
        key: GateBy::Host,
        ..config()
    });
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..20 {
        let k = web(&format!("site{i}"));
        let id = gate.admit(&k, Some(Duration::ZERO)).await.unwrap().gate();
        let hold = gate.slow_down(id, &k.name, None).unwrap();
        assert!((54_000..=66_000).contains(&hold.as_millis()), "{hold:?}");
        seen.insert(hold.as_millis());
    }
    assert!(seen.len() > 10, "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn back_off_from_no_delay_starts_at_one_second() {
    let gate = Politeness::new(config());
    let k = key("a");
    let id = gate.admit(&k, Some(Duration::ZERO)).await.unwrap().gate();
    gate.slow_down(id, &k.name, None);
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(Duration::ZERO)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn doubling_stops_at_max_delay() {
    let gate = Politeness::new(PolitenessConfig {
        max_delay: Some(Duration::from_secs(5)),
        ..config()
    });
    let k = key("a");
    let d = Duration::from_secs(2);
    let id = gate.admit(&k, Some(d)).await.unwrap().gate();
    for _ in 0..5 {
        gate.slow_down(id, &k.name, None);
    }
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(d)).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn idle_hosts_are_forgotten_once_their_spacing_has_passed() {
    let gate = Politeness::new(config());
    for i in 0..100 {
        drop(
            gate.admit(&key(&format!("h{i}")), Some(Duration::from_secs(5)))
                .await
                .unwrap(),
        );
    }
    gate.sweep();
    assert_eq!(gate.usage().0, 100, "spacing not yet past: remembered");
    tokio::time::advance(Duration::from_secs(6)).await;
    gate.sweep();
    assert_eq!(gate.usage().0, 0);
}

#[tokio::test(start_paused = true)]
async fn without_a_delay_a_new_host_gets_the_default_and_a_known_one_keeps_its_own() {
    let gate = Politeness::new(config());
    let k = key("a");
    drop(gate.admit(&k, None).await.unwrap());
    let t0 = Instant::now();
    drop(gate.admit(&k, None).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(1), "default_delay");
    drop(gate.admit(&k, Some(Duration::from_secs(7))).await.unwrap());
    let t0 = Instant::now();
    drop(gate.admit(&k, None).await.unwrap());
    assert_eq!(
        t0.elapsed(),
        Duration::from_secs(7),
        "the host's own spacing"
    );
}

fn server(host: &str, addrs: &[&str]) -> Server {
    Server {
        name: HostKey {
            scheme: Scheme::Gopher,
            host: host.into(),
            port: 70,
        },
        addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
    }
}

/// One server under eight names: the names resolve to its addresses (one
/// of them IPv4-mapped, `localhost` to both families), so every request
/// waits for the same gate. Keyed by host, each name has its own.
#[tokio::test(start_paused = true)]
async fn one_server_under_eight_names_shares_one_gate() {
    let spellings = [
        server("127.0.0.1", &["127.0.0.1:70"]),
        server("localhost", &["[::1]:70", "127.0.0.1:70"]),
        server("[::ffff:127.0.0.1]", &["[::ffff:127.0.0.1]:70"]),
        server("ip6-localhost", &["[::1]:70"]),
        server("alias.example", &["127.0.0.1:70"]),
        server("other.example", &["[::ffff:7f00:1]:70"]),
        server("www.alias.example", &["127.0.0.1:70", "[::1]:70"]),
        server("vhost.example", &["127.0.0.1:70"]),
    ];
    let by = |key: GateBy| {
        let spellings = spellings.clone();
        async move {
            let gate = Politeness::new(PolitenessConfig { key, ..config() });
            let t0 = Instant::now();
            let tasks: Vec<_> = spellings
                .iter()
                .cycle()
                .take(16)
                .map(|s| {
                    let (gate, s) = (gate.clone(), s.clone());
                    tokio::spawn(async move {
                        let _permit = gate.admit(&s, Some(Duration::from_secs(5))).await;
                        t0.elapsed().as_secs()
                    })
                })
                .collect();
            let mut at = Vec::new();
            for t in tasks {
                at.push(t.await.unwrap());
            }
            at.sort();
            (at, gate.usage().0)
        }
    };
    let (at, gates) = by(GateBy::Address).await;
    assert_eq!(at, (0..16).map(|i| i * 5).collect::<Vec<u64>>());
    assert_eq!(gates, 1);
    let (at, gates) = by(GateBy::Host).await;
    assert_eq!(at, [0, 0, 0, 0, 0, 0, 0, 0, 5, 5, 5, 5, 5, 5, 5, 5]);
    assert_eq!(gates, 8);
}

/// A swept gate forgets its addresses: the next request starts afresh.
#[tokio::test(start_paused = true)]
async fn sweeping_a_gate_forgets_its_aliases() {
    let gate = Politeness::new(config());
    drop(
        gate.admit(&server("a", &["192.0.2.1:70"]), None)
            .await
            .unwrap(),
    );
    tokio::time::advance(Duration::from_secs(2)).await;
    gate.sweep();
    assert_eq!(gate.usage().0, 0);
    assert!(gate.here().lock().aliases.is_empty());
    let t0 = Instant::now();
    drop(
        gate.admit(&server("b", &["192.0.2.1:70"]), None)
            .await
            .unwrap(),
    );
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

/// Hostile numbers (a Crawl-delay of 10^20 s, an upstream `44` of u64::MAX
/// seconds) saturate: the gate answers "slow down" and stays usable, and the
/// sweeper keeps working.
#[tokio::test(start_paused = true)]
async fn hostile_numbers_saturate_instead_of_panicking() {
    let gate = Politeness::new(PolitenessConfig {
        max_wait: Duration::MAX,
        ..config()
    });
    let k = key("a");
    let id = gate.admit(&k, Some(Duration::MAX)).await.unwrap().gate();
    gate.slow_down(id, &k.name, Some(Duration::from_secs(u64::MAX)));
    for _ in 0..70 {
        gate.slow_down(id, &k.name, None);
    }
    gate.sweep();
    let short = Politeness::new(config());
    let id = short.admit(&k, Some(Duration::MAX)).await.unwrap().gate();
    let refused = short.admit(&k, Some(Duration::MAX)).await.err().unwrap();
    assert!(refused.retry_after >= Duration::from_secs(86_400 * 365));
    short.slow_down(id, &k.name, Some(Duration::from_secs(u64::MAX)));
    short.sweep();
    assert_eq!(short.usage().0, 1, "the gate is still remembered");
    // Other hosts are untouched.
    let t0 = Instant::now();
    drop(short.admit(&key("b"), None).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::ZERO);
}

/// The background sweeper keeps forgetting idle hosts after a hostile entry
/// (a century of spacing) that it must keep.
#[tokio::test(start_paused = true)]
async fn the_sweeper_keeps_sweeping_past_a_hostile_entry() {
    let gate = Politeness::new(config());
    let stop = CancellationToken::new();
    let sweeper = tokio::spawn(gate.clone().sweeper(Duration::from_secs(30), stop.clone()));
    drop(
        gate.admit(&key("hostile"), Some(Duration::MAX))
            .await
            .unwrap(),
    );
    for round in 0..3 {
        drop(
            gate.admit(&key(&format!("idle{round}")), Some(Duration::ZERO))
                .await
                .unwrap(),
        );
        assert_eq!(gate.usage().0, 2);
        tokio::time::sleep(Duration::from_secs(31)).await;
        assert_eq!(
            gate.usage().0,
            1,
            "round {round}: the idle host is forgotten"
        );
    }
    stop.cancel();
    sweeper.await.unwrap();
}

/// A sweep goes slice by slice and can be cut between slices: the gates it
/// keeps go round again, gates made between slices are neither lost nor
/// skipped, and each gate is looked at once per sweep.
#[tokio::test(start_paused = true)]
async fn a_sweep_in_slices_keeps_busy_gates_and_new_ones() {
    let gate = Politeness::new(config());
    let n = 2 * SWEEP_SLICE + 7;
    let mut busy = Vec::new();
    for i in 0..n {
        let permit = gate.admit(&key(&format!("h{i}")), None).await.unwrap();
        // Every third gate has a request in flight; the others go idle.
        if i % 3 == 0 {
            busy.push(permit);
        }
    }
    tokio::time::advance(Duration::from_secs(2)).await;
    let mut sweep = gate.start_sweep();
    assert!(sweep.next_slice());
    // Between slices the lock is free: a new server is admitted at once.
    let t0 = Instant::now();
    drop(gate.admit(&key("between"), None).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(
        gate.usage().0,
        n + 1 - (SWEEP_SLICE - SWEEP_SLICE.div_ceil(3))
    );
    // The sweep goes on where it stopped.
    while sweep.next_slice() {}
    // The busy gates are kept; the new one was made 0 s ago and keeps its
    // spacing (1 s) until then, so it is kept too.
    assert_eq!(gate.usage().0, busy.len() + 1);
    assert_eq!(gate.here().lock().sweep_order.len(), busy.len() + 1);
    drop(busy);
    tokio::time::advance(Duration::from_secs(2)).await;
    gate.sweep();
    assert_eq!(gate.usage().0, 0);
    let gates = gate.here().lock();
    assert!(gates.aliases.is_empty() && gates.sweep_order.is_empty());
}

#[test]
fn delay_is_clamped() {
    let c = PolitenessConfig {
        default_delay: Duration::from_secs(1),
        min_delay: Duration::from_millis(500),
        max_delay: Some(Duration::from_secs(30)),
        ..config()
    };
    assert_eq!(c.delay_for(None), Duration::from_secs(1));
    assert_eq!(
        c.delay_for(Some(Duration::from_millis(100))),
        Duration::from_millis(500)
    );
    assert_eq!(
        c.delay_for(Some(Duration::from_secs(3600))),
        Duration::from_secs(30)
    );
    let unbounded = config();
    assert_eq!(
        unbounded.delay_for(Some(Duration::from_secs(3600))),
        Duration::from_secs(3600)
    );
}

/// What a hostile upstream or robots.txt can feed the gate, with any config
/// the resolver accepts (and beyond: `Duration::MAX` everywhere).
#[derive(Clone, Debug)]
enum Step {
    Admit { host: u8, delay: Option<Duration> },
    SlowDown { host: u8, seconds: Option<Duration> },
    Recovered { host: u8 },
    Sweep,
    Advance(Duration),
}

fn extreme_duration() -> impl proptest::strategy::Strategy<Value = Duration> {
    use proptest::prelude::*;
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(NEVER),
        (0u64..=u64::MAX).prop_map(Duration::from_secs),
        (0u64..100_000).prop_map(Duration::from_millis),
    ]
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        (0u8..4, proptest::option::of(extreme_duration()))
            .prop_map(|(host, delay)| Step::Admit { host, delay }),
        (0u8..4, proptest::option::of(extreme_duration()))
            .prop_map(|(host, seconds)| Step::SlowDown { host, seconds }),
        (0u8..4).prop_map(|host| Step::Recovered { host }),
        Just(Step::Sweep),
        (0u64..1_000_000).prop_map(|ms| Step::Advance(Duration::from_millis(ms))),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Any sequence of admissions, slow-downs, sweeps and clock jumps, with
    /// extreme numbers everywhere: nothing panics, an admitted request never
    /// waited longer than `max_wait`, and a refusal names a retry time.
    #[test]
    fn the_gate_survives_extreme_numbers(
        default_delay in extreme_duration(),
        min_delay in extreme_duration(),
        max_wait in extreme_duration(),
        concurrency in 1usize..4,
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async move {
            let gate = Politeness::new(PolitenessConfig {
                default_delay,
                min_delay,
                max_delay: None,
                per_host_concurrency: concurrency,
                max_wait,
                horizon: HORIZON,
                max_queued: queued_for(1024),
                web_max_wait: max_wait,
                max_slow_down: MAX_SLOW_DOWN,
                key: GateBy::Host,
                web_backoff: Default::default(),
            });
            let mut ids = std::collections::HashMap::new();
            for step in steps {
                match step {
                    Step::Admit { host, delay } => {
                        let server = key(&format!("h{host}"));
                        let started = Instant::now();
                        // A wait the gate accepted can be long: let the
                        // paused clock run it out, bounded by max_wait.
                        match gate.admit(&server, delay.map(|d| gate.config().delay_for(Some(d)))).await {
                            Ok(permit) => {
                                assert!(started.elapsed() <= max_wait.min(NEVER));
                                ids.insert(host, permit.gate());
                            }
                            Err(slow) => assert!(slow.retry_after > Duration::ZERO),
                        }
                    }
                    Step::SlowDown { host, seconds } => {
                        if let Some(id) = ids.get(&host) {
                            gate.slow_down(*id, &key(&format!("h{host}")).name, seconds);
                        }
                    }
                    Step::Recovered { host } => {
                        if let Some(id) = ids.get(&host) {
                            gate.recovered(*id, &key(&format!("h{host}")).name);
                        }
                    }
                    Step::Sweep => gate.sweep(),
                    Step::Advance(d) => tokio::time::advance(d).await,
                }
            }
        });
    }
}

/// Requests of bots with different Crawl-delays at one server: each waits its
/// own delay from the last start by any of them, queued or not.
#[tokio::test(start_paused = true)]
async fn each_request_is_spaced_by_its_own_delay_from_the_last_start() {
    let gate = Politeness::new(config());
    let k = key("shared");
    let (slow, fast) = (Duration::from_secs(10), Duration::from_secs(1));
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(slow)).await.unwrap());
    // Queued behind nobody: 1 s after the slow bot's start, not 10.
    drop(gate.admit(&k, Some(fast)).await.unwrap());
    assert_eq!(t0.elapsed(), fast);
    // The slow bot again: 10 s after the fast bot's start.
    drop(gate.admit(&k, Some(slow)).await.unwrap());
    assert_eq!(t0.elapsed(), fast + slow);

    // Both queued at once: the fast one queued second still waits its turn
    // (FIFO), and then only its own spacing after the slow one.
    let (g1, g2, k1, k2) = (gate.clone(), gate.clone(), k.clone(), k.clone());
    let t1 = Instant::now();
    let a = tokio::spawn(async move {
        drop(g1.admit(&k1, Some(slow)).await.unwrap());
        Instant::now()
    });
    tokio::task::yield_now().await;
    let b = tokio::spawn(async move {
        drop(g2.admit(&k2, Some(fast)).await.unwrap());
        Instant::now()
    });
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(a - t1, slow);
    assert_eq!(b - a, fast);
}

/// A gate is remembered as long as the longest spacing any bot has at its
/// server (`hold`), so a sweep never lets a slow bot in early.
#[tokio::test(start_paused = true)]
async fn a_gate_is_held_for_the_longest_spacing_of_its_bots() {
    let gate = Politeness::new(config());
    let k = key("held");
    let t0 = Instant::now();
    drop(
        gate.admit_holding(&k, Some(Duration::from_secs(1)), Duration::from_secs(60))
            .await
            .unwrap(),
    );
    tokio::time::advance(Duration::from_secs(31)).await;
    gate.sweep();
    assert_eq!(gate.usage().0, 1, "within the slow bot's spacing: kept");
    drop(gate.admit(&k, Some(Duration::from_secs(60))).await.unwrap());
    assert_eq!(t0.elapsed(), Duration::from_secs(60));
    tokio::time::advance(Duration::from_secs(61)).await;
    gate.sweep();
    assert_eq!(gate.usage().0, 0, "past every spacing: forgotten");
}

/// One machine serving on several ports (a capsule mirrored over Gemini,
/// Gopher, Spartan and Nex) is one visitor's machine: its servers share one
/// gate, by address and by host. Another machine has its own.
#[tokio::test(start_paused = true)]
async fn one_machine_on_four_ports_shares_one_gate() {
    let mirrors = [
        server("capsule.example", &["192.0.2.7:1965"]),
        server("capsule.example", &["192.0.2.7:70"]),
        server("capsule.example", &["192.0.2.7:300"]),
        server("capsule.example", &["192.0.2.7:1900"]),
    ];
    for key in [GateBy::Address, GateBy::Host] {
        let gate = Politeness::new(PolitenessConfig { key, ..config() });
        let t0 = Instant::now();
        let mut starts = Vec::new();
        for s in &mirrors {
            let _permit = gate.admit(s, Some(Duration::from_secs(5))).await.unwrap();
            starts.push(t0.elapsed().as_secs());
        }
        assert_eq!(starts, [0, 5, 10, 15], "{key:?}");
        assert_eq!(gate.usage().0, 1, "{key:?}: one gate");
        let other = server("other.example", &["192.0.2.8:1965"]);
        let t1 = Instant::now();
        let _permit = gate.admit(&other, Some(Duration::from_secs(5))).await;
        assert_eq!(t1.elapsed(), Duration::ZERO, "{key:?}: another machine");
    }
}

/// Every kind of slow-down a server can send, as the gate is told it.
#[derive(Clone, Copy, Debug)]
enum Said {
    /// A number of seconds: `44 N`, a `Retry-After`.
    For(u64),
    /// None: a bare `44` (Gemini's spacing doubles), a web `429`/`503`
    /// without a `Retry-After` (the web's back-off).
    Bare,
}

/// Requests already waiting at a server when it asks to slow down are held
/// by it when their turn comes, not let through: those whose bound the hold
/// passes are told to slow down (at once when it passes the horizon, else
/// at their bound), and a request that leaves the
/// queue for its server's hold does not hold up the other servers on the
/// machine. Every kind of slow-down, the small web and the web.
#[tokio::test(start_paused = true)]
async fn requests_waiting_when_a_server_slows_down_are_held_by_it() {
    for said in [Said::For(3600), Said::For(5), Said::Bare] {
        for server in [key("capsule"), web("site")] {
            let web_hold = WebBackoff {
                jitter: 0.0,
                ..WebBackoff::default()
            };
            let gate = Politeness::new(PolitenessConfig {
                max_wait: Duration::from_secs(30),
                web_max_wait: Duration::from_secs(30),
                web_backoff: web_hold,
                ..config()
            });
            let d = Duration::from_secs(1);
            let first = gate.admit(&server, Some(d)).await.unwrap();
            // Three more wait their turn, one spacing apart.
            let t0 = Instant::now();
            let waiting: Vec<_> = (0..3)
                .map(|_| {
                    let (gate, server) = (gate.clone(), server.clone());
                    tokio::spawn(async move {
                        let turn = gate.admit(&server, Some(d)).await;
                        (
                            t0.elapsed().as_secs(),
                            turn.map(drop).map_err(|s| s.retry_after),
                        )
                    })
                })
                .collect();
            tokio::task::yield_now().await;
            // The server answers the first "slow down", and it ends.
            let seconds = match said {
                Said::For(s) => Some(Duration::from_secs(s)),
                Said::Bare => None,
            };
            first.slow_down(&server.name, seconds).await;
            drop(first);
            let mut turns = Vec::new();
            for w in waiting {
                turns.push(w.await.unwrap());
            }
            let case = format!("{said:?} {:?}: {turns:?}", server.name.scheme);
            let backs_off = rules::of(server.name.scheme).unsaid == Unsaid::BackOff;
            match (said, backs_off) {
                // Held past the horizon (closed): told at once, with the rest.
                (Said::For(3600), _) => {
                    for (at, turn) in &turns {
                        assert_eq!(*at, 0, "{case}");
                        let retry = turn.as_ref().expect_err(&case).as_secs();
                        assert!((3599..=3600).contains(&retry), "{case}");
                    }
                }
                // The web's back-off (60 s), past the 30 s bound but within
                // the horizon: told at the bound, with the rest.
                (Said::Bare, true) => {
                    for (at, turn) in &turns {
                        assert_eq!(*at, 30, "{case}");
                        let retry = turn.as_ref().expect_err(&case).as_secs();
                        assert!((29..=30).contains(&retry), "{case}");
                    }
                }
                // Held 5 s: the first waiter then, the next a spacing later.
                (Said::For(_), _) => {
                    let at: Vec<u64> = turns.iter().map(|t| t.0).collect();
                    assert_eq!(at, [5, 6, 7], "{case}");
                    assert!(turns.iter().all(|t| t.1.is_ok()), "{case}");
                }
                // Gemini's doubled spacing: 2 s apart from the first start.
                (Said::Bare, false) => {
                    let at: Vec<u64> = turns.iter().map(|t| t.0).collect();
                    assert_eq!(at, [2, 4, 6], "{case}");
                }
            }
        }
    }
}

/// A waiter that leaves the queue for its own server's slow-down lets a
/// waiter for another server on the same machine go at its turn.
#[tokio::test(start_paused = true)]
async fn a_waiter_held_by_its_server_lets_its_neighbours_go() {
    let gate = Politeness::new(config());
    let a = server("a.example", &["192.0.2.9:1965"]);
    let b = server("b.example", &["192.0.2.9:1965"]);
    let d = Duration::from_secs(1);
    let first = gate.admit(&a, Some(d)).await.unwrap();
    let t0 = Instant::now();
    let (g, a2) = (gate.clone(), a.clone());
    let held = tokio::spawn(async move { g.admit(&a2, Some(d)).await.map(drop) });
    tokio::task::yield_now().await;
    let (g, b2) = (gate.clone(), b.clone());
    let neighbour = tokio::spawn(async move {
        drop(g.admit(&b2, Some(d)).await.unwrap());
        t0.elapsed()
    });
    tokio::task::yield_now().await;
    first
        .slow_down(&a.name, Some(Duration::from_secs(20)))
        .await;
    drop(first);
    // a's waiter left at its turn (1 s), so b's goes a spacing later.
    assert_eq!(neighbour.await.unwrap(), Duration::from_secs(1));
    held.await.unwrap().unwrap();
    assert_eq!(t0.elapsed(), Duration::from_secs(20), "a held 20 s");
}

/// A web site's slow-down holds the site: every port, both schemes; not a
/// server of the small web under the same name.
#[tokio::test(start_paused = true)]
async fn a_web_site_s_hold_is_the_site_s_on_every_port_and_scheme() {
    let gate = Politeness::new(PolitenessConfig {
        key: GateBy::Host,
        max_wait: Duration::from_secs(5),
        web_max_wait: Duration::from_secs(5),
        ..config()
    });
    let at = |scheme, port| Server {
        name: HostKey {
            scheme,
            host: "site".into(),
            port,
        },
        addrs: Vec::new(),
    };
    let d = Duration::ZERO;
    for (asked, seconds) in [(8080, Some(Duration::from_secs(600))), (80, None)] {
        let gate = Politeness::new(gate.config().as_ref().clone());
        let permit = gate.admit(&at(Scheme::Http, asked), Some(d)).await.unwrap();
        permit
            .slow_down(&at(Scheme::Http, asked).name, seconds)
            .await;
        drop(permit);
        for (scheme, port) in [
            (Scheme::Http, asked),
            (Scheme::Http, 80),
            (Scheme::Http, 8081),
            (Scheme::Https, 443),
            (Scheme::Https, 8443),
        ] {
            let held = gate.admit(&at(scheme, port), Some(d)).await;
            assert!(held.is_err(), "{scheme:?} {port} after {asked}");
        }
        let capsule = gate.admit(&at(Scheme::Gemini, 1965), Some(d)).await;
        assert!(capsule.is_ok(), "the small web under that name is not held");
    }
}

/// Starts a request for `place` at `server`; its turn, or how long it was
/// told to wait, and when (seconds after `t0`).
fn ask_in(
    gate: &Arc<Politeness>,
    server: &Server,
    place: Place,
    t0: Instant,
) -> tokio::task::JoinHandle<(u64, Result<(), Duration>)> {
    let (gate, server) = (gate.clone(), server.clone());
    tokio::spawn(async move {
        let (delay, by) = (Some(Duration::from_secs(10)), gate.bound(&server));
        let place = Some(PlaceOf::from(place));
        let turn = gate
            .admit_by(&server, (delay, Duration::ZERO), Some(by), place)
            .await;
        (
            t0.elapsed().as_secs(),
            turn.map(drop).map_err(|s| s.retry_after),
        )
    })
}

/// A client that leaves its place in line and asks again soon re-enters
/// where it stood, ahead of those who came after it; the place is kept for
/// its bound (here 60 s), then forgotten; a second copy asked while the
/// first waits has a place of its own; the requests behind a client that
/// left move up at once.
#[tokio::test(start_paused = true)]
async fn a_place_in_line_survives_a_retry_within_its_bound() {
    let gate = Politeness::new(PolitenessConfig {
        max_wait: Duration::from_secs(60),
        ..config()
    });
    let k = key("a");
    let page = |n: u32| Place::of("bot", "", format!("gemini://a/{n}"));
    let t0 = Instant::now();
    drop(gate.admit(&k, Some(Duration::from_secs(10))).await.unwrap());
    // Pages 1, 2, 3 queue for 10, 20 and 30 s.
    let one = ask_in(&gate, &k, page(1), t0);
    tokio::task::yield_now().await;
    let two = ask_in(&gate, &k, page(2), t0);
    tokio::task::yield_now().await;
    let three = ask_in(&gate, &k, page(3), t0);
    tokio::task::yield_now().await;
    // Page 2's client gives up at 5 s; page 3 moves up at once.
    tokio::time::sleep(Duration::from_secs(5)).await;
    two.abort();
    let _ = two.await;
    assert_eq!(gate.kept_places(), 1);
    assert_eq!(gate.usage().1, 2);
    // Page 4 comes new, behind page 3; a copy of page 1 while page 1
    // waits gets its own place, behind page 4.
    let four = ask_in(&gate, &k, page(4), t0);
    tokio::task::yield_now().await;
    let copy = ask_in(&gate, &k, page(1), t0);
    tokio::task::yield_now().await;
    // Page 2 asked again at 8 s: in its old place, ahead of 3, 4 and the copy.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = ask_in(&gate, &k, page(2), t0);
    tokio::task::yield_now().await;
    assert_eq!(gate.kept_places(), 0, "taken");
    let at = |t: (u64, Result<(), Duration>)| {
        assert!(t.1.is_ok(), "{t:?}");
        t.0
    };
    assert_eq!(at(one.await.unwrap()), 10);
    assert_eq!(at(again.await.unwrap()), 20);
    assert_eq!(at(three.await.unwrap()), 30);
    assert_eq!(at(four.await.unwrap()), 40);
    assert_eq!(at(copy.await.unwrap()), 50);

    // Left again and asked after its bound: forgotten, at the end.
    let five = ask_in(&gate, &k, page(5), t0);
    tokio::task::yield_now().await;
    let six = ask_in(&gate, &k, page(6), t0);
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    five.abort();
    let _ = five.await;
    let seven = ask_in(&gate, &k, page(7), t0);
    assert_eq!(at(six.await.unwrap()), 60);
    assert_eq!(at(seven.await.unwrap()), 70);
    tokio::time::sleep(Duration::from_secs(40)).await;
    gate.sweep();
    assert_eq!(gate.kept_places(), 1, "kept for 60 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
    gate.sweep();
    assert_eq!(gate.kept_places(), 0, "forgotten after its bound");
}

/// A site that closes past the horizon (a slow-down of an hour) drops the
/// places kept there: the requests waiting are answered at once, and none
/// leaves a place; a short hold keeps them.
#[tokio::test(start_paused = true)]
async fn a_site_that_closes_drops_its_kept_places() {
    for (hold, kept) in [(5, 1), (3600, 0)] {
        let gate = Politeness::new(PolitenessConfig {
            max_wait: Duration::from_secs(60),
            ..config()
        });
        let k = key("a");
        let t0 = Instant::now();
        let first = gate.admit(&k, Some(Duration::from_secs(10))).await.unwrap();
        let left = ask_in(&gate, &k, Place::of("bot", "", "gemini://a/1"), t0);
        let waiting = ask_in(&gate, &k, Place::of("bot", "", "gemini://a/2"), t0);
        tokio::task::yield_now().await;
        left.abort();
        let _ = left.await;
        assert_eq!(gate.kept_places(), 1);
        first
            .slow_down(&k.name, Some(Duration::from_secs(hold)))
            .await;
        drop(first);
        let (at, turn) = waiting.await.unwrap();
        match hold {
            3600 => assert_eq!((at, turn.is_err()), (0, true)),
            _ => assert_eq!((at, turn.is_ok()), (10, true)),
        }
        assert_eq!(gate.kept_places(), kept, "held {hold} s");
    }
}

/// Requests waiting for a turn hold connections: past `max_queued` of them
/// (three quarters of the listeners' connections), a request that would
/// wait is told "slow down" at once, holding nothing, while one whose turn
/// is now still goes; a place freed lets the next wait again.
#[tokio::test(start_paused = true)]
async fn waiting_requests_are_bounded_and_requests_that_go_at_once_still_go() {
    assert_eq!(queued_for(1024), 768);
    assert_eq!(queued_for(3), 2);
    assert_eq!(queued_for(1), 1);
    let gate = Politeness::new(PolitenessConfig {
        max_queued: 2,
        ..config()
    });
    let d = Duration::from_secs(10);
    let (a, b) = (key("a"), key("b"));
    drop(gate.admit(&a, Some(d)).await.unwrap());
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let (gate, a) = (gate.clone(), a.clone());
            tokio::spawn(async move { gate.admit(&a, Some(d)).await.map(drop) })
        })
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(gate.usage().1, 2);
    let t0 = Instant::now();
    let told = gate.admit(&a, Some(d)).await.err().expect("crowded");
    assert_eq!(
        (t0.elapsed(), told.retry_after),
        (Duration::ZERO, Duration::from_secs(30))
    );
    // Another host's turn is now: it goes.
    drop(gate.admit(&b, Some(d)).await.unwrap());
    assert_eq!(gate.kept_places(), 0);
    for w in waiting {
        assert!(w.await.unwrap().is_ok());
    }
    assert_eq!(gate.usage().1, 0);
    let g = gate.clone();
    let again = tokio::spawn(async move { g.admit(&a, Some(d)).await.map(drop) });
    tokio::task::yield_now().await;
    assert_eq!(gate.usage().1, 1, "room again");
    assert!(again.await.unwrap().is_ok());
}
