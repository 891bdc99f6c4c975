//! Other projects' published robots.txt verdicts, decided through the path a
//! request through the proxy takes: the full URL → canonical target → every
//! spelling → decision (`check::decide_target`, which is `Target::parse` then
//! `Target::decide`, as `admission::robots_txt` does). Deciding bare paths with the
//! engine alone would miss what the steps in front do to a URL.
//!
//! Suites (tests/data/suites/, licences in tests/data/README.md):
//! - google/robotstxt `robots_test.cc`: every `rfc_required` case must pass;
//! - scrapy/protego `tests/test_protego.py`;
//! - crawler-commons `SimpleRobotRulesParserTest.java`.
//!
//! A case may differ only if it is listed in its suite's known differences with
//! the reason (docs/dev/conformance.md lists the same); a listed case that
//! starts agreeing fails the test too, so the lists stay true.

use crate::common::binary;
use robots_proxy::check::decide_target;
use robots_proxy::robots::{BotProfile, RobotsTxt};
use robots_proxy::spelling::SelectorReading;
use serde_json::Value;

struct Suite {
    name: &'static str,
    cases: &'static str,
    total: usize,
    known: &'static [(&'static str, &'static str)],
}

const ENCODED: &str = "RFC 9309 §2.2.2: a raw UTF-8 URL is percent-encoded before matching";
const SEGMENT_ESCAPES: &str =
    "RFC 9309 §2.2.2 example: %62%61%7A in a rule matches baz (RFC 3986 §6.2.2 normal form)";
const ONE_WORD: &str = "RFC 9309 §2.2.1: a bot is named by its product token, one word of \
     ASCII letters, `_` and `-` (we also take digits); the suite matches whole User-Agent \
     strings, several words or non-ASCII names";
const NO_AGENT_WILDCARD: &str =
    "RFC 9309 §2.2.1: `*` names every bot only on its own; `foo*bot` is no pattern";
const INDEX_HTML: &str = "Google-only: Allow of /index.html does not allow /";

const GOOGLE: Suite = Suite {
    name: "google/robotstxt",
    cases: include_str!("../data/suites/google-robotstxt-cases.jsonl"),
    total: 145,
    known: &[
        ("ID_Encoding#3", ENCODED),
        ("ID_Encoding#5", ENCODED),
        ("ID_Encoding#6", SEGMENT_ESCAPES),
        ("GoogleOnly_IndexHTMLisDirectory#1", INDEX_HTML),
        (
            "GoogleOnly_LineTooLong#2",
            "Google cuts lines at 16,664 bytes; we parse whole lines",
        ),
        (
            "GoogleOnly_LineTooLong#5",
            "Google cuts lines at 16,664 bytes; we parse whole lines",
        ),
    ],
};

const PROTEGO: Suite = Suite {
    name: "scrapy/protego",
    cases: include_str!("../data/suites/protego-cases.jsonl"),
    total: 225,
    known: &[
        ("test_unicode_url_and_useragent#4", ONE_WORD),
        ("test_unicode_url_and_useragent#10", ONE_WORD),
        ("test_generosity#3", ONE_WORD),
        ("test_generosity#5", NO_AGENT_WILDCARD),
        ("test_generosity#6", NO_AGENT_WILDCARD),
        ("test_index_html_is_directory#1", INDEX_HTML),
        (
            "test_special_symbols_dual_behaviour#2",
            "RFC 9309 §2.2.3: a final `$` anchors the end; /x/abc$ disallows /x/abc, \
             not a path that ends in a dollar sign",
        ),
        (
            "test_special_symbols_dual_behaviour#3",
            "RFC 9309 §2.2.3: a final `$` anchors the end; /x/abc$ disallows /x/abc, \
             not a path that ends in a dollar sign",
        ),
        (
            "test_with_absolute_urls#2",
            "RFC 9309 §2.2.2: a rule matches the path from its start; a rule written as a \
             full URL matches no path (protego prepends a slash)",
        ),
    ],
};

const CRAWLER_COMMONS: Suite = Suite {
    name: "crawler-commons",
    cases: include_str!("../data/suites/crawler-commons-cases.jsonl"),
    total: 152,
    known: &[
        (
            "testHtmlMarkupInRobotsTxt#2",
            "RFC 9309 §2.2.2: a rule is its value as written; crawler-commons strips HTML \
             tags such as <BR> from a robots.txt served as a web page",
        ),
        ("testHeritrixCases#5", ONE_WORD),
        ("testHeritrixCases#6", ONE_WORD),
        ("testHeritrixCases#7", ONE_WORD),
        ("testMultiWordAgentName#1", ONE_WORD),
        (
            "testBigCrawlDelay#1",
            "crawler-commons disallows a host whose Crawl-delay exceeds its limit; we space \
             requests by it and answer slow-down past max_wait",
        ),
    ],
};

struct Case {
    id: String,
    robots: String,
    agent: String,
    url: String,
    allowed: bool,
    rfc_required: bool,
}

fn cases(suite: &Suite) -> Vec<Case> {
    suite
        .cases
        .lines()
        .map(|line| {
            let c: Value = serde_json::from_str(line).expect("valid JSON line");
            let text = |k: &str| c[k].as_str().unwrap().to_string();
            Case {
                id: text("id"),
                robots: text("robots"),
                agent: text("agent"),
                url: text("url"),
                allowed: c["allowed"].as_bool().unwrap(),
                rfc_required: c["rfc_required"].as_bool().unwrap_or(false),
            }
        })
        .collect()
}

/// The suites' harnesses read an empty URL as the site's root.
fn full_url(url: &str) -> &str {
    if url.is_empty() {
        "http://example.com/"
    } else {
        url
    }
}

/// What the proxy decides for one case.
fn decide(case: &Case) -> bool {
    let policy = RobotsTxt::parse(case.robots.as_bytes()).policy(&BotProfile::new(&case.agent));
    decide_target(&policy, full_url(&case.url), SelectorReading::Safe)
        .unwrap_or_else(|e| panic!("{}: {} does not parse: {e}", case.id, case.url))
        .0
        .allowed()
}

fn run(suite: &Suite) {
    let all = cases(suite);
    assert_eq!(all.len(), suite.total, "{}: all cases read", suite.name);
    let mut failures = Vec::new();
    let mut known_seen = 0;
    for case in &all {
        let got = decide(case);
        if suite.known.iter().any(|(k, _)| *k == case.id) {
            assert!(
                !case.rfc_required,
                "{} is RFC-required and cannot be a known difference",
                case.id
            );
            assert_ne!(
                got, case.allowed,
                "{}: {} now agrees: drop it from the known differences",
                suite.name, case.id
            );
            known_seen += 1;
        } else if got != case.allowed {
            failures.push(format!(
                "{}: expected allowed={}, got {got} (agent {:?}, url {:?})",
                case.id, case.allowed, case.agent, case.url
            ));
        }
    }
    assert_eq!(
        known_seen,
        suite.known.len(),
        "every known difference exists"
    );
    assert!(
        failures.is_empty(),
        "{}: {} failures:\n{}",
        suite.name,
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn google_reference_verdicts() {
    run(&GOOGLE);
    let required = cases(&GOOGLE).iter().filter(|c| c.rfc_required).count();
    assert_eq!(required, 128);
}

#[test]
fn protego_verdicts() {
    run(&PROTEGO);
}

#[test]
fn crawler_commons_verdicts() {
    run(&CRAWLER_COMMONS);
}

/// The 128 RFC-required cases through the built binary, `robots-proxy check`
/// with the full URL, as a user would run it.
#[test]
fn google_rfc_required_cases_through_the_check_command() {
    let mut ran = 0;
    for case in cases(&GOOGLE).iter().filter(|c| c.rfc_required) {
        let url = full_url(&case.url);
        let out = binary(
            &["check", "--robots", "-", "--agent", &case.agent, url],
            &case.robots,
        );
        let verdict = if case.allowed { "allow" } else { "disallow" };
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{verdict}\t{url}\n"),
            "{}: stderr {}",
            case.id,
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert_eq!(ran, 128);
}

/// A case's URL as a client sends it to a proxy: on `origin` (its host
/// replaced by the origin serving the case's robots.txt), every byte a
/// request line cannot carry percent-encoded.
fn on_origin(url: &str, origin: std::net::SocketAddr) -> String {
    let url = full_url(url);
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |at| &after_scheme[at..]);
    let mut sent = format!("http://{origin}");
    for b in path.bytes() {
        match b {
            b'!'..=b'~' => sent.push(b as char),
            b => sent.push_str(&format!("%{b:02X}")),
        }
    }
    sent
}

/// google/robotstxt's 145 cases through the HTTP listener, as a crawler
/// meets them: each case's robots.txt served by an origin of its own, its
/// URL asked for through the proxy by a bot of its agent. Every allow
/// reaches the origin; every disallow leaves it untouched; and each verdict
/// is the one the check path gives (so the known differences are the same).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_verdicts_through_the_http_listener() {
    use crate::common::web::{WebClient, WebOrigin};
    use robots_proxy::listener::Listener;
    let all = cases(&GOOGLE);
    let mut agents: Vec<&str> = all.iter().map(|c| c.agent.as_str()).collect();
    agents.sort();
    agents.dedup();
    let (mut ran, mut skipped) = (0, Vec::new());
    for agent in agents {
        // A bot's agent is one product token; the suite's one multi-word
        // name is a known difference of the check path too.
        let toml = match agent {
            "" => "[bot]\n".to_string(),
            a if robots_proxy::robots::valid_product_token(a) => {
                format!("[bot]\nagent = \"{a}\"\n")
            }
            a => {
                skipped.push(a.to_string());
                continue;
            }
        };
        let mut config = crate::common::test_config_with(&toml);
        config
            .listen
            .set(Listener::Http, Some("127.0.0.1:0".parse().unwrap()));
        let proxy = crate::common::start_proxy(config).await;
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        for case in all.iter().filter(|c| c.agent == agent) {
            let robots: &'static str = Box::leak(case.robots.clone().into_boxed_str());
            let origin = WebOrigin::site(robots).await;
            let url = on_origin(&case.url, origin.addr);
            let policy =
                RobotsTxt::parse(case.robots.as_bytes()).policy(&BotProfile::new(&case.agent));
            let expected = decide_target(&policy, &url, SelectorReading::Safe)
                .unwrap_or_else(|e| panic!("{}: {url}: {e}", case.id))
                .0
                .allowed();
            let answer = match client.send("GET", &url, &[]).await {
                Some(answer) => answer,
                None => {
                    // A refusal that closed the connection: a new one.
                    client = WebClient::connect(proxy.addr(Listener::Http)).await;
                    client.send("GET", &url, &[]).await.expect("an answer")
                }
            };
            let reached = origin.targets().iter().any(|t| t != "/robots.txt");
            assert_eq!(
                (answer.status == 200, reached),
                (expected, expected),
                "{}: {url} (agent {agent:?}): {answer:?}, origin saw {:?}",
                case.id,
                origin.targets()
            );
            ran += 1;
        }
    }
    assert_eq!(skipped, ["Foo Bar"]);
    assert_eq!(ran + 1, 145);
}
