//! Policy engine against robotxt and texting_robots on the same input, in one run.
//!
//! Input: benches/data (robots.txt with 50 rules in `*`, 1,000 URLs, the expected
//! verdicts for FooBot). Before timing, all three parsers must agree with the
//! expected verdicts on every URL. Each gets the path and query of the URLs,
//! extracted once outside the timed loop, as robotxt's `is_allowed` expects.
//!
//! Run: `cargo bench --bench policy` (criterion, each engine timed in turn),
//! or `cargo bench --bench policy -- --ratios`: the same work timed in short
//! alternating turns (ours, theirs, theirs, ours, ...), so that the machine's
//! swings in speed fall on both sides of each ratio; it prints the median
//! ratio and the spread over the turns. docs/dev/performance.md, "Performance".

use criterion::{black_box, criterion_group, Criterion, Throughput};
use robots_proxy::robots::{BotProfile, Policy, RobotsTxt};
use robots_proxy::spelling::SelectorReading;
use robots_proxy::target::Target;

const ROBOTS: &[u8] = include_bytes!("data/robots-50-rules.txt");
const URLS: &str = include_str!("data/urls-1000.txt");
const EXPECTED: &str = include_str!("data/expected-verdicts-foobot.txt");
const AGENT: &str = "FooBot";

/// `https://host/path?q` → `/path?q`.
fn path_and_query(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let start = after_scheme.find('/').unwrap_or(after_scheme.len());
    let path = &after_scheme[start..];
    let path = path.split('#').next().unwrap_or(path);
    if path.is_empty() {
        "/"
    } else {
        path
    }
}

fn inputs() -> (Vec<&'static str>, Vec<bool>) {
    let paths: Vec<&str> = URLS.lines().map(path_and_query).collect();
    let expected: Vec<bool> = EXPECTED.trim().bytes().map(|b| b == b'1').collect();
    assert_eq!(paths.len(), 1000);
    assert_eq!(expected.len(), 1000);
    (paths, expected)
}

fn agree(name: &str, paths: &[&str], expected: &[bool], decide: impl Fn(&str) -> bool) {
    let wrong: Vec<&str> = paths
        .iter()
        .zip(expected)
        .filter(|(p, e)| decide(p) != **e)
        .map(|(p, _)| *p)
        .collect();
    assert!(
        wrong.is_empty(),
        "{name} disagrees on {} URLs: {:?}",
        wrong.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// What a request costs ours: the URL to its canonical target, then the
/// decision over both spellings of its path (`Target::decide`).
fn decide_url(policy: &Policy, url: &str) -> bool {
    Target::parse(url)
        .and_then(|t| {
            let paths = robots_proxy::protocol::rules::of(t.scheme).paths;
            t.decide(policy, (paths, SelectorReading::default()))
        })
        .map(|d| d.allowed())
        .unwrap_or(false)
}

fn bench(c: &mut Criterion) {
    let (paths, expected) = inputs();
    let ours = RobotsTxt::parse(ROBOTS).policy(&BotProfile::new(AGENT));
    let robotxt = robotxt::Robots::parse(ROBOTS, AGENT);
    let texting = texting_robots::Robot::new(AGENT, ROBOTS).expect("texting_robots parses");
    agree("robots-proxy", &paths, &expected, |p| {
        ours.decide(p).allowed()
    });
    agree("robotxt", &paths, &expected, |p| robotxt.is_allowed(p));
    agree("texting_robots", &paths, &expected, |p| texting.allowed(p));

    let mut group = c.benchmark_group("decide_1000_urls");
    group.throughput(Throughput::Elements(paths.len() as u64));
    group.bench_function("robots-proxy", |b| {
        b.iter(|| {
            paths
                .iter()
                .filter(|p| ours.decide(black_box(p)).allowed())
                .count()
        })
    });
    group.bench_function("robotxt", |b| {
        b.iter(|| {
            paths
                .iter()
                .filter(|p| robotxt.is_allowed(black_box(p)))
                .count()
        })
    });
    group.bench_function("texting_robots", |b| {
        b.iter(|| {
            paths
                .iter()
                .filter(|p| texting.allowed(black_box(p)))
                .count()
        })
    });
    group.finish();

    // From the URL string, what a request really costs: ours parses the URL
    // into its canonical target and decides over both spellings (the path
    // as written and as decoded, `Target::decide`); texting_robots takes the
    // URL and extracts its path itself; robotxt takes a path only, so it gets
    // the path and query sliced from the URL inside the timed loop.
    let urls: Vec<&str> = URLS.lines().collect();
    let ours_from_url = |u: &str| decide_url(&ours, u);
    agree("robots-proxy (URL)", &urls, &expected, ours_from_url);
    agree("texting_robots (URL)", &urls, &expected, |u| {
        texting.allowed(u)
    });
    let mut group = c.benchmark_group("decide_1000_urls_from_url_string");
    group.throughput(Throughput::Elements(urls.len() as u64));
    group.bench_function("robots-proxy", |b| {
        b.iter(|| urls.iter().filter(|u| ours_from_url(black_box(u))).count())
    });
    group.bench_function("robotxt", |b| {
        b.iter(|| {
            urls.iter()
                .filter(|u| robotxt.is_allowed(path_and_query(black_box(u))))
                .count()
        })
    });
    group.bench_function("texting_robots", |b| {
        b.iter(|| {
            urls.iter()
                .filter(|u| texting.allowed(black_box(u)))
                .count()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("parse_for_agent");
    group.throughput(Throughput::Elements(1));
    group.bench_function("robots-proxy", |b| {
        let bot = BotProfile::new(AGENT);
        b.iter(|| RobotsTxt::parse(black_box(ROBOTS)).policy(&bot))
    });
    group.bench_function("robotxt", |b| {
        b.iter(|| robotxt::Robots::parse(black_box(ROBOTS), AGENT))
    });
    group.bench_function("texting_robots", |b| {
        b.iter(|| texting_robots::Robot::new(AGENT, black_box(ROBOTS)).unwrap())
    });
    group.finish();

    // A hostile file: 500 KiB of distinct rules that all rank alike (one
    // length, one kind, one bucket), the worst case for finding twins, and a
    // path that tries the whole bucket and matches none of it.
    let hostile = hostile_file();
    let mut group = c.benchmark_group("hostile_500k_one_bucket");
    group.sample_size(10);
    group.bench_function("parse + policy", |b| {
        let bot = BotProfile::new(AGENT);
        b.iter(|| RobotsTxt::parse(black_box(&hostile)).policy(&bot))
    });
    let policy = RobotsTxt::parse(&hostile).policy(&BotProfile::new(AGENT));
    assert_eq!(
        policy.rule_count(),
        hostile.split(|&b| b == b'\n').count() - 2
    );
    group.bench_function("decide a miss in the bucket", |b| {
        b.iter(|| policy.decide(black_box("/azzzzz")).allowed())
    });
    // 15,000 agent lines, then `Crawl-delay` lines to the parse limit: every
    // delay applies to every agent before it.
    let mut delays = Vec::new();
    for i in 0..15_000 {
        delays.extend_from_slice(format!("User-agent: a{i}\n").as_bytes());
    }
    while delays.len() + 16 <= robots_proxy::robots::PARSE_LIMIT {
        delays.extend_from_slice(b"Crawl-delay: 1\n");
    }
    group.bench_function("parse 15,000 agents and 17,000 delays", |b| {
        b.iter(|| RobotsTxt::parse(black_box(&delays)))
    });
    // Wildcard rules written to defeat the signatures (`*aaa…ab00042*z`),
    // against a 1 KiB path holding every byte pair they need and matching
    // none: every rule must search the path.
    let mut wild = b"User-agent: *\n".to_vec();
    for i in 0.. {
        let line = format!("Disallow: *{}b{i:05}*z\n", "a".repeat(26));
        if wild.len() + line.len() > robots_proxy::robots::PARSE_LIMIT {
            break;
        }
        wild.extend_from_slice(line.as_bytes());
    }
    let policy = RobotsTxt::parse(&wild).policy(&BotProfile::new(AGENT));
    // Every ordered pair of digits (each pair, then all of it reversed),
    // after a run of `a` and a `b`.
    let mut digits = String::new();
    for a in 0..10 {
        for b in a..10 {
            digits.push_str(&format!("{a}{b}"));
        }
    }
    let path = format!(
        "/{}b{digits}{}",
        "a".repeat(900),
        digits.chars().rev().collect::<String>()
    );
    assert!(policy.decide(&path).allowed());
    group.bench_function("decide a path every wildcard rule must search", |b| {
        b.iter(|| policy.decide(black_box(&path)).allowed())
    });
    // The same rules against a Gopher selector that reads 54 ways (escaped
    // eight times over, a tail, dot segments): its spellings share one budget
    // of wildcard searches (`spelling::spelling_budget`), so this costs about
    // four of the decisions above (the selector is refused once the budget is
    // spent), not 54 of them.
    let selector = format!(
        "{}%2525252525252541/b/../c//d?x\tq",
        &path[..path.len() - 20]
    );
    let spellings =
        robots_proxy::spelling::gopher_spellings(selector.as_bytes(), SelectorReading::Safe)
            .expect("a selector that can be read")
            .len();
    assert!(spellings > 40, "{spellings}");
    group.bench_function(
        format!("decide a selector read {spellings} ways (all spellings)"),
        |b| {
            b.iter(|| {
                robots_proxy::spelling::decide_selector(
                    &policy,
                    black_box(selector.as_bytes()),
                    SelectorReading::Safe,
                )
                .is_ok()
            })
        },
    );
    group.bench_function("decide the same selector's first spelling alone", |b| {
        b.iter(|| {
            policy
                .decide_bytes(black_box(selector.as_bytes()))
                .allowed()
        })
    });
    group.finish();
}

/// `User-agent: *` and as many `Disallow: /aNNNNN` as fit in the parse limit.
fn hostile_file() -> Vec<u8> {
    let mut file = b"User-agent: *\n".to_vec();
    for i in 0.. {
        let line = format!("Disallow: /a{i:05}\n");
        if file.len() + line.len() > robots_proxy::robots::PARSE_LIMIT {
            break;
        }
        file.extend_from_slice(line.as_bytes());
    }
    file
}

/// Nanoseconds per call of `f`, over `n` calls.
fn per_call(n: u32, f: &mut dyn FnMut()) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

/// How many calls of `f` take about `target` nanoseconds.
fn calls_for(target: f64, f: &mut dyn FnMut()) -> u32 {
    let once = per_call(3, f).max(1.0);
    ((target / once) as u32).clamp(1, 1_000_000)
}

/// `theirs ÷ ours` time per call, in alternating turns of about 20 ms each
/// (ABBA order, so a steady drift in speed cancels): median, lowest and
/// highest over the pairs.
fn ratio(ours: &mut dyn FnMut(), theirs: &mut dyn FnMut()) -> (f64, f64, f64) {
    const TURN_NS: f64 = 20e6;
    const PAIRS: usize = 40;
    let (n_ours, n_theirs) = (calls_for(TURN_NS, ours), calls_for(TURN_NS, theirs));
    let mut ratios: Vec<f64> = (0..PAIRS)
        .map(|i| {
            let (o, t) = if i % 2 == 0 {
                let o = per_call(n_ours, ours);
                (o, per_call(n_theirs, theirs))
            } else {
                let t = per_call(n_theirs, theirs);
                (per_call(n_ours, ours), t)
            };
            t / o
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    (ratios[PAIRS / 2], ratios[0], ratios[PAIRS - 1])
}

fn ratios() {
    let (paths, expected) = inputs();
    let urls: Vec<&str> = URLS.lines().collect();
    let bot = BotProfile::new(AGENT);
    let ours = RobotsTxt::parse(ROBOTS).policy(&bot);
    let robotxt = robotxt::Robots::parse(ROBOTS, AGENT);
    let texting = texting_robots::Robot::new(AGENT, ROBOTS).expect("texting_robots parses");
    let ours_from_url = |u: &str| decide_url(&ours, u);
    agree("robots-proxy", &paths, &expected, |p| {
        ours.decide(p).allowed()
    });
    agree("robots-proxy (URL)", &urls, &expected, ours_from_url);
    agree("robotxt", &paths, &expected, |p| robotxt.is_allowed(p));
    agree("texting_robots", &urls, &expected, |u| texting.allowed(u));

    let count = |f: &dyn Fn(&str) -> bool, inputs: &[&str]| {
        black_box(inputs.iter().filter(|x| f(black_box(x))).count());
    };
    let mut decide_ours = || count(&|p| ours.decide(p).allowed(), &paths);
    let mut decide_robotxt = || count(&|p| robotxt.is_allowed(p), &paths);
    let mut decide_texting = || count(&|p| texting.allowed(p), &paths);
    let mut url_ours = || count(&ours_from_url, &urls);
    let mut url_robotxt = || count(&|u| robotxt.is_allowed(path_and_query(u)), &urls);
    let mut url_texting = || count(&|u| texting.allowed(u), &urls);
    let mut parse_ours = || {
        black_box(RobotsTxt::parse(black_box(ROBOTS)).policy(&bot));
    };
    let mut parse_robotxt = || {
        let _ = black_box(robotxt::Robots::parse(black_box(ROBOTS), AGENT));
    };
    let mut parse_texting = || {
        black_box(texting_robots::Robot::new(AGENT, black_box(ROBOTS)).ok());
    };

    println!("robots-proxy's speed over the others' (time per call, theirs / ours):");
    println!("median over 40 alternating pairs of ~20 ms turns (lowest-highest)");
    println!(
        "{:<44} {:>24} {:>24}",
        "", "robotxt 0.7", "texting_robots 0.2"
    );
    // A row: its name, then ours, robotxt's and texting_robots' work.
    type Work<'a> = &'a mut dyn FnMut();
    let rows: [(&str, Work, Work, Work); 3] = [
        (
            "decide 1,000 paths (file already parsed)",
            &mut decide_ours,
            &mut decide_robotxt,
            &mut decide_texting,
        ),
        (
            "decide 1,000 URLs from the URL string",
            &mut url_ours,
            &mut url_robotxt,
            &mut url_texting,
        ),
        (
            "parse + select FooBot's groups",
            &mut parse_ours,
            &mut parse_robotxt,
            &mut parse_texting,
        ),
    ];
    for (name, ours, robotxt, texting) in rows {
        let cell = |(m, lo, hi): (f64, f64, f64)| format!("{m:.2}x ({lo:.2}-{hi:.2})");
        let against_robotxt = cell(ratio(ours, robotxt));
        let against_texting = cell(ratio(ours, texting));
        println!("{name:<44} {against_robotxt:>24} {against_texting:>24}");
    }
}

criterion_group!(benches, bench);

fn main() {
    if std::env::args().any(|a| a == "--ratios") {
        ratios();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
