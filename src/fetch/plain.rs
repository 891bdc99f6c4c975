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
        if let Some(what) = not_a_missing_page(&body) {
            return FetchOutcome::unreachable(format!(
                "{line:?} was answered with {what}: neither a robots.txt nor a missing-file page"
            ));
        }
    }
    FetchOutcome::Missing(format!("no robots.txt at {}", lines.join(", ")))
}

/// What an answer without a robots.txt field line is, when it is not a way
/// of saying "no such file" (nothing, an error menu, an error page): binary
/// data, or another protocol's status line (a Gemini or Spartan server's
/// `59 bad request`, `4 not found`; an HTTP server's `HTTP/1.0 400`). Such an
/// answer comes from a server that does not speak this protocol, or from
/// one that answers junk: it says nothing about robots.txt, and reading it
/// as "missing" would allow everything.
fn not_a_missing_page(body: &[u8]) -> Option<String> {
    if !super::outcome::is_text(body) {
        return Some("binary data".to_string());
    }
    let first = body.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    let digits = first.iter().take_while(|b| b.is_ascii_digit()).count();
    let status_line = matches!(digits, 1 | 2)
        && matches!(first.get(digits), None | Some(b' '))
        && !first.contains(&b'\t');
    let http = first.starts_with(b"HTTP/");
    (status_line || http).then(|| {
        let shown = String::from_utf8_lossy(&first[..first.len().min(60)]).into_owned();
        format!("another protocol's status line ({shown:?})")
    })
}
