//! Policy engine against robotxt and texting_robots on the same input, in one run.
//!
//! Input: benches/data (robots.txt with 50 rules in `*`, 1,000 URLs, the expected
//! verdicts for FooBot). Before timing, all three parsers must agree with the
//! expected verdicts on every URL. Each gets the path and query of the URLs,
//! extracted once outside the timed loop, as robotxt's `is_allowed` expects.
//!
//! Run: `cargo bench --bench policy` (ratios: see README, "Performance").

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use robots_proxy::robots::{BotProfile, RobotsTxt};
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
    let reading = SelectorReading::default();
    let ours_from_url = |u: &str| {
        Target::parse(u)
            .and_then(|t| t.decide(&ours, reading))
            .map(|d| d.allowed())
            .unwrap_or(false)
    };
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
