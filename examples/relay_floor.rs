//! The floor with its sockets: the least a Gemini relay can do with the
//! proxy's own TLS. Each request: accept, one full server handshake with the
//! crawler (the proxy's listener config and certificate), read the request
//! line, connect to one fixed capsule, one resumed client handshake (the
//! proxy's upstream config, sessions kept), send the request, copy the
//! answer back, `close_notify`, close. No robots.txt, no politeness, no log
//! line, no metrics, no async runtime: blocking sockets, one thread per
//! connection in flight from a fixed pool, so every system call is one the
//! relay needs. `benches/relay.sh` sets the proxy's CPU per request against
//! this one's, in the same run, under the same load: what is above it is the
//! proxy's own.
//!
//! With `--plain`, the same for a line-based plain-TCP protocol (Gopher): no
//! TLS on either side, the line read up to its LF and sent on, the answer
//! copied back: what any relay adds to a Gopher request on this machine.
//! `--plain --tokio` does the same on tokio's multi-thread runtime, as the
//! proxy runs (a task per connection, no threads of its own): the runtime's
//! share of what the proxy adds.
//!
//!   cargo run --release --example relay_floor -- LISTEN_ADDR UPSTREAM_ADDR [--threads 16] [--plain [--tokio]]
//!
//! Prints `listening on ADDR` once bound (port 0 picks one).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection, StreamOwned};

/// A Gemini request line: at most 1024 bytes of URL and its CRLF.
const MAX_REQUEST: usize = 1026;

struct Relay {
    plain: bool,
    listener: Arc<ServerConfig>,
    upstream: Arc<ClientConfig>,
    capsule: SocketAddr,
    /// Upstream handshakes: full, resumed.
    handshakes: [AtomicU64; 2],
}

/// Adds a read's `chunk` to the request `line`; whether the line, up to and
/// with its LF (a Gemini request ends in CRLF), is whole. An end of stream
/// (an empty chunk) or a line too long is an error.
fn gather(line: &mut Vec<u8>, chunk: &[u8]) -> std::io::Result<bool> {
    if chunk.is_empty() || line.len() + chunk.len() > MAX_REQUEST {
        return Err(std::io::Error::other("no request line"));
    }
    line.extend_from_slice(chunk);
    Ok(line.ends_with(b"\n"))
}

/// Reads the request line.
fn read_request<S: Read>(from: &mut S) -> std::io::Result<Vec<u8>> {
    let (mut line, mut buf) = (Vec::with_capacity(MAX_REQUEST), [0u8; MAX_REQUEST]);
    loop {
        let n = from.read(&mut buf[..MAX_REQUEST - line.len()])?;
        if gather(&mut line, &buf[..n])? {
            return Ok(line);
        }
    }
}

/// Copies `from` to `to` until `from` ends.
fn copy<R: Read, W: Write>(from: &mut R, to: &mut W) -> std::io::Result<()> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            // A capsule that closes without close_notify: its answer has ended all the same.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
    }
}

/// `--plain --tokio`: the plain relay as tokio tasks.
async fn serve_plain_async(listener: std::net::TcpListener, upstream: SocketAddr) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    async fn one(mut client: tokio::net::TcpStream, upstream: SocketAddr) -> std::io::Result<()> {
        client.set_nodelay(true)?;
        let (mut line, mut buf) = (Vec::with_capacity(MAX_REQUEST), [0u8; MAX_REQUEST]);
        loop {
            let n = client.read(&mut buf[..MAX_REQUEST - line.len()]).await?;
            if gather(&mut line, &buf[..n])? {
                break;
            }
        }
        let mut up = tokio::net::TcpStream::connect(upstream).await?;
        up.set_nodelay(true)?;
        up.write_all(&line).await?;
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match up.read(&mut buf).await? {
                0 => return client.shutdown().await,
                n => client.write_all(&buf[..n]).await?,
            }
        }
    }
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
    loop {
        match listener.accept().await {
            Ok((client, _)) => {
                tokio::spawn(async move {
                    // Bounded as the blocking relay's reads are.
                    match tokio::time::timeout(Duration::from_secs(10), one(client, upstream)).await
                    {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => eprintln!("relay_floor: {e}"),
                        Err(_) => eprintln!("relay_floor: timed out"),
                    }
                });
            }
            Err(e) => eprintln!("relay_floor: accept: {e}"),
        }
    }
}

fn connect(to: SocketAddr) -> std::io::Result<TcpStream> {
    let up = TcpStream::connect(to)?;
    up.set_nodelay(true)?;
    up.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(up)
}

fn serve(relay: &Relay, mut client: TcpStream) -> std::io::Result<()> {
    client.set_nodelay(true)?;
    client.set_read_timeout(Some(Duration::from_secs(10)))?;
    if relay.plain {
        let line = read_request(&mut client)?;
        let mut up = connect(relay.capsule)?;
        up.write_all(&line)?;
        copy(&mut up, &mut client)?;
        return client.shutdown(std::net::Shutdown::Write);
    }
    let conn = ServerConnection::new(relay.listener.clone()).map_err(std::io::Error::other)?;
    let mut client = StreamOwned::new(conn, client);
    let request = read_request(&mut client)?;
    let up = connect(relay.capsule)?;
    let name = ServerName::try_from("localhost").expect("a static name");
    let conn =
        ClientConnection::new(relay.upstream.clone(), name).map_err(std::io::Error::other)?;
    let mut up = StreamOwned::new(conn, up);
    up.write_all(&request)?;
    let resumed = up.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let count = relay.handshakes[usize::from(resumed)].fetch_add(1, Ordering::Relaxed) + 1;
    if count % 1000 == 0 {
        // The floor resumes upstream as the proxy does: benches/relay.sh prints the last line.
        eprintln!(
            "upstream handshakes: {} full, {} resumed",
            relay.handshakes[0].load(Ordering::Relaxed),
            relay.handshakes[1].load(Ordering::Relaxed)
        );
    }
    copy(&mut up, &mut client)?;
    client.conn.send_close_notify();
    client.flush()?;
    client.sock.shutdown(std::net::Shutdown::Write)?;
    Ok(())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let listen: SocketAddr = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("LISTEN_ADDR");
    let capsule: SocketAddr = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("CAPSULE_ADDR");
    let (mut threads, mut plain, mut on_tokio) = (16, false, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--plain" => plain = true,
            "--tokio" => on_tokio = true,
            "--threads" => {
                threads = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--threads N")
            }
            other => panic!("unknown argument {other}"),
        }
    }
    use robots_proxy::tls;
    let dir = std::env::temp_dir().join(format!("relay-floor-{}", std::process::id()));
    let names = ["localhost".to_string()];
    let relay = Arc::new(Relay {
        plain,
        listener: tls::server_config(tls::load_or_generate(&dir, &names).expect("a certificate"))
            .expect("the listener's config"),
        // The proxy's store of upstream sessions, sized as it sizes it for
        // as many requests in flight at one capsule as there are threads.
        upstream: tls::upstream_client_config(tls::sessions::tickets_for(threads))
            .expect("the upstream config"),
        capsule,
        handshakes: Default::default(),
    });
    // The key and certificate are in the config now.
    let _ = std::fs::remove_dir_all(&dir);
    let listener = TcpListener::bind(listen).expect("bind");
    println!("listening on {}", listener.local_addr().expect("bound"));
    if on_tokio {
        assert!(plain, "--tokio relays plain TCP only (with --plain)");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        return runtime.block_on(serve_plain_async(listener, capsule));
    }
    let listener = Arc::new(listener);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (listener, relay) = (listener.clone(), relay.clone());
            std::thread::spawn(move || loop {
                match listener.accept() {
                    Ok((client, _)) => {
                        if let Err(e) = serve(&relay, client) {
                            eprintln!("relay_floor: {e}");
                        }
                    }
                    Err(e) => eprintln!("relay_floor: accept: {e}"),
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
}
