//! Gemini, as one unit: its wire format ([`wire`]: requests, headers, status
//! lines), serving a request on the Gemini listener and answering each fate
//! ([`serve`]), and fetching a capsule's robots.txt ([`robots`]).

pub mod answer;
pub mod robots;
pub mod serve;
pub mod titan;
pub mod wire;

use std::sync::Arc;

use crate::config::Config;
use crate::fetch::RobotsFetcher;
use crate::protocol::Protocol;
use crate::proxy::{Plain, Served};
use crate::upstream::Upstream;

/// Gemini's row in the table of protocols (`protocols::ALL`).
pub struct Gemini;

impl Served for Gemini {
    fn protocol(&self) -> Protocol {
        Protocol::Gemini
    }

    fn robots(&self, upstream: &Arc<Upstream>, config: &Config) -> Box<dyn RobotsFetcher> {
        Box::new(robots::GeminiRobots::new(
            upstream.clone(),
            config.robots.fetch_timeout,
        ))
    }

    /// A capsule speaks TLS: plain text to a Gemini port takes the drop-in's
    /// own rule.
    fn plain(&self) -> Option<&dyn Plain> {
        None
    }
}
