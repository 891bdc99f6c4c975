//! Shell completion from the user's side: bash, run on the script
//! `robots-proxy completions bash` prints, completes every subcommand's flags
//! and the values of those that have a known set (tests/packaging/complete
//! drives it as readline would). The interop suite runs the same cases in zsh
//! and fish.

use std::process::Command;

use clap::CommandFactory;
use robots_proxy::cli::Cli;

/// What bash completes for `words` (a command line as typed).
fn complete(words: &str) -> Vec<String> {
    let out = Command::new("tests/packaging/complete")
        .args(["bash", env!("CARGO_BIN_EXE_robots-proxy"), words])
        .output()
        .expect("tests/packaging/complete runs (bash)");
    assert!(
        out.status.success(),
        "{words}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn every_subcommand_completes_its_own_flags() {
    let cli = Cli::command();
    let subcommands: Vec<_> = cli.get_subcommands().collect();
    assert!(subcommands.len() >= 5);
    for sub in subcommands {
        let mut want: Vec<String> = sub
            .get_arguments()
            .filter_map(|a| a.get_long())
            .map(|long| format!("--{long}"))
            .chain(["--help".to_string()])
            .collect();
        want.sort();
        want.dedup();
        let got = complete(&format!("robots-proxy {} --", sub.get_name()));
        assert_eq!(got, want, "robots-proxy {} --<TAB>", sub.get_name());
    }
}

#[test]
fn values_with_a_known_set_complete() {
    for (words, want) in [
        (
            "robots-proxy ",
            &[
                "check",
                "completions",
                "help",
                "man",
                "run",
                "transparent-rules",
            ][..],
        ),
        ("robots-proxy tr", &["transparent-rules"]),
        ("robots-proxy run --gemini", &["--gemini-listen"]),
        ("robots-proxy run --log-format ", &["human", "json"]),
        (
            "robots-proxy run --virtual-agent ",
            &["archiver", "indexer", "researcher", "webproxy"],
        ),
        ("robots-proxy check --format ", &["json", "text"]),
        (
            "robots-proxy check --content-usage train",
            &["train-ai", "train-genai"],
        ),
        (
            "robots-proxy transparent-rules --syntax ",
            &["iptables", "nft"],
        ),
        (
            "robots-proxy completions ",
            &["bash", "elvish", "fish", "powershell", "zsh"],
        ),
    ] {
        let got = complete(words);
        assert!(
            want.iter().all(|w| got.contains(&w.to_string())),
            "{words}<TAB>: {got:?}, want {want:?}"
        );
    }
    // A free-form value (an address) is not completed with file names.
    assert_eq!(
        complete("robots-proxy run --gemini-listen "),
        Vec::<String>::new()
    );
}
