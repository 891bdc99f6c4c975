//! Google's reference verdicts (tests/data/google-robotstxt-cases.jsonl, Apache-2.0).
//!
//! Every `rfc_required` case must pass. The others either pass or are listed in
//! `KNOWN_DIFFERENCES` with the reason; a listed case that starts passing fails
//! the test too, so the list (and the README's copy of it) stays true.

use robots_proxy::robots::{BotProfile, RobotsTxt};
use robots_proxy::target::{Resource, Target};
use serde_json::Value;

const CASES: &str = include_str!("data/google-robotstxt-cases.jsonl");

/// Cases where we follow RFC 9309 rather than Google's own choices (README, "Conformance").
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    (
        "ID_Encoding#3",
        "RFC 9309 §2.2.2: a raw UTF-8 URL is percent-encoded before matching",
    ),
    (
        "ID_Encoding#5",
        "RFC 9309 §2.2.2: a raw UTF-8 URL is percent-encoded before matching",
    ),
    (
        "ID_Encoding#6",
        "RFC 9309 §2.2.2 example: %62%61%7A in a rule matches baz",
    ),
    (
        "GoogleOnly_IndexHTMLisDirectory#1",
        "Google-only: Allow of /index.html does not allow /",
    ),
    (
        "GoogleOnly_LineTooLong#2",
        "Google cuts lines at 16,664 bytes; we parse whole lines",
    ),
    (
        "GoogleOnly_LineTooLong#5",
        "Google cuts lines at 16,664 bytes; we parse whole lines",
    ),
];

/// The harness contract of the data set: match the path and query of the URL,
/// fragment dropped, an empty path (or an empty URL) becoming `/`.
fn path_of(url: &str) -> String {
    if url.is_empty() {
        return "/".to_string();
    }
    match Target::parse(url).expect(url).resource {
        Resource::Path(p) => p,
        Resource::Gopher { .. } => unreachable!("the data set holds http(s) URLs only"),
    }
}

#[test]
fn google_reference_verdicts() {
    let mut total = 0;
    let mut rfc_required = 0;
    let mut failures = Vec::new();
    let mut known_seen = Vec::new();
    for line in CASES.lines() {
        let case: Value = serde_json::from_str(line).expect("valid JSON line");
        let id = case["id"].as_str().unwrap();
        let robots = case["robots"].as_str().unwrap();
        let agent = case["agent"].as_str().unwrap();
        let url = case["url"].as_str().unwrap();
        let expected = case["allowed"].as_bool().unwrap();
        let required = case["rfc_required"].as_bool().unwrap();
        total += 1;
        rfc_required += usize::from(required);

        let policy = RobotsTxt::parse(robots.as_bytes()).policy(&BotProfile::new(agent));
        let got = policy.decide(&path_of(url)).allowed();
        let known = KNOWN_DIFFERENCES.iter().any(|(k, _)| *k == id);
        if known {
            assert!(
                !required,
                "{id} is RFC-required and cannot be a known difference"
            );
            assert_ne!(
                got, expected,
                "{id} now agrees with Google: drop it from KNOWN_DIFFERENCES"
            );
            known_seen.push(id.to_string());
        } else if got != expected {
            failures.push(format!(
                "{id} (rfc_required={required}): expected allowed={expected}, got {got}"
            ));
        }
    }
    assert_eq!(total, 145, "all cases read");
    assert_eq!(rfc_required, 128);
    assert_eq!(
        known_seen.len(),
        KNOWN_DIFFERENCES.len(),
        "every known difference exists"
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
