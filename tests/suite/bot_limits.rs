//! A bot's own limits (`min_delay`, `concurrency`, `rate`,
//! `daily_requests_per_server`, `quiet_hours`), from the side of a crawler
//! trying to get more than it is allowed: spreading requests over servers,
//! spelling one server several ways, sending in parallel, asking at night.
//! Through the proxy's listeners, over loopback, against fake origins.

use std::time::Duration;

use robots_proxy::bot_limits::WallClock;
use robots_proxy::config::Config;
use robots_proxy::listener::Listener;

use crate::common::*;

async fn open_capsule() -> Origin {
    open_capsule_on(machine(1)).await
}

/// The default bot `examplebot` with `limits` (TOML keys of `[bot]`).
fn with_limits(limits: &str) -> Config {
    test_config_with(&format!("[bot]\nagent = \"examplebot\"\n{limits}\n"))
}

/// The seconds a `44 N` header asks to wait (Gemini's meta is the number
/// alone: the limit is named in the log and on the status page).
fn slow_down(header: &str) -> u64 {
    let n = header
        .strip_prefix("44 ")
        .unwrap_or_else(|| panic!("not a slow-down: {header:?}"));
    n.parse()
        .unwrap_or_else(|_| panic!("44 takes a number: {header:?}"))
}

/// What the status page says of the last refusal at the server at `port`
/// (recorded as the connection ends, just after the client has its answer:
/// asked until it is there, for at most 10 s).
async fn last_refusal(proxy: &robots_proxy::server::Proxy, port: u16) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, body) = http(proxy.addr(Listener::Admin), "GET", "/api/status", &[], "").await;
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        let detail = status["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["port"] == port)
            .and_then(|h| h["last_refusal"]["detail"].as_str())
            .map(str::to_string);
        match detail {
            Some(detail) => return detail,
            None if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            None => panic!("no refusal recorded at port {port}: {body}"),
        }
    }
}

/// Short enough that a test does not wait, long enough that a slot given
/// back as an answer ends is found free.
const SHORT_WAIT: Duration = Duration::from_millis(200);

/// Request starts at the origins, robots.txt fetches left out, in order.
fn page_starts(origins: &[&Origin]) -> Vec<std::time::Instant> {
    let mut starts: Vec<_> = origins
        .iter()
        .flat_map(|o| o.arrivals.lock().unwrap().clone())
        .filter(|(_, url)| !url.ends_with("/robots.txt"))
        .map(|(t, _)| t)
        .collect();
    starts.sort();
    starts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spreading_requests_over_servers_does_not_beat_the_rate() {
    let origins = [
        open_capsule().await,
        open_capsule().await,
        open_capsule().await,
    ];
    let mut config = with_limits("rate = \"2/s\"");
    config.politeness.max_wait = SHORT_WAIT;
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    // Two starts, at two servers; the third server is no way around the rate.
    assert_eq!(
        gemini(addr, &origins[0].url("/a")).await.0,
        "20 text/gemini"
    );
    assert_eq!(
        gemini(addr, &origins[1].url("/a")).await.0,
        "20 text/gemini"
    );
    let (header, _) = gemini(addr, &origins[2].url("/a")).await;
    assert!((1..=2).contains(&slow_down(&header)), "{header}");
    let why = last_refusal(&proxy, origins[2].addr.port()).await;
    assert!(why.contains("rate = 2/s"), "{why}");
    assert_eq!(origins[2].count("/a"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_by_the_rate_a_request_waits_its_turn() {
    let origins = [
        open_capsule().await,
        open_capsule().await,
        open_capsule().await,
    ];
    let mut config = with_limits("rate = \"2/s\"");
    config.politeness.max_wait = Duration::from_secs(10);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let urls = (0..6).map(|i| origins[i % 3].url(&format!("/p{i}")));
    for header in gemini_at_once(addr, urls).await {
        assert_eq!(header, "20 text/gemini");
    }
    // In any second, two starts at most over the three servers: each start
    // is a second or more after the one two before it.
    let starts = page_starts(&[&origins[0], &origins[1], &origins[2]]);
    assert_eq!(starts.len(), 6);
    for w in starts.windows(3) {
        let gap = (w[2] - w[0]).as_secs_f64();
        assert!(
            gap >= 1.0 - JITTER,
            "{gap} s between a start and the one two later"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daily_budget_is_per_server_shared_by_its_spellings_and_per_bot() {
    let origin = open_capsule().await;
    // Another machine; a server on another port of this one is the same
    // machine, and shares its budget (the_servers_of_one_machine_share_...).
    let other = open_capsule_on(machine(3)).await;
    let config = test_config_with(
        "[bot]\nagent = \"examplebot\"\ndaily_requests_per_server = 2\n\n\
         [[bots]]\nname = \"second\"\nagent = \"secondbot\"\nclients = [\"127.0.0.2/32\"]\n",
    );
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let port = origin.addr.port();
    assert_eq!(gemini(addr, &origin.url("/1")).await.0, "20 text/gemini");
    assert_eq!(
        gemini(addr, &format!("gemini://127.1:{port}/2")).await.0,
        "20 text/gemini"
    );
    // `localhost` is the same server (its address); so is `[::ffff:127.0.0.1]`.
    for spelling in [
        format!("gemini://localhost:{port}/3"),
        format!("gemini://[::ffff:127.0.0.1]:{port}/3"),
        origin.url("/3"),
    ] {
        let (header, _) = gemini(addr, &spelling).await;
        // A day from the first start, give or take the 5-minute bucket.
        assert!(
            (86_000..=86_400 + 300).contains(&slow_down(&header)),
            "{spelling}: {header}"
        );
    }
    let why = last_refusal(&proxy, port).await;
    assert!(why.contains("daily_requests_per_server = 2"), "{why}");
    assert_eq!(origin.count("/3"), 0);
    // Another server has its own budget; another bot its own.
    assert_eq!(gemini(addr, &other.url("/1")).await.0, "20 text/gemini");
    let (header, _) = gemini_as(addr, &origin.url("/4"), "127.0.0.2", None).await;
    assert_eq!(header, "20 text/gemini");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_spent_over_gopher_holds_over_gopher() {
    let hole = hole(
        Reply::Bytes(b"User-agent: *\r\nAllow: /\r\n".to_vec()),
        Reply::Bytes(b"hello\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(with_limits("daily_requests_per_server = 1")).await;
    let addr = proxy.addr(Listener::Gopher);
    let line = format!("{}\r\n", hole.url("0/page"));
    assert_eq!(gopher(addr, line.as_bytes()).await, b"hello\r\n");
    let answer = String::from_utf8(gopher(addr, line.as_bytes()).await).unwrap();
    assert!(answer.starts_with('3'), "{answer}");
    assert!(answer.contains("daily_requests_per_server = 1"), "{answer}");
    assert_eq!(hole.count(b"/page"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_requests_do_not_beat_the_concurrency() {
    let origin = capsule(
        text("20 text/plain", ""),
        Reply::Delayed(
            Duration::from_millis(600),
            b"20 text/gemini\r\nslow".to_vec(),
        ),
    )
    .await;
    let mut config = with_limits("concurrency = 1");
    config.politeness.per_host_concurrency = 4;
    config.politeness.max_wait = SHORT_WAIT;
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    // robots.txt first, so both requests meet only the limit.
    assert_eq!(gemini(addr, &origin.url("/warm")).await.0, "20 text/gemini");
    let first = tokio::spawn({
        let url = origin.url("/1");
        async move { gemini(addr, &url).await.0 }
    });
    wait_until("the first request at the origin", || {
        origin.count("/1") == 1
    })
    .await;
    let (header, _) = gemini(addr, &origin.url("/2")).await;
    assert_eq!(slow_down(&header), 1, "{header}");
    let why = last_refusal(&proxy, origin.addr.port()).await;
    assert!(why.contains("concurrency = 1"), "{why}");
    assert_eq!(first.await.unwrap(), "20 text/gemini");
    // Its slot is free once the answer is relayed.
    assert_eq!(gemini(addr, &origin.url("/3")).await.0, "20 text/gemini");
    assert_eq!(origin.count("/2"), 0);
}

/// Seconds since the epoch at a time of some day, UTC.
fn at(h: u64, m: u64, s: u64) -> Duration {
    Duration::from_secs(20_000 * 86_400 + h * 3600 + m * 60 + s)
}

fn quiet_at(start: Duration) -> Config {
    let mut config = with_limits("quiet_hours = [\"23:00-01:00\"]");
    config.wall_clock = WallClock::StartingAt(start);
    config.politeness.max_wait = Duration::from_secs(5);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_hours_hold_across_midnight() {
    let origin = open_capsule().await;
    for (start, left) in [
        (at(23, 30, 0), 5400),
        (at(0, 30, 0), 1800),
        (at(23, 0, 0), 7200),
    ] {
        let proxy = start_proxy(quiet_at(start)).await;
        let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/night")).await;
        let secs = slow_down(&header);
        assert!(secs <= left && secs + 5 >= left, "{start:?}: {header}");
        let why = last_refusal(&proxy, origin.addr.port()).await;
        assert!(why.contains("quiet_hours"), "{why}");
    }
    assert_eq!(origin.count("/night"), 0);
    for start in [at(1, 0, 0), at(22, 59, 0), at(12, 0, 0)] {
        let proxy = start_proxy(quiet_at(start)).await;
        assert_eq!(
            gemini(proxy.addr(Listener::Gemini), &origin.url("/day"))
                .await
                .0,
            "20 text/gemini"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_just_before_the_end_of_quiet_hours_waits_for_it() {
    let origin = open_capsule().await;
    let proxy = start_proxy(quiet_at(at(0, 59, 59))).await;
    let asked = std::time::Instant::now();
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &origin.url("/dawn"))
            .await
            .0,
        "20 text/gemini"
    );
    let starts = page_starts(&[&origin]);
    assert!(
        (starts[0] - asked).as_secs_f64() >= 1.0 - JITTER,
        "started before 01:00"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_bots_with_different_floors_at_one_server() {
    let origin = open_capsule().await;
    let mut config = test_config_with(
        "[bot]\nagent = \"examplebot\"\nmin_delay = \"3s\"\n\n\
         [[bots]]\nname = \"quick\"\nagent = \"quickbot\"\nclients = [\"127.0.0.2/32\"]\n",
    );
    config.politeness.max_wait = Duration::from_secs(1);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let quick = |path: &str| {
        let url = origin.url(path);
        async move { gemini_as(addr, &url, "127.0.0.2", None).await.0 }
    };
    assert_eq!(quick("/0").await, "20 text/gemini");
    // Its floor holds this bot 3 s after any start, whatever robots.txt (no
    // Crawl-delay) says…
    let (header, _) = gemini(addr, &origin.url("/1")).await;
    assert!((2..=3).contains(&slow_down(&header)), "{header}");
    // …and not the other bot, whose spacing is robots.txt's (none).
    assert_eq!(quick("/2").await, "20 text/gemini");
    assert_eq!(origin.count("/1"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_floor_spaces_the_bots_starts_at_a_server() {
    let origin = open_capsule().await;
    let mut config = with_limits("min_delay = \"300ms\"");
    config.politeness.max_wait = Duration::from_secs(10);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let urls = (0..4).map(|i| origin.url(&format!("/p{i}")));
    for header in gemini_at_once(addr, urls).await {
        assert_eq!(header, "20 text/gemini");
    }
    let starts = page_starts(&[&origin]);
    let span = (starts[3] - starts[0]).as_secs_f64();
    assert!(span >= 3.0 * 0.3 - JITTER, "{span} s for four starts");
}

#[test]
fn silly_limits_are_refused_naming_the_key() {
    let cases = [
        ("min_delay = \"2y\"", "bot.min_delay"),
        ("min_delay = \"400d\"", "bot.min_delay"),
        ("concurrency = 0", "bot.concurrency"),
        ("concurrency = 100000", "bot.concurrency"),
        ("rate = \"0/s\"", "bot.rate"),
        ("rate = \"10/fortnight\"", "bot.rate"),
        ("rate = \"99999999999/s\"", "bot.rate"),
        (
            "daily_requests_per_server = 0",
            "bot.daily_requests_per_server",
        ),
        (
            "daily_requests_per_server = 4000000000",
            "bot.daily_requests_per_server",
        ),
        ("quiet_hours = [\"25:00-01:00\"]", "bot.quiet_hours"),
        ("quiet_hours = [\"10:00-10:00\"]", "bot.quiet_hours"),
        (
            "quiet_hours = [\"00:00-12:00\", \"12:00-00:00\"]",
            "bot.quiet_hours",
        ),
        ("quiet_hours = \"22:00-06:00\"", "quiet_hours"),
    ];
    for (line, key) in cases {
        let toml = format!("[bot]\nagent = \"examplebot\"\n{line}\n");
        let err = robots_proxy::config::RawConfig::parse(&toml)
            .and_then(|raw| {
                raw.resolve(&robots_proxy::cli::RunArgs::default())
                    .map_err(|e| e.to_string())
            })
            .expect_err(line)
            .to_string();
        assert!(err.contains(key), "{line}: {err}");
    }
    let toml =
        "[[bots]]\nname = \"b\"\nagent = \"b\"\nclients = [\"127.0.0.2/32\"]\nrate = \"1/eon\"\n";
    let err = robots_proxy::config::RawConfig::parse(toml)
        .and_then(|raw| {
            raw.resolve(&robots_proxy::cli::RunArgs::default())
                .map_err(|e| e.to_string())
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("bots.rate") && err.contains("\"b\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_does_not_reset_a_budget() {
    let origin = open_capsule().await;
    let config = with_limits("daily_requests_per_server = 1");
    let dir = config.state_dir.clone();
    let proxy = start_proxy(config).await;
    assert_eq!(
        gemini(proxy.addr(Listener::Gemini), &origin.url("/1"))
            .await
            .0,
        "20 text/gemini"
    );
    proxy.shutdown();
    assert!(proxy.drained().await);
    drop(proxy);
    // The next process, on the same state directory.
    let mut config = with_limits("daily_requests_per_server = 1");
    config.state_dir = dir.clone();
    let proxy = start_proxy(config).await;
    let (header, _) = gemini(proxy.addr(Listener::Gemini), &origin.url("/2")).await;
    assert!(slow_down(&header) > 86_000, "{header}");
    assert_eq!(origin.count("/2"), 0);
    // What the file holds: the bot, the server, its first bucket, one start
    // in it.
    let kept = std::fs::read_to_string(dir.join("budgets")).unwrap();
    let line = "default\ta/127.0.0.1\t";
    assert!(
        kept.starts_with(line) && kept.trim_end().ends_with("\t0:1") && kept.lines().count() == 1,
        "{kept:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_budget_file_is_read_for_what_it_holds() {
    let origin = open_capsule().await;
    let config = with_limits("daily_requests_per_server = 2");
    std::fs::create_dir_all(&config.state_dir).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let port = origin.addr.port();
    let lines = [
        // Junk, binary, a bucket long past, a count of zero, too many fields…
        "nonsense".to_string(),
        "\u{0}\u{1}\u{2}".to_string(),
        format!("default\ta/127.0.0.1:{port}\t{}\t5", now / 300 - 400),
        format!("default\ta/127.0.0.1:{port}\t{}\t0", now / 300),
        format!("default\ta/127.0.0.1:{port}\t{}\t1\t9", now / 300),
        format!("default\ta/127.0.0.1:{port}\t{}\t99999999999", now / 300),
        // …and one good line: one start of the two allowed.
        format!("default\ta/127.0.0.1:{port}\t{}\t1", now / 300),
    ];
    std::fs::write(config.state_dir.join("budgets"), lines.join("\n")).unwrap();
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    assert_eq!(gemini(addr, &origin.url("/1")).await.0, "20 text/gemini");
    let (header, _) = gemini(addr, &origin.url("/2")).await;
    assert!(slow_down(&header) > 80_000, "{header}");
}

/// A limit's wait and the gate's wait after it share one `max_wait`: a
/// request the rate held for a second, whose server's turn then comes a
/// second later still, is told to slow down when the rate lets it go,
/// rather than waiting twice (2 s against a `max_wait` of 1.5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limits_wait_and_the_gates_share_one_max_wait() {
    let spaced = capsule(
        text("20 text/plain", "User-agent: *\nCrawl-delay: 1\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let open = open_capsule().await;
    let mut config = test_config_with(
        "[bot]\nagent = \"examplebot\"\nrate = \"1/s\"\n\n\
         [[bots]]\nname = \"second\"\nagent = \"secondbot\"\nclients = [\"127.0.0.2/32\"]\n",
    );
    config.politeness.max_wait = Duration::from_millis(1500);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    // The other bot: robots.txt, then a page a second later.
    let (header, _) = gemini_as(addr, &spaced.url("/w1"), "127.0.0.2", None).await;
    assert_eq!(header, "20 text/gemini");
    // The rate's one start for the next second, elsewhere.
    assert_eq!(gemini(addr, &open.url("/a")).await.0, "20 text/gemini");
    // The other bot queues the spaced server's next turn (a second away; it
    // is in the queue long before this bot's rate lets it reach the gate)...
    let w2 = tokio::spawn({
        let url = spaced.url("/w2");
        async move { gemini_as(addr, &url, "127.0.0.2", None).await.0 }
    });
    // ... so after the rate's second, this bot's turn there is a second
    // further: 2 s in all.
    let asked = std::time::Instant::now();
    let (header, _) = gemini(addr, &spaced.url("/b")).await;
    let waited = asked.elapsed().as_secs_f64();
    assert!(header.starts_with("44 "), "{header}");
    assert!(waited <= 1.5 + JITTER, "answered after {waited} s");
    assert_eq!(w2.await.unwrap(), "20 text/gemini");
    assert_eq!(spaced.count("/b"), 0);
}

/// A request one limit would hold (the bot's one slot is taken) and a later
/// one refuse (its daily budget is spent) is refused at once, naming the
/// budget, not after waiting out the first: the crawler hears "slow down"
/// while the request that holds the slot is still in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_a_later_limit_refuses_is_refused_without_waiting_for_an_earlier_one() {
    let origin = capsule(
        text("20 text/plain", ""),
        Reply::Delayed(Duration::from_secs(1), b"20 text/gemini\r\nslow".to_vec()),
    )
    .await;
    let mut config = with_limits("concurrency = 1\ndaily_requests_per_server = 1");
    config.politeness.per_host_concurrency = 4;
    config.politeness.max_wait = Duration::from_secs(30);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    // The one request of the day takes the slot, and the budget.
    let first = tokio::spawn({
        let url = origin.url("/1");
        async move { gemini(addr, &url).await.0 }
    });
    wait_until("the first request at the origin", || {
        origin.count("/1") == 1
    })
    .await;
    let (header, _) = gemini(addr, &origin.url("/2")).await;
    assert!(
        !first.is_finished(),
        "the refusal came at once, while the slot was still held"
    );
    assert!(
        slow_down(&header) > 80_000,
        "until the day's start leaves: {header}"
    );
    let why = last_refusal(&proxy, origin.addr.port()).await;
    assert!(why.contains("daily_requests_per_server = 1"), "{why}");
    assert_eq!(first.await.unwrap(), "20 text/gemini");
    assert_eq!(origin.count("/2"), 0);
}
