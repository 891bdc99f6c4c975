//! Asking a plain-TCP server for robots.txt with one line and reading its
//! answer to the end (Gopher, Nex): servers report a missing file in many
//! ways (an error menu, an error page, nothing), so an answer counts as found
//! only if it holds at least one robots.txt field line.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::FetchOutcome;
use crate::robots::{RobotsTxt, PARSE_LIMIT};
use crate::target::Server;
use crate::upstream::Upstream;

/// Asks `server` each line of `lines` in turn (each on a connection of its
/// own), until one answers with a robots.txt. A connect error makes the host
/// unreachable at once.
pub async fn first_found(upstream: &Upstream, server: &Server, lines: &[&str]) -> FetchOutcome {
    for line in lines {
        let connected = upstream.connect_tcp(&server.name.host, &server.addrs).await;
        let mut stream = match connected {
            Ok(s) => s,
            Err(e) => return FetchOutcome::unreachable(e.to_string()),
        };
        if let Err(e) = stream.write_all(format!("{line}\r\n").as_bytes()).await {
            return FetchOutcome::unreachable(format!("sending {line:?}: {e}"));
        }
        let mut body = Vec::new();
        // Reading past the parse limit would only cost memory.
        if let Err(e) = (&mut stream)
            .take(PARSE_LIMIT as u64 + 1)
            .read_to_end(&mut body)
            .await
        {
            if body.is_empty() {
                return FetchOutcome::unreachable(format!("reading {line:?}: {e}"));
            }
        }
        if RobotsTxt::parse(&body).field_lines() > 0 {
            return FetchOutcome::Found(body);
        }
    }
    FetchOutcome::Missing(format!("no robots.txt at {}", lines.join(", ")))
}
