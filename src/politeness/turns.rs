//! Where a request takes its turn: the seam between the gate's owner
//! ([`Politeness`]) and its backends, this process's gates or the fleet's.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::{Permit, Politeness, SlowDown};
use crate::target::Server;

/// Where a request takes its turn: at this process's gates ([`Local`]), or
/// at the fleet's shared gate in the store ([`Fleet`]). One is chosen at
/// start; the owner, [`Politeness`], does not ask which.
pub trait Turns: Send + Sync {
    /// Waits for this request's turn at `server`'s gate, with its spacing
    /// and the gate's hold, no later than `by` (see [`Politeness::admit_by`]).
    fn admit<'a>(
        &'a self,
        gate: &'a Arc<Politeness>,
        server: &'a Server,
        spacing: (Option<Duration>, Duration),
        by: Option<Instant>,
    ) -> BoxFuture<'a, Result<Permit, SlowDown>>;
}

/// Turns taken at this process's own gates.
pub struct Local;

impl Turns for Local {
    fn admit<'a>(
        &'a self,
        gate: &'a Arc<Politeness>,
        server: &'a Server,
        spacing: (Option<Duration>, Duration),
        by: Option<Instant>,
    ) -> BoxFuture<'a, Result<Permit, SlowDown>> {
        Box::pin(gate.admit_here(server, spacing, by))
    }
}
