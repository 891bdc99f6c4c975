//! A crawler trying to reach a disallowed Gopher file by another spelling, on
//! every way in: the Gopher listener (a Gopher URL), the SOCKS5 listener (the
//! raw selector a server would get), and `robots-proxy check`. The origin here
//! reads selectors the way gophernicus does (leading slash optional, escapes
//! decoded again, `?query` dropped), so each spelling below would reach the
//! disallowed file if it got through. One row per class, several per class.

use crate::common::*;
use robots_proxy::check::decide_target;
use robots_proxy::listener::Listener;
use robots_proxy::robots::{BotProfile, RobotsTxt};
use robots_proxy::spelling::SelectorReading;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\nDisallow: /sub/\nDisallow: /exact.txt$\n";

/// Selectors (as the server receives them) that must be refused with 3403,
/// by class.
const REFUSED: &[(&str, &str)] = &[
    ("as written", "/private/secret.txt"),
    ("no leading slash", "private/secret.txt"),
    ("no leading slash", "sub/file.txt"),
    ("doubled slashes", "//private/secret.txt"),
    ("doubled slashes", "/sub//file.txt"),
    ("dot segments", "/./private/x"),
    ("dot segments", "/pub/../private/x"),
    ("dot segments", "pub/../sub/x"),
    ("escape decoded again", "/sub%2Ffile.txt"),
    ("escape decoded again", "/%70rivate/x"),
    ("escape decoded again", "%2Fprivate"),
    ("escape of an escape", "/sub%252Ffile.txt"),
    ("escape of an escape", "/%2570rivate"),
    ("escaped three times", "/%25252570rivate"),
    ("query dropped", "/exact.txt?x"),
    ("query dropped", "/private?/../public"),
    ("escaped query dropped", "/exact.txt%3Fx"),
    ("escaped tab", "/exact.txt%09x"),
    ("escape of an escaped tab", "/exact.txt%2509x"),
    ("everything at once", "%2F.%2F%252Fprivate%3Fq"),
];

/// Selectors whose decoded forms hide a NUL, CR or LF: bad input, 3400.
const BAD: &[&str] = &[
    "/sub%00",
    "/sub%2500",
    "/private%252500",
    "/x%0D%0Ay",
    "/x%250D%250Ay",
];

/// Selectors that stay allowed (so the refusals above are not a blanket no).
const ALLOWED: &[&str] = &[
    "/public.txt",
    "public.txt",
    "/exact.txt.bak",
    "/subway.txt",
    "/100%",
    "/a%20b",
];

fn origin_reply(selector: &[u8]) -> Reply {
    if selector == b"robots.txt" {
        Reply::Bytes(ROBOTS.as_bytes().to_vec())
    } else {
        Reply::Bytes(b"iserved\t\tnull.host\t1\r\n.\r\n".to_vec())
    }
}

/// `gopher://127.0.0.1:PORT/0` + the selector, percent-encoded as a URL must be
/// (so that the URL layer's decoding gives back exactly `selector`).
fn url_for(origin: &GopherOrigin, selector: &str) -> String {
    let mut encoded = String::new();
    for b in selector.bytes() {
        if b.is_ascii_alphanumeric() || b"/.-_~".contains(&b) {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    origin.url(&format!("0{encoded}"))
}

/// Asserts that `answer` is a refusal of the kind `want` (`3403 Forbidden:
/// robots.txt`, `3400 Bad Request`).
fn assert_refused(answer: &[u8], want: &str, what: &str) {
    assert!(
        first_line(answer).starts_with(want),
        "{what}: {}",
        first_line(answer)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_class_is_refused_on_the_gopher_listener() {
    let origin = GopherOrigin::start(origin_reply).await;
    let proxy = start_proxy(test_config()).await;
    for (class, sel) in REFUSED {
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            url_for(&origin, sel).as_bytes(),
        )
        .await;
        assert_refused(
            &answer,
            "3403 Forbidden: robots.txt",
            &format!("{class}: {sel}"),
        );
    }
    for sel in BAD {
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            url_for(&origin, sel).as_bytes(),
        )
        .await;
        assert_refused(&answer, "3400 Bad Request", sel);
    }
    assert_eq!(
        origin.all(),
        ["robots.txt"],
        "nothing else reached the origin"
    );
    for sel in ALLOWED {
        let answer = gopher(
            proxy.addr(Listener::Gopher),
            url_for(&origin, sel).as_bytes(),
        )
        .await;
        assert_eq!(first_line(&answer), "iserved\t\tnull.host\t1", "{sel}");
        assert_eq!(
            origin.count(sel.as_bytes()),
            1,
            "{sel} reached the origin as sent"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_class_is_refused_through_socks5() {
    let origin = GopherOrigin::start(origin_reply).await;
    let proxy = start_proxy(test_config()).await;
    let socks = proxy.addr(Listener::Socks5);
    for (class, sel) in REFUSED {
        let answer = gopher_via_socks(socks, origin.addr, sel.as_bytes()).await;
        assert_refused(
            &answer,
            "3403 Forbidden: robots.txt",
            &format!("{class}: {sel}"),
        );
    }
    for sel in BAD {
        let answer = gopher_via_socks(socks, origin.addr, sel.as_bytes()).await;
        assert_refused(&answer, "3400 Bad Request", sel);
    }
    // A raw NUL or CR inside the line.
    for raw in [&b"/sub\0x"[..], b"/sub\rx", b"/ok\tsearch\0"] {
        let answer = gopher_via_socks(socks, origin.addr, raw).await;
        assert_refused(&answer, "3400 Bad Request", &format!("{raw:?}"));
    }
    assert_eq!(
        origin.all(),
        ["robots.txt"],
        "nothing else reached the origin"
    );
    for sel in ALLOWED {
        let answer = gopher_via_socks(socks, origin.addr, sel.as_bytes()).await;
        assert_eq!(first_line(&answer), "iserved\t\tnull.host\t1", "{sel}");
    }
    // Bad selectors are logged and counted like the Gopher listener's.
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    let errors = sample(
        &metrics,
        r#"robots_proxy_requests_total{bot="default",decision="error",protocol="gopher"}"#,
    );
    assert_eq!(errors, Some((BAD.len() + 3) as f64));
}

/// `check` takes gopher:// URLs and decides them exactly as the listeners do.
#[test]
fn every_spelling_class_is_refused_by_check() {
    let policy = RobotsTxt::parse(ROBOTS.as_bytes()).policy(&BotProfile::new("bot"));
    let url = |sel: &str| {
        let mut encoded = String::from("gopher://127.0.0.1/0");
        for b in sel.bytes() {
            encoded.push_str(&format!("%{b:02X}"));
        }
        encoded
    };
    for (class, sel) in REFUSED {
        let (d, _) = decide_target(&policy, &url(sel), SelectorReading::Safe).unwrap();
        assert!(!d.allowed(), "{class}: {sel}");
    }
    for sel in BAD {
        assert!(
            decide_target(&policy, &url(sel), SelectorReading::Safe).is_err(),
            "{sel}"
        );
    }
    for sel in ALLOWED {
        let (d, _) = decide_target(&policy, &url(sel), SelectorReading::Safe).unwrap();
        assert!(d.allowed(), "{sel}");
    }
}

/// A hostile server serves a robots.txt of thousands of wildcard rules built
/// so that every rule must search the path, and menus linking to selectors
/// that read dozens of ways (escaped eight times over, a tail, dot segments):
/// deciding each spelling in turn would cost each request as much as fifty
/// decisions. The spellings share one budget of searches: such a selector is
/// refused as bad input (never relayed, never allowed), at the cost of a few
/// decisions, on the Gopher listener and through SOCKS5; a plain selector on
/// the same file is still decided, and a disallowed spelling still refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_read_many_ways_against_thousands_of_wildcard_rules() {
    let mut robots = String::from("User-agent: *\nDisallow: /private\n");
    for i in 0..4_000 {
        robots.push_str(&format!("Disallow: *{}b{i:05}*z\n", "a".repeat(26)));
    }
    let served = robots.clone();
    let origin = GopherOrigin::start(move |selector| {
        if selector == b"robots.txt" {
            Reply::Bytes(served.as_bytes().to_vec())
        } else {
            Reply::Bytes(b"iserved\t\tnull.host\t1\r\n.\r\n".to_vec())
        }
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    // A path holding every byte pair the rules need (each ordered pair of
    // digits), so no rule is ruled out without searching it.
    let mut digits = String::new();
    for a in 0..10 {
        for b in a..10 {
            digits.push_str(&format!("{a}{b}"));
        }
    }
    let reversed: String = digits.chars().rev().collect();
    let long = format!("/{}b{digits}{reversed}", "a".repeat(300));
    let deep = format!("{long}%2525252525252541/x/../y//w?q");
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        url_for(&origin, &deep).as_bytes(),
    )
    .await;
    assert_refused(&answer, "3400 Bad Request", &deep);
    assert!(
        first_line(&answer).contains("ask for it as plainly as it is written"),
        "{}",
        first_line(&answer)
    );
    let answer = gopher_via_socks(proxy.addr(Listener::Socks5), origin.addr, deep.as_bytes()).await;
    assert_refused(&answer, "3400 Bad Request", "through SOCKS5");
    // Plain selectors on the same file: decided as usual.
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        url_for(&origin, &long).as_bytes(),
    )
    .await;
    assert_eq!(first_line(&answer), "iserved\t\tnull.host\t1");
    let answer = gopher(
        proxy.addr(Listener::Gopher),
        url_for(&origin, "private/x").as_bytes(),
    )
    .await;
    assert_refused(&answer, "3403 Forbidden: robots.txt", "private/x");
    assert!(!origin.all().iter().any(|s| s.contains("2525")));
}
