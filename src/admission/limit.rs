//! The operator's limits beyond robots.txt: the [`Limit`] a new limiter
//! implements, and the [`Limits`] of one configuration, asked in order.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use crate::bots::limits::BotLimits;
use crate::bots::BotId;
use crate::cache::Entry;
use crate::refusal::Refusal;
use crate::report::Report;
use crate::target::{Server, Target};

/// What a limit is asked: who, what, where (resolved), robots.txt's word on
/// the host (its Crawl-delay for this bot), and how long it may be held.
pub struct Asked<'a> {
    pub bot: BotId,
    pub target: &'a Target,
    pub server: &'a Server,
    pub robots: &'a Entry,
    /// A limit may hold the request until then (`politeness.max_wait` from
    /// when it was asked); past it, the answer is "slow down".
    pub deadline: Instant,
}

/// What a limit keeps for a request it let through (a place counted, a slot
/// taken) until the request ends. Dropped before [`Held::started`], what it
/// counted is given back: a request refused later (at the gate) spends no
/// budget.
pub trait Held: Send + Sync {
    /// The request's turn came: it starts now.
    fn started(&mut self) {}
}

/// A limit's word on a request it lets through: what it keeps, if anything.
pub type Hold = Option<Box<dyn Held>>;

/// One limit on what a bot may fetch beyond robots.txt: it lets a request
/// through (possibly after a wait, keeping a [`Hold`]) or refuses it with
/// its own [`Refusal`]. Asked after robots.txt and before the gate, so a
/// refused request takes no turn.
pub trait Limit: Send + Sync {
    /// Whether it has anything to say of this request (a limit this bot
    /// does not set, a robots.txt without the field): a plain call, so a
    /// request it does not concern makes no future for it.
    fn applies(&self, _asked: &Asked<'_>) -> bool {
        true
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>>;

    /// The refusal this limit will give however long the request waits for
    /// the others first (its own wait would outlast the deadline), looked at
    /// without counting anything. Every step is asked before any waits: a
    /// request one limit would hold and a later one refuse is refused at
    /// once. `None`: it may let the request through, or cannot tell yet.
    fn foresee(&self, _asked: &Asked<'_>) -> Option<Refusal> {
        None
    }
}

/// What the limits have counted, as the status page shows it.
pub trait Usage: Send + Sync {
    /// Where `bot` has spent its daily budget: each server and its starts in
    /// the last 24 hours, at most `top`, the most used first.
    fn budget_used(&self, bot: &str, top: usize) -> Vec<(String, u32)>;

    /// What is left now of `bot`'s limits that count (`limits`: its own).
    fn left(&self, bot: &str, limits: &BotLimits) -> Left;
}

/// What is left of a bot's counting limits now, as this process counted
/// them (`None`: the limit is not set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Left {
    /// Requests that may still start at once at its busiest server.
    pub concurrency: Option<usize>,
    /// Starts left in the rate's window.
    pub rate: Option<usize>,
    /// How long its quiet hours hold it from now (zero: not quiet now).
    pub quiet_for: Option<Duration>,
}

/// The limits of one configuration, asked in order; the first refusal wins.
#[derive(Clone, Default)]
pub struct Limits {
    steps: Vec<Arc<dyn Limit>>,
    usage: Option<Arc<dyn Usage>>,
}

impl Limits {
    /// `usage`: what the steps have counted, for the status page.
    pub fn new(steps: Vec<Arc<dyn Limit>>, usage: Option<Arc<dyn Usage>>) -> Limits {
        Limits { steps, usage }
    }

    /// Where `bot` has spent its daily budget ([`Usage::budget_used`]).
    pub fn budget_used(&self, bot: &str, top: usize) -> Vec<(String, u32)> {
        self.usage
            .as_ref()
            .map_or_else(Vec::new, |u| u.budget_used(bot, top))
    }

    /// What is left of `bot`'s limits now ([`Usage::left`]).
    pub fn left(&self, bot: &str, limits: &BotLimits) -> Left {
        self.usage
            .as_ref()
            .map_or_else(Left::default, |u| u.left(bot, limits))
    }

    /// In report mode (`report`, with `max_wait`), a limit that would hold
    /// the request (asked with a deadline of now: it waits for nothing) is
    /// noted there instead, and the next limits are asked.
    pub(super) async fn check(
        &self,
        asked: &Asked<'_>,
        mut report: Option<(&mut Report, Duration)>,
    ) -> Result<Holds, Refusal> {
        let mut holds = Holds::default();
        // Report mode waits for nothing: each step says what it would do.
        if report.is_none() {
            let mut steps = self.steps.iter().filter(|l| l.applies(asked));
            if let Some(refusal) = steps.find_map(|l| l.foresee(asked)) {
                return Err(refusal);
            }
        }
        for limit in self.steps.iter().filter(|l| l.applies(asked)) {
            match limit.check(asked).await {
                Ok(Some(held)) => holds.0.push(held),
                Ok(None) => {}
                Err(refusal) => match report.as_mut() {
                    Some((report, max_wait)) if crate::report::reportable(&refusal) => {
                        report.held(refusal, *max_wait)
                    }
                    // A refusal drops what earlier limits kept: given back.
                    _ => return Err(refusal),
                },
            }
        }
        Ok(holds)
    }
}

/// What the limits keep for an admitted request, until it ends.
#[derive(Default)]
pub struct Holds(Vec<Box<dyn Held>>);

impl Holds {
    pub(super) fn started(&mut self) {
        for held in &mut self.0 {
            held.started();
        }
    }
}
