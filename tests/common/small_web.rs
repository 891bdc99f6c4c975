//! Small Spartan and Nex servers for the tests, written from the specs (no
//! packaged server exists): a capsule of files in memory, read as common
//! servers read paths (percent-decoded, dot segments and doubled slashes
//! folded, a leading `/` optional for Nex), so that every spelling of a
//! file reaches it. Each records what it was asked and when.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// Which protocol a [`SmallServer`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Speaks {
    Spartan,
    Nex,
}

/// One request as the server read it: the path it resolved, and the data
/// (Spartan uploads).
#[derive(Clone, Debug)]
pub struct Asked {
    pub path: String,
    pub data: Vec<u8>,
    pub at: Instant,
}

pub struct SmallServer {
    pub addr: SocketAddr,
    pub asked: Arc<Mutex<Vec<Asked>>>,
}

/// The path a common server reads: percent-decoded, dot segments and empty
/// segments dropped, with a leading `/`.
pub fn resolve(raw: &str) -> String {
    let text = String::from_utf8_lossy(&percent_decode(raw.as_bytes())).into_owned();
    let mut out: Vec<&str> = Vec::new();
    for seg in text.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    let trailing = text.ends_with('/') && !out.is_empty();
    format!("/{}{}", out.join("/"), if trailing { "/" } else { "" })
}

fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

impl SmallServer {
    /// Serves `files` (path → body) over `speaks` on `addr` (port 0).
    pub async fn start(speaks: Speaks, addr: SocketAddr, files: &[(&str, &str)]) -> SmallServer {
        let files: Arc<HashMap<String, Vec<u8>>> = Arc::new(
            files
                .iter()
                .map(|(p, b)| (p.to_string(), b.as_bytes().to_vec()))
                .collect(),
        );
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let recorded = asked.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (files, recorded) = (files.clone(), recorded.clone());
                tokio::spawn(async move {
                    let mut stream = BufReader::new(stream);
                    let Ok(line) = robots_proxy::protocol::read_line(
                        &mut stream,
                        4096,
                        Duration::from_secs(5),
                    )
                    .await
                    else {
                        return;
                    };
                    let line = String::from_utf8_lossy(&line).into_owned();
                    let (raw_path, len) = match speaks {
                        Speaks::Nex => (line.as_str(), 0),
                        Speaks::Spartan => {
                            let parts: Vec<&str> = line.split(' ').collect();
                            match parts.as_slice() {
                                [_, p, n] => (*p, n.parse::<usize>().unwrap_or(0)),
                                _ => {
                                    let _ = stream.get_mut().write_all(b"4 bad request\r\n").await;
                                    return;
                                }
                            }
                        }
                    };
                    let mut data = vec![0u8; len.min(1 << 20)];
                    if stream.read_exact(&mut data).await.is_err() {
                        return;
                    }
                    let path = resolve(raw_path);
                    recorded.lock().unwrap().push(Asked {
                        path: path.clone(),
                        data,
                        at: Instant::now(),
                    });
                    let answer = match (speaks, files.get(&path)) {
                        (Speaks::Spartan, Some(body)) => {
                            let mime = if path.ends_with(".txt") {
                                "text/plain"
                            } else {
                                "text/gemini"
                            };
                            [format!("2 {mime}\r\n").as_bytes(), body].concat()
                        }
                        (Speaks::Spartan, None) => b"4 not found\r\n".to_vec(),
                        (Speaks::Nex, Some(body)) => body.clone(),
                        (Speaks::Nex, None) => b"Not found.\n".to_vec(),
                    };
                    let _ = stream.get_mut().write_all(&answer).await;
                    let _ = stream.get_mut().shutdown().await;
                });
            }
        });
        SmallServer { addr, asked }
    }

    /// How many requests resolved to `path`.
    pub fn count(&self, path: &str) -> usize {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.path == path)
            .count()
    }

    /// Every path asked, in order.
    pub fn paths(&self) -> Vec<String> {
        self.asked
            .lock()
            .unwrap()
            .iter()
            .map(|a| a.path.clone())
            .collect()
    }
}

/// A Spartan server on `addr` whose robots.txt disallows `/private` (and
/// which would serve `/private/x` as "secret"), with the config that says
/// its port speaks Spartan (the default bot `examplebot`).
pub async fn spartan_guarding_private(addr: SocketAddr) -> (SmallServer, String) {
    let files = [
        ("/robots.txt", "User-agent: *\nDisallow: /private\n"),
        ("/private/x", "secret"),
    ];
    let spartan = SmallServer::start(Speaks::Spartan, addr, &files).await;
    let toml = format!(
        "[ports]\nspartan = [{}]\n\n[bot]\nagent = \"examplebot\"\n",
        spartan.addr.port()
    );
    (spartan, toml)
}

/// `/private/x` at 127.0.0.1:`port` as each protocol's client would ask for
/// it on a connection to that port (no line end): a Gemini URL, a
/// `gopher://` URL, a Gopher selector, a Nex path, a Spartan line.
pub fn private_in_every_protocol(port: u16) -> Vec<String> {
    vec![
        format!("gemini://127.0.0.1:{port}/private/x"),
        format!("gopher://127.0.0.1:{port}/0/private/x"),
        "0/private/x".to_string(),
        "/private/x".to_string(),
        "private/x".to_string(),
        "127.0.0.1 /private/x 0".to_string(),
    ]
}

/// `answer` to `line` is a Spartan refusal (a `4` status line) that gives
/// nothing of the guarded file away.
pub fn assert_refused_in_spartan(line: &str, answer: &str) {
    assert!(answer.starts_with("4 "), "{line:?}: {answer}");
    assert!(!answer.contains("secret"), "{line:?}: {answer}");
}

impl SmallServer {
    /// It was asked for its robots.txt (so spoken to in its own protocol)
    /// and for nothing else.
    pub fn assert_asked_only_robots_txt(&self) {
        let paths = self.paths();
        assert!(
            !paths.is_empty() && paths.iter().all(|p| p == "/robots.txt"),
            "{paths:?}"
        );
    }
}
