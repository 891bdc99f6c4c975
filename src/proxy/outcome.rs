//! What became of one request: its [`Outcome`], and the one log line and
//! count each request gets.

use std::time::Duration;

use super::{Conn, Context};
use crate::bots::BotId;
use crate::cache::Evidence;
use crate::fate::Fate;
use crate::protocol::Protocol;
use crate::report::Report;
use crate::target::{HostKey, Target};

/// What happened to one request, for the log line.
#[derive(Debug)]
pub struct Outcome {
    pub fate: Fate,
    /// Gemini: the status; Gopher: none.
    pub status: Option<u16>,
    pub detail: String,
    pub bytes: u64,
    /// How long the request waited for its host's turn.
    pub waited: Duration,
    /// The upstream failed mid-answer: the connection is cut rather than
    /// closed cleanly, so the client can tell the answer is incomplete.
    pub cut: bool,
    /// Report mode: what robots.txt and the bot's limits would have done.
    pub report: Report,
    /// The robots.txt it was decided with (the evidence its log line carries).
    pub robots: Option<Evidence>,
}

impl Outcome {
    pub fn new(fate: Fate, status: Option<u16>, detail: String) -> Outcome {
        Outcome {
            fate,
            status,
            detail,
            bytes: 0,
            waited: Duration::ZERO,
            cut: false,
            report: Report::default(),
            robots: None,
        }
    }
}

/// The outcome of a request whose client left while it waited.
pub fn client_left() -> Outcome {
    Outcome::new(
        Fate::ClientLeft,
        None,
        "the client left while waiting for its turn".into(),
    )
}

/// The counts of one finished request (metrics, the status page's recent
/// hosts): taken before the client sees the end of its answer, so a client
/// that reads the metrics once it has its answer finds it counted. `bot`: the
/// bot it was served as (`None`: turned away before one was picked).
pub fn count(
    ctx: &Context,
    protocol: Protocol,
    (bot, target): (Option<BotId>, Option<&Target>),
    outcome: &Outcome,
) {
    let metrics = &ctx.admission.metrics;
    let class = outcome.fate.class();
    metrics.request(bot, protocol, outcome.fate);
    if let Some(t) = target {
        metrics.host_request(&t.host, class);
        let key = HostKey {
            scheme: t.scheme,
            host: t.host.clone(),
            port: t.port,
        };
        let sha256 = outcome.robots.as_ref().map(|r| r.sha256.clone());
        let name = bot.map(|b| ctx.admission.config.bots.get(b).name.as_str());
        ctx.recent
            .finished(&key, name, outcome.fate, &outcome.detail, sha256);
    }
    metrics.bytes_to_client.inc_by(outcome.bytes);
    if let Some(bot) = bot {
        for would in outcome.report.iter() {
            metrics.report_only(&ctx.admission.config.bots.get(bot).name, would.reason());
        }
    }
}

/// The one log line of a finished request: written once the client has its
/// answer, so it adds nothing to the client's wait.
pub fn log(
    ctx: &Context,
    protocol: Protocol,
    conn: &Conn,
    (bot, target): (Option<BotId>, Option<&Target>),
    outcome: &Outcome,
) {
    let class = outcome.fate.class();
    let (host, path) = match target {
        Some(t) => {
            let path = String::from_utf8_lossy(t.matched_path());
            let path: String = path.chars().take(200).collect();
            (t.authority(), path)
        }
        None => (String::new(), String::new()),
    };
    let bot = bot.map_or(crate::metrics::NO_BOT, |b| {
        &ctx.admission.config.bots.get(b).name
    });
    tracing::info!(
        protocol = protocol.as_str(),
        listener = conn.listener.as_str(),
        client = %conn.peer,
        bot = %bot,
        host = %host,
        path = %path,
        decision = %class.as_str(),
        cause = %outcome.fate.cause().as_str(),
        outcome = outcome.fate.as_str(),
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
        duration_ms = conn.started.elapsed().as_millis() as u64,
        "request"
    );
}
