//! What a connection holds while it waits: the size of the future each
//! listener runs per connection. Every held request (10,000 waiting on one
//! slow capsule, say) costs at least this much memory, so it is bounded here;
//! `benches/hold-10k.sh` measures the whole process. The heap a held
//! connection keeps is counted here too, with an allocator that tracks live
//! bytes (this binary's tests take turns, so none counts another's).

mod common;

use robots_proxy::listener::Listener;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use common::*;

struct Live;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Live = Live;

/// One test at a time: each counts the heap of the whole process.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn size_of_future<F: std::future::Future>(_: &F) -> usize {
    std::mem::size_of::<F>()
}

#[tokio::test]
async fn a_connection_future_stays_small() {
    let _turn = TURN.lock().await;
    let proxy = start_proxy(test_config()).await;
    let ctx = proxy.context();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peer: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    let gopher = robots_proxy::gopher::serve::serve(
        tokio::net::TcpStream::connect(addr).await.unwrap(),
        peer,
        ctx.clone(),
    );
    let gemini = robots_proxy::gemini::serve::serve::<robots_proxy::gateway::OtherProtocols>(
        tokio::net::TcpStream::connect(addr).await.unwrap(),
        peer,
        ctx.gemini_tls.clone(),
        ctx.clone(),
    );
    let socks = robots_proxy::socks5::serve::serve(
        tokio::net::TcpStream::connect(addr).await.unwrap(),
        peer,
        ctx.clone(),
        std::sync::Arc::new(robots_proxy::tls::Authority::load_or_generate(&state_dir()).unwrap()),
    );
    // Measured 2,880, 5,336 and 7,568 bytes (Gemini and SOCKS5 hold a TLS
    // connection, about 1.2 KiB); the bounds leave room for small changes,
    // not for a buffer or a fetch's state kept inline (that once made a
    // Gopher connection 5,352 bytes), nor for a stream kept twice (Gemini
    // was 6,272 while its TLS stream was both an argument and in its buffer).
    let sizes = [
        ("gopher", size_of_future(&gopher), 3 * 1024),
        ("gemini", size_of_future(&gemini), 5 * 1024 + 512),
        ("socks5", size_of_future(&socks), 8 * 1024),
    ];
    println!("{sizes:?}");
    for (listener, size, bound) in sizes {
        assert!(
            size <= bound,
            "{listener}: {size} bytes a connection {sizes:?}"
        );
    }
}

/// The heap each connection keeps while it waits: its task (the future and
/// the task's header), its read buffer, its socket's registration. A
/// connection that has sent nothing yet waits like one held by politeness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_connection_keeps_little_heap() {
    let _turn = TURN.lock().await;
    let mut config = test_config();
    config.limits.request_timeout = std::time::Duration::from_secs(60);
    let proxy = start_proxy(config).await;
    let open = |m: &str| sample(m, "robots_proxy_connections_open{listener=\"gopher\"}");
    // Once through every lazy part (metrics, buffers), then count.
    let _ = gopher(
        proxy.addr(Listener::Gopher),
        b"gopher://127.0.0.1:1/0/warm\r\n",
    )
    .await;
    settled_metrics(proxy.addr(Listener::Admin)).await;
    const HELD: usize = 200;
    // Blocking sockets on the test's side: they cost the counted heap nothing.
    let mut clients = Vec::with_capacity(HELD);
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    for _ in 0..HELD {
        clients.push(std::net::TcpStream::connect(proxy.addr(Listener::Gopher)).unwrap());
    }
    wait_for_open(proxy.addr(Listener::Admin), open, HELD).await;
    let per = (LIVE_BYTES.load(Ordering::Relaxed) - before) / HELD as isize;
    println!("{per} bytes of heap a held Gopher connection");
    drop(clients);
    // Measured 3,634 bytes in a debug build: the future (2.6 KiB), the read
    // buffer, the task and the socket's registration. Report mode and the
    // robots.txt evidence a request carries (issue 29) made the Gopher future
    // 2,896 bytes and the heap 3,914 to 4,034 from run to run (4,099 once in
    // CI, against the 4 KiB this bound was). It was 9,894 while every
    // connection's task was as large as the largest listener's future and
    // kept that future twice: the bound still catches that, or a buffer kept
    // inline.
    assert!(per <= 4 * 1024 + 512, "{per} bytes a held connection");
}

async fn wait_for_open(addr: std::net::SocketAddr, open: impl Fn(&str) -> Option<f64>, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, m) = http_get(addr, "/metrics").await;
        if open(&m) == Some(n as f64) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{:?} open, not {n}",
            open(&m)
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
