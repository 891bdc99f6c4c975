//! `concurrency = N`: at most N requests of one bot in flight at one server,
//! counted from this step until the answer has been relayed (or the request
//! gave up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::{wait_for, Blocked, Ledger, PerBot};
use crate::admission::{Asked, Held, Hold, Limit};
use crate::politeness::{aliases, Alias, GateBy};
use crate::refusal::{BotLimit, Refusal};

/// In flight per bot and server alias; an entry at zero is removed.
#[derive(Default)]
pub(super) struct Book(Mutex<HashMap<(String, Alias), usize>>);

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, Alias), usize>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// In flight at the server these aliases name: the most any alias holds
    /// (a request counts under each).
    pub(super) fn count(&self, bot: &str, aliases: &[Alias]) -> usize {
        let book = self.lock();
        aliases
            .iter()
            .filter_map(|a| book.get(&(bot.to_string(), a.clone())))
            .copied()
            .max()
            .unwrap_or(0)
    }

    fn take(&self, bot: &str, aliases: &[Alias], max: usize) -> Result<(), Blocked> {
        let mut book = self.lock();
        let keys: Vec<(String, Alias)> = aliases
            .iter()
            .map(|a| (bot.to_string(), a.clone()))
            .collect();
        let most = keys
            .iter()
            .filter_map(|k| book.get(k))
            .copied()
            .max()
            .unwrap_or(0);
        if most >= max {
            return Err(Blocked::Released);
        }
        for k in keys {
            *book.entry(k).or_insert(0) += 1;
        }
        Ok(())
    }

    fn give_back(&self, bot: &str, aliases: &[Alias]) {
        let mut book = self.lock();
        for a in aliases {
            let key = (bot.to_string(), a.clone());
            if let Some(n) = book.get_mut(&key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    book.remove(&key);
                }
            }
        }
    }
}

/// The step: each bot's concurrency, by bot id.
pub(super) struct Concurrency {
    pub(super) max: PerBot<usize>,
    pub(super) key: GateBy,
    pub(super) ledger: Arc<Ledger>,
}

impl Limit for Concurrency {
    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Some((name, max)) = self.max.get(asked.bot) else {
                return Ok(None);
            };
            let aliases = aliases(self.key, asked.server);
            let book = &self.ledger.inflight;
            wait_for(
                &self.ledger,
                asked.deadline,
                BotLimit::Concurrency(*max),
                || book.take(name, &aliases, *max),
            )
            .await?;
            Ok(Some(Box::new(InFlight {
                ledger: self.ledger.clone(),
                bot: name.to_string(),
                aliases,
            }) as Box<dyn Held>))
        })
    }
}

/// A request of a bot in flight at a server: counted until dropped.
struct InFlight {
    ledger: Arc<Ledger>,
    bot: String,
    aliases: Vec<Alias>,
}

impl Held for InFlight {}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.ledger.inflight.give_back(&self.bot, &self.aliases);
        self.ledger.changed.notify_waiters();
    }
}
