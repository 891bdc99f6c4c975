//! `robots-proxy check`: decide targets offline with the proxy's own engine.
//!
//! Reads the robots.txt (at most [`PARSE_LIMIT`] bytes are parsed, so no more is
//! read), builds the bot's policy once, and streams one line per target, so a
//! crawl frontier of millions of lines runs in constant memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::process::ExitCode;

use serde_json::json;
use thiserror::Error;

use crate::cli::{CheckArgs, Format};
use crate::robots::{BotProfile, Decision, Policy, RobotsTxt, Selected, PARSE_LIMIT};
use crate::spelling::{decide_path, SelectorReading};
use crate::target::{Target, TargetError};

/// Why `check` could not run at all (exit 2).
#[derive(Debug, Error)]
pub enum CheckError {
    #[error("--robots {path}: {source}")]
    ReadRobots { path: String, source: io::Error },
    #[error("--targets-from {path}: {source}")]
    ReadTargets { path: String, source: io::Error },
    #[error("--robots - and --targets-from - cannot both read standard input")]
    BothStdin,
    #[error("no targets: give TARGET arguments, --targets-from FILE, --crawl-delay or --sha256")]
    NoTargets,
    #[error("writing output: {0}")]
    Write(#[from] io::Error),
}

/// What `check` did: targets decided and targets it could not parse.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub decided: usize,
    pub errors: usize,
}

impl Outcome {
    /// 0 when every target was decided, 1 when some could not be parsed.
    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(u8::from(self.errors > 0))
    }
}

/// Runs `check` with `stdin` and `out` standing for the process's streams.
pub fn run(
    args: &CheckArgs,
    stdin: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Result<Outcome, CheckError> {
    if args.robots == "-" && args.targets_from.as_deref() == Some("-") {
        return Err(CheckError::BothStdin);
    }
    if args.targets.is_empty() && args.targets_from.is_none() && !args.crawl_delay && !args.sha256 {
        return Err(CheckError::NoTargets);
    }
    let robots_bytes = if args.robots == "-" {
        read_capped(stdin)
    } else {
        File::open(&args.robots).and_then(|f| read_capped(&mut BufReader::new(f)))
    }
    .map_err(|source| CheckError::ReadRobots {
        path: args.robots.clone(),
        source,
    })?;
    let robots = RobotsTxt::parse(&robots_bytes);
    let bot = args
        .virtual_agents
        .iter()
        .fold(BotProfile::new(&args.agent), |b, v| b.with_virtual_agent(v));
    let bot = args.content_usage.iter().fold(bot, |b, &u| b.with_use(u));
    let policy = robots.policy(&bot);

    let mut out = io::BufWriter::new(out);
    let mut outcome = Outcome::default();
    for target in &args.targets {
        report(&policy, target, args, &mut out, &mut outcome)?;
    }
    if let Some(path) = &args.targets_from {
        let read_err = |source| CheckError::ReadTargets {
            path: path.clone(),
            source,
        };
        let mut file_reader;
        let reader: &mut dyn BufRead = if path == "-" {
            stdin
        } else {
            file_reader = BufReader::new(File::open(path).map_err(read_err)?);
            &mut file_reader
        };
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).map_err(read_err)? == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            let target = text.trim_end_matches(['\n', '\r']);
            if !target.trim().is_empty() {
                report(&policy, target, args, &mut out, &mut outcome)?;
            }
        }
    }
    if args.crawl_delay {
        let delay = policy.crawl_delay_secs();
        match (args.format, delay) {
            (Format::Text, Some(secs)) => writeln!(out, "crawl-delay\t{secs}")?,
            (Format::Text, None) => writeln!(out, "crawl-delay\tnone")?,
            (Format::Json, _) => writeln!(out, "{}", json!({ "crawl_delay": delay }))?,
        }
    }
    if args.sha256 {
        let hex = crate::robots::sha256_hex(&robots_bytes);
        match args.format {
            Format::Text => writeln!(out, "sha256\t{hex}")?,
            Format::Json => writeln!(out, "{}", json!({ "sha256": hex }))?,
        }
    }
    out.flush()?;
    Ok(outcome)
}

/// Reads at most one byte more than the parser looks at, so a huge file costs
/// nothing and the parser still knows it was cut.
fn read_capped(reader: &mut dyn BufRead) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    reader
        .take(PARSE_LIMIT as u64 + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Decides one target as `check` reads it: a full URL when it starts with an
/// RFC 3986 scheme and `://`, else a path or selector (`/a/x%20http://b/` and
/// `URL:http://x` are paths). A URL is decided through the same path as a
/// request through the proxy: canonical target, then every spelling.
pub fn decide_target(
    policy: &Policy,
    target: &str,
    reading: SelectorReading,
) -> Result<(Decision, Vec<u8>), TargetError> {
    if is_url(target) {
        let t = Target::parse(target)?;
        let paths = crate::protocol::rules::of(t.scheme).paths;
        Ok((
            t.decide(policy, (paths, reading))?,
            t.matched_path().to_vec(),
        ))
    } else if target.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        Err(TargetError::ControlCharacter)
    } else {
        Ok((
            decide_path(policy, target.as_bytes()),
            target.as_bytes().to_vec(),
        ))
    }
}

/// `scheme://…` with `scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )`.
fn is_url(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once("://") else {
        return false;
    };
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

fn report(
    policy: &Policy,
    target: &str,
    args: &CheckArgs,
    out: &mut impl Write,
    outcome: &mut Outcome,
) -> io::Result<()> {
    let reading = if args.literal_selectors {
        SelectorReading::Literal
    } else {
        SelectorReading::Safe
    };
    let (decision, path) = match decide_target(policy, target, reading) {
        Ok(d) => d,
        Err(e) => {
            outcome.errors += 1;
            return match args.format {
                Format::Text => writeln!(out, "error\t{target}\t{e}"),
                Format::Json => writeln!(
                    out,
                    "{}",
                    json!({ "target": target, "error": e.to_string() })
                ),
            };
        }
    };
    outcome.decided += 1;
    let verdict = if decision.allowed() {
        "allow"
    } else {
        "disallow"
    };
    let why = policy.explain(&decision);
    match args.format {
        Format::Text if args.explain => writeln!(out, "{verdict}\t{target}\t{why}"),
        Format::Text => writeln!(out, "{verdict}\t{target}"),
        Format::Json => {
            let group = why.group.map(|g| {
                json!({
                    "name": g.name,
                    "selected_by": match g.selected {
                        Selected::OwnToken => "product-token",
                        Selected::VirtualAgents => "virtual-agent",
                        Selected::Star => "star",
                        Selected::Nothing => "none",
                    },
                    "lines": g.lines,
                })
            });
            let rule = why.rule.map(|r| {
                json!({ "kind": r.kind.as_str().to_ascii_lowercase(), "pattern": r.pattern, "line": r.line })
            });
            let usage = why.usage.map(|p| {
                json!({ "field": p.vocabulary.field(), "use": p.category.as_str(), "line": p.line, "text": p.to_string() })
            });
            writeln!(
                out,
                "{}",
                json!({
                    "target": target,
                    "decision": verdict,
                    "path": String::from_utf8_lossy(&path),
                    "group": group,
                    "rule": rule,
                    "content_usage": usage,
                    "explanation": format!("{why:#}"),
                })
            )
        }
    }
}
