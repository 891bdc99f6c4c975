//! Why a request was not relayed: one typed [`Refusal`] (its fate, a typed
//! detail, an optional retry-after) from which each protocol derives its
//! answer (Gemini status and meta, Gopher type-3 text), the log line its
//! `detail`, and the metrics their labels ([`Fate`]). Pure: no I/O.
//!
//! Adding a refusal cause: a variant here (or in one of the detail enums),
//! its [`Fate`] in [`Refusal::fate`], its text in `Display`; the compiler then
//! points at each protocol's answer (docs/architecture.md, "Recipes").

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use crate::access::Denied;
use crate::fate::Fate;
use crate::robots::{Preference, RuleKind};
use crate::target::TargetError;
use crate::upstream::UpstreamError;

/// Why a request is not relayed, and who caused it (docs/architecture.md, "Answers").
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The client may not use the proxy, or as no bot.
    #[error("{0}")]
    Denied(Denied),
    /// The client's request is malformed.
    #[error("{0}")]
    Malformed(Malformed),
    /// The proxy's own rules (private upstreams, ports, itself, another host).
    #[error("{0}")]
    ProxyRule(ProxyRule),
    /// robots.txt disallows it.
    #[error("{0}")]
    Disallowed(Disallowed),
    /// robots.txt could not be fetched and there is no good copy.
    #[error("{0}")]
    RobotsUnreachable(RobotsUnreachable),
    /// The upstream's answer states a preference against a use the bot
    /// declares (`Content-Usage`, `X-Robots-Tag: noai`, TDMRep): not relayed.
    #[error("{0}")]
    Preference(ResponsePreference),
    /// The upstream could not be reached, or answered badly before relaying.
    #[error("{0}")]
    Upstream(UpstreamFailure),
    /// Not now: the host's turn is too far away, or the fleet cannot tell.
    #[error("{0}")]
    SlowDown(SlowDown),
}

impl Refusal {
    /// What became of the request.
    pub fn fate(&self) -> Fate {
        match self {
            Refusal::Denied(_) => Fate::Denied,
            Refusal::Malformed(_) => Fate::Malformed,
            Refusal::ProxyRule(ProxyRule::DenyHosts { .. }) => Fate::DenyHosts,
            Refusal::ProxyRule(_) => Fate::ProxyRule,
            Refusal::Disallowed(_) => Fate::Disallowed,
            Refusal::RobotsUnreachable(_) => Fate::RobotsUnreachable,
            Refusal::Preference(_) => Fate::Preference,
            Refusal::Upstream(_) => Fate::UpstreamFailed,
            Refusal::SlowDown(_) => Fate::SlowDown,
        }
    }

    /// The work a crawler loses to it, if it is a wait it could not
    /// have: its turn, or its bot's limit, past its bound.
    pub fn lost(&self) -> Option<crate::fate::Lost> {
        match self {
            Refusal::SlowDown(SlowDown {
                why: Busy::Turn, ..
            }) => Some(crate::fate::Lost::Wait),
            Refusal::SlowDown(SlowDown {
                why: Busy::Limit(_),
                ..
            }) => Some(crate::fate::Lost::Limit),
            _ => None,
        }
    }

    /// When asking again may be answered: a slow-down's wait.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Refusal::SlowDown(s) => Some(s.retry_after),
            _ => None,
        }
    }

    /// When asking again may be answered otherwise, where the refusal
    /// knows: a slow-down's wait, or when an unreachable robots.txt is
    /// fetched again (HTTP's `Retry-After`).
    pub fn ask_again_in(&self) -> Option<Duration> {
        match self {
            Refusal::RobotsUnreachable(r) => Some(r.retry_in),
            r => r.retry_after(),
        }
    }

    /// The text the answer and the log line carry.
    pub fn detail(&self) -> String {
        self.to_string()
    }

    /// The kind of answer it gets, whatever protocol says it.
    pub fn family(&self) -> Family {
        match self {
            Refusal::Denied(Denied::NoCertificate) => return Family::CertificateRequired,
            Refusal::Denied(Denied::UnknownCertificate(_)) => {
                return Family::CertificateNotAuthorised
            }
            _ => {}
        }
        match self.fate() {
            Fate::Malformed => Family::Malformed,
            Fate::ProxyRule
            | Fate::Disallowed
            | Fate::Denied
            | Fate::DenyHosts
            | Fate::Preference => Family::Refused,
            Fate::RobotsUnreachable | Fate::UpstreamFailed | Fate::Relayed | Fate::ClientLeft => {
                Family::Unavailable
            }
            Fate::SlowDown => Family::SlowDown,
        }
    }
}

/// The kind of answer a refusal gets (docs/guide/answers.md), before any
/// protocol words it: each protocol maps a family to its own status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// The request does not read as one.
    Malformed,
    /// robots.txt, the bot's declared uses, or the proxy's own rules refuse it.
    Refused,
    /// The client must show a certificate.
    CertificateRequired,
    /// The client's certificate picks no bot.
    CertificateNotAuthorised,
    /// robots.txt or the server could not be reached or answered badly.
    Unavailable,
    /// Not now: ask again later.
    SlowDown,
}

impl Family {
    /// The proxy's two-digit code for it, the same on every protocol that
    /// shows one: Gemini's status (`59`, `53`, `60`, `61`, `43`, `44`), which
    /// a Nex refusal document names too.
    pub fn code(self) -> u8 {
        match self {
            Family::Malformed => 59,
            Family::Refused => 53,
            Family::CertificateRequired => 60,
            Family::CertificateNotAuthorised => 61,
            Family::Unavailable => 43,
            Family::SlowDown => 44,
        }
    }

    /// The class of a one-digit (or HTTP-like) status: `4`, the client's
    /// side (its request, its certificate, the rules), or `5`, the server's
    /// side (unreachable, slow down).
    pub fn class(self) -> u8 {
        match self {
            Family::Unavailable | Family::SlowDown => 5,
            _ => 4,
        }
    }
}

/// Whole seconds, rounded up: what a "retry in N s" says.
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_millis().div_ceil(1000).max(1) as u64
}

/// What is wrong with a client's request.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Malformed {
    /// The request line is longer than the protocol allows.
    #[error("{what} longer than {max} bytes")]
    TooLong { what: &'static str, max: usize },
    /// A request its protocol's parser refused, in the parser's words
    /// (each protocol converts its own errors: no protocol is named here).
    #[error("{why}")]
    Request {
        protocol: &'static str,
        why: Box<str>,
    },
    /// A Spartan upload whose data ended before its announced length.
    #[error("the request announced {announced} bytes of data and sent {sent}")]
    ShortUpload { announced: u64, sent: u64 },
    /// Its path cannot be decided on (a selector read too many ways, a
    /// control character hidden behind escapes).
    #[error("{0}")]
    Target(#[from] TargetError),
}

impl Malformed {
    /// A request `protocol`'s parser refused, for the reason `why`.
    pub fn request(protocol: &'static str, why: impl fmt::Display) -> Malformed {
        Malformed::Request {
            protocol,
            why: why.to_string().into(),
        }
    }
}

/// The proxy's own rules.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ProxyRule {
    /// It does not connect there: a special-purpose address, a port of a
    /// line-based service, itself.
    #[error("{host}: the proxy does not connect there: {why}")]
    Egress { host: String, why: String },
    /// A drop-in connection (SOCKS5, transparent) was made for one host, and
    /// its request names another.
    #[error("this connection is for {expected}:{port}, the request names {named}")]
    OtherHost {
        expected: String,
        port: u16,
        named: String,
    },
    /// An upload (a Spartan request with data, `titan://`) from a bot
    /// without `uploads = true`.
    #[error("uploads are refused for this bot ({what}); they are not crawling (a bot with uploads = true may send them)")]
    Upload { what: &'static str },
    /// A request line of one protocol to a port `[ports]` gives no protocol
    /// (or another): refused rather than relayed as something else.
    #[error("a {protocol} request to port {port}, which [ports] does not list for {protocol}; refused, never relayed as another protocol's request")]
    Unlisted { protocol: &'static str, port: u16 },
    /// A web request whose method the bot may not use (`http_methods`).
    #[error("{method} is not among this bot's http_methods ({})", .allowed.join(", "))]
    Method {
        method: String,
        allowed: Vec<String>,
    },
    /// `limits.deny_hosts` lists the host (`entry`: the name, `*.` name or
    /// range that matched): never contacted, robots.txt included.
    #[error("{host} is never contacted through this proxy (limits.deny_hosts: {entry})")]
    DenyHosts { host: String, entry: String },
    /// A request that came through this proxy already (its `Via` names
    /// this proxy): relayed, it would come back again.
    #[error("this request came through this proxy already (Via names it): a proxy loop")]
    Loop,
    /// A URL whose scheme is not what `[ports]` says its port speaks
    /// (`gopher://h:300/…` with `spartan = [300]`): sent, it would reach a
    /// server of another protocol, whose error line no robots.txt fetch can
    /// read, with a path it never decided.
    #[error("a {scheme}:// URL to port {port}, which [ports] lists for {speaks}; refused, never sent over another protocol than its port speaks")]
    PortSpeaks {
        scheme: &'static str,
        port: u16,
        speaks: &'static str,
    },
}

/// robots.txt disallows the path for this bot; the rule that did, if one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disallowed {
    pub host: String,
    pub port: u16,
    /// The bot's product token, or "this bot" for a bot without one.
    pub bot: String,
    pub rule: Option<Rule>,
    /// The preference (`Content-Usage`, `Content-Signal`) that refused one
    /// of the bot's declared uses, when no rule disallowed it.
    pub usage: Option<Preference>,
    /// Decided on a cached copy: the host is unreachable now.
    pub stale: bool,
}

/// A robots.txt rule, as a refusal names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub kind: RuleKind,
    pub pattern: String,
    pub line: u32,
}

impl fmt::Display for Disallowed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Disallowed {
            host, port, bot, ..
        } = self;
        write!(f, "robots.txt of {host}:{port} disallows this for {bot}")?;
        if let Some(rule) = &self.rule {
            write!(
                f,
                ": {}: {} (line {})",
                rule.kind.as_str(),
                rule.pattern,
                rule.line
            )?;
        }
        if let Some(usage) = &self.usage {
            write!(f, ": {usage}")?;
        }
        if self.stale {
            f.write_str(" (cached copy; the host is unreachable now)")?;
        }
        Ok(())
    }
}

impl std::error::Error for Disallowed {}

/// An answer that refuses one of the bot's declared uses, by a field of
/// its own ([`crate::robots::response`]): the body never reaches the bot.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("the answer of {host}:{port} refuses {} for {bot}: {}", .refused.declared, .refused.field)]
pub struct ResponsePreference {
    pub host: String,
    pub port: u16,
    /// The bot's product token, or "this bot".
    pub bot: String,
    pub refused: crate::robots::response::Refused,
}

/// robots.txt could not be fetched, and `on_unreachable = "disallow"`.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("robots.txt of {host}:{port} could not be fetched ({why}); trying again in {} s", ceil_secs(*.retry_in))]
pub struct RobotsUnreachable {
    pub host: String,
    pub port: u16,
    pub why: String,
    /// Until the next fetch.
    pub retry_in: Duration,
}

/// The upstream failed before anything was relayed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum UpstreamFailure {
    /// Resolving, connecting, TLS or the pinned certificate.
    #[error("upstream: {0}")]
    Connect(UpstreamError),
    /// The request (Gemini) or selector (Gopher) could not be sent.
    #[error("upstream {authority}: could not send the {what}")]
    Send {
        authority: String,
        what: &'static str,
    },
    /// Its first line could not be read, or is no answer.
    #[error("upstream {authority}: {why}")]
    Answer { authority: String, why: String },
    /// It said nothing at all.
    #[error("upstream {authority} sent nothing within {after:?}")]
    Silent { authority: String, after: Duration },
}

/// Not now, and when to ask again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowDown {
    pub retry_after: Duration,
    pub why: Busy,
}

/// Why a request must wait longer than it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Busy {
    /// The host's turn would come later than `max_wait`.
    Turn,
    /// Fleet mode, `on_unavailable = "refuse"`: the store does not answer.
    StoreDown,
    /// The proxy is shutting down: a request still waiting for its turn is
    /// answered rather than cut off.
    ShuttingDown,
    /// One of the bot's own limits (`[bot]`, `[[bots]]`) holds it longer.
    Limit(BotLimit),
    /// The client had its minute's share of new web certificates
    /// (`CONNECT` to hosts it had none for).
    Certificates,
}

/// A bot's limit that holds a request, as its answer names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BotLimit {
    /// `concurrency`: this many of its requests are in flight at the server.
    Concurrency(usize),
    /// `rate`: its starts across all servers.
    Rate(crate::bots::limits::Rate),
    /// `daily_requests_per_server`: its starts at the server in 24 hours.
    DailyBudget(u32),
    /// `limits.max_budget_pairs`: the daily budgets count this many (bot,
    /// server) pairs, and this request would count one more.
    BudgetBook(usize),
    /// `quiet_hours`: no starts now.
    QuietHours,
    /// robots.txt's `Visit-time`: no starts at this host until a window opens.
    VisitTime(crate::robots::VisitTime),
}

impl BotLimit {
    /// Its config key (robots.txt's `Visit-time`: `visit_time`): the
    /// `reason` report mode counts it under.
    pub fn key(self) -> &'static str {
        match self {
            BotLimit::Concurrency(_) => "concurrency",
            BotLimit::Rate(_) => "rate",
            BotLimit::DailyBudget(_) => "daily_requests_per_server",
            BotLimit::BudgetBook(_) => "max_budget_pairs",
            BotLimit::QuietHours => "quiet_hours",
            BotLimit::VisitTime(_) => "visit_time",
        }
    }
}

impl fmt::Display for BotLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BotLimit::Concurrency(n) => write!(f, "this bot's concurrency = {n} at this server"),
            BotLimit::Rate(rate) => write!(f, "this bot's rate = {rate}"),
            BotLimit::DailyBudget(n) => {
                write!(
                    f,
                    "this bot's daily_requests_per_server = {n}, used up here"
                )
            }
            BotLimit::BudgetBook(n) => write!(
                f,
                "the daily budgets count limits.max_budget_pairs = {n} (bot, server) pairs, and this server would be one more"
            ),
            BotLimit::QuietHours => f.write_str("this bot's quiet_hours"),
            BotLimit::VisitTime(w) => {
                let hm = |m: u16| format!("{:02}{:02}", m / 60, m % 60);
                write!(
                    f,
                    "robots.txt's Visit-time: {}-{} UTC (line {})",
                    hm(w.from),
                    hm(w.to),
                    w.line
                )
            }
        }
    }
}

impl fmt::Display for SlowDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slow down, retry in {} s", ceil_secs(self.retry_after))?;
        match self.why {
            Busy::Turn => Ok(()),
            Busy::StoreDown => f.write_str(" (the fleet's store does not answer)"),
            Busy::ShuttingDown => f.write_str(" (the proxy is shutting down)"),
            Busy::Limit(limit) => write!(f, " ({limit})"),
            Busy::Certificates => {
                f.write_str(" (this client had its minute's share of new certificates for CONNECT)")
            }
        }
    }
}

impl std::error::Error for SlowDown {}

/// The proxy's own rule when it would not connect; otherwise the upstream's failure.
impl From<UpstreamError> for Refusal {
    fn from(e: UpstreamError) -> Refusal {
        match e {
            UpstreamError::Refused { host, why } => {
                Refusal::ProxyRule(ProxyRule::Egress { host, why })
            }
            UpstreamError::DenyHosts { host, entry } => {
                Refusal::ProxyRule(ProxyRule::DenyHosts { host, entry })
            }
            e => Refusal::Upstream(UpstreamFailure::Connect(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts clients and logs saw before the refusal was typed.
    #[test]
    fn each_refusal_reads_as_before() {
        let disallowed = Disallowed {
            host: "example.org".into(),
            port: 1965,
            bot: "examplebot".into(),
            rule: Some(Rule {
                kind: RuleKind::Disallow,
                pattern: "/private".into(),
                line: 3,
            }),
            usage: None,
            stale: true,
        };
        assert_eq!(
            Refusal::Disallowed(disallowed).detail(),
            "robots.txt of example.org:1965 disallows this for examplebot: Disallow: /private (line 3) (cached copy; the host is unreachable now)"
        );
        let slow = Refusal::SlowDown(SlowDown {
            retry_after: Duration::from_millis(1500),
            why: Busy::StoreDown,
        });
        assert_eq!(
            slow.detail(),
            "slow down, retry in 2 s (the fleet's store does not answer)"
        );
        assert_eq!(slow.retry_after(), Some(Duration::from_millis(1500)));
        let refused = Refusal::from(UpstreamError::Refused {
            host: "10.0.0.1".into(),
            why: "a private address".into(),
        });
        assert_eq!(refused.fate(), Fate::ProxyRule);
        assert_eq!(
            refused.detail(),
            "10.0.0.1: the proxy does not connect there: a private address"
        );
        let long = Refusal::Malformed(Malformed::TooLong {
            what: "request",
            max: 1024,
        });
        assert_eq!(long.detail(), "request longer than 1024 bytes");
        assert_eq!(long.retry_after(), None);
    }
}
