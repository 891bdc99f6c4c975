//! Any bytes as a Spartan request line (SOCKS5, transparent mode), as a
//! `spartan://` URL (the Gemini listener's gateway) and as an upstream status
//! line. An accepted line has the request's shape and is sent upstream as one
//! line that reads back as the same request; a URL's request sends one line
//! and its data; an accepted status line is 2-5 with no control character,
//! written back as one line that parses to itself, and becomes a Gemini
//! status the gateway may send (a redirect to a `spartan://` URL of the
//! same server).
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::gateway::gemini_for_spartan;
use robots_proxy::spartan::wire::{
    header, looks_like_spartan, parse_header, parse_request_line, Request, MAX_UPLOAD,
};
use robots_proxy::target::{Scheme, Target};

/// The first line of `head` (CRLF ends it, nothing before is a line end).
fn first_line(head: &[u8]) -> &[u8] {
    let end = head
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("a line end");
    let line = &head[..end];
    assert!(!line.contains(&b'\r') && !line.contains(&b'\n'), "{line:?}");
    line
}

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_request_line(300, data) {
        assert!(data.is_ascii() && looks_like_spartan(data));
        assert!(r.data_len() <= MAX_UPLOAD);
        let head = r.upstream_head();
        let line = first_line(&head);
        assert_eq!(
            line.len() + 2,
            head.len(),
            "a line's request sends only its line"
        );
        // The upstream line reads back as the same request (an IPv6 host is
        // sent without its brackets, as the spec asks: not a line we take).
        if !r.target.host.starts_with('[') {
            let again = parse_request_line(300, line).expect("the line sent reads back");
            assert_eq!(again, r);
        }
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(target) = Target::parse(&format!("spartan://127.0.0.1/{text}")) {
        assert_eq!(target.scheme, Scheme::Spartan);
        if let Ok(r) = Request::from_url(target) {
            let head = r.upstream_head();
            let line = first_line(&head);
            assert_eq!((head.len() - line.len() - 2) as u64, r.data_len());
        }
    }
    if let Ok(h) = parse_header(data) {
        assert!((2..=5).contains(&h.status));
        assert!(!h.meta.chars().any(char::is_control));
        let written = header(h.status, &h.meta);
        let line = first_line(&written);
        assert_eq!(line.len() + 2, written.len());
        if h.meta.len() <= 1024 {
            assert_eq!(parse_header(line), Ok(h.clone()));
        }
        let to = Target::parse("spartan://127.0.0.1:3000/dir/page").unwrap();
        let (status, meta) = gemini_for_spartan(h.status, &h.meta, &to);
        assert!([20, 30, 40, 43, 50].contains(&status), "{status}");
        if status == 30 {
            let redirect = Target::parse(&meta).expect("a redirect is a URL");
            assert_eq!(
                (redirect.scheme, redirect.host.as_str(), redirect.port),
                (Scheme::Spartan, "127.0.0.1", 3000)
            );
        }
    }
    let written = header(5, &text);
    assert!(written.len() <= 2 + 1024 + 2);
    assert_eq!(written.iter().filter(|&&b| b == b'\n').count(), 1);
});
