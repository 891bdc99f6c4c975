//! robots-proxy: a forward proxy for Gemini and Gopher crawlers that enforces
//! robots.txt and Crawl-delay.
//!
//! Module map:
//! - [`robots`]: the policy engine (parse, match, group selection). Pure.
//! - [`target`]: targets in canonical form (URLs, hosts, paths, Gopher selectors). Pure.
//! - [`check`]: the `robots-proxy check` command over the two above.
//! - [`cli`]: the command line as the user typed it (clap).

pub mod check;
pub mod cli;
pub mod robots;
pub mod target;
