//! Where a request takes its turn: the seam between the gate as the proxy
//! sees it ([`Politeness`](super::Politeness)) and its backends, this
//! process's gates ([`Local`]) or the fleet's ([`Fleet`](super::Fleet)).
//! A backend owns its state; none calls back into the façade.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use super::{Local, Permit, PlaceOf, SlowDown};
use crate::target::Server;

/// Where a request takes its turn: at this process's gates, or at the
/// fleet's shared gate in the store. One is chosen at start; the owner does
/// not ask which.
pub trait Turns: Send + Sync {
    /// Waits for this request's turn at `server`'s gate, with its spacing
    /// and the gate's hold, no later than `by`, its place kept under
    /// `place` if it leaves first (see
    /// [`Politeness::admit_by`](super::Politeness::admit_by)).
    fn admit<'a>(
        &'a self,
        server: &'a Server,
        spacing: (Option<Duration>, Duration),
        by: Option<Instant>,
        place: Option<PlaceOf<'a>>,
    ) -> BoxFuture<'a, Result<Permit, SlowDown>>;

    /// This process's gates: the whole state when alone; in fleet mode the
    /// starts the fleet let through, noted here (report mode's waits, the
    /// status page, the fallback while the store is down).
    fn here(&self) -> &Arc<Local>;
}
