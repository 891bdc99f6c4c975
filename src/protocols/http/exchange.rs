//! The web's part of the exchange every protocol's request runs through
//! ([`crate::proxy::exchange`]): the request sent upstream ([`super::relay`]:
//! the upstream connections), the answer's head judged (a challenge a
//! signing bot answers, `429`/`503` and their `Retry-After`, a protocol
//! switch that was not asked for), the answer's own preferences read (its
//! fields, a page's meta tags), then its body relayed as the client reads
//! it, or the refusal's answer ([`super::answer`]).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;

use hyper::body::{Bytes, Frame, Incoming};
use hyper::header;
use hyper::{Request, Response, StatusCode, Version};

use super::answer::{refused, Body};
use super::relay::{self, challenges, Answered, RelayBody, Relayed};
use super::wire;
use crate::admission::Admitted;
use crate::bots::{Bot, BotId};
use crate::context::Context;
use crate::fate::Fate;
use crate::protocol::Protocol;
use crate::proxy::{client_left, Attempt, Conn, Exchange, Load, Outcome, Said, Tally, Verdict};
use crate::refusal::{Refusal, UpstreamFailure};
use crate::target::Target;

/// The `protocol` label of a web request: the scheme of the server it
/// reaches (`http` when it names none).
fn protocol_of(target: Option<&Target>) -> Protocol {
    target
        .and_then(|t| Protocol::of(t.scheme))
        .unwrap_or(Protocol::Http)
}

/// The answer to a web request's refusal, the request counted and logged
/// (its tally made and dropped at once) as `said` adds: before admission, or
/// in the exchange.
pub fn refuse(
    ctx: &Arc<Context>,
    (conn, bot, target): (&Conn, Option<BotId>, Option<&Target>),
    refusal: &Refusal,
    (unread_body, said): (bool, Said),
) -> Response<Body> {
    let response = refused(refusal, unread_body);
    let status = Some(response.status().as_u16());
    let outcome = Outcome::refused(refusal, status, refusal.detail()).with(said);
    let protocol = protocol_of(target);
    drop(Tally::new(
        ctx.clone(),
        protocol,
        conn,
        (bot, target.cloned()),
        outcome,
    ));
    response
}

/// What a web request has to send: the request itself, and for a bodiless
/// `GET` or `HEAD` of a bot that signs when challenged, its head kept to
/// ask again, signed.
pub struct Asking {
    pub request: Option<Request<RelayBody>>,
    pub again: Option<hyper::http::request::Parts>,
}

/// One web request of `bot` for `target`, as the exchange serves it.
pub struct Web<'a> {
    pub ctx: &'a Arc<Context>,
    pub conn: Conn<'a>,
    pub bot: BotId,
    pub target: &'a Target,
    /// Its method: a place in line is kept per (bot, method, URL).
    pub method: hyper::Method,
    /// The request's body is left unread: its connection closes once answered.
    pub unread_body: bool,
    /// A bodiless `GET` or `HEAD` of a bot that signs when challenged: its
    /// head was kept, to ask again signed.
    pub retryable: bool,
    /// Its tally was made. A request whose client leaves while it waits is
    /// dropped by hyper with its future: dropped untallied, it is counted
    /// and logged as its client's leaving.
    pub tallied: std::sync::atomic::AtomicBool,
}

impl Drop for Web<'_> {
    fn drop(&mut self) {
        if !*self.tallied.get_mut() {
            drop(self.tally(client_left()));
        }
    }
}

/// An upstream's answer up to its head; for a page read by a bot that
/// declares uses, its first frames too.
pub struct Head {
    parts: hyper::http::response::Parts,
    body: Incoming,
    /// A page's head, read before it is relayed: relayed first.
    frames: VecDeque<Frame<Bytes>>,
    connection: relay::KeptConn,
    connecting: tokio::time::Instant,
}

impl Web<'_> {
    fn bot(&self) -> &Bot {
        self.ctx.admission.config.bots.get(self.bot)
    }

    /// The request's one count and log line, ending as `outcome` says.
    fn tally(&self, outcome: Outcome) -> Tally {
        self.tallied
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let request = (Some(self.bot), Some(self.target.clone()));
        let protocol = protocol_of(Some(self.target));
        Tally::new(self.ctx.clone(), protocol, &self.conn, request, outcome)
    }

    /// The refusal of a use the answer (its fields, its page) refuses.
    fn preference(&self, refused: crate::robots::response::Refused) -> Refusal {
        Refusal::Preference(crate::refusal::ResponsePreference {
            host: self.target.host.clone(),
            port: self.target.port,
            bot: match self.bot().profile.token() {
                "" => "this bot".into(),
                token => token.into(),
            },
            refused,
        })
    }
}

impl<'a> Exchange<Asking> for Web<'a> {
    type AfterTurn = crate::proxy::exchange::Inline;
    type Head = Head;
    type Answer = Response<Body>;

    /// Never: a client that goes away closes its connection, and hyper drops
    /// the request it was waiting for.
    fn gone<'c>(&'c self, _: &'c mut Asking) -> impl Future<Output = ()> + 'c {
        std::future::pending()
    }

    fn method(&self) -> &str {
        self.method.as_str()
    }

    async fn ask(
        &self,
        asking: &mut Asking,
        admitted: &Admitted,
        attempt: Attempt,
    ) -> Result<Head, Refusal> {
        let request = match attempt {
            Attempt::First => asking.request.take(),
            Attempt::Signed => asking
                .again
                .take()
                .map(|parts| Request::from_parts(parts, relay::no_body())),
        };
        let Some(request) = request else {
            // Nothing kept to ask again with: the server's to explain.
            return Err(Refusal::Upstream(UpstreamFailure::Answer {
                authority: self.target.authority(),
                why: "asked for a signature".into(),
            }));
        };
        let signed = attempt == Attempt::Signed;
        let Answered {
            response,
            connection,
            connecting,
        } = relay::ask(self.ctx, request, (self.bot, self.target), admitted, signed).await?;
        let (parts, body) = response.into_parts();
        Ok(Head {
            parts,
            body,
            frames: VecDeque::new(),
            connection,
            connecting,
        })
    }

    fn verdict(&self, head: &Head, attempt: Attempt) -> Verdict {
        if head.parts.status == StatusCode::SWITCHING_PROTOCOLS {
            return Verdict::Refuse(Refusal::Upstream(UpstreamFailure::Answer {
                authority: self.target.authority(),
                why: "switched protocols, which was not asked".into(),
            }));
        }
        // A challenge this bot answers by signing: asked again, as a new
        // request (only a bodiless GET or HEAD, whose head was kept).
        let answers_challenges = self
            .ctx
            .signers
            .get(self.bot)
            .is_some_and(|s| s.when == crate::identity::When::Challenged);
        let first = attempt == Attempt::First && self.retryable;
        if first && answers_challenges && challenges(&head.parts) {
            return Verdict::AskAgain;
        }
        // The server's own word on its load: `429` or `503` slows its site
        // down (for its `Retry-After` in seconds, else by the web's back-off),
        // at most `politeness.max_slow_down`; any other answer ends it.
        Verdict::Relay(match head.parts.status {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => {
                Load::Busy(wire::retry_after(&head.parts.headers))
            }
            _ => Load::Fine,
        })
    }

    /// The answer's own word on the bot's declared uses, in its fields and,
    /// for a page, its head's meta tags (read first, relayed after).
    async fn preferences(&self, head: &mut Head) -> Result<Option<Refusal>, Refusal> {
        let bot = self.bot();
        let uses = bot.profile.uses();
        if uses.is_empty() {
            return Ok(None);
        }
        let headers = &head.parts.headers;
        let content_type = headers.get(header::CONTENT_TYPE).map(|v| v.as_bytes());
        // (A profile's token is lower case already.)
        let token = bot.profile.token();
        let fields = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
        if let Some(refused) =
            crate::robots::response::read(fields, content_type, token).refused(uses)
        {
            return Ok(Some(self.preference(refused)));
        }
        if !super::page::is_page(headers) {
            return Ok(None);
        }
        let idle = self.ctx.admission.config.limits.idle_timeout;
        // Boxed: only bots that declare uses read it.
        match Box::pin(super::page::refused(
            &mut head.body,
            headers,
            idle,
            (token, uses),
        ))
        .await
        {
            Ok((frames, refused)) => {
                head.frames = frames;
                Ok(refused.map(|refused| self.preference(refused)))
            }
            Err(why) => Err(Refusal::Upstream(UpstreamFailure::Answer {
                authority: self.target.authority(),
                why,
            })),
        }
    }

    async fn relay(
        &self,
        _: &mut Asking,
        head: Head,
        admitted: Admitted,
        said: Said,
    ) -> Response<Body> {
        let Head {
            mut parts,
            body,
            frames,
            connection,
            connecting,
        } = head;
        // Kept for the next request once its body has been read, unless the
        // server said it closes it.
        let closes = parts.version < Version::HTTP_11
            || parts.headers.get_all(header::CONNECTION).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.to_ascii_lowercase().contains("close"))
            });
        wire::strip_hop_by_hop(&mut parts.headers);
        // Received as HTTP/2, perhaps: said so in `Via`, relayed as HTTP/1.1.
        wire::add_via(&mut parts.headers, parts.version, wire::pseudonym());
        parts.version = Version::HTTP_11;
        let outcome = Outcome::new(Fate::Relayed, Some(parts.status.as_u16()), String::new());
        let tally = self.tally(outcome.with(said));
        let upstream = (connection, connecting, !closes);
        let relayed = Relayed::new((body, frames), upstream, admitted, tally);
        Response::from_parts(parts, Body::Relayed(Box::pin(relayed)))
    }

    async fn refuse(&self, _: &mut Asking, refusal: &Refusal, said: Said) -> Response<Body> {
        self.tallied
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let request = (&self.conn, Some(self.bot), Some(self.target));
        refuse(self.ctx, request, refusal, (self.unread_body, said))
    }

    /// Never asked ([`Web::gone`] never resolves: hyper drops the request,
    /// and [`Web`]'s drop tallies it); were it, the request is logged as its
    /// client's leaving, and the answer goes nowhere.
    fn left(&self, _: &mut Asking) -> Response<Body> {
        drop(self.tally(client_left()));
        let mut response = Response::new(Body::full(""));
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        response
    }
}
