//! Admission on its own: an `Admission` value built from a config, a fake
//! robots.txt fetcher and the runtime's paused clock; no socket, no
//! listener, no `Context`. One test per step, and the order of refusals:
//! egress before robots.txt before the bot's limits before the turn; report
//! mode; one `max_wait` shared by a limit's wait and the turn's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use robots_proxy::admission::{admit, Admission, Admitted, Refused};
use robots_proxy::bot_limits::{self, Clock, Ledger, WallClock};
use robots_proxy::bots::BotId;
use robots_proxy::cache::RobotsCache;
use robots_proxy::cli::RunArgs;
use robots_proxy::config::{Config, RawConfig};
use robots_proxy::egress::Reach;
use robots_proxy::fetch::{FetchFuture, FetchOutcome, Polite, RobotsFetcher};
use robots_proxy::metrics::Metrics;
use robots_proxy::politeness::Politeness;
use robots_proxy::refusal::{Busy, Refusal};
use robots_proxy::target::{Server, Target};
use robots_proxy::upstream::Upstream;

/// A robots.txt for every server, and how often it was asked for.
struct Fake {
    robots: FetchOutcome,
    asked: AtomicUsize,
}

/// The fetcher admission is given, the test keeping the fake.
struct Fetcher(Arc<Fake>);

impl RobotsFetcher for Fetcher {
    fn fetch<'a>(&'a self, _: &'a Server, _: Option<&'a str>) -> FetchFuture<'a> {
        self.0.asked.fetch_add(1, Ordering::Relaxed);
        let robots = self.0.robots.clone();
        Box::pin(async move { robots })
    }
}

/// The config of `toml` (its `[bot]` the default bot), loopback allowed,
/// no spacing unless it asks for one.
fn config(toml: &str) -> Config {
    let raw = RawConfig::parse(toml).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    let args = RunArgs {
        allow_private_upstreams: true,
        state_dir: Some(std::env::temp_dir().join("rp-admission-unused")),
        ..RunArgs::default()
    };
    let mut config = raw.resolve(&args).unwrap_or_else(|e| panic!("{e}\n{toml}"));
    config.politeness.default_delay = Duration::ZERO;
    config
}

/// Admission over `config`, every server's robots.txt `robots`.
fn admission(config: Config, robots: FetchOutcome) -> (Admission, Arc<Fake>) {
    let config = Arc::new(config);
    let names: Vec<&str> = config.bots.all().iter().map(|b| b.name.as_str()).collect();
    let metrics = Arc::new(Metrics::with(&names, None));
    let politeness = Politeness::new(config.politeness.clone());
    let fake = Arc::new(Fake {
        robots,
        asked: AtomicUsize::new(0),
    });
    let polite = Polite {
        inner: Fetcher(fake.clone()),
        gate: politeness.clone(),
        metrics: metrics.clone(),
    };
    let robots = Arc::new(RobotsCache::new(
        Arc::new(polite),
        config.robots.clone(),
        config.bots.profiles(),
    ));
    let reach = Reach {
        allow_private: config.limits.allow_private_upstreams,
        ports: config.limits.upstream_ports.clone(),
        own: Vec::new(),
        deny: Default::default(),
    };
    let upstream = Arc::new(Upstream::new(reach, config.limits.connect_timeout).unwrap());
    let clock = Clock::new(WallClock::StartingAt(Duration::from_secs(20_000 * 86_400)));
    let ledger = Ledger::new(clock, None, Box::new(bot_limits::Alone));
    let limits = bot_limits::steps(
        &config.bots,
        &config.hosts,
        politeness.config().key,
        &ledger,
    );
    let admission = Admission {
        config,
        upstream,
        robots,
        politeness,
        metrics,
        limits,
        generation: 0,
        shutdown: tokio_util::sync::CancellationToken::new(),
    };
    (admission, fake)
}

fn found(robots: &str) -> FetchOutcome {
    FetchOutcome::Found(robots.as_bytes().to_vec())
}

fn target(url: &str) -> Target {
    Target::parse(url).unwrap()
}

const BOT: BotId = 0;

async fn refused(admission: &Admission, url: &str) -> Refused {
    match admit(admission, BOT, &target(url)).await {
        Ok(_) => panic!("{url} was admitted"),
        Err(refused) => refused,
    }
}

async fn admitted(admission: &Admission, url: &str) -> Admitted {
    match admit(admission, BOT, &target(url)).await {
        Ok(admitted) => admitted,
        Err(refused) => panic!("{url}: {}", refused.refusal),
    }
}

const BOT_TOML: &str = "[bot]\nagent = \"examplebot\"\n";

/// robots.txt decides, fetched once for the server and kept.
#[tokio::test(start_paused = true)]
async fn robots_txt_decides_and_is_fetched_once() {
    let robots = found("User-agent: *\nDisallow: /private\n");
    let (admission, fake) = admission(config(BOT_TOML), robots);
    drop(admitted(&admission, "gemini://127.0.0.1/page").await);
    let no = refused(&admission, "gemini://127.0.0.1/private/x").await;
    assert!(
        matches!(no.refusal, Refusal::Disallowed(_)),
        "{}",
        no.refusal
    );
    assert!(no.robots.is_some(), "the refusal carries its robots.txt");
    assert_eq!(fake.asked.load(Ordering::Relaxed), 1);
}

/// Egress comes first: a server the proxy may not connect to is refused
/// before its robots.txt is asked for.
#[tokio::test(start_paused = true)]
async fn egress_is_asked_before_robots_txt() {
    let mut config = config(BOT_TOML);
    config.limits.allow_private_upstreams = false;
    let (admission, fake) = admission(config, found(""));
    for url in [
        "gemini://127.0.0.1/",
        "gemini://10.0.0.1/",
        "gopher://127.0.0.1:25/",
    ] {
        let no = refused(&admission, url).await;
        assert!(
            matches!(no.refusal, Refusal::ProxyRule(_)),
            "{url}: {}",
            no.refusal
        );
    }
    assert_eq!(fake.asked.load(Ordering::Relaxed), 0);
}

/// robots.txt before the bot's limits: a disallowed request spends nothing
/// of the bot's budget.
#[tokio::test(start_paused = true)]
async fn a_disallowed_request_spends_no_budget() {
    let toml = format!("{BOT_TOML}daily_requests_per_server = 1\n");
    let robots = found("User-agent: *\nDisallow: /private\n");
    let (admission, _) = admission(config(&toml), robots);
    for _ in 0..3 {
        refused(&admission, "gemini://127.0.0.1/private/x").await;
    }
    let go = admitted(&admission, "gemini://127.0.0.1/page").await;
    drop(go);
    let no = refused(&admission, "gemini://127.0.0.1/page").await;
    let Refusal::SlowDown(slow) = &no.refusal else {
        panic!("{}", no.refusal)
    };
    assert!(matches!(slow.why, Busy::Limit(_)), "{:?}", slow.why);
}

/// The bot's limits before the turn: a request a limit refuses takes no
/// place at the gate (another bot's request there is not spaced after it).
#[tokio::test(start_paused = true)]
async fn a_request_a_limit_refuses_takes_no_turn() {
    let toml = format!(
        "{BOT_TOML}daily_requests_per_server = 1\n\n[politeness]\ndefault_delay = \"5s\"\nmax_wait = \"1s\"\n"
    );
    let (admission, _) = admission(config(&toml), found(""));
    let first = admitted(&admission, "gemini://127.0.0.1/a").await;
    drop(first);
    tokio::time::advance(Duration::from_secs(6)).await;
    // Used up: held by the budget, the gate not asked.
    let no = refused(&admission, "gemini://127.0.0.1/b").await;
    assert!(matches!(&no.refusal, Refusal::SlowDown(s) if matches!(s.why, Busy::Limit(_))));
    let next = admission
        .politeness
        .would_wait(&admitted_server(&admission).await, Duration::from_secs(5));
    assert_eq!(next, Duration::ZERO, "the refused request took no turn");
}

/// The server `gemini://127.0.0.1/` resolves to (no lookup: a literal).
async fn admitted_server(admission: &Admission) -> Server {
    robots_proxy::admission::where_to(admission, &target("gemini://127.0.0.1/"))
        .await
        .unwrap()
}

/// The turn: starts at a server are spaced by its Crawl-delay; a turn past
/// `max_wait` is "slow down" at once, not a wait.
#[tokio::test(start_paused = true)]
async fn the_turn_spaces_starts_by_the_crawl_delay() {
    let toml = format!("{BOT_TOML}\n[politeness]\nmax_wait = \"3s\"\n");
    let robots = found("User-agent: *\nCrawl-delay: 2\n");
    let (admission, _) = admission(config(&toml), robots);
    let first = admitted(&admission, "gemini://127.0.0.1/1").await;
    drop(first);
    let second = admitted(&admission, "gemini://127.0.0.1/2").await;
    assert!(
        second.waited >= Duration::from_secs(2) - Duration::from_millis(1),
        "{:?}",
        second.waited
    );
    drop(second);
    // Two more at once: the second of them would wait 4 s, past max_wait.
    let (three, four) = (
        target("gemini://127.0.0.1/3"),
        target("gemini://127.0.0.1/4"),
    );
    let (a, b) = tokio::join!(
        admit(&admission, BOT, &three),
        admit(&admission, BOT, &four)
    );
    let refusals: Vec<_> = [a, b].into_iter().filter_map(Result::err).collect();
    assert_eq!(refusals.len(), 1);
    assert!(
        matches!(refusals[0].refusal, Refusal::SlowDown(_)),
        "{}",
        refusals[0].refusal
    );
}

/// Report mode: what robots.txt would refuse goes in the report and the
/// request is admitted.
#[tokio::test(start_paused = true)]
async fn report_mode_admits_and_reports() {
    let toml = format!("{BOT_TOML}mode = \"report\"\n");
    let robots = found("User-agent: *\nDisallow: /private\n");
    let (admission, _) = admission(config(&toml), robots);
    let go = admitted(&admission, "gemini://127.0.0.1/private/x").await;
    let would = go.report.would().expect("a refusal reported");
    assert!(would.contains("disallowed"), "{would}");
}

/// A robots.txt that cannot be fetched, with `on_unreachable = "disallow"`
/// (the default): refused, saying when it will be asked again.
#[tokio::test(start_paused = true)]
async fn an_unreachable_robots_txt_refuses() {
    let unreachable = FetchOutcome::unreachable("no answer");
    let (admission, _) = admission(config(BOT_TOML), unreachable);
    let no = refused(&admission, "gemini://127.0.0.1/page").await;
    assert!(
        matches!(no.refusal, Refusal::RobotsUnreachable(_)),
        "{}",
        no.refusal
    );
}

/// A limit's wait and the turn's share one `max_wait` (1.5 s): held a
/// second by its rate, a request whose turn then comes a second later still
/// (another bot started meanwhile) is told to slow down, though either wait
/// alone is within `max_wait`.
#[tokio::test(start_paused = true)]
async fn a_limit_and_the_turn_share_max_wait() {
    let toml = format!(
        "{BOT_TOML}rate = \"1/s\"\n\n[[bots]]\nname = \"second\"\nagent = \"secondbot\"\nclients = [\"127.0.0.2/32\"]\n\n[politeness]\nmax_wait = \"1500ms\"\n"
    );
    let robots = found("User-agent: *\nCrawl-delay: 1\n");
    let (admission, _) = admission(config(&toml), robots);
    const SECOND: BotId = 1;
    let url = |path: &str| target(&format!("gemini://127.0.0.1{path}"));
    // robots.txt, then the second bot's start a second later.
    let w0 = admit(&admission, SECOND, &url("/w0")).await;
    drop(w0.unwrap_or_else(|no| panic!("{}", no.refusal)));
    // This bot's start, a second later again: its rate's one start.
    drop(admitted(&admission, "gemini://127.0.0.1/1").await);
    let (w1, two) = (url("/w1"), url("/2"));
    let (other, held) = tokio::join!(admit(&admission, SECOND, &w1), admit(&admission, BOT, &two));
    assert!(other.is_ok(), "the second bot's turn, a second away");
    let no = held
        .err()
        .expect("held 1 s by the rate, then 1 s more by the turn");
    assert!(matches!(no.refusal, Refusal::SlowDown(_)), "{}", no.refusal);
}

/// "Slow down" after `waited`, with a `Retry-After` of `retry` (seconds).
fn told_after(refused: &Refused, asked: tokio::time::Instant, (waited, retry): (u64, u64)) {
    let Refusal::SlowDown(slow) = &refused.refusal else {
        panic!("{}", refused.refusal);
    };
    assert_eq!(asked.elapsed().as_secs(), waited, "{}", refused.refusal);
    assert_eq!(slow.retry_after.as_secs(), retry, "{}", refused.refusal);
}

/// How long a request waits for its turn is its crawler's patience: the
/// web's 150 s unless set (web crawlers wait minutes: Scrapy 180 s), the small
/// web's 60 s. A turn 100 s away (robots.txt's fetch took the server's turn,
/// and its Crawl-delay is 100 s) is waited for on the web; on Gemini the
/// request is held until its 60 s have passed, then told "slow down" with
/// the 40 s left.
#[tokio::test(start_paused = true)]
async fn the_web_waits_for_a_turn_the_small_web_would_not() {
    let robots = found("User-agent: *\nCrawl-delay: 100\n");
    let (web, _) = admission(config(BOT_TOML), robots.clone());
    let page = admitted(&web, "http://127.0.0.1/1").await;
    assert!(page.waited >= Duration::from_secs(100) - Duration::from_millis(1));
    assert!(page.waited < Duration::from_secs(101), "{:?}", page.waited);

    let (small, _) = admission(config(BOT_TOML), robots);
    let asked = tokio::time::Instant::now();
    let refused = refused(&small, "gemini://127.0.0.1/1").await;
    told_after(&refused, asked, (60, 40));
}

/// A bot's `max_wait` is its crawler's patience, whatever the protocol: a
/// crawler that gives up after 5 s is told "slow down" when they have
/// passed, not kept waiting past them; one that waits 2 minutes waits for a
/// Gemini turn 100 s away.
#[tokio::test(start_paused = true)]
async fn a_bot_s_max_wait_is_its_patience_on_every_protocol() {
    let robots = found("User-agent: *\nCrawl-delay: 100\n");
    let impatient = format!("{BOT_TOML}max_wait = \"5s\"\n");
    let (web, _) = admission(config(&impatient), robots.clone());
    let asked = tokio::time::Instant::now();
    let refused = refused(&web, "https://127.0.0.1/1").await;
    told_after(&refused, asked, (5, 95));

    let patient = format!("{BOT_TOML}max_wait = \"2m\"\n");
    let (small, _) = admission(config(&patient), robots);
    let page = admitted(&small, "gemini://127.0.0.1/1").await;
    assert!(page.waited >= Duration::from_secs(100) - Duration::from_millis(1));
}

/// When `method url` of the bot is admitted, in whole seconds from `t0`
/// (the admission dropped at once: the request is done).
fn asked_at(
    admission: &Arc<Admission>,
    (method, url): (&'static str, &str),
    t0: tokio::time::Instant,
) -> tokio::task::JoinHandle<Result<u64, String>> {
    let (admission, target) = (admission.clone(), target(url));
    tokio::spawn(async move {
        match robots_proxy::admission::admit_method(&admission, (BOT, method), &target).await {
            Ok(admitted) => Ok(admitted.permit.started.duration_since(t0).as_secs()),
            Err(refused) => Err(refused.refusal.to_string()),
        }
    })
}

/// A crawler whose client gives up while its page waits (its own timeout),
/// then asks for the page again, gets it in its old place, ahead of those
/// who came after it: the place is kept under (bot, method, canonical URL),
/// so the URL spelled another way finds it, and another method does not; a
/// copy asked while it waits gets a place of its own. The site's spacing
/// holds throughout.
#[tokio::test(start_paused = true)]
async fn a_page_asked_again_takes_its_kept_place_through_admission() {
    let robots = found("User-agent: *\nCrawl-delay: 10\n");
    let (admission, _) = admission(config(BOT_TOML), robots);
    let admission = Arc::new(admission);
    let t0 = tokio::time::Instant::now();
    // robots.txt takes the turn at 0; pages 1, 2, 3 queue for 10, 20, 30.
    let one = asked_at(&admission, ("GET", "http://127.0.0.1/1"), t0);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let two = asked_at(&admission, ("GET", "http://127.0.0.1/2"), t0);
    tokio::time::sleep(Duration::from_millis(1)).await;
    let three = asked_at(&admission, ("GET", "http://127.0.0.1/3"), t0);
    tokio::time::sleep(Duration::from_secs(5)).await;
    two.abort();
    assert!(two.await.unwrap_err().is_cancelled());
    assert_eq!(admission.politeness.kept_places(), 1);
    // Another method for the same URL: a request of its own, at the end.
    let head = asked_at(&admission, ("HEAD", "http://127.0.0.1/2"), t0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // The same page, spelled with its scheme's port and in capitals.
    let again = asked_at(&admission, ("GET", "HTTP://127.0.0.1:80/2"), t0);
    tokio::time::sleep(Duration::from_millis(1)).await;
    // A second copy while it waits: a place of its own, at the end.
    let copy = asked_at(&admission, ("GET", "http://127.0.0.1/2"), t0);
    let turns = [one, again, three, head, copy];
    let mut at = Vec::new();
    for t in turns {
        at.push(t.await.unwrap());
    }
    assert_eq!(at, [Ok(10), Ok(20), Ok(30), Ok(40), Ok(50)]);
    assert_eq!(admission.politeness.kept_places(), 0);
}

/// A page whose turn is past its bound (the web's here 30 s) waits in line
/// until the bound, then is told "slow down" with what is left of its wait;
/// asked again at once, it takes its kept place and is served at its turn,
/// not sent to the end behind the pages asked meanwhile.
#[tokio::test(start_paused = true)]
async fn a_page_told_at_its_bound_comes_back_to_its_place() {
    let toml = format!("{BOT_TOML}\n[politeness]\nweb_max_wait = \"30s\"\n");
    let robots = found("User-agent: *\nCrawl-delay: 10\n");
    let (admission, _) = admission(config(&toml), robots);
    let admission = Arc::new(admission);
    let t0 = tokio::time::Instant::now();
    let pages = ["/1", "/2", "/3", "/4"].map(|p| format!("http://127.0.0.1{p}"));
    let mut first = Vec::new();
    for url in &pages {
        first.push(asked_at(&admission, ("GET", url), t0));
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Page 5 comes while 4 waits.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let five = asked_at(&admission, ("GET", "http://127.0.0.1/5"), t0);
    let mut at = Vec::new();
    for t in first {
        at.push(t.await.unwrap());
    }
    // 1, 2, 3 at 10, 20, 30; 4 (due at 40) is told at its bound, 30 s after
    // it asked, to come back in 10 s.
    assert_eq!(at[..3], [Ok(10), Ok(20), Ok(30)]);
    let told = at[3].clone().unwrap_err();
    assert!(told.contains("retry in 10 s"), "{told}");
    assert_eq!(t0.elapsed().as_secs(), 30);
    assert_eq!(admission.politeness.kept_places(), 1);
    let again = asked_at(&admission, ("GET", &pages[3]), t0);
    assert_eq!(again.await.unwrap(), Ok(40));
    assert_eq!(five.await.unwrap(), Ok(50));
}

/// A turn past the horizon (robots.txt's Crawl-delay of an hour) is told at
/// once, with the whole wait, and keeps no place: waiting would buy nothing.
#[tokio::test(start_paused = true)]
async fn a_turn_past_the_horizon_is_told_at_once() {
    let robots = found("User-agent: *\nCrawl-delay: 3600\n");
    let (admission, _) = admission(config(BOT_TOML), robots);
    let asked = tokio::time::Instant::now();
    let refused = refused(&admission, "http://127.0.0.1/1").await;
    told_after(&refused, asked, (0, 3600));
    assert_eq!(admission.politeness.kept_places(), 0);
}
