//! The Gopher proxy end to end, in-process: a crawler sends a Gopher URL as its
//! selector to the proxy's listener; a fake Gopher origin on 127.0.0.1:0 answers.

use robots_proxy::listener::Listener;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

const ROBOTS: &str = "User-agent: examplebot\nDisallow: /private\nDisallow: */secret\n\nUser-agent: *\nDisallow: /\n";

fn welcome_hole(selector: &[u8]) -> Reply {
    match selector {
        b"robots.txt" => Reply::Bytes(ROBOTS.as_bytes().to_vec()),
        b"" | b"/" => Reply::Bytes(
            b"iWelcome\t\tnull.host\t1\r\n1Docs\t/docs\tgopher.example\t70\r\n.\r\n".to_vec(),
        ),
        b"/hello.txt" => Reply::Bytes(b"Hello, gopherspace.\r\n.\r\n".to_vec()),
        _ => Reply::Bytes(b"3Not found\t\terror.host\t1\r\n.\r\n".to_vec()),
    }
}

/// Text and binary answers are relayed byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_and_binary_are_relayed_byte_for_byte() {
    let blob: Arc<Vec<u8>> = Arc::new(
        (0..4 * 1024 * 1024u32)
            .map(|i| (i.wrapping_mul(2246822519) >> 11) as u8)
            .collect(),
    );
    let served = blob.clone();
    let origin = GopherOrigin::start(move |sel| match sel {
        b"robots.txt" => Reply::Bytes(b"User-agent: *\nDisallow: /nope\n".to_vec()),
        b"/blob.bin" => Reply::Bytes(served.to_vec()),
        _ => welcome_hole(sel),
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let text = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/hello.txt").as_bytes(),
    )
    .await;
    assert_eq!(text, b"Hello, gopherspace.\r\n.\r\n");
    let binary = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("9/blob.bin").as_bytes(),
    )
    .await;
    assert_eq!(binary.len(), blob.len());
    assert!(binary == *blob, "binary differs");
    assert_eq!(origin.count(b"/blob.bin"), 1);
}

/// Disallowed selectors get a type-3 `403 Forbidden` menu naming robots.txt and
/// the rule; the origin never sees them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disallowed_selectors_get_a_403_menu() {
    let origin = GopherOrigin::start(welcome_hole).await;
    let proxy = start_proxy(test_config()).await;
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/private/diary.txt").as_bytes(),
    )
    .await;
    let reason = format!(
        "403 Forbidden: robots.txt of 127.0.0.1:{} disallows this for examplebot: Disallow: /private (line 2)",
        origin.addr.port()
    );
    assert_eq!(
        String::from_utf8_lossy(&answer),
        format!("3{reason}\t{reason}\texample.com\t0\r\n.\r\n")
    );
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/docs/secret").as_bytes(),
    )
    .await;
    assert!(
        first_line(&answer).contains("Disallow: */secret (line 3)"),
        "{}",
        first_line(&answer)
    );
    assert_eq!(origin.count(b"/private/diary.txt"), 0);
    assert_eq!(origin.count(b"/docs/secret"), 0);
    assert_eq!(origin.count(b"robots.txt"), 1);
}

/// `Disallow: /` covers `users` too by default (servers read `users` as
/// `/users`); the proposal's literal reading (`[gopher] literal_selectors`)
/// leaves it allowed. robots.txt itself stays allowed either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_without_a_slash_is_covered_by_disallow_slash_unless_read_literally() {
    let origin = hole(
        Reply::Bytes(b"User-agent: *\nDisallow: /\n".to_vec()),
        Reply::Bytes(b"content\r\n".to_vec()),
    )
    .await;
    let proxy = start_proxy(test_config()).await;
    for sel in ["0users", "0/users"] {
        let refused = gopher(proxy.addr(Listener::Gopher), origin.url(sel).as_bytes()).await;
        assert!(
            first_line(&refused).starts_with("3403 Forbidden"),
            "{sel}: {}",
            first_line(&refused)
        );
    }
    assert_eq!(
        gopher(
            proxy.addr(Listener::Gopher),
            origin.url("0robots.txt").as_bytes()
        )
        .await,
        b"User-agent: *\nDisallow: /\n"
    );

    let mut config = test_config();
    config.selector_reading = robots_proxy::spelling::SelectorReading::Literal;
    let literal = start_proxy(config).await;
    assert_eq!(
        gopher(
            literal.addr(Listener::Gopher),
            origin.url("0users").as_bytes()
        )
        .await,
        b"content\r\n"
    );
    let refused = gopher(
        literal.addr(Listener::Gopher),
        origin.url("0/users").as_bytes(),
    )
    .await;
    assert!(first_line(&refused).starts_with("3403 Forbidden"));
}

/// Selectors that could reach a file two ways are refused if either is disallowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dodging_spellings_are_refused() {
    let origin = GopherOrigin::start(welcome_hole).await;
    let proxy = start_proxy(test_config()).await;
    for sel in [
        "0//private/x",
        "0/./private/x",
        "0/a/../private/x",
        "0%2Fprivate",
        "1/%70rivate/",
    ] {
        let answer = gopher(proxy.addr(Listener::Gopher), origin.url(sel).as_bytes()).await;
        assert!(
            first_line(&answer).starts_with("3403 Forbidden: robots.txt"),
            "{sel}: {}",
            first_line(&answer)
        );
    }
    assert_eq!(origin.all(), vec!["robots.txt".to_string()]);
}

/// Menus point back through the proxy: selectable items get the proxy's host and
/// port and the original as a Gopher URL; other items and the `.` are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn menus_are_rewritten_to_point_back_through_the_proxy() {
    let origin = GopherOrigin::start(|sel| match sel {
        b"robots.txt" => Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        _ => Reply::Bytes(
            b"iHello\t\tnull.host\t1\r\n\
              0About\t/about.txt\there.example\t70\r\n\
              1Elsewhere\t/dir sub\tthere.example\t7071\r\n\
              7Search\t/search\there.example\t70\r\n\
              hWeb\tURL:https://example.org/\there.example\t70\r\n\
              8Telnet\t\tbbs.example\t23\r\n\
              3Oops\t\terror.host\t1\r\n\
              .\r\n"
                .to_vec(),
        ),
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let p = proxy.addr(Listener::Gopher).port();
    let menu = gopher(proxy.addr(Listener::Gopher), origin.url("1/").as_bytes()).await;
    let want = format!(
        "iHello\t\tnull.host\t1\r\n\
         0About\tgopher://here.example/0/about.txt\t127.0.0.1\t{p}\r\n\
         1Elsewhere\tgopher://there.example:7071/1/dir%20sub\t127.0.0.1\t{p}\r\n\
         7Search\tgopher://here.example/7/search\t127.0.0.1\t{p}\r\n\
         hWeb\tURL:https://example.org/\there.example\t70\r\n\
         8Telnet\t\tbbs.example\t23\r\n\
         3Oops\t\terror.host\t1\r\n\
         .\r\n"
    );
    assert_eq!(String::from_utf8_lossy(&menu), want);

    // Search results (type 7) are menus too; a text file is not rewritten.
    let results = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("7/search%09gopher").as_bytes(),
    )
    .await;
    assert!(String::from_utf8_lossy(&results).contains(&format!(
        "gopher://here.example/0/about.txt\t127.0.0.1\t{p}"
    )));
    let text = gopher(
        proxy.addr(Listener::Gopher),
        origin.url("0/menu-as-text").as_bytes(),
    )
    .await;
    assert!(String::from_utf8_lossy(&text).contains("0About\t/about.txt\there.example\t70"));
    assert!(
        origin.all().contains(&"/search\tgopher".to_string()),
        "{:?}",
        origin.all()
    );
}

/// A crawler that starts at the proxy can follow a rewritten item and stay on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawler_never_leaves_the_proxy() {
    let port_cell = Arc::new(std::sync::OnceLock::<u16>::new());
    let port_for_menu = port_cell.clone();
    let origin = GopherOrigin::start(move |sel| match sel {
        b"robots.txt" => Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        b"/" | b"" => {
            let port = port_for_menu.get().copied().unwrap_or(70);
            Reply::Bytes(format!("0Page\t/page.txt\t127.0.0.1\t{port}\r\n1Private\t/private/\t127.0.0.1\t{port}\r\n.\r\n").into_bytes())
        }
        b"/page.txt" => Reply::Bytes(b"the page\r\n".to_vec()),
        _ => Reply::Bytes(b"3none\t\terror.host\t1\r\n.\r\n".to_vec()),
    })
    .await;
    port_cell.set(origin.addr.port()).unwrap();
    let proxy = start_proxy(test_config()).await;
    let menu = gopher(proxy.addr(Listener::Gopher), origin.url("1/").as_bytes()).await;
    let menu = String::from_utf8_lossy(&menu).into_owned();
    // Follow each item as a client would: its selector, to its host and port.
    let mut answers = Vec::new();
    for line in menu.lines().filter(|l| !l.starts_with('.')) {
        let fields: Vec<&str> = line.trim_end_matches('\r').split('\t').collect();
        assert_eq!(
            (fields[2], fields[3]),
            (
                "127.0.0.1",
                proxy.addr(Listener::Gopher).port().to_string().as_str()
            )
        );
        let addr = format!("{}:{}", fields[2], fields[3]).parse().unwrap();
        answers.push(gopher(addr, fields[1].as_bytes()).await);
    }
    assert_eq!(answers[0], b"the page\r\n");
    assert!(first_line(&answers[1]).starts_with("3403 Forbidden"));
}

/// robots.txt is looked for at `robots.txt`, `/robots.txt`, `0/robots.txt`; a
/// plain-text "not found" page or a type-3 menu is not a robots.txt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_robots_txt_fallback_chain() {
    let not_found = b"Error: File or directory not found! (null)\r\n______\r\n".to_vec();
    let error_menu = b"3'robots.txt' does not exist\t\terror.host\t1\r\n.\r\n".to_vec();
    let robots = b"User-agent: *\nDisallow: /private\n".to_vec();
    // (answers for the three selectors, is /private refused)
    let cases: Vec<([Vec<u8>; 3], bool)> = vec![
        ([robots.clone(), not_found.clone(), not_found.clone()], true),
        ([not_found.clone(), robots.clone(), not_found.clone()], true),
        (
            [error_menu.clone(), not_found.clone(), robots.clone()],
            true,
        ),
        ([Vec::new(), error_menu.clone(), not_found.clone()], false),
    ];
    for (i, (answers, refused)) in cases.into_iter().enumerate() {
        let answers = Arc::new(answers);
        let origin = GopherOrigin::start(move |sel| match sel {
            b"robots.txt" => Reply::Bytes(answers[0].clone()),
            b"/robots.txt" => Reply::Bytes(answers[1].clone()),
            b"0/robots.txt" => Reply::Bytes(answers[2].clone()),
            _ => Reply::Bytes(b"content\r\n".to_vec()),
        })
        .await;
        let proxy = start_proxy(test_config()).await;
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            origin.url("0/private/x").as_bytes(),
        )
        .await;
        assert_eq!(
            first_line(&answer).starts_with("3403"),
            refused,
            "case {i}: {}",
            first_line(&answer)
        );
        // Each selector is asked only if the one before was missing.
        let asked: Vec<String> = origin
            .all()
            .into_iter()
            .filter(|s| s.contains("robots.txt"))
            .collect();
        let expected = match i {
            0 => 1,
            1 => 2,
            _ => 3,
        };
        assert_eq!(asked.len(), expected, "case {i}: {asked:?}");
    }
}

/// Malformed lines get a `3400 Bad Request` menu; nothing reaches an origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_selectors_are_answered() {
    let origin = GopherOrigin::start(welcome_hole).await;
    let proxy = start_proxy(test_config()).await;
    let long = format!("gopher://127.0.0.1/0/{}", "a".repeat(3000));
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            b"/just/a/selector".to_vec(),
            "3400 Bad Request: send a Gopher URL",
        ),
        (
            b"gemini://example.org/".to_vec(),
            "3400 Bad Request: this proxy fetches gopher:// URLs, not gemini://",
        ),
        (
            format!("gopher://127.0.0.1:{}/0a%0Db", origin.addr.port()).into_bytes(),
            "3400 Bad Request: CR, LF or NUL",
        ),
        (
            b"gopher://bad host/".to_vec(),
            "3400 Bad Request: invalid host",
        ),
        (
            long.into_bytes(),
            "3400 Bad Request: selector line longer than 2048 bytes",
        ),
    ];
    for (line, want) in cases {
        let answer = gopher(proxy.addr(Listener::Gopher), &line).await;
        assert!(
            first_line(&answer).starts_with(want),
            "{}: {}",
            String::from_utf8_lossy(&line[..line.len().min(60)]),
            first_line(&answer)
        );
        assert!(answer.ends_with(b"\texample.com\t0\r\n.\r\n"));
    }
    assert!(origin.all().is_empty());
}

/// Upstream down: `3503` while its robots.txt cannot be fetched; a host whose
/// robots.txt is known but whose answer fails gets `3502 Bad Gateway`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_down_is_answered() {
    let (_held, gone) = gone_server();
    let port = gone.port();
    let proxy = start_proxy(test_config()).await;
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        format!("gopher://127.0.0.1:{port}/1/").as_bytes(),
    )
    .await;
    assert!(
        first_line(&answer).starts_with("3503 Service Unavailable: robots.txt of 127.0.0.1:"),
        "{}",
        first_line(&answer)
    );

    let mut config = test_config();
    config.limits.idle_timeout = Duration::from_millis(300);
    let proxy = start_proxy(config).await;
    let silent = hole(
        Reply::Bytes(b"User-agent: *\nDisallow: /private\n".to_vec()),
        Reply::Silent,
    )
    .await;
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        silent.url("0/page").as_bytes(),
    )
    .await;
    assert!(
        first_line(&answer).starts_with("3502 Bad Gateway: upstream 127.0.0.1:"),
        "{}",
        first_line(&answer)
    );
}

/// Private upstreams are refused (`3403`) without --allow-private-upstreams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_upstreams_are_refused_by_default() {
    let origin = GopherOrigin::start(welcome_hole).await;
    let mut config = test_config();
    config.limits.allow_private_upstreams = false;
    let proxy = start_proxy(config).await;
    let answer = gopher(proxy.addr(Listener::Gopher), origin.url("1/").as_bytes()).await;
    assert!(
        first_line(&answer).starts_with("3403 Forbidden: 127.0.0.1: the proxy does not connect there: 127.0.0.1 is in 127.0.0.0/8 loopback (see --allow-private-upstreams)"),
        "{}",
        first_line(&answer)
    );
    assert!(origin.all().is_empty());
}
