//! Configuration files: the commented example is valid and says the defaults;
//! every file under tests/data/config/invalid fails with the message its first
//! line expects (naming the key).

use std::path::Path;

use robots_proxy::cli::RunArgs;
use robots_proxy::config::RawConfig;

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
    assert_eq!(example.gemini_listen.to_string(), "127.0.0.1:1965");
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
    assert_eq!(config.gemini_listen.to_string(), "127.0.0.1:2000");
    assert_eq!(config.bot.token(), "examplebot");
    assert_eq!(config.bot.virtual_agents(), ["indexer"]);
    assert!(config.limits.allow_private_upstreams);
    let bad = RunArgs {
        agent: Some("a b".into()),
        ..RunArgs::default()
    };
    let err = RawConfig::default().resolve(&bad).unwrap_err().to_string();
    assert!(err.starts_with("--agent: "), "{err}");
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
    assert_eq!(format!("{again:?}"), format!("{config:?}"));
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
        assert_eq!(
            format!("{again:?}"),
            format!("{config:?}"),
            "{}",
            path.display()
        );
        checked += 1;
    }
    assert!(checked >= 2, "found only {checked} valid configs");
}
