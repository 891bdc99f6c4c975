//! Preferences a site states on its answers, against the uses a bot
//! declares (`content_usage`): each signal of the guide's table refuses the
//! answer (`403`, `Proxy-Status` naming the field, the body never relayed,
//! counted), from the server's side and the crawler's; what should not
//! refuse does not; report mode relays and counts.

use robots_proxy::listener::Listener;

use crate::common::web::{web_config_with, WebClient, WebOrigin};
use crate::common::*;

/// A site whose robots.txt allows everything and whose `/page` answers
/// `content_type` with `fields`, its body a marker the crawler must not see
/// when refused.
async fn site(content_type: &'static str, fields: Vec<(&'static str, &'static str)>) -> WebOrigin {
    WebOrigin::start(move |path| match path {
        "/robots.txt" => (
            200,
            vec![("content-type", "text/plain".into())],
            b"User-agent: *\nAllow: /\n".to_vec(),
        ),
        _ => {
            let mut headers = vec![("content-type", content_type.to_string())];
            headers.extend(fields.iter().map(|(n, v)| (*n, v.to_string())));
            (200, headers, b"THE-BODY".to_vec())
        }
    })
    .await
}

/// A content type, the answer's fields, and (per test) what is said or declared.
type Case = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    &'static str,
);

fn bot(uses: &str, mode: &str) -> robots_proxy::config::Config {
    web_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\ncontent_usage = [{uses}]\nmode = \"{mode}\"\n"
    ))
}

/// Every row of the table refuses `train-ai`: 403, the field named in
/// `Proxy-Status` and the text, no body, counted.
#[tokio::test]
async fn each_signal_refuses_a_declared_use() {
    let rows: [Case; 6] = [
        (
            "text/html",
            vec![("content-usage", "train-ai=n")],
            "Content-Usage: train-ai=n",
        ),
        (
            "text/html",
            vec![("content-usage", "bots=n, search=y")],
            "Content-Usage: bots=n, search=y",
        ),
        (
            "text/html",
            vec![("x-robots-tag", "noindex, noai")],
            "X-Robots-Tag: noindex, noai",
        ),
        (
            "text/html",
            vec![("x-robots-tag", "ExampleBot: noai")],
            "X-Robots-Tag: ExampleBot: noai",
        ),
        (
            "image/png",
            vec![("x-robots-tag", "noimageai")],
            "X-Robots-Tag: noimageai",
        ),
        (
            "text/html",
            vec![("tdm-reservation", "1")],
            "tdm-reservation: 1",
        ),
    ];
    let proxy = start_proxy(bot("\"train-ai\"", "enforce")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for (content_type, fields, named) in rows {
        let origin = site(content_type, fields).await;
        let answer = client.get(&origin.url("/page"), &[]).await;
        assert_eq!(answer.status, 403, "{named}: {answer:?}");
        assert!(
            !answer.body.contains("THE-BODY"),
            "{named}: the body was relayed"
        );
        assert!(
            answer
                .body
                .contains(&format!("refuses train-ai for examplebot: {named}")),
            "{named}: {}",
            answer.body
        );
        let status = answer
            .header("proxy-status")
            .unwrap_or_default()
            .to_string();
        assert!(
            status.contains("error=http_request_denied") && status.contains(named),
            "{named}: {status}"
        );
        assert_eq!(
            origin.targets(),
            ["/robots.txt", "/page"],
            "{named}: asked once"
        );
    }
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(&metrics, "robots_proxy_request_outcomes_total{bot=\"default\",outcome=\"response-preference\",protocol=\"http\"}"),
        Some(6.0)
    );
}

/// What must not refuse does not: another bot's tag, `noimageai` on a page,
/// a reservation against a search bot, unknown vocabulary, a preference
/// allowing it, and a bot that declares no use.
#[tokio::test]
async fn what_does_not_concern_the_bot_is_relayed() {
    let cases: [Case; 6] = [
        (
            "text/html",
            vec![("x-robots-tag", "otherbot: noai")],
            "\"train-ai\"",
        ),
        (
            "text/html",
            vec![("x-robots-tag", "noimageai")],
            "\"train-ai\"",
        ),
        ("text/html", vec![("tdm-reservation", "1")], "\"search\""),
        (
            "text/html",
            vec![
                ("content-usage", "train-ai=maybe, fly=n"),
                ("x-robots-tag", "noaix, nonsense"),
            ],
            "\"train-ai\"",
        ),
        (
            "text/html",
            vec![("content-usage", "train-ai=y")],
            "\"train-ai\"",
        ),
        (
            "text/html",
            vec![("content-usage", "bots=n"), ("x-robots-tag", "noai")],
            "",
        ),
    ];
    for (content_type, fields, uses) in cases {
        let origin = site(content_type, fields.clone()).await;
        let proxy = start_proxy(bot(uses, "enforce")).await;
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let answer = client.get(&origin.url("/page"), &[]).await;
        assert_eq!(answer.status, 200, "{fields:?} for [{uses}]: {answer:?}");
        assert_eq!(answer.body, "THE-BODY");
    }
}

/// Several fields combine, the most restrictive winning; a huge field is
/// read whole (the answer's head is bounded, 64 KiB: no read limit of the
/// proxy's turns its `noai` into "no preference").
#[tokio::test]
async fn several_fields_combine_and_a_huge_one_is_read_whole() {
    let proxy = start_proxy(bot("\"train-ai\"", "enforce")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let origin = site(
        "text/html",
        vec![
            ("content-usage", "train-ai=y"),
            ("content-usage", "train-ai=n"),
        ],
    )
    .await;
    assert_eq!(client.get(&origin.url("/page"), &[]).await.status, 403);
    let huge: &'static str = Box::leak(format!("{}noai", "x, ".repeat(20_000)).into_boxed_str());
    let origin = site("text/html", vec![("x-robots-tag", huge)]).await;
    let answer = client.get(&origin.url("/page"), &[]).await;
    assert_eq!(answer.status, 403, "60 KB, then noai: {}", answer.status);
}

/// Holes 3 and 4, from the site's side: fields are bytes, and a refusal in
/// them is read wherever it is, whatever bytes surround it (obs-text, a
/// character an old 8 KiB cut split, 60 KB before it, several bots named in
/// one value, a quoted comma in a dictionary, a junk field beside it): each
/// refuses `train-ai` through the HTTP listener, and the body never
/// reaches the crawler.
#[tokio::test]
async fn a_refusal_among_any_bytes_refuses() {
    use crate::common::web::{answer_bytes, RawOrigin};
    let euros = "\u{20ac}".repeat(3_000);
    let rows: Vec<Vec<Vec<u8>>> = vec![
        vec![b"X-Robots-Tag: noai, caf\xe9".to_vec()],
        vec![b"X-Robots-Tag: caf\xe9, noai".to_vec()],
        vec![format!("X-Robots-Tag: noai, {euros}").into_bytes()],
        vec![format!("X-Robots-Tag: {}noai", "x, ".repeat(20_000)).into_bytes()],
        vec![b"X-Robots-Tag: otherbot: noindex, examplebot: noai".to_vec()],
        vec![
            b"X-Robots-Tag: \xff\xfe".to_vec(),
            b"x-robots-tag: NOAI".to_vec(),
        ],
        vec![b"Content-Usage: a=\"x, y\", train-ai=n".to_vec()],
        vec![
            b"Content-Usage: caf\xe9=n".to_vec(),
            b"Content-Usage: train-ai=n".to_vec(),
        ],
        vec![b"tdm-reservation: 1 ".to_vec()],
    ];
    let proxy = start_proxy(bot("\"train-ai\"", "enforce")).await;
    for fields in rows {
        let answer = answer_bytes(
            &fields
                .iter()
                .map(Vec::as_slice)
                .chain([&b"content-type: text/plain"[..]])
                .collect::<Vec<_>>(),
            b"THE-BODY",
        );
        let origin = RawOrigin::start(move |path, _| match path {
            "/robots.txt" => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec(),
            _ => answer.clone(),
        })
        .await;
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let got = client.get(&origin.url("/page"), &[]).await;
        let row = String::from_utf8_lossy(&fields.concat())
            .chars()
            .take(80)
            .collect::<String>();
        assert_eq!(got.status, 403, "{row}: {got:?}");
        assert!(!got.body.contains("THE-BODY"), "{row}");
        assert_eq!(origin.paths(), ["/robots.txt", "/page"], "{row}");
    }
}

/// Report mode relays the answer whole and counts what would have happened.
#[tokio::test]
async fn report_mode_relays_and_counts() {
    let origin = site("text/html", vec![("x-robots-tag", "noai")]).await;
    let proxy = start_proxy(bot("\"train-ai\"", "report")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let answer = client.get(&origin.url("/page"), &[]).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "THE-BODY"));
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(
            &metrics,
            "robots_proxy_report_only_total{bot=\"default\",reason=\"response_preference\"}"
        ),
        Some(1.0)
    );
}
