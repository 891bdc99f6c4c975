//! The policy engine: robots.txt bytes → groups → a [`Policy`] per bot → decisions.
//!
//! Pure: no I/O, no async, no global state. Parse once with [`RobotsTxt::parse`],
//! select and compile the groups for a bot with [`RobotsTxt::policy`], then call
//! [`Policy::decide`] as often as needed; decisions allocate nothing.
//!
//! ```
//! use robots_proxy::robots::{BotProfile, RobotsTxt};
//!
//! let robots = RobotsTxt::parse(b"User-agent: indexer\nDisallow: /private\nCrawl-delay: 2\n");
//! let policy = robots.policy(&BotProfile::new("examplebot").with_virtual_agent("indexer"));
//! assert!(!policy.decide("/private/diary.gmi").allowed());
//! assert!(policy.decide("/public").allowed());
//! assert_eq!(policy.crawl_delay_secs(), Some(2.0));
//! ```

pub(crate) mod encoding;
mod lines;
mod matcher;
pub mod page;
mod parse;
mod policy;
pub mod response;
pub mod usage;

pub use parse::{normalize_pattern, AgentKind, RobotsTxt, RuleKind, VisitTime, PARSE_LIMIT};
pub use policy::{
    valid_product_token, valid_virtual_agent, BotProfile, Decision, Explanation, GroupInfo, Policy,
    RuleInfo, Selected,
};
pub use usage::{Preference, Use};

/// The SHA-256 of a robots.txt's bytes, in lower-case hex: what a
/// decision's evidence names (the log line, the status page, `check --sha256`).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut hex = String::with_capacity(64);
    for b in digest.as_ref() {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}
