//! The state directory from the other side: someone who can write there plants
//! a FIFO (start-up would wait for a writer forever), a symlink where the
//! proxy writes (its target would be truncated), and a supervisor sends
//! SIGHUP in the first milliseconds of the process.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use crate::common::*;

/// `robots-proxy run` on port 0 everywhere with `dir` as its state directory.
fn spawn_proxy(dir: &Path) -> Child {
    spawn_run(
        dir,
        "info",
        &["--socks5-listen", "127.0.0.1:0", "--log-format", "json"],
    )
}

/// The process's exit code and its standard error, or a failure if it is
/// still running after `limit` (then it is killed).
fn exit_within(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            if let Some(mut stderr) = child.stderr.take() {
                stderr.read_to_string(&mut err).unwrap();
            }
            return (status.code(), err);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after {limit:?}: start-up hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn fifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// A FIFO in place of any file the proxy reads at start: it exits 2 at once,
/// naming the path, instead of hanging with its listeners open.
#[test]
fn a_fifo_in_the_state_directory_is_refused_at_start() {
    for name in [
        "pins",
        "gemini-key.pem",
        "gemini-cert.names",
        "ca-key.pem",
        "budgets",
    ] {
        let dir = state_dir();
        std::fs::create_dir_all(&dir).unwrap();
        fifo(&dir.join(name));
        let (code, err) = exit_within(spawn_proxy(&dir), Duration::from_secs(20));
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(name), "{name}: {err}");
        assert!(
            err.contains("is a FIFO, not a regular file"),
            "{name}: {err}"
        );
        assert!(err.contains(&dir.display().to_string()), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A directory where a file belongs is refused the same way.
#[test]
fn a_directory_in_place_of_the_pins_is_refused_at_start() {
    let dir = state_dir();
    std::fs::create_dir_all(dir.join("pins")).unwrap();
    let (code, err) = exit_within(spawn_proxy(&dir), Duration::from_secs(20));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("pins"), "{err}");
    assert!(err.contains("is a directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Symlinks planted where the proxy writes (the pins journal, its old temp
/// name, a key it is about to generate) never lead it to write their targets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_symlinks_are_not_written_through() {
    let dir = state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let planted = |name: &str, target: &Path| {
        std::os::unix::fs::symlink(target, dir.join(name)).unwrap();
    };
    planted("pins.tmp", &victim);
    planted("pins", &victim);
    // A dangling link where the key will be written: the proxy must not
    // create the file it points at.
    let elsewhere = dir.join("made-through-a-link");
    planted("gemini-key.pem", &elsewhere);
    planted("ca-key.pem", &elsewhere);

    let mut config = test_config();
    config.state_dir = dir.clone();
    let proxy = start_proxy(config).await;
    proxy.shutdown();
    proxy.drained().await;

    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!elsewhere.exists(), "a key was written through a symlink");
    for name in ["pins", "gemini-key.pem", "ca-key.pem"] {
        let meta = std::fs::symlink_metadata(dir.join(name)).unwrap();
        assert!(meta.is_file(), "{name} is now the proxy's own file");
    }
    // The keys are private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(dir.join("gemini-key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether process `pid` runs our program (it has been through `exec`:
/// before it, the spawning library blocks every signal in the child) and
/// blocks or catches SIGHUP (`/proc/PID/status`).
fn sighup_is_handled(pid: u32) -> bool {
    let ours = std::fs::read_link(format!("/proc/{pid}/exe"))
        .is_ok_and(|exe| exe == Path::new(env!("CARGO_BIN_EXE_robots-proxy")));
    if !ours {
        return false;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    status.lines().any(|line| {
        let mask = |name: &str| {
            line.strip_prefix(name)
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        };
        // SIGHUP is signal 1: the mask's lowest bit.
        [mask("SigBlk:"), mask("SigCgt:")]
            .into_iter()
            .flatten()
            .any(|m| m & 1 == 1)
    })
}

/// SIGHUP sent from the moment the program runs (a supervisor that reloads
/// right after starting it), through start-up: never fatal; the proxy comes
/// up, and a SIGTERM still ends it with 0. (Before `main` runs, while the
/// dynamic loader maps the program, no program can hold off a signal; the
/// test starts once the process shows SIGHUP blocked or caught, which
/// `main` does first.)
#[test]
fn sighup_at_once_after_start_is_not_fatal() {
    let dir = state_dir();
    let mut child = spawn_proxy(&dir);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let hup = || nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP);
    // As fast as this thread can send them, through start-up.
    let lines = log_lines(&mut child);
    let started = Instant::now();
    while !sighup_is_handled(child.id()) {
        assert!(child.try_wait().unwrap().is_none());
        assert!(started.elapsed() < Duration::from_secs(30));
        std::thread::yield_now();
    }
    let mut sent = 0;
    let listening = loop {
        if hup().is_ok() {
            sent += 1;
        }
        if let Ok(line) = lines.try_recv() {
            if line.contains("robots-proxy listening") {
                break true;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the process ended after {sent} SIGHUPs: {status}");
        }
        if started.elapsed() > Duration::from_secs(30) {
            break false;
        }
    };
    assert!(listening, "never said it was listening");
    assert!(sent > 0);
    // A few more after start, then the process is still there.
    for _ in 0..5 {
        hup().unwrap();
    }
    assert!(child.try_wait().unwrap().is_none());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let (code, _) = exit_within(child, Duration::from_secs(20));
    assert_eq!(code, Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
