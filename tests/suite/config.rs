//! Configuration files: the commented example is valid and says the defaults;
//! every file under tests/data/config/invalid fails with the message its first
//! line expects (naming the key).

use std::path::Path;

use clap::Parser;
use robots_proxy::cli::{Cli, Command, RunArgs};
use robots_proxy::config::RawConfig;
use robots_proxy::listener::Listener;

fn resolve(path: &Path) -> Result<robots_proxy::config::Config, String> {
    let flags = RunArgs::default();
    RawConfig::load(path)
        .and_then(|raw| raw.resolve(&flags))
        .map_err(|e| e.to_string())
}

#[test]
fn the_commented_example_is_valid_and_holds_the_defaults() {
    let example = resolve(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/robots-proxy.toml"
    )))
    .unwrap();
    let defaults = RawConfig::default().resolve(&RunArgs::default()).unwrap();
    // Config has no PartialEq (durations, paths...); its Debug form says everything.
    assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
    assert_eq!(
        example.listen.get(Listener::Gemini).unwrap().to_string(),
        "127.0.0.1:1965"
    );
}

#[test]
fn invalid_configs_fail_naming_the_key() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/config/invalid"
    ));
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| {
                panic!("{}: first line must be `# expect: MESSAGE`", path.display())
            });
        let err = resolve(&path).expect_err(&path.display().to_string());
        assert!(
            err.contains(expect),
            "{}: {err:?} should contain {expect:?}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 8, "found only {checked} invalid configs");
}

#[test]
fn flags_override_the_file() {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/robots-proxy.toml"
    ));
    let flags = RunArgs {
        gemini_listen: Some("127.0.0.1:2000".into()),
        agent: Some("examplebot".into()),
        virtual_agents: vec!["indexer".into()],
        allow_private_upstreams: true,
        ..RunArgs::default()
    };
    let config = RawConfig::load(path).unwrap().resolve(&flags).unwrap();
    assert_eq!(
        config.listen.get(Listener::Gemini).unwrap().to_string(),
        "127.0.0.1:2000"
    );
    assert_eq!(config.bots.get(0).profile.token(), "examplebot");
    assert_eq!(config.bots.get(0).profile.virtual_agents(), ["indexer"]);
    assert!(config.limits.allow_private_upstreams);
    let bad = RunArgs {
        agent: Some("a b".into()),
        ..RunArgs::default()
    };
    let err = RawConfig::default().resolve(&bad).unwrap_err().to_string();
    assert!(err.starts_with("--agent: "), "{err}");
}

/// A configuration as the file says it: what chose the state directory (the
/// file, once printed, where it was `$HOME` before) is left out.
fn same(mut config: robots_proxy::config::Config) -> String {
    config.state_dir_origin = "";
    format!("{config:?}")
}

/// `run --check-config` prints the effective configuration: a TOML file that,
/// read back, resolves to the same configuration.
#[test]
fn the_printed_effective_config_reads_back_the_same() {
    let flags = RunArgs {
        agent: Some("examplebot".into()),
        virtual_agents: vec!["indexer".into(), "archiver".into()],
        default_delay: Some("1500ms".into()),
        log_format: Some("json".into()),
        ..RunArgs::default()
    };
    let config = RawConfig::default().resolve(&flags).unwrap();
    let printed = config.to_toml();
    let again = RawConfig::parse(&printed)
        .unwrap()
        .resolve(&RunArgs::default())
        .unwrap();
    assert_eq!(same(again), same(config));
    assert!(printed.contains("default_delay = \"1500ms\""), "{printed}");
}

/// Every file under tests/data/config/valid resolves, and prints back the same.
#[test]
fn valid_configs_resolve() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/config/valid"
    ));
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let config = resolve(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let again = RawConfig::parse(&config.to_toml())
            .unwrap()
            .resolve(&RunArgs::default())
            .unwrap();
        assert_eq!(same(again), same(config), "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 2, "found only {checked} valid configs");
}

/// Values an operator might write by mistake, or an attacker who controls the
/// file might write on purpose: each is refused at the config boundary with
/// the key and the bound, rather than accepted and then panicking a clock, a
/// cache or a semaphore later.
#[test]
fn absurd_values_are_refused_naming_the_key_and_the_bound() {
    let cases = [
        ("[robots]\nttl = \"400000d\"", "robots.ttl: \"400000d\" is out of range: from 1s to 365d"),
        ("[robots]\nttl = \"0s\"", "robots.ttl: \"0s\" is out of range: from 1s to 365d"),
        ("[robots]\nmax_stale = \"1e30d\"", "robots.max_stale: invalid duration"),
        ("[robots]\nmax_stale = \"99999999999999999999d\"", "robots.max_stale: \"99999999999999999999d\" is out of range: at most 365d"),
        ("[robots]\nunreachable_retry = \"0s\"", "robots.unreachable_retry: \"0s\" is out of range: from 1s to 7d"),
        ("[robots]\nfetch_timeout = \"2h\"", "robots.fetch_timeout: \"2h\" is out of range: from 1ms to 1h"),
        ("[robots]\ncache_bytes = 9223372036854775807", "robots.cache_bytes: 9223372036854775807 is out of range: from 1048576 to 1099511627776"),
        ("[robots]\ncache_bytes = 1000", "robots.cache_bytes: 1000 is out of range"),
        ("[limits]\nmax_connections = 4611686018427387904", "limits.max_connections: 4611686018427387904 is out of range: from 1 to 1048576"),
        ("[limits]\nrequest_timeout = \"200000000000000d\"", "limits.request_timeout: \"200000000000000d\" is out of range: from 1ms to 1h"),
        ("[limits]\nconnect_timeout = \"0ms\"", "limits.connect_timeout: \"0ms\" is out of range"),
        ("[limits]\nidle_timeout = \"30d\"", "limits.idle_timeout: \"30d\" is out of range: from 1ms to 1d"),
        ("[limits]\nshutdown_grace = \"9999h\"", "limits.shutdown_grace: \"9999h\" is out of range: at most 1h"),
        ("[politeness]\nper_host_concurrency = 4294967296", "politeness.per_host_concurrency: 4294967296 is out of range: from 1 to 1024"),
        ("[politeness]\nper_host_concurrency = 0", "politeness.per_host_concurrency: 0 is out of range"),
        ("[politeness]\ndefault_delay = \"400000d\"", "politeness.default_delay: \"400000d\" is out of range: at most 1d"),
        ("[politeness]\nmin_delay = \"2d\"", "politeness.min_delay: \"2d\" is out of range: at most 1d"),
        ("[politeness]\nmax_delay = \"2d\"", "politeness.max_delay: \"2d\" is out of range: at most 1d"),
        ("[politeness]\nmax_wait = \"200000000000000d\"", "politeness.max_wait: \"200000000000000d\" is out of range: at most 1d"),
        ("[listen]\nmetrics = \"0.0.0.0:9770\"", "admin.allow_from: the admin listener is on 0.0.0.0:9770, reachable from other machines"),
        ("[listen]\nmetrics = \"[::]:9770\"", "admin.allow_from: the admin listener is on [::]:9770"),
        ("[admin]\nallow_from = [\"10.0.0.0/33\"]", "admin.allow_from: "),
        ("[admin]\nhosts = [\"evil.example:80\"]", "admin.hosts: \"evil.example:80\": a host name"),
        ("[admin]\nhosts = [\"\"]", "admin.hosts: \"\": a host name"),
        ("[metrics]\nper_host = true\nper_host_limit = 0", "metrics.per_host_limit: 0 is out of range: from 1 to 100000"),
        ("[metrics]\nper_host = true\nper_host_limit = 10000000", "metrics.per_host_limit: 10000000 is out of range"),
        ("[store]\nurl = \"redis://h:6379\"\ntimeout = \"2h\"", "store.timeout: \"2h\" is out of range: from 10ms to 1m"),
        ("[store]\nurl = \"redis://h:6379\"\ntimeout = \"0ms\"", "store.timeout: \"0ms\" is out of range"),
        ("[store]\nurl = \"redis://h:6379\"\nlease = \"100ms\"", "store.lease: \"100ms\" is out of range: from 1s to 1h"),
        ("[store]\nurl = \"redis://h:6379\"\nlease = \"99999999999999999999d\"", "store.lease: \"99999999999999999999d\" is out of range"),
        ("[store]\nurl = \"redis://h:6379\"\nprefix = \"a{b}\"", "store.prefix: \"a{b}\": at most 64 bytes"),
        ("[store]\nurl = \"redis://h:6379\"\nprefix = \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "store.prefix: "),
        ("[store]\nurl = \"redis://h:6379\"\non_unavailable = \"ignore\"", "store.on_unavailable: \"ignore\": use \"refuse\" or \"local\""),
        ("[store]\nurl = \"http://user:secret@h:6379\"", "store.url: \"http://***@h:6379\": write redis://host:port[/db], unix:///path/redis.sock, redis+cluster://host:port,… or redis+sentinel://host:port,…/MASTER_NAME"),
        ("[store]\nurl = \"redis+cluster://:secret@127.0.0.1\"", "store.url: \"redis+cluster://***@127.0.0.1\": \"127.0.0.1\" is no host:port; write redis+cluster://host:port,host:port,…"),
        ("[store]\nurl = \"redis+cluster://127.0.0.1:7000/0\"", "store.url: \"redis+cluster://127.0.0.1:7000/0\": a Cluster has no database"),
        ("[store]\nurl = \"redis+sentinel://127.0.0.1:26379\"", "store.url: \"redis+sentinel://127.0.0.1:26379\": no master name after the Sentinels (…/MASTER_NAME); write redis+sentinel://host:port,host:port,…/MASTER_NAME"),
        ("[store]\nurl = \"redis+sentinel://127.0.0.1:26379/x y\"", "store.url: "),
        ("[store]\nurl = \"redis://h:notaport\"", "store.url: "),
        ("[log]\nlevel = \"verbose\"", "log.level: \"verbose\" is not a level"),
        ("[log]\nlevel = \"robots_proxy=loud\"", "log.level: \"robots_proxy=loud\" is not a level"),
        ("[log]\nlevel = \"\"", "log.level: \"\" is not a level"),
    ];
    for (text, expect) in cases {
        let err = RawConfig::parse(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .resolve(&RunArgs::default())
            .expect_err(text)
            .to_string();
        assert!(
            err.starts_with(expect),
            "{text:?}: {err:?} should start with {expect:?}"
        );
    }
    // A flag names itself, not the key.
    let flag_error = |flags: RunArgs| {
        RawConfig::default()
            .resolve(&flags)
            .unwrap_err()
            .to_string()
    };
    let err = flag_error(RunArgs {
        max_wait: Some("200000000000000d".into()),
        ..RunArgs::default()
    });
    assert!(
        err.starts_with("--max-wait: \"200000000000000d\" is out of range"),
        "{err}"
    );
    let err = flag_error(RunArgs {
        store: Some("rediss://h:6379".into()),
        ..RunArgs::default()
    });
    assert!(
        err.starts_with("--store: \"rediss://h:6379\": write redis://"),
        "{err}"
    );
    let err = flag_error(RunArgs {
        metrics_listen: Some("0.0.0.0:9770".into()),
        ..RunArgs::default()
    });
    assert!(
        err.starts_with("admin.allow_from: the admin listener is on 0.0.0.0:9770"),
        "{err}"
    );
    // Said on purpose, either way, it starts.
    for admin in [
        "allow_from = [\"10.0.0.0/8\"]",
        "token = \"0123456789abcdef0123\"",
    ] {
        RawConfig::parse(&format!("[admin]\n{admin}"))
            .unwrap()
            .resolve(&RunArgs {
                metrics_listen: Some("0.0.0.0:9770".into()),
                ..RunArgs::default()
            })
            .unwrap();
    }
    // Levels and filters that mean something still pass.
    for level in ["warn", "DEBUG", "robots_proxy=debug,info", "off"] {
        let text = format!("[log]\nlevel = {level:?}");
        RawConfig::parse(&text)
            .unwrap()
            .resolve(&RunArgs::default())
            .unwrap();
    }
}

/// The binary: `--check-config` exits 2 on an absurd value and names it, and
/// prints SOCKS5 passwords as a placeholder.
/// No listener of the table is left open to other machines by accident: each
/// one crawlers use, put on every address while `access.allow_from` admits
/// only this machine, is refused naming it, by its key and by its flag.
#[test]
fn every_crawler_listener_on_a_public_address_needs_allow_from() {
    for &listener in Listener::ALL {
        let spec = listener.spec();
        if !spec.serves_crawlers {
            continue;
        }
        let name = spec.key.strip_prefix("listen.").unwrap();
        let expect = format!(
            "access.allow_from: the {} listener is on 0.0.0.0:4000, reachable from other machines",
            spec.title
        );
        let text =
            format!("[listen]\n{name} = \"0.0.0.0:4000\"\n[gopher]\npublic_host = \"proxy.lan\"\n");
        let err = RawConfig::parse(&text)
            .unwrap()
            .resolve(&RunArgs::default())
            .expect_err(&text)
            .to_string();
        assert!(err.starts_with(&expect), "{text:?}: {err}");
        let toml = "[gopher]\npublic_host = \"proxy.lan\"\n";
        let cli = Cli::try_parse_from(["robots-proxy", "run", spec.flag, "0.0.0.0:4000"]).unwrap();
        let Command::Run(flags) = cli.command else {
            panic!("{}: not `run`", spec.flag)
        };
        let err = RawConfig::parse(toml)
            .unwrap()
            .resolve(&flags)
            .expect_err(spec.flag)
            .to_string();
        assert!(err.starts_with(&expect), "{}: {err}", spec.flag);
    }
}

#[test]
fn check_config_refuses_absurd_values_and_redacts_passwords() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("check-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
            .args(["run", "--check-config", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    };
    let absurd = run("absurd.toml", "[robots]\nttl = \"400000d\"\n");
    assert_eq!(absurd.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&absurd.stderr);
    assert!(
        stderr.contains("robots.ttl: \"400000d\" is out of range: from 1s to 365d"),
        "{stderr}"
    );

    // Every problem in the file at once, not the first: keys that cannot be
    // read (each with its line), and each section's wrong value.
    let several = run(
        "several.toml",
        "[listen]\ngemini = \"not an address\"\n\n[bot]\nagent = \"examplebot\"\ncolour = \"blue\"\n\n\
         [politeness]\ndefault_delay = \"soon\"\nmax_wait = 12\n\n[limits]\nmax_connections = 0\n\n\
         [admin]\ntoken = \"short\"\n",
    );
    assert_eq!(several.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&several.stderr);
    assert!(
        stderr.contains("6 problems in the configuration:"),
        "{stderr}"
    );
    for said in [
        "TOML parse error at line 6, column 1",
        "unknown field `colour`",
        "TOML parse error at line 10, column 12",
        "a duration needs its unit",
        "- listen.gemini: invalid address \"not an address\"",
        "- limits.max_connections: 0 is out of range",
        "- politeness.default_delay: invalid duration \"soon\"",
        "- admin.token: 16 to 256 printable ASCII characters",
    ] {
        assert!(stderr.contains(said), "{said}: {stderr}");
    }
    // Several wrong values in one section: each said.
    let section = run(
        "section.toml",
        "[politeness]\ndefault_delay = \"soon\"\nmax_wait = \"2000d\"\nkey = \"street\"\n\
         [limits]\nmax_connections = 0\nidle_timeout = \"x\"\n",
    );
    let stderr = String::from_utf8_lossy(&section.stderr);
    assert!(
        stderr.contains("5 problems in the configuration:"),
        "{stderr}"
    );
    for key in [
        "politeness.default_delay",
        "politeness.max_wait",
        "politeness.key",
        "limits.max_connections",
        "limits.idle_timeout",
    ] {
        assert!(stderr.contains(&format!("- {key}: ")), "{key}: {stderr}");
    }
    // A syntax error ends the reading: what follows cannot be told apart.
    let broken = run(
        "broken.toml",
        "[bot\nagent = \"x\"\n[limits]\nmax_connections = 0\n",
    );
    let stderr = String::from_utf8_lossy(&broken.stderr);
    assert_eq!(broken.status.code(), Some(2));
    assert!(
        !stderr.contains("problems in the configuration"),
        "{stderr}"
    );
    assert!(stderr.contains("line 1"), "{stderr}");

    // No agent anywhere: it runs, and says what that means.
    let anonymous = run("anonymous.toml", "[robots]\nttl = \"1h\"\n");
    assert_eq!(anonymous.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&anonymous.stderr);
    assert!(
        stderr.contains("warning: bot \"default\" has no agent: robots.txt groups naming your crawler are not followed, only `User-agent: *`; set bot.agent (or --agent)"),
        "{stderr}"
    );
    let named = run("named.toml", "[bot]\nagent = \"examplebot\"\n");
    assert_eq!(named.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&named.stderr).contains("warning"));

    let users = run(
        "users.toml",
        "[socks5]\nusers = [{ name = \"crawler\", password = \"hunter2-secret\" }]\n",
    );
    assert_eq!(users.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&users.stdout);
    assert!(stdout.contains("name = \"crawler\""), "{stdout}");
    assert!(!stdout.contains("hunter2-secret"), "{stdout}");
    assert!(stdout.contains("(redacted)"), "{stdout}");

    let token = run(
        "token.toml",
        "[admin]\ntoken = \"hunter4-secret-0123456789\"\n",
    );
    assert_eq!(token.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&token.stdout);
    assert!(!stdout.contains("hunter4-secret"), "{stdout}");
    assert!(stdout.contains("token = \"<redacted>\""), "{stdout}");

    let store = run(
        "store.toml",
        "[store]\nurl = \"redis://:hunter3-secret@127.0.0.1:6379/1\"\n",
    );
    assert_eq!(store.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&store.stdout);
    assert!(
        stdout.contains("url = \"redis://***@127.0.0.1:6379/1\""),
        "{stdout}"
    );
    assert!(!stdout.contains("hunter3-secret"), "{stdout}");
}

/// The largest value of every bounded key is safe to run with: the proxy
/// starts, serves a request and shuts down (a bound that still panics
/// somewhere downstream would fail here).
#[tokio::test]
async fn the_proxy_runs_at_every_upper_bound() {
    let text = r#"
[listen]
gemini = "127.0.0.1:0"
gopher = "127.0.0.1:0"
metrics = "127.0.0.1:0"
[robots]
ttl = "365d"
max_stale = "365d"
unreachable_retry = "7d"
fetch_timeout = "1h"
cache_bytes = 1099511627776
[limits]
max_connections = 1048576
request_timeout = "1h"
connect_timeout = "1h"
idle_timeout = "1d"
shutdown_grace = "1h"
[politeness]
default_delay = "1d"
min_delay = "1d"
max_delay = "1d"
per_host_concurrency = 1024
max_wait = "1d"
[metrics]
per_host = true
per_host_limit = 100000
"#;
    let flags = RunArgs {
        state_dir: Some(
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("bounds-{}", std::process::id())),
        ),
        ..RunArgs::default()
    };
    let config = RawConfig::parse(text).unwrap().resolve(&flags).unwrap();
    let proxy = robots_proxy::server::Proxy::start(config).await.unwrap();
    // A Gopher request for an unreachable private address: refused at once
    // (private upstreams are not allowed), through politeness and the cache.
    let mut stream = tokio::net::TcpStream::connect(proxy.addr(Listener::Gopher))
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"gopher://127.0.0.1:1/1/\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with('3'), "{answer:?}");
    proxy.shutdown();
}

mod extremes {
    use super::*;
    use proptest::prelude::*;

    const DURATION_KEYS: &[(&str, &str)] = &[
        ("robots", "ttl"),
        ("robots", "max_stale"),
        ("robots", "unreachable_retry"),
        ("robots", "fetch_timeout"),
        ("limits", "request_timeout"),
        ("limits", "connect_timeout"),
        ("limits", "idle_timeout"),
        ("limits", "shutdown_grace"),
        ("politeness", "default_delay"),
        ("politeness", "min_delay"),
        ("politeness", "max_wait"),
    ];
    const COUNT_KEYS: &[(&str, &str)] = &[
        ("robots", "cache_bytes"),
        ("limits", "max_connections"),
        ("politeness", "per_host_concurrency"),
        ("limits", "worker_threads"),
    ];
    const YEAR: std::time::Duration = std::time::Duration::from_secs(365 * 86_400);

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Any number with any unit, in any duration key: either refused naming
        /// that key, or accepted as at most a year.
        #[test]
        fn any_duration_is_bounded_or_refused_by_name(
            key in proptest::sample::select(DURATION_KEYS),
            number in prop_oneof![any::<u64>().prop_map(|n| n.to_string()), "[0-9]{1,30}(\\.[0-9]{1,5})?"],
            unit in proptest::sample::select(&["ms", "s", "m", "h", "d", "", "x"][..]),
        ) {
            let text = format!("[{}]\n{} = \"{number}{unit}\"", key.0, key.1);
            match RawConfig::parse(&text).unwrap().resolve(&RunArgs::default()) {
                Err(e) => {
                    let e = e.to_string();
                    prop_assert!(e.starts_with(&format!("{}.{}: ", key.0, key.1)), "{e}");
                }
                Ok(c) => {
                    for d in [c.robots.ttl, c.robots.max_stale, c.robots.unreachable_retry,
                              c.robots.fetch_timeout, c.limits.request_timeout,
                              c.limits.connect_timeout, c.limits.idle_timeout,
                              c.limits.shutdown_grace, c.politeness.default_delay,
                              c.politeness.min_delay, c.politeness.max_wait] {
                        prop_assert!(d <= YEAR);
                    }
                }
            }
        }

        /// Any non-negative TOML integer in a count key: refused naming the key,
        /// or accepted within the bound docs/guide/configuration.md gives.
        #[test]
        fn any_count_is_bounded_or_refused_by_name(
            key in proptest::sample::select(COUNT_KEYS),
            n in prop_oneof![0i64..=i64::MAX, 0i64..5000],
        ) {
            let text = format!("[{}]\n{} = {n}", key.0, key.1);
            match RawConfig::parse(&text).unwrap().resolve(&RunArgs::default()) {
                Err(e) => {
                    let e = e.to_string();
                    prop_assert!(e.starts_with(&format!("{}.{}: {n} is out of range", key.0, key.1)), "{e}");
                }
                Ok(c) => {
                    prop_assert!(c.robots.cache_bytes <= 1 << 40);
                    prop_assert!(c.limits.max_connections <= 1 << 20);
                    prop_assert!(c.politeness.per_host_concurrency <= 1024);
                    prop_assert!(c.limits.worker_threads.unwrap_or(1) <= 1024);
                }
            }
        }
    }
}

/// A listener that cannot bind is named, with its key.
#[tokio::test]
async fn a_bind_error_names_the_listener() {
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = taken.local_addr().unwrap().port();
    let flags = RunArgs {
        gemini_listen: Some("127.0.0.1:0".into()),
        gopher_listen: Some(format!("127.0.0.1:{port}")),
        metrics_listen: Some("127.0.0.1:0".into()),
        state_dir: Some(
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
                .join(format!("bind-{}", std::process::id())),
        ),
        ..RunArgs::default()
    };
    let config = RawConfig::default().resolve(&flags).unwrap();
    let err = match robots_proxy::server::Proxy::start(config).await {
        Ok(_) => panic!("the port is taken"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.starts_with(&format!(
            "the Gopher listener (listen.gopher) cannot listen on 127.0.0.1:{port}: "
        )),
        "{err}"
    );
    assert!(
        err.ends_with(&format!(
            "; another program listens there (`ss -ltnp 'sport = :{port}'` names it)"
        )),
        "{err}"
    );
}

/// `--check-config` checks what start-up would meet before binding: the
/// certificate files `[tls]` names, the extra roots files (`http.extra_roots`,
/// `--extra-roots`) and the state directory, each error naming the key or
/// flag to change, with exit 2.
#[test]
fn check_config_checks_files_and_the_state_directory() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("preflight-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let check = |args: &[&str], env: &[(&str, Option<&str>)]| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"));
        command.args(["run", "--check-config"]).args(args);
        for (name, value) in env {
            match value {
                Some(v) => command.env(name, v),
                None => command.env_remove(name),
            };
        }
        let out = command.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let state = dir.join("state");
    let state = state.to_str().unwrap();

    // An extra roots file that is missing, by the key and by the flag; one
    // that holds no certificate.
    let roots = dir.join("roots-missing.toml");
    std::fs::write(&roots, "[http]\nextra_roots = [\"/nonexistent/ca.pem\"]\n").unwrap();
    let (code, err) = check(
        &["--state-dir", state, "--config", roots.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("http.extra_roots: /nonexistent/ca.pem"),
        "{err}"
    );
    let (code, err) = check(
        &[
            "--state-dir",
            state,
            "--extra-roots",
            "/nonexistent/flag.pem",
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--extra-roots: /nonexistent/flag.pem"),
        "{err}"
    );
    let text = dir.join("not-pem.pem");
    std::fs::write(&text, "just text\n").unwrap();
    let (code, err) = check(
        &[
            "--state-dir",
            state,
            "--extra-roots",
            text.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--extra-roots: ") && err.contains("no certificate"),
        "{err}"
    );

    let missing = dir.join("tls-missing.toml");
    std::fs::write(
        &missing,
        "[tls]\ncert = \"/nonexistent/cert.pem\"\nkey = \"/nonexistent/key.pem\"\n",
    )
    .unwrap();
    let (code, err) = check(
        &["--state-dir", state, "--config", missing.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("tls.cert: /nonexistent/cert.pem: No such file"),
        "{err}"
    );

    // A key that is not the certificate's.
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("other-key.pem"), other.serialize_pem()).unwrap();
    // A config naming `cert` and `key` in `dir` for [tls].
    let tls_config = |name: &str, cert: &str, key: &str| {
        let path = dir.join(name);
        let text = format!(
            "[tls]\ncert = \"{}\"\nkey = \"{}\"\n",
            dir.join(cert).display(),
            dir.join(key).display()
        );
        std::fs::write(&path, text).unwrap();
        path
    };
    let mismatched = tls_config("tls-mismatched.toml", "cert.pem", "other-key.pem");
    let (code, err) = check(
        &[
            "--state-dir",
            state,
            "--config",
            mismatched.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("tls.cert and tls.key: "), "{err}");
    assert!(
        err.contains(&format!(
            "the key in {} must be the private key of the first certificate in {}",
            dir.join("other-key.pem").display(),
            dir.join("cert.pem").display()
        )),
        "{err}"
    );
    assert!(
        err.contains("or remove tls.cert and tls.key to use the certificate the proxy generates"),
        "{err}"
    );
    // The two files swapped: each error says what the file holds instead.
    let swapped = tls_config("tls-swapped.toml", "other-key.pem", "cert.pem");
    let (code, err) = check(
        &["--state-dir", state, "--config", swapped.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("tls.cert: ")
            && err.contains("no certificate in the file; it holds a private key: are tls.cert and tls.key swapped?"),
        "{err}"
    );

    // A state directory that cannot be made (a file is in its way).
    let blocked = dir.join("a-file");
    std::fs::write(&blocked, "").unwrap();
    let inside = blocked.join("state");
    let (code, err) = check(&["--state-dir", inside.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--state-dir: the state directory")
            && err.contains("give one the proxy's user can write with --state-dir DIR"),
        "{err}"
    );
    // No HOME and no XDG_STATE_HOME: no default, said, rather than the working directory.
    let (code, err) = check(&[], &[("HOME", None), ("XDG_STATE_HOME", None)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("state_dir: neither HOME nor XDG_STATE_HOME is set"),
        "{err}"
    );
    // The default under HOME, made when it can be.
    let home = dir.join("home");
    let (code, err) = check(
        &[],
        &[
            ("HOME", Some(home.to_str().unwrap())),
            ("XDG_STATE_HOME", None),
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(home.join(".local/state/robots-proxy").is_dir());
}

/// A file of nothing but wrong keys is read to a bounded list of errors,
/// each on its line; a multi-line value in error ends the reading.
#[test]
fn every_unreadable_key_is_reported_up_to_a_bound() {
    let text: String = (0..200).map(|i| format!("key{i} = {i}\n")).collect();
    let (raw, errors) = RawConfig::parse_all(&text);
    assert!(raw.is_none());
    assert_eq!(errors.len(), 50);
    assert!(errors[49].contains("line 50"), "{}", errors[49]);
    let (raw, errors) = RawConfig::parse_all("[bot]\nagent = \"a\"\nwhat = 1\n[robots]\nttl = 5\n");
    assert_eq!(errors.len(), 2, "{errors:?}");
    let raw = raw.expect("the rest of the file, read, for its values to be checked");
    assert_eq!(raw.bot.unwrap().agent.as_deref(), Some("a"));
    let (raw, errors) = RawConfig::parse_all("[bot]\nagent = \"a\"\nwhat = [\n 1,\n 2]\n");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(raw.is_none());
}

/// The shipped examples (config/examples/) are valid, run as written, and
/// print back the same.
#[test]
fn the_shipped_example_configs_resolve() {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/config/examples"));
    let mut checked = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let config = resolve(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            config.warnings().is_empty(),
            "{}: {:?}",
            path.display(),
            config.warnings()
        );
        let again = RawConfig::parse(&config.to_toml())
            .unwrap()
            .resolve(&RunArgs::default())
            .unwrap();
        assert_eq!(same(again), same(config), "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 1);
}

/// Any listener can be turned off: `"off"`, `false` or `""` in `[listen]`,
/// `off` for its flag; `--check-config` prints `"off"` for one that is on by
/// default, and that reads back the same. The web-only example has only the
/// HTTP listener and the admin one.
#[test]
fn any_listener_can_be_turned_off() {
    use robots_proxy::listener::Listener;
    let raw =
        "[listen]\ngemini = false\ngopher = \"off\"\nmetrics = \"\"\nhttp = \"127.0.0.1:3129\"\n";
    let config = RawConfig::parse(raw)
        .unwrap()
        .resolve(&RunArgs::default())
        .unwrap();
    let on: Vec<Listener> = config.listen.iter().map(|(l, _)| l).collect();
    assert_eq!(on, [Listener::Http]);
    let printed = config.to_toml();
    assert!(printed.contains("gemini = \"off\""), "{printed}");
    let again = RawConfig::parse(&printed)
        .unwrap()
        .resolve(&RunArgs::default())
        .unwrap();
    assert_eq!(same(again), same(config));
    let flags = RunArgs {
        gopher_listen: Some("off".into()),
        ..RunArgs::default()
    };
    let config = RawConfig::default().resolve(&flags).unwrap();
    assert_eq!(config.listen.get(Listener::Gopher), None);
    assert!(config.listen.get(Listener::Gemini).is_some());
    let err = RawConfig::parse("[listen]\ngemini = true\n").expect_err("true");
    assert!(
        err.to_string().contains("false (\"off\") to turn it off"),
        "{err}"
    );
    let example = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/config/examples/web-only.toml"
    ));
    let config = resolve(example).unwrap();
    let on: Vec<Listener> = config.listen.iter().map(|(l, _)| l).collect();
    assert_eq!(on, [Listener::Http, Listener::Admin]);
    let again = RawConfig::parse(&config.to_toml())
        .unwrap()
        .resolve(&RunArgs::default())
        .unwrap();
    assert_eq!(same(again), same(config));
}
