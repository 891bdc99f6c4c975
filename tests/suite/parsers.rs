//! A property test per wire parser: arbitrary bytes never panic, and what a
//! parser accepts keeps the parser's own promises (one line sent upstream, a
//! canonical form that parses back, menus whose every Gopher item goes back
//! through the proxy whatever the chunking). The fuzz targets in `fuzz/` push
//! the same parsers much further; these run in `cargo test`.

use proptest::prelude::*;
use robots_proxy::gemini::wire::{header, parse_header, parse_request as gemini_request};
use robots_proxy::gopher::wire::{parse_request, parse_selector_line, MenuRewriter};
use robots_proxy::nex::wire::parse_path_line;
use robots_proxy::protocol::read_line;
use robots_proxy::socks5::wire::handshake;
use robots_proxy::spartan::wire::parse_request_line;
use robots_proxy::target::Target;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Bytes that are mostly URL-ish, with the characters parsers trip on.
fn urlish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec(
            prop::sample::select(vec![
                &b"gemini://"[..],
                b"gopher://",
                b"localhost",
                b"127.0.0.1",
                b"[::1]",
                b":",
                b"1965",
                b"70",
                b"/",
                b"%",
                b"%2f",
                b"%0d%0a",
                b"%09",
                b"\t",
                b"\r",
                b"\n",
                b"\0",
                b"?",
                b"#",
                b"@",
                b".",
                b"..",
                b"xn--",
                b"\xc3\xa9",
                b" ",
                b"1",
                b"0",
                b"7",
            ],),
            0..30,
        )
        .prop_map(|parts| parts.concat()),
    ]
}

/// Menu-ish bytes: item types, tabs, line ends of every kind, long runs.
fn menuish() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(
        prop_oneof![
            prop::sample::select(vec![
                &b"1"[..],
                b"0",
                b"i",
                b"3",
                b"h",
                b"7",
                b"8",
                b"URL:",
                b"Docs",
                b"\t",
                b"\r",
                b"\n",
                b"\r\n",
                b"example.org",
                b"70",
                b"0",
                b"seventy",
                b"65536",
                b" ",
                b".",
                b"/sel",
                b"+",
            ],)
            .prop_map(<[u8]>::to_vec),
            (1usize..3000).prop_map(|n| vec![b'x'; n]),
        ],
        0..80,
    )
    .prop_map(|parts| parts.concat())
}

/// Item types whose host and port a client would fetch over Gopher.
fn navigable(item_type: u8, selector: &[u8]) -> bool {
    match item_type {
        b'i' | b'3' | b'8' | b'T' | b'2' => false,
        b'h' => !selector.starts_with(b"URL:"),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Gemini request lines: an accepted request's canonical URL is accepted
    /// again as the same target and is at most one line.
    #[test]
    fn gemini_request_lines(line in urlish()) {
        if let Ok(target) = gemini_request(&line) {
            let url = target.url();
            prop_assert!(!url.contains(['\r', '\n', '\0']));
            let again = gemini_request(url.as_bytes()).expect("a canonical URL is a request");
            prop_assert_eq!(again.url(), url);
        }
    }

    /// Gemini response headers: an accepted header has a status in 10..=69 and
    /// a META without control characters; the header the proxy writes from any
    /// META is one line that parses back with its status.
    #[test]
    fn gemini_response_headers(line in proptest::collection::vec(any::<u8>(), 0..1100),
                               status in 10u8..70,
                               meta in ".{0,1200}") {
        if let Ok(h) = parse_header(&line) {
            prop_assert!((10..=69).contains(&h.status));
            prop_assert!(!h.meta.chars().any(char::is_control));
        }
        let written = header(status, &meta);
        prop_assert!(written.ends_with(b"\r\n"));
        let body = &written[..written.len() - 2];
        prop_assert!(!body.contains(&b'\r') && !body.contains(&b'\n'));
        prop_assert!(written.len() <= 3 + 1024 + 2);
        prop_assert_eq!(parse_header(body).map(|h| h.status), Ok(status));
    }

    /// Gopher URL lines and bare selectors: what goes upstream is exactly one
    /// line (one CR LF, at its end, no NUL); an accepted URL's canonical form
    /// parses back to the same target.
    #[test]
    fn gopher_request_lines(line in urlish()) {
        let one_line = |up: &[u8]| {
            up.ends_with(b"\r\n")
                && !up[..up.len() - 2].iter().any(|b| matches!(b, b'\r' | b'\n' | 0))
        };
        if let Ok(request) = parse_request(&line) {
            prop_assert!(one_line(&request.upstream_line()), "{:?}", request.upstream_line());
            let url = request.target.url();
            let again = Target::parse(&url).expect("a canonical URL parses");
            prop_assert_eq!(again.url(), url);
        }
        if let Ok(request) = parse_selector_line("127.0.0.1", 70, &line) {
            prop_assert!(one_line(&request.upstream_line()), "{:?}", request.upstream_line());
        }
    }

    /// Request lines read from a socket: at most `max` bytes, no LF inside,
    /// however the bytes arrive.
    #[test]
    fn request_line_reading(bytes in proptest::collection::vec(any::<u8>(), 0..3000),
                            buffer in 1usize..64,
                            max in 1usize..2048) {
        let got = runtime().block_on(async {
            let mut reader = tokio::io::BufReader::with_capacity(buffer, bytes.as_slice());
            read_line(&mut reader, max, std::time::Duration::from_secs(1)).await
        });
        if let Ok(line) = got {
            prop_assert!(line.len() <= max);
            prop_assert!(!line.contains(&b'\n'));
        }
    }

    /// The menu rewriter gives the same output however the menu is cut into
    /// chunks, ends every line with CR LF, and every line that names a Gopher
    /// item names the proxy as its host and port.
    #[test]
    fn menu_rewriting(menu in menuish(), cuts in proptest::collection::vec(1usize..5000, 1..20)) {
        let whole = {
            let mut rw = MenuRewriter::new("proxy.local", 7070);
            let mut out = Vec::new();
            rw.feed(&menu, &mut out);
            rw.finish(&mut out);
            out
        };
        let chunked = {
            let mut rw = MenuRewriter::new("proxy.local", 7070);
            let mut out = Vec::new();
            let mut rest = menu.as_slice();
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, more) = rest.split_at((*cut).min(rest.len()));
                rw.feed(piece, &mut out);
                rest = more;
            }
            rw.finish(&mut out);
            out
        };
        prop_assert!(whole == chunked, "chunking changed the output");
        let text = whole;
        let mut lines: Vec<&[u8]> = Vec::new();
        let mut rest = text.as_slice();
        while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
            lines.push(&rest[..i]);
            rest = &rest[i + 2..];
        }
        lines.push(rest);
        for line in lines {
            prop_assert!(!line.contains(&b'\r') && !line.contains(&b'\n'), "{:?}", String::from_utf8_lossy(line));
            let fields: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
            if fields.len() < 2 {
                continue;
            }
            match fields[0].first() {
                Some(&t) if !navigable(t, fields[1]) => continue,
                _ => {}
            }
            prop_assert!(fields.len() >= 4, "{:?}", String::from_utf8_lossy(line));
            prop_assert_eq!(fields[2], b"proxy.local", "{:?}", String::from_utf8_lossy(line));
            prop_assert_eq!(fields[3], b"7070");
        }
    }

    /// SOCKS5 handshakes: any bytes end in a destination or an error (never
    /// a hang once the client is done, never a panic); a destination's host is
    /// not empty.
    #[test]
    fn socks5_handshakes(bytes in prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        (proptest::collection::vec(any::<u8>(), 0..4), any::<u8>(), proptest::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(methods, atyp, rest)| {
                let mut v = vec![5, methods.len() as u8];
                v.extend(methods);
                v.extend([5, 1, 0, atyp % 6]);
                v.extend(rest);
                v
            }),
    ], with_users in any::<bool>()) {
        let users = if with_users { vec![("u".to_string(), "p".to_string())] } else { vec![] };
        let result = runtime().block_on(async {
            use tokio::io::AsyncWriteExt;
            let (mut client, mut server) = tokio::io::duplex(4096);
            client.write_all(&bytes).await.unwrap();
            client.shutdown().await.unwrap();
            tokio::time::timeout(std::time::Duration::from_secs(5), handshake(&mut server, &users, || true))
                .await
                .expect("ends once the client is done")
        });
        if let Ok(connect) = result {
            // An empty host only from a zero-length name (address type 3).
            prop_assert!(!connect.dest.host.is_empty() || with_users || bytes.get(4) == Some(&3));
            prop_assert_eq!(connect.user.is_some(), with_users);
        }
    }

    /// Spartan request lines (SOCKS5, transparent mode): an accepted line is
    /// sent upstream as one line that reads back as the same request.
    #[test]
    fn spartan_request_lines(host in prop::sample::select(vec!["localhost", "127.0.0.1", "Example.ORG", "h", ""]),
                             path in urlish(), len in prop::sample::select(vec!["0", "12", "", "x", "99999999999999999999"])) {
        let mut line = format!("{host} ").into_bytes();
        line.extend_from_slice(&path);
        line.extend_from_slice(format!(" {len}").as_bytes());
        if let Ok(r) = parse_request_line(300, &line) {
            let head = r.upstream_head();
            prop_assert!(head.ends_with(b"\r\n"));
            let sent = &head[..head.len() - 2];
            prop_assert!(!sent.contains(&b'\r') && !sent.contains(&b'\n'));
            prop_assert_eq!(parse_request_line(300, sent), Ok(r));
        }
    }

    /// Nex path lines: an accepted line goes upstream as the client wrote
    /// it, one line, with no NUL.
    #[test]
    fn nex_path_lines(line in urlish()) {
        if let Ok(r) = parse_path_line("example.org", 1900, &line) {
            prop_assert_eq!(r.upstream_line(), [&line[..], b"\r\n"].concat());
            prop_assert!(!line.iter().any(|b| matches!(b, b'\r' | b'\n' | 0)));
        }
    }
}
