//! Logging as an operator's environment sets it: an empty `RUST_LOG` (what a
//! unit's `Environment=RUST_LOG=` gives) is unset, not a filter that logs
//! nothing; a `RUST_LOG` that does not parse is said, and the config's level
//! is used. And what needs an operator is a warning that says what to do.

use std::process::Child;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use crate::common::*;

/// `robots-proxy run` on port 0, with `RUST_LOG` set to `rust_log`.
fn spawn_with(rust_log: &str) -> (Child, Receiver<String>) {
    spawn(rust_log, &[])
}

/// `robots-proxy run` on port 0 with `RUST_LOG` and more arguments.
fn spawn(rust_log: &str, more: &[&str]) -> (Child, Receiver<String>) {
    let mut child = spawn_run(&state_dir(), rust_log, more);
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

/// `limits.worker_threads` is how many threads serve connections, said at
/// start; unset, one per core.
#[test]
fn the_start_says_how_many_threads_serve() {
    let dir = state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("threads.toml");
    std::fs::write(&config, "[limits]\nworker_threads = 3\n").unwrap();
    for (more, threads) in [
        (vec!["--config", config.to_str().unwrap()], 3),
        (vec![], std::thread::available_parallelism().unwrap().get()),
    ] {
        let mut more = more;
        more.extend(["--log-format", "json"]);
        let (child, lines) = spawn("info", &more);
        let listening = until(&lines, "robots-proxy listening");
        let line: serde_json::Value = serde_json::from_str(listening.last().unwrap()).unwrap();
        assert_eq!(line["threads"], threads, "{line}");
        stop(child);
    }
}

/// A capsule whose certificate changed is refused until the pin is forgotten:
/// that will not mend itself, so it is a warning naming the action, said once
/// for the change, not once per request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_certificate_is_a_warning_naming_the_action_once() {
    let first = Origin::start(|_| text("20 text/gemini", "first")).await;
    let addr = first.addr;
    let (child, lines) = spawn(
        "info",
        &[
            "--log-format",
            "json",
            "--allow-private-upstreams",
            "--default-delay",
            "0s",
        ],
    );
    let listening = until(&lines, "robots-proxy listening");
    let line: serde_json::Value = serde_json::from_str(listening.last().unwrap()).unwrap();
    let gemini_at: std::net::SocketAddr = line["gemini"].as_str().unwrap().parse().unwrap();
    let url = format!("gemini://127.0.0.1:{}/page", addr.port());
    assert_eq!(gemini(gemini_at, &url).await.1, b"first");
    first.stop().await;
    let _renewed = Origin::start_on(addr, |_| text("20 text/gemini", "renewed")).await;
    for _ in 0..3 {
        let (header, _) = gemini(gemini_at, &url).await;
        assert!(header.starts_with("43"), "{header}");
    }
    // Four requests, four request lines: the first relayed, three refused.
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.extend(until(&lines, "\"request\""));
    }
    let warnings: Vec<serde_json::Value> = seen
        .iter()
        .filter(|l| l.contains("another certificate than the one pinned"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(warnings.len(), 1, "{seen:#?}");
    assert_eq!(warnings[0]["level"], "WARN");
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "POST /api/pins/forget?host=127.0.0.1&port={}",
            addr.port()
        )),
        "{message}"
    );
    stop(child);
}
