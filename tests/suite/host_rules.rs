//! `[[hosts]]`: the operator's limits at particular hosts, for every bot: a
//! floor under the spacing there and a daily budget, the most specific
//! entry holding, reloadable; other hosts untouched.

use std::time::Duration;

use robots_proxy::listener::Listener;

use crate::common::*;

/// Page starts at `origin`, robots.txt left out, in order.
fn page_gaps(origin: &Origin) -> Vec<f64> {
    let starts: Vec<std::time::Instant> = origin
        .arrivals
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, url)| !url.ends_with("/robots.txt"))
        .map(|(t, _)| *t)
        .collect();
    starts
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_secs_f64())
        .collect()
}

/// A host's `min_delay` spaces every request there, robots.txt asking for
/// nothing; another host is not held; the status page says where the
/// spacing comes from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_s_min_delay_spaces_every_request_there() {
    let slow = open_capsule_on(machine(1)).await;
    let other = open_capsule_on(machine(2)).await;
    let config = test_config_with(
        "[bot]\nagent = \"examplebot\"\n\n[[hosts]]\nhost = \"127.0.0.1\"\nmin_delay = \"300ms\"\n",
    );
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    let mut tasks = Vec::new();
    for i in 0..3 {
        for origin in [&slow, &other] {
            let url = origin.url(&format!("/{i}"));
            tasks.push(tokio::spawn(async move { gemini(addr, &url).await.0 }));
        }
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), "20 text/gemini");
    }
    let gaps = page_gaps(&slow);
    assert_eq!(gaps.len(), 2);
    assert_spaced(&gaps, 0.3);
    assert!(
        page_gaps(&other).iter().all(|g| *g < 0.3),
        "another host is not held: {:?}",
        page_gaps(&other)
    );
    let (_, body) = http(proxy.addr(Listener::Admin), "GET", "/api/status", &[], "").await;
    let s: robots_proxy::admin::model::Status = serde_json::from_str(&body).unwrap();
    let row = s.hosts.iter().find(|h| h.port == slow.addr.port()).unwrap();
    let spacing = row.spacing.as_ref().unwrap().get("default").unwrap();
    assert_eq!(
        (spacing.seconds, spacing.from.as_str()),
        (0.3, "the host's min_delay ([[hosts]])")
    );
}

/// A host's daily budget holds every bot there, one without a budget of
/// its own too; with both, the smaller; other hosts are not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_s_daily_budget_holds_every_bot_there() {
    let small = open_capsule_on(machine(1)).await;
    let other = open_capsule_on(machine(2)).await;
    let mut config = test_config_with(
        "[bot]\nagent = \"examplebot\"\n\n\
         [[bots]]\nname = \"frugal\"\nagent = \"frugalbot\"\ndaily_requests_per_server = 1\nclients = [\"127.0.0.2/32\"]\n\n\
         [[hosts]]\nhost = \"127.0.0.1\"\ndaily_requests_per_server = 2\n",
    );
    config.politeness.max_wait = Duration::from_millis(200);
    let proxy = start_proxy(config).await;
    let addr = proxy.addr(Listener::Gemini);
    for i in 0..2 {
        let url = small.url(&format!("/{i}"));
        assert_eq!(gemini(addr, &url).await.0, "20 text/gemini");
    }
    let (header, _) = gemini(addr, &small.url("/2")).await;
    assert!(header.starts_with("44 "), "the host's budget: {header}");
    for i in 0..3 {
        let url = other.url(&format!("/{i}"));
        assert_eq!(gemini(addr, &url).await.0, "20 text/gemini", "another host");
    }
    // The bot with a budget of 1 of its own: the smaller holds.
    let url = small.url("/frugal-1");
    assert_eq!(
        gemini_as(addr, &url, "127.0.0.2", None).await.0,
        "20 text/gemini"
    );
    let url = small.url("/frugal-2");
    let (header, _) = gemini_as(addr, &url, "127.0.0.2", None).await;
    assert!(
        header.starts_with("44 "),
        "the bot's own, smaller: {header}"
    );
    assert_eq!(small.count("/2") + small.count("/frugal-2"), 0);
}

/// A reload adds an entry: the next requests there are spaced by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_host_entry() {
    let origin = open_capsule_on(machine(1)).await;
    let config = test_config_with("[bot]\nagent = \"examplebot\"\n");
    let proxy = start_proxy(config.clone()).await;
    let addr = proxy.addr(Listener::Gemini);
    assert_eq!(
        gemini(addr, &origin.url("/before")).await.0,
        "20 text/gemini"
    );
    let mut reloaded = test_config_with(
        "[bot]\nagent = \"examplebot\"\n\n[[hosts]]\nhost = \"*.localhost\"\nmin_delay = \"1s\"\n\n\
         [[hosts]]\nhost = \"127.0.0.1\"\ndaily_requests_per_server = 1\n",
    );
    reloaded.state_dir = config.state_dir.clone();
    reloaded.politeness.max_wait = Duration::from_millis(200);
    proxy.reload(reloaded).await.unwrap();
    assert_eq!(
        gemini(addr, &origin.url("/after-1")).await.0,
        "20 text/gemini"
    );
    let (header, _) = gemini(addr, &origin.url("/after-2")).await;
    assert!(header.starts_with("44 "), "{header}");
}

/// What cannot be an entry is refused at start, naming the key.
#[test]
fn silly_entries_are_refused_naming_the_key() {
    for (entry, said) in [
        (
            "host = \"exa mple\"\nmin_delay = \"1s\"",
            "hosts.host: \"exa mple\"",
        ),
        (
            "host = \"a.example\"",
            "hosts: a.example: set min_delay or daily_requests_per_server",
        ),
        (
            "host = \"a.example\"\nmin_delay = \"400d\"",
            "hosts.min_delay",
        ),
        (
            "host = \"a.example\"\ndaily_requests_per_server = 0",
            "hosts.daily_requests_per_server: 0 is out of range",
        ),
        ("host = \"*.1.2.3.4\"\nmin_delay = \"1s\"", "hosts.host"),
    ] {
        let text = format!("[[hosts]]\n{entry}\n");
        let err = robots_proxy::config::RawConfig::parse(&text)
            .unwrap()
            .resolve(&robots_proxy::cli::RunArgs::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(said), "{entry}: {err}");
    }
    let twice = "[[hosts]]\nhost = \"A.example\"\nmin_delay = \"1s\"\n[[hosts]]\nhost = \"a.example.\"\nmin_delay = \"2s\"\n";
    let err = robots_proxy::config::RawConfig::parse(twice)
        .unwrap()
        .resolve(&robots_proxy::cli::RunArgs::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hosts.host: a.example is listed twice"),
        "{err}"
    );
}
