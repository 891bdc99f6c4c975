//! Any bytes as a robots.txt: parsing, group selection, decisions and
//! explanations never panic, and a decision does not depend on how often it is asked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::robots::{BotProfile, RobotsTxt};

fuzz_target!(|data: &[u8]| {
    let robots = RobotsTxt::parse(data);
    let bot = BotProfile::new("examplebot")
        .with_virtual_agent("indexer")
        .with_virtual_agent("archiver");
    let policy = robots.policy(&bot);
    // Paths taken from the input itself reach the rules' own bytes.
    for path in data
        .split(|&b| b == b'\n')
        .take(16)
        .chain([&b"/"[..], b"", b"/robots.txt", b"0/x"])
    {
        let first = policy.decide_bytes(path);
        assert_eq!(first, policy.decide_bytes(path));
        let _ = policy.explain(&first).to_string();
    }
    if let Some(delay) = policy.crawl_delay_secs() {
        assert!(delay >= 0.0 && delay.is_finite());
    }
});
