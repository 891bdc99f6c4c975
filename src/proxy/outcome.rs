//! What became of one request: its [`Outcome`], what admission adds to it
//! ([`Said`]), and the outcome of a client that left while it waited.

use std::time::Duration;

use crate::admission::{Admitted, Refused};
use crate::cache::Evidence;
use crate::fate::{Fate, Lost};
use crate::refusal::Refusal;
use crate::report::Report;

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
    /// The page the crawler lost, and why (a wait past its bound, a limit,
    /// its client leaving).
    pub lost: Option<Lost>,
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
            lost: None,
        }
    }

    /// The outcome of `refusal`, answered with `status` and `detail`.
    pub fn refused(refusal: &Refusal, status: Option<u16>, detail: String) -> Outcome {
        Outcome {
            lost: refusal.lost(),
            ..Outcome::new(refusal.fate(), status, detail)
        }
    }

    /// This outcome with what admission said of its request.
    pub fn with(mut self, said: Said) -> Outcome {
        self.waited = said.waited;
        self.report = said.report;
        self.robots = said.robots;
        self
    }
}

/// What admission says of a request, for its log line: how long it waited,
/// what report mode would have done, the robots.txt it was decided with.
#[derive(Debug, Default)]
pub struct Said {
    pub waited: Duration,
    pub report: Report,
    pub robots: Option<Evidence>,
}

impl Said {
    /// Taken from an admitted request (its evidence moves: a second copy
    /// would be held across the relay).
    pub fn of(admitted: &mut Admitted) -> Said {
        Said {
            waited: admitted.waited,
            report: std::mem::take(&mut admitted.report),
            robots: admitted.robots.take(),
        }
    }

    /// Taken from a refused one.
    pub fn refused(refused: &mut Refused) -> Said {
        Said {
            waited: refused.waited,
            robots: refused.robots.take(),
            ..Said::default()
        }
    }
}

/// The outcome of a request whose client left while it waited.
pub fn client_left() -> Outcome {
    Outcome {
        lost: Some(Lost::ClientLeft),
        ..Outcome::new(
            Fate::ClientLeft,
            None,
            "the client left while waiting for its turn".into(),
        )
    }
}
