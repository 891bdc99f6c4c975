//! `[limits] deny_hosts`: hosts the proxy never contacts (robots.txt
//! included), whichever way a crawler spells them or comes in: a name, a
//! name and everything under it, an address range a name resolves into.
//! Counted under their own outcome; a reload adds to the list.

use robots_proxy::listener::Listener;

use crate::common::web::{raw_exchange, web_config_with, WebClient, WebOrigin};
use crate::common::*;

fn denying(list: &str) -> robots_proxy::config::Config {
    web_config_with(&format!(
        "[bot]\nagent = \"examplebot\"\n[limits]\ndeny_hosts = [{list}]\n"
    ))
}

/// Every spelling of a denied name, and every address form in a denied
/// range, is refused with 403 naming the entry; the site never sees a
/// request, robots.txt included; each is counted as `deny-hosts`.
#[tokio::test]
async fn a_denied_host_is_never_contacted_however_it_is_spelled() {
    let origin = WebOrigin::site("User-agent: *\nAllow: /\n").await;
    let port = origin.addr.port();
    let proxy = start_proxy(denying("\"localhost\", \"127.0.0.0/8\", \"::1\"")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let spellings = [
        format!("http://localhost:{port}/a"),
        format!("http://LocalHost.:{port}/a"),
        format!("http://127.0.0.1:{port}/a"),
        format!("http://2130706433:{port}/a"),
        format!("http://0x7f.1:{port}/a"),
        format!("http://[::ffff:127.0.0.1]:{port}/a"),
        format!("http://[::1]:{port}/a"),
    ];
    for url in &spellings {
        let answer = client.get(url, &[]).await;
        assert_eq!(answer.status, 403, "{url}: {answer:?}");
        assert!(
            answer
                .body
                .contains("is never contacted through this proxy (limits.deny_hosts: "),
            "{url}: {}",
            answer.body
        );
    }
    assert!(origin.targets().is_empty(), "{:?}", origin.targets());
    let metrics = settled_metrics(proxy.addr(Listener::Admin)).await;
    let counted = sample(
        &metrics,
        "robots_proxy_request_outcomes_total{bot=\"default\",outcome=\"deny-hosts\",protocol=\"http\"}",
    );
    assert_eq!(counted, Some(spellings.len() as f64), "{metrics}");
}

/// `*.name` is the name and everything under it; a name beside it is not.
#[tokio::test]
async fn a_starred_name_covers_the_name_and_everything_under_it() {
    let origin = WebOrigin::site("User-agent: *\nAllow: /\n").await;
    let port = origin.addr.port();
    let proxy = start_proxy(denying("\"*.localhost\"")).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    for host in ["localhost", "a.localhost", "b.a.LOCALHOST."] {
        let url = format!("http://{host}:{port}/a");
        assert_eq!(client.get(&url, &[]).await.status, 403, "{url}");
    }
    // An address literal is not under the name: allowed, and fetched.
    let answer = client.get(&origin.url("/a"), &[]).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(origin.targets(), ["/robots.txt", "/a"]);
}

/// CONNECT, Gemini and SOCKS5 meet the same list: the tunnel is refused
/// before it opens, the Gemini request gets a refusal, the SOCKS5 CONNECT
/// "not allowed by ruleset".
#[tokio::test]
async fn every_way_in_meets_the_list() {
    let capsule = capsule(
        text("20 text/plain", "User-agent: *\nAllow: /\n"),
        text("20 text/gemini", "page"),
    )
    .await;
    let mut config = denying("\"127.0.0.1\"");
    config
        .listen
        .set(Listener::Socks5, Some("127.0.0.1:0".parse().unwrap()));
    let proxy = start_proxy(config).await;
    let raw = raw_exchange(
        proxy.addr(Listener::Http),
        b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n",
    )
    .await;
    assert!(raw.starts_with("HTTP/1.1 403"), "{raw}");
    let (status, _) = gemini(proxy.addr(Listener::Gemini), &capsule.url("/a")).await;
    assert!(status.starts_with("53 "), "{status}");
    assert!(status.contains("limits.deny_hosts"), "{status}");
    assert_eq!(capsule.all(), Vec::<String>::new());
    let (_, reply) = socks_connect(proxy.addr(Listener::Socks5), "127.0.0.1", 1965, None).await;
    assert_eq!(reply, 0x02, "not allowed by ruleset");
}

/// The list is reloadable: a host added is refused from the next request,
/// the robots.txt already cached notwithstanding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_host_to_the_list() {
    let origin = WebOrigin::site("User-agent: *\nAllow: /\n").await;
    let config = web_config_with("[bot]\nagent = \"examplebot\"\n");
    let proxy = start_proxy(config.clone()).await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/a"), &[]).await.status, 200);
    let mut denied = denying("\"127.0.0.1\"");
    denied.state_dir = config.state_dir.clone();
    proxy.reload(denied).await.unwrap();
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/b"), &[]).await.status, 403);
    assert_eq!(origin.targets(), ["/robots.txt", "/a"]);
}

/// What cannot be a host or a range is refused at start, naming the entry.
#[test]
fn a_silly_list_is_refused_naming_the_entry() {
    for (entry, said) in [
        ("\"exa mple.com\"", "\"exa mple.com\": a host name"),
        ("\"10.0.0.1/8\"", "10.0.0.1/8"),
        ("\"*.\"", "\"*.\": a host name"),
    ] {
        let text = format!("[limits]\ndeny_hosts = [{entry}]\n");
        let err = robots_proxy::config::RawConfig::parse(&text)
            .unwrap()
            .resolve(&robots_proxy::cli::RunArgs::default())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("limits.deny_hosts: "), "{err}");
        assert!(err.contains(said), "{entry}: {err}");
    }
}
