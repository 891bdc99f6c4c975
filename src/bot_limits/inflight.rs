//! `concurrency = N`: at most N requests of one bot in flight at one server,
//! counted from this step until the answer has been relayed (or the request
//! gave up).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;

use super::shared::Scope;
use super::{wait_for, Blocked, Ledger, PerBot};
use crate::admission::{Asked, Held, Hold, Limit};
use crate::politeness::{aliases, Alias, GateBy};
use crate::refusal::{BotLimit, Refusal};

/// In flight per bot, then per server alias; an entry at zero is removed
/// (and a bot with none). Looked up by `&str` and `&Alias`: a request's
/// check allocates nothing under the lock.
#[derive(Default)]
pub(super) struct Book(Mutex<HashMap<String, HashMap<Alias, usize>>>);

impl Book {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<Alias, usize>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more request of `bot` under each alias, if none already
    /// holds `max` (a request counts under each alias of its server).
    fn take(&self, bot: &str, aliases: &[Alias], max: usize) -> Result<(), Blocked> {
        let mut book = self.lock();
        let most = book.get(bot).map_or(0, |held| {
            aliases
                .iter()
                .filter_map(|a| held.get(a))
                .copied()
                .max()
                .unwrap_or(0)
        });
        if most >= max {
            return Err(Blocked::Released);
        }
        let held = match book.get_mut(bot) {
            Some(held) => held,
            None => book.entry(bot.to_string()).or_default(),
        };
        for a in aliases {
            match held.get_mut(a) {
                Some(n) => *n += 1,
                None => {
                    held.insert(a.clone(), 1);
                }
            }
        }
        Ok(())
    }

    /// The most of `bot`'s requests in flight at one server.
    pub(super) fn busiest(&self, bot: &str) -> usize {
        self.lock()
            .get(bot)
            .and_then(|held| held.values().copied().max())
            .unwrap_or(0)
    }

    fn give_back(&self, bot: &str, aliases: &[Alias]) {
        let mut book = self.lock();
        let Some(held) = book.get_mut(bot) else {
            return;
        };
        for a in aliases {
            if let Some(n) = held.get_mut(a) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    held.remove(a);
                }
            }
        }
        if held.is_empty() {
            book.remove(bot);
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
    fn applies(&self, asked: &Asked<'_>) -> bool {
        self.max.get(asked.bot).is_some()
    }

    fn check<'a>(&'a self, asked: &'a Asked<'a>) -> BoxFuture<'a, Result<Hold, Refusal>> {
        Box::pin(async move {
            let Some((name, max)) = self.max.get(asked.bot) else {
                return Ok(None);
            };
            let aliases = aliases(self.key, asked.server);
            let book = &self.ledger.inflight;
            wait_for(
                &self.ledger,
                (Some(name), asked.deadline),
                BotLimit::Concurrency(*max),
                || book.take(name, &aliases, *max),
            )
            .await?;
            let mut held = InFlight {
                ledger: self.ledger.clone(),
                bot: name.to_string(),
                aliases,
                shared: None,
            };
            // Refused by the fleet's count, this one is given back (dropped).
            held.shared = self
                .ledger
                .shared
                .take(
                    (name, Scope::Server(self.key, asked.server)),
                    (
                        u32::try_from(*max).unwrap_or(u32::MAX),
                        crate::store::Window::Running,
                    ),
                    asked.deadline,
                    BotLimit::Concurrency(*max),
                )
                .await?;
            Ok(Some(Box::new(held) as Box<dyn Held>))
        })
    }
}

/// A request of a bot in flight at a server: counted until dropped (in the
/// fleet's count too, in fleet mode).
struct InFlight {
    ledger: Arc<Ledger>,
    bot: String,
    aliases: Vec<Alias>,
    shared: Option<crate::store::Counted>,
}

impl Held for InFlight {}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.ledger.inflight.give_back(&self.bot, &self.aliases);
        self.ledger.changed(&self.bot);
    }
}
