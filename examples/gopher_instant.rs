//! A Gopher server that answers at once: one thread, blocking sockets, answers
//! kept in memory. `benches/relay.sh` puts it behind socat and robots-proxy to
//! see what the relays themselves add, without gophernicus' fork and exec per
//! request (which is most of a direct request's time and varies with it).
//!
//! ```sh
//! cargo run --release --example gopher_instant -- 127.0.0.1:7000 [THINK_MS]
//! ```
//!
//! `/robots.txt` allows everything, `/big` is 16 MiB, any other selector gets
//! one line of text. With THINK_MS, each answer but robots.txt's waits that
//! long first (asleep, not busy): a slow server without the fork.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let think = std::time::Duration::from_millis(
        std::env::args()
            .nth(2)
            .map_or(0, |ms| ms.parse().expect("THINK_MS")),
    );
    let listener = TcpListener::bind(&addr)?;
    eprintln!("gopher_instant on {}", listener.local_addr()?);
    let big = vec![b'x'; 16 << 20];
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        let mut line = Vec::new();
        let mut reader = BufReader::new(&stream).take(4096);
        if reader.read_until(b'\n', &mut line).is_err() {
            continue;
        }
        let selector = String::from_utf8_lossy(&line);
        let answer: &[u8] = match selector.trim_end() {
            "/robots.txt" | "robots.txt" | "0/robots.txt" => b"User-agent: *\r\nAllow: /\r\n",
            "/big" => &big,
            _ => b"Hello from an instant server.\r\n",
        };
        if !think.is_zero() && !selector.contains("robots.txt") {
            std::thread::sleep(think);
        }
        let _ = stream.write_all(answer);
    }
    Ok(())
}
