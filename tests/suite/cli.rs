//! `robots-proxy check`, the command-line contract of design.md: output lines,
//! `--explain`, `--format json`, `--crawl-delay`, `--targets-from`, exit codes.
//!
//! Most cases run in-process; a few run the built binary, because the exit code
//! and the messages on stderr are part of the contract.

use std::io::Cursor;
use std::path::PathBuf;

use crate::common::binary;
use clap::Parser;
use robots_proxy::check;
use robots_proxy::cli::{Cli, Command as Sub};

const ROBOTS: &str = "\
User-agent: examplebot
Disallow: /private
Allow: /private/open
Crawl-delay: 2.5

Virtual-agent: indexer
Disallow: /noindex

User-agent: *
Disallow: /
";

/// A file under the target directory, unique to the test that writes it.
fn temp_file(name: &str, content: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("cli-{}-{name}", std::process::id()));
    std::fs::write(&path, content).unwrap();
    path
}

/// Runs `check` in-process; returns (stdout, exit code) or the error message.
fn check_in_process(args: &[&str], stdin: &str) -> Result<(String, u8), String> {
    let cli = Cli::try_parse_from(std::iter::once("robots-proxy").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    let Sub::Check(args) = cli.command else {
        return Err("not a check command".to_string());
    };
    let mut out = Vec::new();
    let outcome = check::run(&args, &mut Cursor::new(stdin.as_bytes()), &mut out)
        .map_err(|e| e.to_string())?;
    Ok((
        String::from_utf8(out).unwrap(),
        u8::from(outcome.errors > 0),
    ))
}

/// `check --robots - --agent AGENT REST…` with `robots` on standard input.
fn check_stdin(robots: &str, agent: &str, rest: &[&str]) -> (String, u8) {
    let args: Vec<&str> = ["check", "--robots", "-", "--agent", agent]
        .iter()
        .copied()
        .chain(rest.iter().copied())
        .collect();
    check_in_process(&args, robots).unwrap()
}

#[test]
fn one_line_per_target_for_paths_selectors_and_urls() {
    let robots = temp_file("robots.txt", ROBOTS);
    let r = robots.to_str().unwrap();
    let (out, code) = check_in_process(
        &[
            "check",
            "--robots",
            r,
            "--agent",
            "ExampleBot/1.0",
            "/private/x",
            "/private/open/y",
            "gemini://Example.ORG:1965/a/../%70rivate",
            "gopher://example.org/1/private",
            "https://example.org/public?x#frag",
            "private",
        ],
        "",
    )
    .unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "disallow\t/private/x\n\
         allow\t/private/open/y\n\
         disallow\tgemini://Example.ORG:1965/a/../%70rivate\n\
         disallow\tgopher://example.org/1/private\n\
         allow\thttps://example.org/public?x#frag\n\
         allow\tprivate\n"
    );
}

#[test]
fn explain_names_group_and_rule_with_lines() {
    let (out, _) = check_stdin(
        ROBOTS,
        "otherbot",
        &[
            "--virtual-agent",
            "indexer",
            "--explain",
            "/noindex/a",
            "/b",
        ],
    );
    assert_eq!(
        out,
        "disallow\t/noindex/a\tgroup indexer [virtual agent] (line 6)\trule Disallow: /noindex (line 7)\n\
         allow\t/b\tgroup indexer [virtual agent] (line 6)\tno rule matches\n"
    );
}

#[test]
fn crawl_delay_line() {
    let (out, _) = check_stdin(ROBOTS, "examplebot", &["--crawl-delay"]);
    assert_eq!(out, "crawl-delay\t2.5\n");
    let (out, _) = check_stdin(ROBOTS, "otherbot", &["--crawl-delay", "/x"]);
    assert_eq!(out, "disallow\t/x\ncrawl-delay\tnone\n");
}

#[test]
fn json_format() {
    let (out, _) = check_stdin(
        ROBOTS,
        "examplebot",
        &[
            "--format",
            "json",
            "--crawl-delay",
            "/private/z",
            "gemini://h/ok",
        ],
    );
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["target"], "/private/z");
    assert_eq!(lines[0]["decision"], "disallow");
    assert_eq!(lines[0]["group"]["name"], "examplebot");
    assert_eq!(lines[0]["group"]["lines"], serde_json::json!([1]));
    assert_eq!(
        lines[0]["rule"],
        serde_json::json!({"kind": "disallow", "pattern": "/private", "line": 2})
    );
    assert_eq!(lines[1]["decision"], "allow");
    assert_eq!(lines[1]["path"], "/ok");
    assert_eq!(lines[1]["rule"], serde_json::Value::Null);
    assert_eq!(lines[2], serde_json::json!({"crawl_delay": 2.5}));
}

#[test]
fn targets_from_file_and_stdin() {
    let robots = temp_file("robots-tf.txt", ROBOTS);
    let list = temp_file("targets.txt", "/private/a\r\n\n/private/open\n/elsewhere");
    let (out, _) = check_in_process(
        &[
            "check",
            "--robots",
            robots.to_str().unwrap(),
            "--agent",
            "examplebot",
            "--targets-from",
            list.to_str().unwrap(),
            "/first",
        ],
        "",
    )
    .unwrap();
    assert_eq!(
        out,
        "allow\t/first\ndisallow\t/private/a\nallow\t/private/open\nallow\t/elsewhere\n"
    );
    let (out, _) = check_in_process(
        &[
            "check",
            "--robots",
            robots.to_str().unwrap(),
            "--agent",
            "examplebot",
            "--targets-from",
            "-",
        ],
        "/private\n",
    )
    .unwrap();
    assert_eq!(out, "disallow\t/private\n");
}

#[test]
fn bad_target_gets_an_error_line_and_exit_1() {
    let (out, code) = check_stdin(ROBOTS, "examplebot", &["ftp://h/x", "/ok"]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "error\tftp://h/x\tunsupported scheme \"ftp\"\nallow\t/ok\n"
    );
}

#[test]
fn usage_errors_name_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "check",
                "--robots",
                "/nonexistent/robots.txt",
                "--agent",
                "b",
                "/",
            ],
            "--robots /nonexistent/robots.txt",
        ),
        (
            &["check", "--robots", "-", "--agent", "Foo Bar", "/"],
            "--agent",
        ),
        (
            &[
                "check",
                "--robots",
                "-",
                "--agent",
                "b",
                "--virtual-agent",
                "two words",
                "/",
            ],
            "--virtual-agent",
        ),
        (
            &[
                "check",
                "--robots",
                "-",
                "--agent",
                "b",
                "--targets-from",
                "-",
            ],
            "standard input",
        ),
        (&["check", "--robots", "-", "--agent", "b"], "no targets"),
        (&["check", "--agent", "b", "/"], "--robots"),
        (
            &[
                "check", "--robots", "-", "--agent", "b", "--format", "xml", "/",
            ],
            "--format",
        ),
    ];
    for (args, needle) in cases {
        let err = check_in_process(args, "").expect_err(needle);
        assert!(
            err.contains(needle),
            "{args:?}: {err:?} should mention {needle:?}"
        );
    }
}

#[test]
fn binary_exit_codes_and_streams() {
    let ok = binary(
        &[
            "check",
            "--robots",
            "-",
            "--agent",
            "examplebot",
            "/private",
            "/x",
        ],
        ROBOTS,
    );
    assert_eq!(ok.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "disallow\t/private\nallow\t/x\n"
    );

    let missing = binary(
        &[
            "check",
            "--robots",
            "/nonexistent/robots.txt",
            "--agent",
            "b",
            "/",
        ],
        "",
    );
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("--robots /nonexistent/robots.txt"),
        "{stderr}"
    );
    assert!(missing.stdout.is_empty());

    let bad_flag = binary(&["check", "--robots", "-", "--agent", "Foo Bar", "/"], "");
    assert_eq!(bad_flag.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad_flag.stderr).contains("--agent"));

    let bad_target = binary(
        &["check", "--robots", "-", "--agent", "b", "gemini://a b/"],
        "",
    );
    assert_eq!(bad_target.status.code(), Some(1));
}

#[test]
fn huge_and_binary_robots_files_are_handled() {
    // 2 MiB of junk after a real group: only the first 500 KiB is read and parsed.
    let mut big = String::from("User-agent: *\nDisallow: /private\n");
    while big.len() < 2 * 1024 * 1024 {
        big.push_str("\u{0}\u{1}garbage \u{ff} line that means nothing\n");
    }
    big.push_str("Disallow: /beyond-the-limit\n");
    let path = temp_file("big-robots.txt", &big);
    let (out, _) = check_in_process(
        &[
            "check",
            "--robots",
            path.to_str().unwrap(),
            "--agent",
            "b",
            "/private",
            "/beyond-the-limit",
        ],
        "",
    )
    .unwrap();
    assert_eq!(out, "disallow\t/private\nallow\t/beyond-the-limit\n");
}

/// A target is a URL only when it starts with an RFC 3986 scheme and `://`;
/// a path or selector holding `://` later is decided as written.
#[test]
fn a_target_is_a_url_only_when_it_starts_with_a_scheme() {
    let robots = "User-agent: *\nDisallow: /a/\nDisallow: URL:\n";
    let (out, code) = check_stdin(
        robots,
        "bot",
        &[
            "/a/TEXT%20http://x/",
            "URL:http://x/",
            "/b/http://x/",
            "svn+ssh://h/a/x",
        ],
    );
    assert_eq!(
        (out.as_str(), code),
        (
            "disallow\t/a/TEXT%20http://x/\ndisallow\tURL:http://x/\nallow\t/b/http://x/\n\
             error\tsvn+ssh://h/a/x\tunsupported scheme \"svn+ssh\"\n",
            1
        )
    );
}

/// An empty `--agent`: no own group, so the virtual agents' groups and `*` apply.
#[test]
fn an_empty_agent_is_accepted() {
    let (out, code) = check_stdin(ROBOTS, "", &["/private/x", "/about"]);
    assert_eq!(
        (out.as_str(), code),
        ("disallow\t/private/x\ndisallow\t/about\n", 0)
    );
    let (out, _) = check_stdin(
        ROBOTS,
        "",
        &["--virtual-agent", "indexer", "/private/x", "/noindex/y"],
    );
    assert_eq!(out, "allow\t/private/x\ndisallow\t/noindex/y\n");
}

/// `transparent-rules` prints rules for the config `run` would use, and refuses
/// (exit 2, naming what to set) rules that would loop or catch nothing.
#[test]
fn transparent_rules_follow_the_config_and_refuse_loops() {
    let rules = binary(
        &[
            "transparent-rules",
            "--transparent-listen",
            "127.0.0.1:8965",
            "--upstream-mark",
            "0x2a",
        ],
        "",
    );
    assert_eq!(rules.status.code(), Some(0));
    let text = String::from_utf8_lossy(&rules.stdout);
    assert!(text.contains("iptables -t nat -A ROBOTS_PROXY -m mark --mark 0x2a -j RETURN"));
    assert!(text.contains("--dport 1965 -j REDIRECT --to-ports 8965"));
    // By default, each protocol's port is caught.
    for &p in robots_proxy::protocol::Protocol::ALL {
        let port = p.scheme().default_port();
        assert!(
            text.contains(&format!("--dport {port} -j REDIRECT --to-ports 8965")),
            "{} on {port}",
            p.as_str()
        );
    }

    let config = temp_file(
        "transparent.toml",
        "[listen]\ntransparent = \"127.0.0.1:9000\"\n[limits]\nupstream_mark = 7\n",
    );
    let nft = binary(
        &[
            "transparent-rules",
            "--config",
            config.to_str().unwrap(),
            "--syntax",
            "nft",
            "--ports",
            "all",
        ],
        "",
    );
    assert_eq!(nft.status.code(), Some(0));
    let text = String::from_utf8_lossy(&nft.stdout);
    assert!(text.contains("meta mark 0x7 return"), "{text}");
    assert!(text.contains("tcp dport != 53 redirect to :9000"), "{text}");

    for (args, needle) in [
        (&["transparent-rules"][..], "listen.transparent"),
        (
            &[
                "transparent-rules",
                "--transparent-listen",
                "127.0.0.1:8965",
            ][..],
            "limits.upstream_mark",
        ),
        (
            &[
                "transparent-rules",
                "--transparent-listen",
                "127.0.0.1:8965",
                "--upstream-mark",
                "1",
                "--ports",
                "1965;70",
            ][..],
            "--ports",
        ),
        (
            &[
                "transparent-rules",
                "--transparent-listen",
                "127.0.0.1:8965",
                "--upstream-mark=-1",
            ][..],
            "--upstream-mark",
        ),
    ] {
        let out = binary(args, "");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// The manual pages and completion scripts come from the same clap definitions
/// as the parser: every subcommand and flag is in them.
#[test]
fn man_pages_and_completions_describe_the_real_command_line() {
    let run = |args: &[&str]| {
        let out = binary(args, "");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, page, _) = run(&["man", "run"]);
    assert_eq!(code, Some(0));
    assert!(page.contains(".TH robots-proxy-run 1"), "{page}");
    for flag in [
        "transparent\\-listen",
        "store",
        "state\\-dir",
        "check\\-config",
    ] {
        assert!(page.contains(&format!("\\-\\-{flag}")), "{flag} missing");
    }
    for section in [
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH SIGNALS",
        ".SH \"EXIT STATUS\"",
    ] {
        assert!(
            page.contains(section),
            "robots-proxy-run(1) lacks {section}"
        );
    }
    for (what, text) in [
        ("RUST_LOG", "\\fBRUST_LOG\\fR"),
        ("SIGHUP", "\\fBSIGHUP\\fR"),
        ("the pins", "STATE_DIR/pins"),
    ] {
        assert!(
            page.contains(text),
            "robots-proxy-run(1) does not name {what}"
        );
    }
    let (code, page, _) = run(&["man", "check"]);
    assert_eq!(code, Some(0));
    assert!(page.contains(".SH \"EXIT STATUS\"") && page.contains("Every target was decided."));
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("man-{}", std::process::id()));
    let (code, _, err) = run(&["man", "--out-dir", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    for stem in [
        "",
        "-run",
        "-check",
        "-transparent-rules",
        "-completions",
        "-man",
    ] {
        let page = std::fs::read_to_string(dir.join(format!("robots-proxy{stem}.1"))).unwrap();
        assert!(page.contains(".SH \"EXIT STATUS\""), "robots-proxy{stem}.1");
    }
    let (code, _, err) = run(&["man", "nosuch"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("one of: run, check"), "{err}");
    let (code, script, _) = run(&["completions", "bash"]);
    assert_eq!(code, Some(0));
    assert!(script.contains("--transparent-listen") && script.contains("transparent-rules"));
    let (code, _, _) = run(&["completions", "tcsh"]);
    assert_eq!(code, Some(2), "an unknown shell is a usage error");
    // A reader that stops at once (`| head -1`, `| grep -q`): no panic.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_robots-proxy"))
        .args(["completions", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
