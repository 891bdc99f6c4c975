//! A byte-stream protocol's part of the exchange (Gemini, Gopher, Spartan,
//! Nex, the gateway): what differs between them ([`Streamed`]: asking the
//! upstream, what the head says of the server's load, relaying the rest, the
//! answer to a refusal); the rest of [`Exchange`] is theirs alike: the
//! client watched by its [`Hangup`], the outcome of a client that left, each
//! outcome given what admission said, the admitted request held until its
//! answer has been relayed, and the state after admission boxed.

use std::future::Future;

use tokio::io::{AsyncRead, BufReader};

use super::exchange::{Attempt, Boxed, Exchange, Load, Verdict};
use super::{client_gone, client_left, Hangup, Outcome, Said};
use crate::admission::Admitted;
use crate::refusal::Refusal;

/// What one byte-stream protocol supplies to the exchange; its client is the
/// connection `S`, read through its buffer.
pub trait Streamed<S> {
    /// The upstream's answer up to its head, with what relaying the rest needs.
    type Head;

    /// How the client's leaving shows while its request waits.
    fn hangup(&self) -> Hangup;

    /// Connects upstream, sends the request, reads the answer's head (its
    /// status line, or its first bytes): a refusal while nothing has been
    /// sent to the client.
    fn ask(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
    ) -> impl Future<Output = Result<Self::Head, Refusal>>;

    /// What the head says of the server's load: nothing, unless the protocol
    /// has a word for it (Gemini's `44`).
    fn load(&self, _head: &Self::Head) -> Load {
        Load::Unsaid
    }

    /// Writes the head and the rest of the answer to the client.
    fn relay(&self, client: &mut BufReader<S>, head: Self::Head) -> impl Future<Output = Outcome>;

    /// Writes the protocol's answer to a refusal.
    fn refuse(&self, client: &mut S, refusal: &Refusal) -> impl Future<Output = Outcome>;
}

impl<S: AsyncRead + Unpin, P: Streamed<S>> Exchange<BufReader<S>> for P {
    type AfterTurn = Boxed;
    type Head = P::Head;
    type Answer = Outcome;

    fn gone<'c>(&'c self, client: &'c mut BufReader<S>) -> impl Future<Output = ()> + 'c {
        client_gone(client, self.hangup())
    }

    fn ask(
        &self,
        client: &mut BufReader<S>,
        admitted: &Admitted,
        _: Attempt,
    ) -> impl Future<Output = Result<P::Head, Refusal>> {
        Streamed::ask(self, client, admitted)
    }

    fn verdict(&self, head: &P::Head, _: Attempt) -> Verdict {
        Verdict::Relay(self.load(head))
    }

    async fn relay(
        &self,
        client: &mut BufReader<S>,
        head: P::Head,
        admitted: Admitted,
        said: Said,
    ) -> Outcome {
        let outcome = Streamed::relay(self, client, head).await;
        // Its turn and the bot's holds last until the answer is relayed.
        drop(admitted);
        outcome.with(said)
    }

    async fn refuse(&self, client: &mut BufReader<S>, refusal: &Refusal, said: Said) -> Outcome {
        Streamed::refuse(self, client.get_mut(), refusal)
            .await
            .with(said)
    }

    fn left(&self, _: &mut BufReader<S>) -> Outcome {
        client_left()
    }
}
