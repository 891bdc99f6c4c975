//! The spellings a server reads as one resource, and deciding over all of them.
//!
//! A refusal must not be dodged by writing the same resource another way. For a
//! Gemini, Spartan (or HTTP) path the canonical form in [`crate::target`] already
//! removes dot segments and normalises escapes; what is left is a doubled slash,
//! which many servers fold (`//private/x` is `/private/x`), and an encoded slash,
//! which servers that decode a path before opening a file read as one
//! (`/%2Fprivate/x`, `/pub/..%2Fprivate/x`). So a path is decided as written and
//! as such a server reads it: `%2F` decoded, dot segments removed, slashes folded. The query is matched as written (RFC 9309
//! §2.2.2): `?u=http://x` keeps its `//`.
//!
//! A Gopher selector is sent upstream byte for byte, and the servers people run
//! read it loosely. Checked against gophernicus, pygopherd and geomyidae (see the
//! table in docs/guide/robots-txt.md), a server may
//!
//! * add or drop a leading `/` (`private/x` and `/private/x` are one file),
//! * fold doubled slashes and dot segments,
//! * percent-decode the selector once more, after the URL layer already did
//!   (`/sub%252Ffile` reaches `/sub/file`), or several times,
//! * stop at a NUL, and drop a `?query` or a tab and what follows.
//!
//! So a selector is refused if **any** of those spellings is disallowed: every
//! stage of decoding until nothing changes, each with and without its `?`/tab
//! tail, each cleaned of dot segments and doubled slashes, each with and without
//! a leading `/`. A NUL, CR or LF in any decoded stage is bad input, as is a
//! selector still changing after [`MAX_DECODE_ROUNDS`] decodings.
//!
//! The Gopher robots.txt proposal's letter treats selectors as opaque strings:
//! `Disallow: /` then leaves `0/foo` allowed. [`SelectorReading::Literal`] is that
//! reading (no implied leading slash; the other equivalences still hold), for
//! operators who want it; the safe reading is the default.

use std::borrow::Cow;

use crate::robots::encoding::percent_decode;
use crate::robots::{Decision, Policy};

/// A selector that still changes after this many percent-decodings is refused:
/// no server decodes that often, and each round is work for us.
pub const MAX_DECODE_ROUNDS: usize = 8;

/// How Gopher selectors are read (`[gopher] literal_selectors`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SelectorReading {
    /// Every spelling common servers map to one file counts (the default).
    #[default]
    Safe,
    /// The proposal's letter: no implied leading `/`.
    Literal,
}

/// Why a selector cannot be decided: it hides something a server would act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpellingError {
    #[error("a NUL, CR or LF hides behind percent-escapes in the selector")]
    HiddenControl,
    #[error("a NUL hides behind percent-escapes in the path: a server that decodes it would stop there and serve another file than the one decided")]
    HiddenNul,
    #[error("the selector is percent-escaped more than {MAX_DECODE_ROUNDS} times over")]
    TooDeep,
    #[error("the selector reads {0} ways, and deciding each against this robots.txt's wildcard rules would cost more than the proxy spends on one request; ask for it as plainly as it is written")]
    TooCostly(usize),
}

/// The wildcard searches one selector's spellings may take together: four
/// times the file's rules (a search per rule for four spellings), and a floor
/// that ordinary files never reach. A selector read many ways against a file
/// of thousands of wildcard rules (a hostile server serves both: the file and
/// the menus that link to such selectors) then costs about what four
/// spellings do, not what fifty do; past it the selector is refused, never
/// allowed.
pub fn spelling_budget(policy: &Policy) -> u64 {
    4 * policy.rule_count() as u64 + 4096
}

/// The selector and each stage of percent-decoding it, until nothing changes.
fn decode_stages(selector: &[u8]) -> Result<Vec<Vec<u8>>, SpellingError> {
    stages_without(
        selector,
        |b| matches!(b, 0 | b'\r' | b'\n'),
        SpellingError::HiddenControl,
    )
}

/// `bytes` and each stage of percent-decoding it, until nothing changes;
/// `hidden` when a stage holds a byte `forbidden` says no to.
fn stages_without(
    bytes: &[u8],
    forbidden: impl Fn(u8) -> bool,
    hidden: SpellingError,
) -> Result<Vec<Vec<u8>>, SpellingError> {
    let mut stages = vec![bytes.to_vec()];
    loop {
        let last = stages.last().map(Vec::as_slice).unwrap_or_default();
        if last.iter().any(|&b| forbidden(b)) {
            return Err(hidden);
        }
        if !last.contains(&b'%') {
            return Ok(stages);
        }
        let next = percent_decode(last);
        if next == last {
            return Ok(stages);
        }
        if stages.len() > MAX_DECODE_ROUNDS {
            return Err(SpellingError::TooDeep);
        }
        stages.push(next);
    }
}

/// Checks that a selector can be decided: what [`gopher_spellings`] would refuse.
pub fn check_selector(selector: &[u8]) -> Result<(), SpellingError> {
    decode_stages(selector).map(|_| ())
}

/// Checks that a path with its query (Gemini, Spartan, HTTP) can be decided
/// as a server reads it. A server that percent-decodes the path and opens
/// the file through C strings (gophernicus, most C servers) stops at a NUL:
/// `/data.bin%00.txt` is `/data.bin` there, which a `Disallow: /*.bin$`
/// must refuse, and the rules saw `.txt`. So a NUL at any stage of decoding
/// is bad input, as it is in a Gopher selector or a Nex path; a path still
/// changing after [`MAX_DECODE_ROUNDS`] decodings too.
pub fn check_path(path: &[u8]) -> Result<(), SpellingError> {
    stages_without(path, |b| b == 0, SpellingError::HiddenNul).map(|_| ())
}

/// Every spelling of `selector` that a common server reads as the same
/// resource, the selector as written first, without repeats.
pub fn gopher_spellings(
    selector: &[u8],
    reading: SelectorReading,
) -> Result<Vec<Vec<u8>>, SpellingError> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut add = |s: Vec<u8>| {
        if !out.contains(&s) {
            out.push(s);
        }
    };
    add(selector.to_vec());
    for stage in decode_stages(selector)? {
        let cut = stage
            .iter()
            .position(|&b| b == b'?' || b == b'\t')
            .map(|at| stage[..at].to_vec());
        for form in std::iter::once(stage).chain(cut) {
            let bare = form.iter().position(|&b| b != b'/').unwrap_or(form.len());
            match reading {
                SelectorReading::Safe => {
                    let mut rooted = Vec::with_capacity(form.len() + 1);
                    rooted.push(b'/');
                    rooted.extend_from_slice(&form[bare..]);
                    let rooted = fold_path(&rooted).into_owned();
                    add(rooted.get(1..).unwrap_or_default().to_vec());
                    add(rooted);
                }
                SelectorReading::Literal => add(fold_path(&form).into_owned()),
            }
            add(form);
        }
    }
    Ok(out)
}

/// `path` with dot segments removed and runs of `/` folded; borrowed when there
/// was nothing to do.
pub fn fold_path(path: &[u8]) -> Cow<'_, [u8]> {
    let has_dot_segment = path
        .split(|&b| b == b'/')
        .any(|seg| seg == b"." || seg == b"..");
    if !has_dot_segment && !path.windows(2).any(|w| w == b"//") {
        return Cow::Borrowed(path);
    }
    let mut out = remove_dot_segments(path);
    out.dedup_by(|a, b| *a == b'/' && *b == b'/');
    Cow::Owned(out)
}

/// How a protocol's servers read a path, as a path is decided
/// (`protocol::rules`: each protocol's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathReading {
    /// A file server's: `%2F` decoded, then folded ([`decide_path`]).
    Decoded,
    /// The web's: also its parameters and its case ([`decide_web_path`]).
    Web,
}

/// A path decided as `reading` says its servers read it.
pub fn decide_path_as(policy: &Policy, path: &[u8], reading: PathReading) -> Decision {
    match reading {
        PathReading::Decoded => decide_path(policy, path),
        PathReading::Web => decide_web_path(policy, path),
    }
}

/// Decides a path with its query (Gemini, Spartan, HTTP, or a bare `check`
/// target): as written, and as a server that decodes it reads it: `%2F` taken
/// as `/` ([`slashes_decoded`]), then folded ([`fold_path`]). The query is left
/// as it is. The first refusal wins.
pub fn decide_path(policy: &Policy, path: &[u8]) -> Decision {
    let as_written = policy.decide_bytes(path);
    if !as_written.allowed() {
        return as_written;
    }
    let (before, query) = match path.iter().position(|&b| b == b'?') {
        Some(at) => path.split_at(at),
        None => (path, &[][..]),
    };
    let decoded = slashes_decoded(before);
    match fold_path(&decoded) {
        Cow::Borrowed(_) if matches!(decoded, Cow::Borrowed(_)) => as_written,
        read => {
            let mut read = read.into_owned();
            read.extend_from_slice(query);
            first_refusal(as_written, policy.decide_bytes(&read))
        }
    }
}

/// [`decide_path`] for a web path, also as the web's servers read it: a
/// backslash (`\` or `%5C`) as `/` (IIS, and servers on Windows), and each
/// segment's `;parameters` dropped (Tomcat and other Java servers read
/// `/private;jsessionid=1/x` as `/private/x`). The query is left as it is.
/// (A NUL, which C servers end a path at, is refused before this: a target
/// with one is malformed.)
pub fn decide_web_path(policy: &Policy, path: &[u8]) -> Decision {
    let decided = decide_path(policy, path);
    if !decided.allowed() {
        return decided;
    }
    let (before, query) = match path.iter().position(|&b| b == b'?') {
        Some(at) => path.split_at(at),
        None => (path, &[][..]),
    };
    match web_read(before) {
        None => decided,
        Some(read) => {
            let mut read = read;
            read.extend_from_slice(query);
            first_refusal(decided, decide_path(policy, &read))
        }
    }
}

/// A web path as servers that take `\` for `/` and drop `;parameters`
/// read it; `None` when it has neither.
fn web_read(path: &[u8]) -> Option<Vec<u8>> {
    let backslash = |w: &[u8]| w[0] == b'%' && w[1] == b'5' && (w[2] | 0x20) == b'c';
    let has = path.contains(&b'\\') || path.contains(&b';') || path.windows(3).any(backslash);
    if !has {
        return None;
    }
    let mut out = Vec::with_capacity(path.len());
    let mut rest = path;
    let mut in_params = false;
    while let Some(&b) = rest.first() {
        let (byte, step) = match b {
            b'%' if rest.len() >= 3 && backslash(&rest[..3]) => (b'/', 3),
            b'\\' => (b'/', 1),
            b => (b, 1),
        };
        rest = &rest[step..];
        match byte {
            b'/' => {
                in_params = false;
                out.push(b'/');
            }
            b';' => in_params = true,
            _ if in_params => {}
            b => out.push(b),
        }
    }
    Some(out)
}

/// `path` with each `%2F` (either case) read as `/`, as servers that
/// percent-decode a path before opening a file read it: `/%2Fprivate/x` and
/// `/pub/..%2Fprivate/x` reach `/private/x`. Other escapes stay: the canonical
/// form already decoded the unreserved ones, and a server that decodes `%25`
/// once reads a literal `%`. Borrowed when there is none.
fn slashes_decoded(path: &[u8]) -> Cow<'_, [u8]> {
    let is_slash = |w: &[u8]| w[0] == b'%' && w[1] == b'2' && (w[2] | 0x20) == b'f';
    if !path.windows(3).any(is_slash) {
        return Cow::Borrowed(path);
    }
    let mut out = Vec::with_capacity(path.len());
    let mut rest = path;
    while !rest.is_empty() {
        if rest.len() >= 3 && is_slash(&rest[..3]) {
            out.push(b'/');
            rest = &rest[3..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    Cow::Owned(out)
}

/// Decides a Gopher selector over all its spellings; robots.txt itself, asked
/// for by one of its selectors as written, is always allowed.
pub fn decide_selector(
    policy: &Policy,
    selector: &[u8],
    reading: SelectorReading,
) -> Result<Decision, SpellingError> {
    let mut budget = spelling_budget(policy);
    let spellings = gopher_spellings(selector, reading)?;
    let too_costly = || SpellingError::TooCostly(spellings.len());
    let as_written = policy
        .decide_within(selector, &mut budget)
        .ok_or_else(too_costly)?;
    if as_written.allowed() && policy.explain(&as_written).robots_txt_itself {
        return Ok(as_written);
    }
    let mut decision = as_written;
    for spelling in spellings.iter().skip(1) {
        if !decision.allowed() {
            break;
        }
        let next = policy
            .decide_within(spelling, &mut budget)
            .ok_or_else(too_costly)?;
        decision = first_refusal(decision, next);
    }
    Ok(decision)
}

/// The first of two decisions that refuses; `first` when both allow (its
/// explanation names the spelling as written).
fn first_refusal(first: Decision, second: Decision) -> Decision {
    if first.allowed() && !second.allowed() {
        second
    } else {
        first
    }
}

/// RFC 3986 §5.2.4.
pub fn remove_dot_segments(path: &[u8]) -> Vec<u8> {
    let mut input: &[u8] = path;
    let mut out: Vec<u8> = Vec::with_capacity(path.len());
    let pop = |out: &mut Vec<u8>| {
        let at = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
        out.truncate(at);
    };
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix(b"../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix(b"./") {
            input = rest;
        } else if input.starts_with(b"/./") {
            input = &input[2..];
        } else if input == b"/." {
            input = b"/";
        } else if input.starts_with(b"/../") {
            input = &input[3..];
            pop(&mut out);
        } else if input == b"/.." {
            input = b"/";
            pop(&mut out);
        } else if input == b"." || input == b".." {
            input = b"";
        } else {
            let skip = usize::from(input[0] == b'/');
            let end = input[skip..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(input.len(), |i| i + skip);
            out.extend_from_slice(&input[..end]);
            input = &input[end..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robots::RobotsTxt;

    fn spellings(s: &str, reading: SelectorReading) -> Vec<String> {
        gopher_spellings(s.as_bytes(), reading)
            .unwrap()
            .into_iter()
            .map(|v| String::from_utf8(v).unwrap())
            .collect()
    }

    #[test]
    fn spellings_of_a_selector() {
        let safe = spellings("private/secret.txt", SelectorReading::Safe);
        assert!(
            safe.contains(&"/private/secret.txt".to_string()),
            "{safe:?}"
        );
        let safe = spellings("/0/sub%252Ffile.txt", SelectorReading::Safe);
        for want in ["/0/sub%2Ffile.txt", "/0/sub/file.txt", "0/sub/file.txt"] {
            assert!(safe.contains(&want.to_string()), "{want} in {safe:?}");
        }
        let safe = spellings("/exact.txt?x", SelectorReading::Safe);
        assert!(safe.contains(&"/exact.txt".to_string()), "{safe:?}");
        let safe = spellings("//a/./b/../c%253Fq", SelectorReading::Safe);
        assert!(safe.contains(&"/a/c".to_string()), "{safe:?}");
        let literal = spellings("private/x", SelectorReading::Literal);
        assert_eq!(literal, ["private/x"]);
        let literal = spellings("/sub%252Ffile", SelectorReading::Literal);
        assert!(literal.contains(&"/sub/file".to_string()), "{literal:?}");
    }

    #[test]
    fn hidden_controls_and_deep_escapes_are_bad_input() {
        for bad in ["/sub%00", "/sub%2500", "/a%250D%250Ab", "/x%25252500"] {
            assert_eq!(
                check_selector(bad.as_bytes()),
                Err(SpellingError::HiddenControl),
                "{bad}"
            );
        }
        let deep = format!("/x%{}41", "25".repeat(MAX_DECODE_ROUNDS + 1));
        assert_eq!(check_selector(deep.as_bytes()), Err(SpellingError::TooDeep));
        let fine = format!("/x%{}41", "25".repeat(MAX_DECODE_ROUNDS - 1));
        assert_eq!(check_selector(fine.as_bytes()), Ok(()));
        // A stray `%` is no escape and changes nothing.
        assert_eq!(check_selector(b"/100%"), Ok(()));
    }

    #[test]
    fn the_query_keeps_its_slashes() {
        let robots = RobotsTxt::parse(
            b"User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
        );
        let policy = robots.policy(&crate::robots::BotProfile::new("FooBot"));
        assert!(decide_path(&policy, b"/foo/bar?qux=taz&baz=http://foo.bar?tar&par").allowed());
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
        let policy = robots.policy(&crate::robots::BotProfile::new("x"));
        assert!(!decide_path(&policy, b"//private?a=//b").allowed());
        assert!(decide_path(&policy, b"/public?u=//private").allowed());
    }

    #[test]
    fn an_encoded_slash_is_read_as_a_slash() {
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
        let policy = robots.policy(&crate::robots::BotProfile::new("x"));
        for no in [
            "/%2Fprivate/x",
            "/%2fprivate/x",
            "%2Fprivate/x",
            "/pub/..%2Fprivate/x",
            "/pub%2F..%2Fprivate/x?q",
            "/%2F%2Fprivate",
        ] {
            assert!(!decide_path(&policy, no.as_bytes()).allowed(), "{no}");
        }
        for ok in [
            "/pub%2Fprivate",
            "/%252Fprivate",
            "/%2",
            "/pub?u=%2Fprivate",
            "/%2Gprivate",
        ] {
            assert!(decide_path(&policy, ok.as_bytes()).allowed(), "{ok}");
        }
        assert_eq!(&*slashes_decoded(b"/a%2Fb%2fc%2"), b"/a/b/c%2");
        assert!(matches!(slashes_decoded(b"/plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn robots_txt_stays_allowed_and_its_spellings_do_not_open_the_rest() {
        let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /\n");
        let policy = robots.policy(&crate::robots::BotProfile::new("x"));
        for ok in ["robots.txt", "/robots.txt", "0/robots.txt"] {
            let d = decide_selector(&policy, ok.as_bytes(), SelectorReading::Safe).unwrap();
            assert!(d.allowed(), "{ok}");
        }
        for no in [
            "/robots.txt/../private",
            "robots.txt%3F/../x",
            "0/foo",
            "foo",
        ] {
            let d = decide_selector(&policy, no.as_bytes(), SelectorReading::Safe).unwrap();
            assert!(!d.allowed(), "{no}");
        }
        let d = decide_selector(&policy, b"0/foo", SelectorReading::Literal).unwrap();
        assert!(d.allowed(), "the literal reading leaves 0/foo allowed");
    }
}
