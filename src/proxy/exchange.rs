//! The exchange every protocol's request runs through once it is parsed and
//! its bot known, in the shape of pingora's `ProxyHttp` phases: a protocol
//! supplies what differs ([`Exchange`]: the upstream exchange up to the
//! answer's head, a verdict on that head, the answer's own preferences, the
//! relay of the rest, its answer to a refusal); [`exchange`] does the rest
//! once, for all of them:
//!
//! 1. admission (robots.txt, the bot's limits, the host's turn), given up as
//!    soon as the client goes away, so it gives its place back at once;
//! 2. what the status page learns of it ([`noted`]);
//! 3. the upstream asked ([`Exchange::ask`]); its head's verdict: relay it,
//!    ask again signed (admitted anew), or refuse;
//! 4. the server's word on its load applied: a slow-down (for how long) or a
//!    recovery, for every bot and, in a fleet, every proxy;
//! 5. the answer's own preferences (a refusal of the bot's declared uses):
//!    refused, or in report mode reported;
//! 6. the relay, or the protocol's answer to a refusal; each carries what
//!    admission said ([`Said`]) into the request's one [`super::Tally`].

use std::future::Future;
use std::time::Duration;

use super::outcome::Said;
use crate::admission::{self, Admitted, Refused};
use crate::bots::BotId;
use crate::context::Context;
use crate::refusal::Refusal;
use crate::target::Target;

/// Which asking of a request this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt {
    /// The first.
    First,
    /// Asked again, signed: the server challenged the first asking.
    Signed,
}

/// A server's word on its load, in its answer's head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    /// Slow down: for this long (its own word), else as the protocol's
    /// policy says (the web's back-off, Gemini's spacing doubled).
    Busy(Option<Duration>),
    /// A success: any back-off it was under ends.
    Fine,
    /// Nothing said either way.
    Unsaid,
}

/// What the skeleton does with an answer's head.
pub enum Verdict {
    /// Relay it, after heeding what it says of the server's load.
    Relay(Load),
    /// Ask again, signed, as a new request (admitted anew): the server
    /// challenged a bot that signs when challenged. Only after the first
    /// asking; after the second, the head is relayed.
    AskAgain,
    /// Refuse it (nothing of it has reached the client).
    Refuse(Refusal),
}

/// What one protocol supplies to [`exchange`]. `C` is its client, as the
/// protocol writes to it (a byte stream; for the web, the request to send).
pub trait Exchange<C> {
    /// How the exchange after admission is held: [`Boxed`], or [`Inline`].
    type AfterTurn: Holding;
    /// The upstream's answer up to its head, with what relaying the rest needs.
    type Head;
    /// What the protocol's caller gets: the outcome (a byte stream's answer
    /// has been written), or the answer to hand to the client (the web's).
    type Answer;

    /// Resolves when the client has gone away while its request waits.
    fn gone<'c>(&'c self, client: &'c mut C) -> impl Future<Output = ()> + 'c;

    /// The request's method, if its protocol has more than one kind of
    /// request (the web's): a place in line left by a client that went away
    /// is kept for the same bot, method and URL.
    fn method(&self) -> &str {
        ""
    }

    /// Connects upstream, sends the request, reads the answer's head: a
    /// refusal while nothing has been sent to the client.
    fn ask(
        &self,
        client: &mut C,
        admitted: &Admitted,
        attempt: Attempt,
    ) -> impl Future<Output = Result<Self::Head, Refusal>>;

    /// The verdict on a head.
    fn verdict(&self, head: &Self::Head, attempt: Attempt) -> Verdict;

    /// The answer's own word on the bot's declared uses: a refusal it gives
    /// (`Ok(Some)`), or why it could not be read (`Err`: a failure of the
    /// upstream's). Only the web's answers carry any.
    fn preferences(
        &self,
        _head: &mut Self::Head,
    ) -> impl Future<Output = Result<Option<Refusal>, Refusal>> {
        std::future::ready(Ok(None))
    }

    /// Relays the rest of the answer. `admitted` is held until it has been
    /// relayed (its turn, the bot's holds).
    fn relay(
        &self,
        client: &mut C,
        head: Self::Head,
        admitted: Admitted,
        said: Said,
    ) -> impl Future<Output = Self::Answer>;

    /// The protocol's answer to a refusal.
    fn refuse(
        &self,
        client: &mut C,
        refusal: &Refusal,
        said: Said,
    ) -> impl Future<Output = Self::Answer>;

    /// The client went away while its request waited.
    fn left(&self, client: &mut C) -> Self::Answer;
}

/// How the part of an exchange after admission (upstream connection, TLS,
/// buffers) is held while it runs.
pub trait Holding {
    type Held<F: Future>: Future<Output = F::Output>;
    fn hold<F: Future>(exchange: F) -> Self::Held<F>;
}

/// Boxed: allocated when the request's turn comes, so a connection waiting
/// for its turn holds only what waiting needs (tests/footprint.rs).
pub enum Boxed {}

impl Holding for Boxed {
    type Held<F: Future> = std::pin::Pin<Box<F>>;
    fn hold<F: Future>(exchange: F) -> Self::Held<F> {
        Box::pin(exchange)
    }
}

/// Inline, in the future that waited (moving a large state into a box costs
/// a copy of all of it, for every request).
pub enum Inline {}

impl Holding for Inline {
    type Held<F: Future> = F;
    fn hold<F: Future>(exchange: F) -> F {
        exchange
    }
}

/// One request of `bot` for `target`, from admission to its answer.
pub async fn exchange<C, P: Exchange<C>>(
    ctx: &Context,
    (bot, target): (BotId, &Target),
    client: &mut C,
    protocol: &P,
) -> P::Answer {
    let Some(admitted) = admit_while_connected(ctx, (bot, target), client, protocol).await else {
        return protocol.left(client);
    };
    match admitted {
        Ok(admitted) => {
            let exchange = admitted_exchange(ctx, (bot, target), client, protocol, admitted);
            <P::AfterTurn as Holding>::hold(exchange).await
        }
        Err(mut refused) => {
            let said = Said::refused(&mut refused);
            protocol.refuse(client, &refused.refusal, said).await
        }
    }
}

/// Admission, given up as soon as the client goes away (`None`); what the
/// status page learns of it noted.
async fn admit_while_connected<C, P: Exchange<C>>(
    ctx: &Context,
    (bot, target): (BotId, &Target),
    client: &mut C,
    protocol: &P,
) -> Option<Result<Admitted, Refused>> {
    let admitted = tokio::select! {
        admitted = admission::admit_method(&ctx.admission, (bot, protocol.method()), target) => admitted,
        _ = protocol.gone(client) => return None,
    };
    noted(ctx, bot, &admitted);
    Some(admitted)
}

async fn admitted_exchange<C, P: Exchange<C>>(
    ctx: &Context,
    (bot, target): (BotId, &Target),
    client: &mut C,
    protocol: &P,
    mut admitted: Admitted,
) -> P::Answer {
    let mut attempt = Attempt::First;
    let (mut head, load) = loop {
        let head = match protocol.ask(client, &admitted, attempt).await {
            Ok(head) => head,
            Err(refusal) => {
                return protocol
                    .refuse(client, &refusal, Said::of(&mut admitted))
                    .await
            }
        };
        match protocol.verdict(&head, attempt) {
            Verdict::Relay(load) => break (head, load),
            Verdict::AskAgain if attempt == Attempt::First => {
                // This answer (its body unread) is not the server's word on
                // its load; its turn is given back before asking for another.
                drop(head);
                drop(admitted);
                admitted = match admit_while_connected(ctx, (bot, target), client, protocol).await {
                    Some(Ok(again)) => again,
                    Some(Err(mut refused)) => {
                        let said = Said::refused(&mut refused);
                        return protocol.refuse(client, &refused.refusal, said).await;
                    }
                    None => return protocol.left(client),
                };
                attempt = Attempt::Signed;
            }
            Verdict::AskAgain => break (head, Load::Unsaid),
            Verdict::Refuse(refusal) => {
                drop(head);
                return protocol
                    .refuse(client, &refusal, Said::of(&mut admitted))
                    .await;
            }
        }
    };
    heed(&admitted, load).await;
    match protocol.preferences(&mut head).await {
        Ok(None) => {}
        Ok(Some(refusal)) => match ctx.admission.config.bots.get(bot).limits.mode {
            crate::bots::limits::Mode::Report => {
                admitted.report.add(crate::report::Would::Refuse(refusal))
            }
            crate::bots::limits::Mode::Enforce => {
                drop(head);
                return protocol
                    .refuse(client, &refusal, Said::of(&mut admitted))
                    .await;
            }
        },
        Err(failed) => {
            drop(head);
            return protocol
                .refuse(client, &failed, Said::of(&mut admitted))
                .await;
        }
    }
    let said = Said::of(&mut admitted);
    protocol.relay(client, head, admitted, said).await
}

/// A server's word on its load, applied to its site: a slow-down pushes its
/// next start out (for every bot and, in a fleet, every proxy); a success
/// ends its back-off.
async fn heed(admitted: &Admitted, load: Load) {
    let server = &admitted.server.name;
    match load {
        Load::Busy(seconds) => {
            admitted.permit.slow_down(server, seconds).await;
        }
        Load::Fine => admitted.permit.recovered(server).await,
        Load::Unsaid => {}
    }
}

/// What the status page learns from an admission: the addresses a host
/// resolved to (observed here, not inside admission's steps), and its
/// pictures: when the gate let the request start, against which spacing.
fn noted(ctx: &Context, bot: BotId, admitted: &Result<Admitted, Refused>) {
    match admitted {
        Ok(a) => {
            let bot = ctx.admission.config.bots.get(bot);
            let reported = bot.limits.mode == crate::bots::limits::Mode::Report;
            let start = (a.permit.started, a.spacing, reported);
            ctx.recent
                .started(&a.server, &bot.name, start, a.permit.behind);
        }
        Err(refused) => {
            if let Some(server) = &refused.server {
                ctx.recent.resolved(&server.name, &server.addrs);
            }
        }
    }
}
