//! Logging as an operator's environment sets it: an empty `RUST_LOG` (what a
//! unit's `Environment=RUST_LOG=` gives) is unset, not a filter that logs
//! nothing; a `RUST_LOG` that does not parse is said, and the config's level
//! is used.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use common::*;

/// `robots-proxy run` on port 0, with `RUST_LOG` set to `rust_log`.
fn spawn_with(rust_log: &str) -> (Child, Receiver<String>) {
    let dir = state_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args([
            "run",
            "--gemini-listen",
            "127.0.0.1:0",
            "--gopher-listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
            "--state-dir",
        ])
        .arg(&dir)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = log_lines(&mut child);
    (child, lines)
}

/// The lines up to the first that holds `what` (it included), or a failure
/// naming what was logged.
fn until(lines: &Receiver<String>, what: &str) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => {
                let done = line.contains(what);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no log line with {what:?}; logged: {seen:#?}"),
        }
    }
}

fn stop(mut child: Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn an_empty_rust_log_logs_at_the_configured_level() {
    for empty in ["", "  "] {
        let (child, lines) = spawn_with(empty);
        until(&lines, "robots-proxy listening");
        stop(child);
    }
}

#[test]
fn a_rust_log_that_does_not_parse_is_said_and_the_config_level_used() {
    let (child, lines) = spawn_with("robots_proxy=loud");
    let seen = until(&lines, "robots-proxy listening");
    assert!(
        seen.iter()
            .any(|l| l.contains("RUST_LOG is not a log filter") && l.contains("robots_proxy=loud")),
        "{seen:#?}"
    );
    stop(child);
}
