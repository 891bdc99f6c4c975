//! Hole 5, from the site's side and the crawler's: a page's own refusal in
//! its head (`<meta name="robots" content="noai">`, `noimageai`, the bot's
//! own name, TDMRep's `<meta name="tdm-reservation" content="1">`) refuses
//! it to a bot that declares the use, as the same words in a field do,
//! however the page is written and sent (compressed, cut into small chunks,
//! untyped, XHTML); what a page does not say, or says to another bot, or
//! after its head, does not refuse; a bot that declares no use gets the page
//! untouched; a page the proxy cannot read is not relayed to such a bot.

use std::io::Write;

use robots_proxy::listener::Listener;

use crate::common::web::{answer_bytes, web_config_with, RawOrigin, WebClient};
use crate::common::*;

fn gzip(body: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(body).unwrap();
    e.finish().unwrap()
}

fn zlib(body: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(body).unwrap();
    e.finish().unwrap()
}

/// A page's answer: `fields`, then `body` in chunks of `chunk` bytes
/// (`Transfer-Encoding: chunked`).
fn chunked(fields: &[&[u8]], body: &[u8], chunk: usize) -> Vec<u8> {
    let mut out =
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n".to_vec();
    for field in fields {
        out.extend_from_slice(field);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    for piece in body.chunks(chunk) {
        out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// A site allowing everything whose `/page` answers `answer`.
async fn site(answer: Vec<u8>) -> RawOrigin {
    RawOrigin::start(move |path, _| match path {
        "/robots.txt" => b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec(),
        _ => answer.clone(),
    })
    .await
}

const HTML: &[u8] = b"content-type: text/html; charset=utf-8";

fn page(head: &str) -> Vec<u8> {
    format!("<!doctype html><html><head><title>t</title>{head}</head><body>THE-BODY</body></html>")
        .into_bytes()
}

/// The proxy, a bot `examplebot` declaring `uses` (TOML list items).
async fn proxy_for(uses: &str) -> robots_proxy::server::Proxy {
    start_proxy(web_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\ncontent_usage = [{uses}]\n"
    )))
    .await
}

/// What the crawler is told for `/page`, asking with `Accept-Encoding: gzip, deflate, br`.
async fn get(proxy: &robots_proxy::server::Proxy, origin: &RawOrigin) -> (u16, String) {
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let answer = client
        .get(
            &origin.url("/page"),
            &[("accept-encoding", "gzip, deflate, br")],
        )
        .await;
    (answer.status, answer.body)
}

#[tokio::test]
async fn a_page_s_own_refusal_is_not_relayed() {
    let noai = page(r#"<meta name="robots" content="noindex, noai">"#);
    let long_head = page(&format!(
        "<style>{}</style><meta name=robots content=noai>",
        "p{}".repeat(15_000)
    ));
    let rows: Vec<(&str, Vec<u8>)> = vec![
        ("robots noai", answer_bytes(&[HTML], &noai)),
        (
            "robots noimageai",
            answer_bytes(
                &[HTML],
                &page(r#"<meta name="robots" content="noimageai">"#),
            ),
        ),
        (
            "the bot's own name",
            answer_bytes(&[HTML], &page(r#"<META NAME="ExampleBot" CONTENT="noai">"#)),
        ),
        (
            "TDMRep",
            answer_bytes(
                &[HTML],
                &page(r#"<meta name="tdm-reservation" content="1">"#),
            ),
        ),
        (
            "character references",
            answer_bytes(&[HTML], &page(r#"<meta name='robots' content='no&#97;i'>"#)),
        ),
        (
            "gzip",
            answer_bytes(&[HTML, b"content-encoding: gzip"], &gzip(&noai)),
        ),
        (
            "deflate",
            answer_bytes(&[HTML, b"content-encoding: deflate"], &zlib(&noai)),
        ),
        ("untyped", answer_bytes(&[], &noai)),
        (
            "XHTML",
            answer_bytes(&[b"content-type: application/xhtml+xml"], &noai),
        ),
        ("a byte a chunk", chunked(&[HTML], &noai, 1)),
        (
            "gzip in 7-byte chunks",
            chunked(&[HTML, b"content-encoding: gzip"], &gzip(&noai), 7),
        ),
        ("after 45 KB of head", answer_bytes(&[HTML], &long_head)),
    ];
    let proxy = proxy_for("\"train-ai\"").await;
    for (row, answer) in rows {
        let origin = site(answer).await;
        let (status, body) = get(&proxy, &origin).await;
        assert_eq!(status, 403, "{row}: {body}");
        assert!(body.contains("<meta name="), "{row}: names the tag: {body}");
        assert!(!body.contains("THE-BODY"), "{row}");
        assert_eq!(origin.paths(), ["/robots.txt", "/page"], "{row}");
    }
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    assert_eq!(
        sample(&metrics, "robots_proxy_request_outcomes_total{bot=\"default\",outcome=\"response-preference\",protocol=\"http\"}"),
        Some(12.0)
    );
}

/// What a page does not say to this bot is relayed whole: a comment, a
/// script, another bot's name, a tag after the head, a reservation against a
/// search bot, a refusal past the prefix read (64 KiB).
#[tokio::test]
async fn what_the_page_does_not_say_to_the_bot_is_relayed_whole() {
    let past_prefix = page(&format!(
        "<style>{}</style><meta name=robots content=noai>",
        "p{}".repeat(23_000)
    ));
    let rows: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "a comment",
            "\"train-ai\"",
            page(r#"<!-- <meta name="robots" content="noai"> -->"#),
        ),
        (
            "a script",
            "\"train-ai\"",
            page(r#"<script>var m = '<meta name="robots" content="noai">';</script>"#),
        ),
        (
            "another bot",
            "\"train-ai\"",
            page(r#"<meta name="otherbot" content="noai">"#),
        ),
        (
            "in the body",
            "\"train-ai\"",
            b"<html><head></head><body><meta name=robots content=noai>THE-BODY".to_vec(),
        ),
        (
            "search",
            "\"search\"",
            page(r#"<meta name="tdm-reservation" content="1">"#),
        ),
        ("past the prefix", "\"train-ai\"", past_prefix),
        (
            "no use declared",
            "",
            page(r#"<meta name="robots" content="noai">"#),
        ),
    ];
    for (row, uses, body) in rows {
        let proxy = proxy_for(uses).await;
        let origin = site(answer_bytes(&[HTML], &body)).await;
        let (status, got) = get(&proxy, &origin).await;
        assert_eq!(status, 200, "{row}");
        assert_eq!(got.as_bytes(), body.as_slice(), "{row}: relayed whole");
    }
}

/// A bot that declares uses asks only for codings the proxy can read the
/// head in; one that declares none asks as its crawler did. A site that
/// answers in another coding anyway is not relayed to the first: `502`
/// saying why.
#[tokio::test]
async fn a_page_the_proxy_cannot_read_is_not_relayed_to_a_bot_that_declares_uses() {
    let brotli = answer_bytes(
        &[HTML, b"content-encoding: br"],
        b"\x1b\x03\x00\xf8\xa5\x40\x02",
    );
    let origin = site(brotli.clone()).await;
    let proxy = proxy_for("\"train-ai\"").await;
    let (status, body) = get(&proxy, &origin).await;
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("(br)"), "{body}");
    let asked = &origin.asked()[1];
    assert!(
        asked
            .to_ascii_lowercase()
            .contains("accept-encoding: gzip, deflate\r\n"),
        "{asked}"
    );
    let broken = site(answer_bytes(
        &[HTML, b"content-encoding: gzip"],
        b"not gzip",
    ))
    .await;
    let (status, body) = get(&proxy, &broken).await;
    assert_eq!(status, 502, "{body}");

    let origin = site(brotli).await;
    let proxy = proxy_for("").await;
    let (status, _) = get(&proxy, &origin).await;
    assert_eq!(status, 200, "no use declared: relayed as it came");
    let asked = &origin.asked()[1];
    assert!(
        asked
            .to_ascii_lowercase()
            .contains("accept-encoding: gzip, deflate, br\r\n"),
        "{asked}"
    );
}
