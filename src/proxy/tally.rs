//! A request's one count and one log line, whatever its protocol and its way
//! in: a guard ([`Tally`]) that counts when told (before the client can see
//! the end of its answer, so metrics read after it include it) or else when
//! dropped, and logs when dropped (once the client has its answer, so the
//! line adds nothing to its wait). Nothing else counts or logs a request.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::time::Instant;

use super::{Conn, Context, Outcome};
use crate::bots::BotId;
use crate::cache::Evidence;
use crate::metrics::Listener;
use crate::protocol::Protocol;
use crate::target::{HostKey, Target};

/// One request's end: counted at most once, logged exactly once (when dropped).
pub struct Tally {
    ctx: Arc<Context>,
    protocol: Protocol,
    /// The client, its listener, and when its request began.
    peer: SocketAddr,
    listener: Listener,
    started: Instant,
    /// The bot it was served as (`None`: turned away before one was picked).
    bot: Option<BotId>,
    target: Option<Target>,
    pub outcome: Outcome,
    counted: bool,
}

impl Tally {
    /// The end of a request of `bot` for `target` over `protocol`, from the
    /// client `conn` describes, as `outcome` says.
    pub fn new(
        ctx: Arc<Context>,
        protocol: Protocol,
        conn: &Conn,
        (bot, target): (Option<BotId>, Option<Target>),
        outcome: Outcome,
    ) -> Tally {
        Tally {
            ctx,
            protocol,
            peer: conn.peer,
            listener: conn.listener,
            started: conn.started,
            bot,
            target,
            outcome,
            counted: false,
        }
    }

    pub fn ctx(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The answer stopped mid-way (the upstream failed, or went silent):
    /// counted as truncated, and said in the log line.
    pub fn cut(&mut self, why: String) {
        self.truncated();
        self.outcome.cut = true;
        self.outcome.detail = why;
    }

    /// Counted as an answer the client got truncated.
    pub fn truncated(&self) {
        self.ctx.admission.metrics.truncated(self.protocol);
    }

    /// Counts the request, once.
    pub fn count(&mut self) {
        if self.counted {
            return;
        }
        self.counted = true;
        let (ctx, outcome) = (&self.ctx, &self.outcome);
        let metrics = &ctx.admission.metrics;
        let class = outcome.fate.class();
        metrics.request(self.bot, self.protocol, outcome.fate);
        if let Some(t) = &self.target {
            metrics.host_request(&t.host, class);
            let key = HostKey {
                scheme: t.scheme,
                host: t.host.clone(),
                port: t.port,
            };
            let sha256 = outcome.robots.as_ref().map(|r| r.sha256.clone());
            let name = self
                .bot
                .map(|b| ctx.admission.config.bots.get(b).name.as_str());
            ctx.recent.finished(
                &key,
                name,
                (outcome.fate, outcome.lost),
                &outcome.detail,
                sha256,
            );
        }
        metrics.bytes_to_client.inc_by(outcome.bytes);
        if let Some(bot) = self.bot {
            for would in outcome.report.iter() {
                metrics.report_only(&ctx.admission.config.bots.get(bot).name, would.reason());
            }
        }
    }

    /// The request's one log line.
    fn log(&self) {
        let outcome = &self.outcome;
        let class = outcome.fate.class();
        let (host, path) = match &self.target {
            Some(t) => {
                let path = String::from_utf8_lossy(t.matched_path());
                let path: String = path.chars().take(200).collect();
                (t.authority(), path)
            }
            None => (String::new(), String::new()),
        };
        let bot = self.bot.map_or(crate::metrics::NO_BOT, |b| {
            &self.ctx.admission.config.bots.get(b).name
        });
        tracing::info!(
            protocol = self.protocol.as_str(),
            listener = self.listener.as_str(),
            client = %self.peer,
            bot = %bot,
            host = %host,
            path = %path,
            decision = %class.as_str(),
            cause = %outcome.fate.cause().as_str(),
            outcome = outcome.fate.as_str(),
            lost = outcome.lost.map(crate::fate::Lost::as_str),
            status = outcome.status,
            detail = %outcome.detail,
            robots_sha256 = outcome.robots.as_ref().map(|r| &*r.sha256),
            robots_fetched = outcome.robots.as_ref().map(Evidence::fetched_unix),
            allowed_by = outcome
                .robots
                .as_ref()
                .and_then(|r| r.allowed_by.as_ref())
                .map(tracing::field::display),
            would = outcome.report.would(),
            would_wait = outcome.report.would_wait(),
            wait_ms = outcome.waited.as_millis() as u64,
            bytes = outcome.bytes,
            duration_ms = self.started.elapsed().as_millis() as u64,
            "request"
        );
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.count();
        self.log();
    }
}
