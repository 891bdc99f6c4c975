//! Accepting on a listener, for every listener (the proxy's and the admin's):
//! the next connection, backing off when accepting fails; a budget of log
//! lines for the connections turned away, so a scan cannot flood the log.

use tokio_util::sync::CancellationToken;

/// At most `per_second` log lines a second; the next line that is written says
/// how many were left out.
pub struct LogBudget {
    per_second: u32,
    second: Option<tokio::time::Instant>,
    written: u32,
    suppressed: u64,
}

impl LogBudget {
    pub fn new(per_second: u32) -> LogBudget {
        LogBudget {
            per_second,
            second: None,
            written: 0,
            suppressed: 0,
        }
    }

    /// `Some(left out since the last line)`: write this one.
    pub fn note(&mut self) -> Option<u64> {
        let now = tokio::time::Instant::now();
        if self
            .second
            .is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1))
        {
            self.second = Some(now);
            self.written = 0;
        }
        if self.written < self.per_second {
            self.written += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

/// The next connection on `listener`, or `None` once `shutdown` is cancelled.
/// A failed accept (out of file descriptors and the like) is logged as
/// `what` and retried after 50 ms: the listener backs off and stays up.
pub async fn next_connection(
    listener: &tokio::net::TcpListener,
    shutdown: &CancellationToken,
    what: &'static str,
) -> Option<(tokio::net::TcpStream, std::net::SocketAddr)> {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            accepted = listener.accept() => match accepted {
                Ok(a) => return Some(a),
                Err(e) => {
                    tracing::warn!(error = %e, "{what}");
                    tokio::select! {
                        _ = shutdown.cancelled() => return None,
                        _ = tokio::time::sleep(std::time::Duration::from_millis(50)) => {}
                    }
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LogBudget;
    use std::time::Duration;

    /// A flood of outsiders writes at most the budget each second, and the next
    /// line written says how many were left out.
    #[tokio::test(start_paused = true)]
    async fn the_log_budget_bounds_lines_and_counts_the_rest() {
        let mut budget = LogBudget::new(3);
        let first: Vec<_> = (0..10).map(|_| budget.note()).collect();
        assert_eq!(first[..3], [Some(0), Some(0), Some(0)]);
        assert!(first[3..].iter().all(Option::is_none));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(budget.note(), Some(7));
        assert_eq!(budget.note(), Some(0));
    }
}
