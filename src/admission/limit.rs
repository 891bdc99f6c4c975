//! The operator's limits beyond robots.txt: the [`Limit`] a new limiter
//! implements, and the [`Limits`] of one configuration, asked in order.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use crate::bots::BotId;
use crate::cache::Entry;
use crate::refusal::Refusal;
use crate::target::{Server, Target};

/// What a limit is asked: who, what, where (resolved), and robots.txt's word
/// on the host (its Crawl-delay for this bot).
pub struct Asked<'a> {
    pub bot: BotId,
    pub target: &'a Target,
    pub server: &'a Server,
    pub robots: &'a Entry,
}

/// One limit on what a bot may fetch beyond robots.txt: it lets a request
/// through or refuses it with its own [`Refusal`]. Asked after robots.txt and
/// before the gate, so a refused request takes no turn.
pub trait Limit: Send + Sync {
    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<(), Refusal>>;
}

/// The limits of one configuration, asked in order; the first refusal wins.
#[derive(Clone, Default)]
pub struct Limits(Vec<Arc<dyn Limit>>);

impl Limits {
    pub fn new(limits: Vec<Arc<dyn Limit>>) -> Limits {
        Limits(limits)
    }

    pub(super) async fn check(&self, asked: &Asked<'_>) -> Result<(), Refusal> {
        for limit in &self.0 {
            limit.check(asked).await?;
        }
        Ok(())
    }
}
