//! What ends a web request: its count and its log line, each exactly once
//! (a relayed one's as its body ends, or is dropped: the client went away).

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::time::Instant;

use crate::bots::{BotId, Presented};
use crate::context::Context;
use crate::fate::Fate;
use crate::metrics::Listener;
use crate::protocol::Protocol;
use crate::proxy::{count, log, Conn, Outcome};
use crate::target::{Scheme, Target};

/// The `protocol` label of a request: the scheme of the server it reaches.
pub fn protocol_of(target: Option<&Target>) -> Protocol {
    match target.map(|t| t.scheme) {
        Some(Scheme::Https) => Protocol::Https,
        _ => Protocol::Http,
    }
}

/// What ends a relayed request: its count, when its answer has been
/// streamed, and its log line, when the body is done with (or dropped: the
/// client went away).
pub struct Finish {
    pub ctx: Arc<Context>,
    /// The client, and when its request began.
    pub conn: (SocketAddr, Listener, Instant),
    pub bot: BotId,
    pub target: Target,
    pub outcome: Outcome,
    counted: bool,
}

impl Finish {
    /// A request of `bot` for `target`, from the client `conn` describes
    /// (its address, its listener, when its request began): relayed,
    /// unless its outcome is set otherwise.
    pub fn new(
        ctx: Arc<Context>,
        conn: (SocketAddr, Listener, Instant),
        bot: BotId,
        target: Target,
    ) -> Finish {
        Finish {
            ctx,
            conn,
            bot,
            target,
            counted: false,
            outcome: Outcome::new(Fate::Relayed, None, String::new()),
        }
    }

    /// Counts the request, once (before the client sees the end of its
    /// answer, so metrics read after it include it).
    pub fn count(&mut self) {
        if !self.counted {
            self.counted = true;
            let protocol = protocol_of(Some(&self.target));
            count(
                &self.ctx,
                protocol,
                (Some(self.bot), Some(&self.target)),
                &self.outcome,
            );
        }
    }
}

impl Drop for Finish {
    fn drop(&mut self) {
        self.count();
        let (peer, listener, started) = self.conn;
        let conn = Conn {
            peer,
            listener,
            socks5_user: None,
            cert: Presented::NotTls,
            started,
            deadline: started,
        };
        let protocol = protocol_of(Some(&self.target));
        log(
            &self.ctx,
            protocol,
            &conn,
            (Some(self.bot), Some(&self.target)),
            &self.outcome,
        );
    }
}
