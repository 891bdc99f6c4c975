//! The in-process tests, one binary (ripgrep's `tests/tests.rs` shape): one
//! module per area, every server they talk to started in the process on
//! loopback. `cargo test` runs them with no server installed.

#[path = "../common/mod.rs"]
mod common;

mod access;
mod admin;
mod admission;
mod bot_limits;
mod cli;
mod completions;
mod config;
mod conformance;
mod content_usage;
mod crawlers;
mod deny_hosts;
mod docs;
mod dodging;
mod egress;
mod floods;
mod gateway;
mod gemini_proxy;
mod gopher_proxy;
mod holds;
mod holes;
mod host_rules;
mod kept_connections;
mod logging;
mod metrics;
mod page_meta;
mod parsers;
mod policy;
mod politeness;
mod properties;
mod reload;
mod report_mode;
mod response_preferences;
mod resumption;
mod robots_refresh;
mod small_web;
mod socks5;
mod state_files;
mod tallies;
mod transparent;
mod tunnels;
mod upstreams;
mod web;
mod web_backoff;
mod web_bot_auth;
mod web_bots;
mod web_tls;
