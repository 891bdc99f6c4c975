//! A real `redis-server` (Debian's, installed by `.ci/run`) on a unix socket in
//! a temp dir: no port, nothing shared with other tests. Killed when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

#[path = "redis_ha.rs"]
pub mod ha;

pub struct RedisServer {
    child: Option<Child>,
    dir: PathBuf,
    pub socket: PathBuf,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let dir = crate::common::state_dir();
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("redis.sock");
        let mut server = RedisServer {
            child: None,
            dir,
            socket,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let mut args: Vec<String> = vec!["--port".into(), "0".into(), "--unixsocket".into()];
        args.push(self.socket.display().to_string());
        args.extend(["--unixsocketperm", "700"].map(String::from));
        self.child = Some(spawn_redis(&args, &self.dir));
    }

    /// `unix:///…/redis.sock`.
    pub fn url(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// SIGKILL: what a crash looks like to its clients. Its data is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP: the server keeps its data and its clients' connections but
    /// answers nothing (what they send waits in its socket) until
    /// [`RedisServer::resume`].
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// SIGCONT: it reads what waited and answers again.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, which: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let done = Command::new("kill").args([which, &pid]).status().unwrap();
        assert!(done.success(), "kill {which} {pid}");
    }

    /// A new server on the same socket, empty.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// A plain connection, to look at or plant keys.
    pub async fn connection(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }
}

/// Starts redis-server with `args` (no persistence, in `dir`) and returns
/// once it says it is ready to accept connections (its own word, not a sleep).
fn spawn_redis(args: &[String], dir: &std::path::Path) -> Child {
    std::fs::create_dir_all(dir).unwrap();
    let mut child = Command::new("redis-server")
        .args(args)
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server is installed (apt-get install redis-server; .ci/run does)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        match lines.next() {
            Some(Ok(line)) => {
                let ready = line
                    .to_ascii_lowercase()
                    .contains("ready to accept connections");
                seen.push(line);
                if ready {
                    break;
                }
            }
            _ => panic!("redis-server did not start:\n{}", seen.join("\n")),
        }
    }
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    child
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
