//! The Gemini listener's other URLs, as Gemini clients' proxy settings send
//! them: `gopher://`, `spartan://` and `nex://` fetched over their own
//! protocol and answered as Gemini (menus and listings rendered as
//! `text/gemini`, links keeping their own scheme), each decided by its own
//! robots.txt over every spelling; `titan://` uploads refused unless the bot
//! may upload.

use crate::common::small_web;
use std::sync::{Arc, OnceLock};

use robots_proxy::listener::Listener;

use crate::common::*;
use small_web::{SmallServer, Speaks};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn body(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A Gopher hole whose root menu links a file, a search, a private file
/// and the web; the search answers a menu of what it was asked.
async fn gopher_hole() -> GopherOrigin {
    let own_port = Arc::new(OnceLock::<u16>::new());
    let port = own_port.clone();
    let hole = GopherOrigin::start(move |selector| {
        let port = port.get().copied().unwrap_or(0);
        let reply = match selector {
            b"robots.txt" => ROBOTS.to_string(),
            b"" | b"/" => format!(
                "iWelcome, crawler\t\tnull.host\t1\r\n\
0Public file\t/public.txt\t127.0.0.1\t{port}\r\n\
7Search\t/find\t127.0.0.1\t{port}\r\n\
0Private\t/private/x.txt\t127.0.0.1\t{port}\r\n\
hWeb\tURL:https://example.org/\tnull.host\t70\r\n\
.\r\n"
            ),
            b"/public.txt" => "public text\r\n".to_string(),
            s if s.starts_with(b"/find\t") => format!(
                "iYou asked for {}\t\tnull.host\t1\r\n.\r\n",
                String::from_utf8_lossy(&s[6..])
            ),
            _ => "3Not found\t\tnull.host\t1\r\n.\r\n".to_string(),
        };
        Reply::Bytes(reply.into_bytes())
    })
    .await;
    own_port.set(hole.addr.port()).unwrap();
    hole
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gopher_urls_are_rendered_as_gemtext_and_decided_by_the_holes_robots_txt() {
    let hole = gopher_hole().await;
    let proxy = start_proxy(test_config()).await;
    let gemini_at = proxy.addr(Listener::Gemini);
    let (header, menu) = gemini(gemini_at, &hole.url("1/")).await;
    assert_eq!(header, "20 text/gemini");
    let port = hole.addr.port();
    // Every Gopher item is a `gopher://` link, shown as the proxy will be
    // asked for it; the web stays the web.
    assert_eq!(
        body(&menu),
        format!(
            "Welcome, crawler\n\
=> gopher://127.0.0.1:{port}/0/public.txt Public file\n\
=> gopher://127.0.0.1:{port}/7/find Search\n\
=> gopher://127.0.0.1:{port}/0/private/x.txt Private\n\
=> https://example.org/ Web\n"
        )
    );
    let (header, file) = gemini(gemini_at, &hole.url("0/public.txt")).await;
    assert_eq!(
        (header.as_str(), body(&file).as_str()),
        ("20 text/plain", "public text\r\n")
    );
    for spelling in [
        "0/private/x.txt",
        "0/%70rivate/x.txt",
        "0//private/x.txt",
        "0/./private/x.txt",
        "0/public/../private/x.txt",
        "0/%2570rivate/x.txt",
        "1/private/x.txt",
    ] {
        let (header, _) = gemini(gemini_at, &hole.url(spelling)).await;
        assert!(
            header.starts_with(&format!("53 robots.txt of 127.0.0.1:{port}")),
            "{spelling}: {header}"
        );
    }
    assert!(
        !hole.all().iter().any(|s| s.contains("rivate")),
        "{:?}",
        hole.all()
    );
    // A search asks for its terms, then sends them as Gopher does.
    let (header, _) = gemini(gemini_at, &hole.url("7/find")).await;
    assert_eq!(header, "10 Search terms");
    let (header, results) = gemini(gemini_at, &format!("{}?caf%C3%A9", hole.url("7/find"))).await;
    assert_eq!(header, "20 text/gemini");
    assert_eq!(body(&results), "You asked for café\n");
    assert_eq!(hole.count("/find\tcafé".as_bytes()), 1, "{:?}", hole.all());
}

/// The links of a rendered menu lead back through the proxy: each is a
/// `gopher://` URL that, sent to the Gemini listener, reaches its item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_menus_links_lead_to_their_items() {
    let hole = GopherOrigin::start(|selector| {
        Reply::Bytes(match selector {
            b"robots.txt" => b"User-agent: *\nAllow: /\n".to_vec(),
            b"/a file.txt" => b"the file\r\n".to_vec(),
            _ => b"".to_vec(),
        })
    })
    .await;
    let port = hole.addr.port();
    let menu_hole = GopherOrigin::start(move |selector| {
        Reply::Bytes(match selector {
            b"robots.txt" => b"User-agent: *\nAllow: /\n".to_vec(),
            _ => format!("0A file\t/a file.txt\t127.0.0.1\t{port}\r\n.\r\n").into_bytes(),
        })
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let (header, menu) = gemini(proxy.addr(Listener::Gemini), &menu_hole.url("1/")).await;
    assert_eq!(header, "20 text/gemini");
    let menu = body(&menu);
    let link = menu
        .lines()
        .find_map(|l| l.strip_prefix("=> "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("a link: {menu}"));
    assert_eq!(link, format!("gopher://127.0.0.1:{port}/0/a%20file.txt"));
    let (header, file) = gemini(proxy.addr(Listener::Gemini), link).await;
    assert_eq!(
        (header.as_str(), body(&file).as_str()),
        ("20 text/plain", "the file\r\n")
    );
}

fn small_files(listing: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("/robots.txt", ROBOTS),
        ("/", listing),
        ("/public.txt", "public text\n"),
        ("/private/x.txt", "secret\n"),
        ("/guestbook", "thanks\n"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spartan_and_nex_urls_are_answered_as_gemini_and_decided_by_their_own_robots_txt() {
    let listing = "# My capsule\n=> public.txt Public\n=> /private/ Private\n```\n";
    let spartan = SmallServer::start(Speaks::Spartan, machine(1), &small_files(listing)).await;
    let nex = SmallServer::start(Speaks::Nex, machine(1), &small_files(listing)).await;
    let proxy = start_proxy(test_config()).await;
    let at = proxy.addr(Listener::Gemini);
    let spartan_url = |path: &str| format!("spartan://127.0.0.1:{}{path}", spartan.addr.port());
    let nex_url = |path: &str| format!("nex://127.0.0.1:{}{path}", nex.addr.port());

    let (header, text) = gemini(at, &spartan_url("/public.txt")).await;
    assert_eq!(
        (header.as_str(), body(&text).as_str()),
        ("20 text/plain", "public text\n")
    );
    let (header, _) = gemini(at, &spartan_url("/missing")).await;
    assert_eq!(header, "50 not found");
    let (header, text) = gemini(at, &nex_url("/public.txt")).await;
    assert_eq!(
        (header.as_str(), body(&text).as_str()),
        ("20 text/plain", "public text\n")
    );
    // A listing is gemtext: its links stay links, its text stays text.
    let (header, text) = gemini(at, &nex_url("/")).await;
    assert_eq!(header, "20 text/gemini");
    assert_eq!(
        body(&text),
        " # My capsule\n=> public.txt Public\n=> /private/ Private\n ```\n"
    );

    for spelling in PRIVATE_SPELLINGS {
        for url in [spartan_url(spelling), nex_url(spelling)] {
            let (header, _) = gemini(at, &url).await;
            assert!(
                header.starts_with("53 robots.txt of 127.0.0.1:") && header.contains("/private"),
                "{url}: {header}"
            );
        }
    }
    let (header, _) = gemini(at, &nex_url("/%2570rivate/x.txt")).await;
    assert!(header.starts_with("53 "), "{header}");
    assert_eq!(spartan.count("/private/x.txt"), 0, "{:?}", spartan.paths());
    assert_eq!(nex.count("/private/x.txt"), 0, "{:?}", nex.paths());
    assert_eq!(spartan.count("/robots.txt"), 1, "over Spartan, once");
    assert_eq!(nex.count("/robots.txt"), 1, "over Nex, once");

    // A query is a Spartan upload: refused for a bot that may not upload.
    let (header, _) = gemini(at, &spartan_url("/guestbook?hello")).await;
    assert!(header.starts_with("53 uploads are refused"), "{header}");
    assert_eq!(spartan.count("/guestbook"), 0);
}

/// Titan: refused as an upload for a bot by default; for a bot with
/// `uploads = true`, relayed with its data, and still decided by the
/// capsule's robots.txt on the path before its parameters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn titan_uploads_are_refused_unless_the_bot_may_upload() {
    let capsule = capsule(
        text("20 text/plain", ROBOTS),
        text("20 text/gemini", "saved"),
    )
    .await;
    let port = capsule.addr.port();
    let proxy = start_proxy(test_config()).await;
    let upload = |path: &str, data: &str| {
        format!(
            "titan://127.0.0.1:{port}{path};mime=text/plain;size={}\r\n{data}",
            data.len()
        )
    };
    let answer = gemini_raw(
        proxy.addr(Listener::Gemini),
        upload("/wiki/page", "hello").as_bytes(),
    )
    .await;
    assert!(
        body(&answer).starts_with("53 uploads are refused for this bot (a titan:// upload)"),
        "{}",
        body(&answer)
    );
    assert!(capsule.all().is_empty(), "{:?}", capsule.all());

    let proxy = start_proxy(test_config_with(
        "[bot]\nagent = \"examplebot\"\nuploads = true\n",
    ))
    .await;
    let at = proxy.addr(Listener::Gemini);
    let answer = gemini_raw(at, upload("/wiki/./page", "hello").as_bytes()).await;
    assert_eq!(body(&answer), "20 text/gemini\r\nsaved");
    let uploads = capsule.uploads.lock().unwrap().clone();
    assert_eq!(
        uploads,
        vec![(
            format!("titan://127.0.0.1:{port}/wiki/page;mime=text/plain;size=5"),
            b"hello".to_vec()
        )]
    );
    for path in ["/private/x", "/%70rivate/x", "/a/../private/x"] {
        let answer = gemini_raw(at, upload(path, "abc").as_bytes()).await;
        assert!(
            body(&answer).starts_with("53 robots.txt of 127.0.0.1:"),
            "{path}: {}",
            body(&answer)
        );
    }
    // The capsule's robots.txt, fetched once over Gemini, rules its uploads.
    assert_eq!(capsule.count("/robots.txt"), 1, "{:?}", capsule.all());
    assert_eq!(capsule.uploads.lock().unwrap().len(), 1);
    // A Titan URL without its size is malformed.
    let answer = gemini_raw(
        at,
        format!("titan://127.0.0.1:{port}/x;mime=text/plain\r\n").as_bytes(),
    )
    .await;
    assert!(
        body(&answer).starts_with("59 a titan:// URL gives the size"),
        "{}",
        body(&answer)
    );
}

/// A hostile hole: escape sequences, bytes that are no UTF-8, a line that
/// would start a preformatted block, an item longer than the proxy holds,
/// and an item pointing at a port nothing is given for. The client gets
/// gemtext that is UTF-8, holds no control character but line ends, and
/// links only where the menu gave a usable host and port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_menu_reaches_the_client_as_harmless_gemtext() {
    let mut menu = b"i\x1b]0;owned\x07title\t\tnull.host\t1\r\n\
i```\t\tnull.host\t1\r\n\
i\xff\xfe bytes\t\tnull.host\t1\r\n\
1No port\t/x\t127.0.0.1\r\n\
1=> fake\t/y\t127.0.0.1\t70\r\n"
        .to_vec();
    menu.extend_from_slice(b"1");
    menu.extend(vec![b'z'; 100 * 1024]);
    menu.extend_from_slice(b"\t/z\t127.0.0.1\t70\r\n.\r\n");
    let hole = GopherOrigin::start(move |selector| match selector {
        b"robots.txt" => Reply::Bytes(b"User-agent: *\nAllow: /\n".to_vec()),
        _ => Reply::Bytes(menu.clone()),
    })
    .await;
    let proxy = start_proxy(test_config()).await;
    let (header, rendered) = gemini(proxy.addr(Listener::Gemini), &hole.url("1/")).await;
    assert_eq!(header, "20 text/gemini");
    let rendered = String::from_utf8(rendered).expect("UTF-8");
    assert!(
        !rendered.chars().any(|c| c.is_control() && c != '\n'),
        "{rendered:?}"
    );
    assert_eq!(
        rendered,
        " ]0;owned title\n \
```\n\
\u{fffd}\u{fffd} bytes\n\
No port\n\
=> gopher://127.0.0.1/1/y => fake\n\
[an item longer than 64 KiB was dropped by the proxy]\n"
    );
}
