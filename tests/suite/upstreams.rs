//! Hostile or broken upstreams, from the client's side: an answer cut short
//! must not look complete, and a header that could mislead the client is not
//! relayed.

use robots_proxy::listener::Listener;
use std::sync::Arc;

use crate::common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A Gemini answer whose upstream resets mid-body reaches the client as far
/// as it got, then ends without TLS `close_notify`: the client's TLS library
/// reports an unexpected end instead of a complete answer. Counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_answer_cut_short_upstream_is_not_closed_cleanly() {
    let origin = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            text("51 none", "")
        } else if url.ends_with("/cut") {
            Reply::Reset(b"20 text/gemini\r\n# The first half".to_vec())
        } else {
            text("20 text/gemini", "whole")
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let gemini = proxy.addr(Listener::Gemini);
    let read_all = |url: String| async move {
        let tcp = TcpStream::connect(gemini).await.unwrap();
        let config = robots_proxy::tls::client_config().unwrap();
        exchange_tls(tcp, config, format!("{url}\r\n").as_bytes()).await
    };
    let (answer, end) = read_all(origin.url("/cut")).await;
    assert_eq!(answer, b"20 text/gemini\r\n# The first half");
    assert_eq!(
        end,
        Err(std::io::ErrorKind::UnexpectedEof),
        "no close_notify"
    );
    // A whole answer still ends with close_notify.
    let (answer, end) = read_all(origin.url("/whole")).await;
    assert_eq!(answer, b"20 text/gemini\r\nwhole");
    assert_eq!(end, Ok(()));
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_upstream_truncated_total{protocol=\"gemini\"}"
        ),
        Some(1.0)
    );
}

/// The proxy writes a Gemini header with what of the body came with it, but
/// never holds the header back for the rest: a capsule that sends its header
/// (or its header and a first part) and then stalls has them reach the
/// client at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gemini_header_is_not_held_back_for_its_body() {
    let origin = Origin::start(|url| {
        if url.ends_with("/robots.txt") {
            text("51 none", "")
        } else if url.ends_with("/header") {
            Reply::Stalled(b"20 text/gemini\r\n".to_vec())
        } else {
            Reply::Stalled(b"20 text/gemini\r\n# A first part".to_vec())
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let gemini = proxy.addr(Listener::Gemini);
    for (path, expected) in [
        ("/header", &b"20 text/gemini\r\n"[..]),
        ("/part", &b"20 text/gemini\r\n# A first part"[..]),
    ] {
        let tcp = TcpStream::connect(gemini).await.unwrap();
        let config = robots_proxy::tls::client_config().unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .unwrap();
        let url = origin.url(path);
        tls.write_all(format!("{url}\r\n").as_bytes())
            .await
            .unwrap();
        // What the capsule sent arrives while the capsule still holds the rest
        // (it stalls for 30 s): read until all of it is here, within 5 s.
        let mut got = Vec::new();
        let reading = async {
            while got.len() < expected.len() {
                let mut buf = [0u8; 256];
                match tls.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        };
        let in_time = tokio::time::timeout(std::time::Duration::from_secs(5), reading).await;
        assert!(in_time.is_ok(), "{path}: only {got:?} within 5 s");
        assert_eq!(got, expected, "{path}");
    }
}

/// A Gopher answer cut short upstream ends in a TCP reset, not a clean close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gopher_answer_cut_short_upstream_ends_in_a_reset() {
    let origin = GopherOrigin::start(|sel| match sel {
        b"robots.txt" | b"/robots.txt" => Reply::Bytes(Vec::new()),
        b"/cut" => Reply::Reset(b"the first half of a file".to_vec()),
        _ => Reply::Bytes(b"whole".to_vec()),
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let gopher = proxy.addr(Listener::Gopher);
    let fetch = |url: String| async move {
        let mut s = TcpStream::connect(gopher).await.unwrap();
        s.write_all(format!("{url}\r\n").as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return (answer, Ok(())),
                Ok(n) => answer.extend_from_slice(&buf[..n]),
                Err(e) => return (answer, Err(e.kind())),
            }
        }
    };
    let (_, end) = fetch(origin.url("0/cut")).await;
    assert_eq!(end, Err(std::io::ErrorKind::ConnectionReset));
    let (answer, end) = fetch(origin.url("0/whole")).await;
    assert_eq!((answer.as_slice(), end), (&b"whole"[..], Ok(())));
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_upstream_truncated_total{protocol=\"gopher\"}"
        ),
        Some(1.0)
    );
}

/// An upstream header whose META holds a CR, a NUL, an escape sequence or
/// another control character is malformed: `43`, never relayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_with_control_characters_is_not_relayed() {
    let metas: Arc<Vec<&'static [u8]>> = Arc::new(vec![
        b"20 text/gemini\r\r\n",
        b"20 text/gemini\rinjected\r\n",
        b"30 gemini://elsewhere/\x00\r\n",
        b"20 text/plain\x1b]0;owned\x07\r\n",
        b"51 not\x0bfound\r\n",
    ]);
    let served = metas.clone();
    let origin = Origin::start(move |url| {
        if url.ends_with("/robots.txt") {
            return text("51 none", "");
        }
        let i: usize = url.rsplit('/').next().unwrap().parse().unwrap();
        Reply::Bytes([served[i], b"body"].concat())
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    for i in 0..metas.len() {
        let (header, body) =
            gemini(proxy.addr(Listener::Gemini), &origin.url(&format!("/{i}"))).await;
        assert!(header.starts_with("43 upstream "), "{i}: {header:?}");
        assert!(header.contains("control character"), "{i}: {header:?}");
        assert!(body.is_empty(), "{i}: {body:?}");
    }
}
