//! `robots-proxy status`: the admin API's view (`/api/status`) in a
//! terminal. The admin listener is found where `run` wrote it
//! (`STATE_DIR/listening`) unless `--admin` names it; the token comes from
//! `--token` or `ROBOTS_PROXY_ADMIN_TOKEN`. Every wait has a deadline and
//! the answer a byte cap.

use std::fmt::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use thiserror::Error;

use super::html::seconds;
use super::model::{Bot, Status};

/// The environment variable the token may come from.
pub const TOKEN_VARIABLE: &str = "ROBOTS_PROXY_ADMIN_TOKEN";

/// The longest the whole exchange may take.
const DEADLINE: Duration = Duration::from_secs(10);

/// The most bytes of an answer read.
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// How many hosts and refusals are printed.
const ROWS: usize = 20;

#[derive(Debug, Error)]
pub enum StatusError {
    #[error(
        "{}: {source}; is the proxy running with this state directory? (give it with --state-dir or --config, or the admin listener with --admin ADDR)",
        path.display()
    )]
    Listening {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{0} names no admin listener (listen.metrics): is it off?")]
    NoAdmin(String),
    #[error("the admin listener at {addr}: {detail}")]
    Ask { addr: SocketAddr, detail: String },
    #[error("the admin listener at {addr} answered {status}: {body}")]
    Refused {
        addr: SocketAddr,
        status: u16,
        body: String,
    },
    #[error("the admin listener's answer is not the status this version reads: {0}")]
    Answer(String),
}

/// Where `run` with this state directory listens for admin requests.
pub fn admin_address(state_dir: &Path) -> Result<SocketAddr, StatusError> {
    let path = state_dir.join(crate::state::LISTENING);
    let text = crate::state::read(&path, crate::state::SMALL_FILE).map_err(|source| {
        StatusError::Listening {
            path: path.clone(),
            source,
        }
    })?;
    let text = String::from_utf8_lossy(&text);
    let key = crate::listener::Listener::Admin.spec().key;
    let addr = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .find(|(k, _)| *k == key)
        .and_then(|(_, a)| a.trim().parse::<SocketAddr>().ok())
        .ok_or_else(|| StatusError::NoAdmin(path.display().to_string()))?;
    Ok(reachable(addr))
}

/// A listener on every address is asked on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, addr.port()))
        }
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port()))
        }
        _ => addr,
    }
}

/// `GET /api/status` at `addr`, with `token` if given.
pub async fn fetch(addr: SocketAddr, token: Option<&str>) -> Result<Status, StatusError> {
    match tokio::time::timeout(DEADLINE, ask(addr, token)).await {
        Ok(answer) => answer,
        Err(_) => Err(StatusError::Ask {
            addr,
            detail: format!("no answer within {DEADLINE:?}"),
        }),
    }
}

async fn ask(addr: SocketAddr, token: Option<&str>) -> Result<Status, StatusError> {
    let failed = |e: &dyn std::fmt::Display| StatusError::Ask {
        addr,
        detail: e.to_string(),
    };
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| failed(&e))?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| failed(&e))?;
    let driver = tokio::spawn(connection);
    let mut request =
        hyper::Request::get("/api/status").header(hyper::header::HOST, addr.to_string());
    if let Some(token) = token {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|e| failed(&e))?;
    let answer = sender.send_request(request).await.map_err(|e| failed(&e))?;
    let status = answer.status().as_u16();
    let body = Limited::new(answer.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| failed(&e))?
        .to_bytes();
    driver.abort();
    if status != 200 {
        let body: String = String::from_utf8_lossy(&body)
            .trim()
            .chars()
            .take(300)
            .collect();
        return Err(StatusError::Refused { addr, status, body });
    }
    serde_json::from_slice(&body).map_err(|e| StatusError::Answer(e.to_string()))
}

/// The status as a terminal shows it: the proxy, the fleet store, each bot
/// with its mode, limits and what is left, the latest refusals, the hosts.
pub fn render(s: &Status) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "robots-proxy {}, up {}, config generation {}",
        s.version,
        seconds(s.uptime_seconds as f64),
        s.config_generation
    );
    let counts: Vec<String> = s.requests.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(out, "requests: {}", counts.join(", "));
    if let Some(store) = &s.store {
        let _ = writeln!(
            out,
            "fleet store: {} ({} at {}, {} master{}, on_unavailable = {})",
            match store.up {
                true => "up",
                false => "DOWN",
            },
            store.kind,
            store.url,
            store.masters.len(),
            if store.masters.len() == 1 { "" } else { "s" },
            store.on_unavailable
        );
    }
    let _ = writeln!(out, "\nbots:");
    for bot in &s.bots {
        bot_lines(&mut out, bot);
    }
    let _ = writeln!(out, "\nlatest refusals:");
    if s.recent_refusals.is_empty() {
        let _ = writeln!(out, "  none lately");
    }
    for r in s.recent_refusals.iter().take(ROWS) {
        let _ = writeln!(
            out,
            "  {:>8} ago  {}  {}: {}",
            seconds(r.refusal.seconds_ago),
            r.key,
            r.refusal.outcome,
            r.refusal.detail
        );
    }
    let _ = writeln!(
        out,
        "\nhosts seen lately ({}{}):",
        s.hosts.len(),
        match s.hosts.len() > ROWS {
            true => format!(", the {ROWS} latest shown"),
            false => String::new(),
        }
    );
    let width = s
        .hosts
        .iter()
        .take(ROWS)
        .map(|h| h.key.chars().count())
        .max()
        .unwrap_or(4);
    let _ = writeln!(
        out,
        "  {:<width$}  {:<11}  {:>8}  {:>9}  {:>5}  lost",
        "host", "robots.txt", "requests", "refusals", "queue"
    );
    for h in s.hosts.iter().take(ROWS) {
        let lost: Vec<String> = h.lost.iter().map(|(why, n)| format!("{why} {n}")).collect();
        let lost = match lost.is_empty() {
            true => "-".to_string(),
            false => lost.join(", "),
        };
        let _ = writeln!(
            out,
            "  {:<width$}  {:<11}  {:>8}  {:>9}  {:>5}  {lost}",
            h.key, h.robots.state, h.requests, h.refusals, h.queue
        );
    }
    out
}

/// A bot: its token and mode, then each limit with what is left of it.
fn bot_lines(out: &mut String, bot: &Bot) {
    let _ = writeln!(
        out,
        "  {} (agent {:?}){}",
        bot.name,
        bot.agent,
        match bot.reports() {
            true => ", REPORT MODE: relayed at once, what would be refused is only counted",
            false => "",
        }
    );
    let (l, left) = (&bot.limits, &bot.left);
    if let Some(d) = l.min_delay_seconds {
        let _ = writeln!(out, "    min_delay {}", seconds(d));
    }
    if let Some(d) = l.max_wait_seconds {
        let _ = writeln!(out, "    max_wait {}", seconds(d));
    }
    if let Some(max) = l.concurrency {
        let _ = writeln!(
            out,
            "    concurrency {max}: {} free at its busiest server",
            left.concurrency.unwrap_or(max)
        );
    }
    if let Some(rate) = &l.rate {
        let _ = writeln!(
            out,
            "    rate {rate}: {} left in the window",
            left.rate.map_or_else(|| "?".into(), |n| n.to_string())
        );
    }
    if let Some(b) = &bot.budgets {
        let spent = b.servers.iter().filter(|s| s.left == 0).count();
        let _ = writeln!(
            out,
            "    daily_requests_per_server {}: at least {} left at each server; {} server{} used, {spent} spent{}",
            b.per_server,
            left.daily_requests_per_server.unwrap_or(b.per_server),
            b.servers.len(),
            if b.servers.len() == 1 { "" } else { "s" },
            match b.enforced {
                true => "",
                false => " (not enforced: report mode)",
            }
        );
        for row in b.servers.iter().take(5) {
            let _ = writeln!(
                out,
                "      {}  {} used, {} left",
                row.server, row.used, row.left
            );
        }
    }
    if !l.quiet_hours.is_empty() {
        let now = match left.quiet_for_seconds {
            Some(q) if q > 0.0 => format!("quiet now, for {}", seconds(q)),
            _ => "not quiet now".into(),
        };
        let _ = writeln!(
            out,
            "    quiet_hours {} UTC: {now}",
            l.quiet_hours.join(", ")
        );
    }
}
