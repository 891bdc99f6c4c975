//! robots.txt preferences about a bot's declared uses (`Content-Usage`,
//! `Content-Signal`) and `Visit-time`, decided through the path a request
//! takes (URL → canonical target → every spelling → decision), with property
//! tests against a plain reading of the drafts.

use std::time::Duration;

use proptest::prelude::*;
use robots_proxy::check::decide_target;
use robots_proxy::robots::{BotProfile, Policy, RobotsTxt, Use};
use robots_proxy::spelling::SelectorReading;

fn policy(robots: &str, uses: &[Use]) -> Policy {
    let bot = uses
        .iter()
        .fold(BotProfile::new("examplebot"), |b, &u| b.with_use(u));
    RobotsTxt::parse(robots.as_bytes()).policy(&bot)
}

/// The verdict and its explanation, as `check --explain` prints them.
fn decide(policy: &Policy, target: &str) -> (bool, String) {
    let (d, _) = decide_target(policy, target, SelectorReading::Safe).unwrap();
    (d.allowed(), policy.explain(&d).to_string())
}

const TRAINER: &[Use] = &[Use::TrainAi];

#[test]
fn a_refused_use_is_disallowed_naming_the_line() {
    let p = policy(
        "User-agent: *\nAllow: /\nContent-Usage: train-ai=n, search=y\n",
        TRAINER,
    );
    let (allowed, why) = decide(&p, "gemini://localhost/notes.gmi");
    assert!(!allowed);
    assert!(why.ends_with("Content-Usage: train-ai=n (line 3)"), "{why}");
    // A search bot is welcome; a bot declaring nothing is not affected.
    assert!(
        decide(
            &policy(
                "User-agent: *\nContent-Usage: train-ai=n, search=y\n",
                &[Use::Search]
            ),
            "/x"
        )
        .0
    );
    assert!(decide(&policy("User-agent: *\nContent-Usage: bots=n\n", &[]), "/x").0);
}

#[test]
fn the_longest_path_wins_and_equal_paths_combine_to_the_strictest() {
    let robots = "User-agent: *\n\
                  Content-Usage: train-ai=n\n\
                  Content-Usage: /open/ train-ai=y\n\
                  Content-Usage: /open/closed/ train-ai=y\n\
                  Content-Usage: /open/closed/ train-ai=n\n";
    let p = policy(robots, TRAINER);
    assert!(!decide(&p, "/diary.gmi").0);
    assert!(decide(&p, "/open/paper.gmi").0);
    let (allowed, why) = decide(&p, "/open/closed/x");
    assert!(!allowed);
    assert!(why.ends_with("Content-Usage: train-ai=n (line 5)"), "{why}");
    // Two paths of one length both matching: the strictest of the two.
    let p = policy(
        "User-agent: *\nContent-Usage: /a* train-ai=y\nContent-Usage: /ab train-ai=n\n",
        TRAINER,
    );
    let (allowed, why) = decide(&p, "/abc");
    assert!(!allowed);
    assert!(why.ends_with("(line 3)"), "{why}");
    assert!(decide(&p, "/ac").0);
    // Wildcards and `$` as in rules.
    let p = policy(
        "User-agent: *\nContent-Usage: /*.pdf$ train-ai=n\n",
        TRAINER,
    );
    assert!(!decide(&p, "/a/b.pdf").0);
    assert!(decide(&p, "/a/b.pdf.gmi").0);
}

#[test]
fn both_vocabularies_and_the_parent_categories() {
    let signal = policy(
        "User-agent: *\nContent-Signal: search=yes, ai-train=no, ai-input=no\n",
        TRAINER,
    );
    let (allowed, why) = decide(&signal, "/x");
    assert!(!allowed);
    assert!(
        why.ends_with("Content-Signal: ai-train=no (line 2)"),
        "{why}"
    );
    assert!(
        !decide(
            &policy(
                "User-agent: *\nContent-Signal: ai-input=no\n",
                &[Use::AiInput]
            ),
            "/x"
        )
        .0
    );
    assert!(
        decide(
            &policy(
                "User-agent: *\nContent-Signal: ai-train=no\n",
                &[Use::Search]
            ),
            "/x"
        )
        .0
    );
    // train-genai falls back to train-ai, then bots.
    assert!(
        !decide(
            &policy(
                "User-agent: *\nContent-Usage: train-ai=n\n",
                &[Use::TrainGenai]
            ),
            "/x"
        )
        .0
    );
    let (allowed, why) = decide(
        &policy("User-agent: *\nContent-Usage: bots=n\n", &[Use::Search]),
        "/x",
    );
    assert!(!allowed);
    assert!(why.ends_with("Content-Usage: bots=n (line 2)"), "{why}");
    // Content-Usage's words in Content-Signal (and the reverse) say nothing.
    assert!(
        decide(
            &policy("User-agent: *\nContent-Signal: train-ai=n\n", TRAINER),
            "/x"
        )
        .0
    );
    assert!(
        decide(
            &policy("User-agent: *\nContent-Usage: ai-train=no\n", TRAINER),
            "/x"
        )
        .0
    );
}

#[test]
fn a_disallowed_path_is_refused_for_its_rule_alone() {
    let p = policy(
        "User-agent: *\nDisallow: /private\nContent-Usage: train-ai=n\n",
        TRAINER,
    );
    let (allowed, why) = decide(&p, "/private/x");
    assert!(!allowed);
    assert!(why.ends_with("rule Disallow: /private (line 2)"), "{why}");
}

#[test]
fn only_the_groups_that_apply_to_the_bot_count() {
    let robots = "User-agent: otherbot\nContent-Usage: train-ai=n\n\n\
                  User-agent: examplebot\nAllow: /\n\n\
                  User-agent: *\nContent-Usage: train-ai=n\n";
    assert!(decide(&policy(robots, TRAINER), "/x").0);
    let robots = "User-agent: examplebot\nDisallow: /nothing\nContent-Usage: /papers/ train-ai=n\n";
    assert!(!decide(&policy(robots, TRAINER), "/papers/1").0);
    assert!(decide(&policy(robots, TRAINER), "/other").0);
}

/// A preference line is a rule of its group (the attach draft): an agent line
/// after it starts another group, as after an `Allow`, so the `Disallow` below
/// binds the second group's agent alone, whatever the bot declares.
#[test]
fn a_preference_line_ends_the_run_of_agent_lines() {
    let robots = "User-agent: *\nContent-Usage: train-ai=n\nUser-agent: otherbot\nDisallow: /\n";
    for uses in [&[][..], &[Use::Search][..]] {
        assert!(decide(&policy(robots, uses), "/x").0, "{uses:?}");
    }
    assert!(!decide(&policy(robots, TRAINER), "/x").0);
    let without = "User-agent: *\nUser-agent: otherbot\nDisallow: /\n";
    assert!(!decide(&policy(without, &[]), "/x").0);
}

#[test]
fn another_spelling_of_a_refused_path_is_refused_too() {
    let p = policy(
        "User-agent: *\nContent-Usage: /papers/ train-ai=n\n",
        TRAINER,
    );
    for target in [
        "gemini://localhost/papers/1.gmi",
        "gemini://localhost//papers/1.gmi",
        "gemini://localhost/x/../papers/1.gmi",
        "gemini://localhost/%70apers/1.gmi",
        "gopher://localhost/0papers/1.txt",
        "gopher://localhost/0//papers/1.txt",
        "gopher://localhost/0/%2570apers/1.txt",
    ] {
        assert!(!decide(&p, target).0, "{target}");
    }
}

#[test]
fn a_broken_dictionary_states_nothing() {
    for line in ["train-ai=", "Train-AI=n", "train-ai=n,,", "train ai=n"] {
        let p = policy(&format!("User-agent: *\nContent-Usage: {line}\n"), TRAINER);
        assert!(decide(&p, "/x").0, "{line}");
    }
}

#[test]
fn visit_time_says_how_long_until_a_window_opens() {
    let p = policy("User-agent: *\nVisit-time: 0600-0845\n", &[]);
    let at = |h: u64, m: u64| Duration::from_secs(20_000 * 86_400 + h * 3600 + m * 60);
    assert_eq!(p.visit_wait(at(7, 0)), None);
    let (wait, window) = p.visit_wait(at(9, 0)).unwrap();
    assert_eq!(wait, Duration::from_secs((21 * 60) * 60));
    assert_eq!((window.from, window.to, window.line), (360, 525, 2));
    // Across midnight, and two windows: the first to open.
    let p = policy(
        "User-agent: *\nVisit-time: 22:00-02:00\nVisit-time: 1200-1300\n",
        &[],
    );
    assert_eq!(p.visit_wait(at(23, 0)), None);
    assert_eq!(p.visit_wait(at(1, 59)), None);
    assert_eq!(
        p.visit_wait(at(11, 0)).unwrap().0,
        Duration::from_secs(3600)
    );
    assert_eq!(
        p.visit_wait(at(13, 0)).unwrap().0,
        Duration::from_secs(9 * 3600)
    );
    // Junk is ignored.
    for junk in ["0600", "2500-0100", "0600-0600", "6-8", "06:00-08:0x"] {
        let p = policy(&format!("User-agent: *\nVisit-time: {junk}\n"), &[]);
        assert_eq!(p.visit_wait(at(3, 0)), None, "{junk}");
    }
}

/// One generated `Content-Usage` line: a path (or none), and `train-ai` /
/// `search` stated or not.
type Line = (Option<String>, Option<bool>, Option<bool>);

fn line_text((path, train, search): &Line) -> String {
    let yn = |b: bool| if b { "y" } else { "n" };
    let mut members = Vec::new();
    if let Some(t) = train {
        members.push(format!("train-ai={}", yn(*t)));
    }
    if let Some(s) = search {
        members.push(format!("search={}", yn(*s)));
    }
    match path {
        Some(p) => format!("Content-Usage: {p} {}\n", members.join(", ")),
        None => format!("Content-Usage: {}\n", members.join(", ")),
    }
}

/// The drafts read plainly: the lines whose path is a prefix of `path`; of
/// those the longest; their preferences for `train-ai`, the strictest.
fn reference_train_allowed(lines: &[Line], path: &str) -> bool {
    let matching: Vec<(usize, Option<bool>)> = lines
        .iter()
        .map(|(p, t, _)| (p.as_deref().unwrap_or("/"), *t))
        .filter(|(p, _)| path.starts_with(p))
        .map(|(p, t)| (p.len(), t))
        .collect();
    let Some(longest) = matching.iter().map(|(l, _)| *l).max() else {
        return true;
    };
    !matching
        .iter()
        .any(|(l, t)| *l == longest && *t == Some(false))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn preferences_agree_with_a_plain_reading(
        lines in proptest::collection::vec((
            proptest::option::of("/[ab]{0,3}"),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
        ), 0..8),
        path in "/[ab]{0,4}",
    ) {
        let robots: String = std::iter::once("User-agent: *\n".to_string())
            .chain(lines.iter().map(line_text))
            .collect();
        let p = policy(&robots, TRAINER);
        prop_assert_eq!(p.decide(&path).allowed(), reference_train_allowed(&lines, &path), "{}", robots);
    }

    /// Declaring a use never allows more; a bot declaring none decides as if
    /// each preference line were a rule that decides nothing. (A preference
    /// line is a rule of its group, as the attach draft has it: like an
    /// `Allow`, it ends a run of agent lines, so the file without it is not
    /// the reference: `User-agent: *`, `Content-Usage: train-ai=n`,
    /// `User-agent: x`, `Disallow: /` disallows for `x` alone.)
    #[test]
    fn declaring_a_use_never_allows_more(
        lines in proptest::collection::vec((
            prop::sample::select(vec!["Content-Usage", "Content-Signal", "Disallow", "Allow", "User-agent"]),
            prop::sample::select(vec!["", "/a ", "/b* ", "/a$ "]),
            prop::sample::select(vec!["train-ai=n", "search=y", "bots=n", "ai-train=no", "ai-input=no, search=yes", "*", "/a", "x=(1)"]),
        ), 0..12),
        path in "/[ab]{0,3}",
        uses in proptest::collection::vec(
            prop::sample::select(vec![Use::TrainAi, Use::TrainGenai, Use::Search, Use::AiInput]), 0..3),
    ) {
        let robots: String = lines.iter().map(|(f, p, v)| format!("{f}: {p}{v}\n")).collect();
        let without = policy(&robots, &[]);
        let with = policy(&robots, &uses);
        let neutral: String = robots
            .lines()
            .map(|l| if l.starts_with("Content-") { "Allow: /robots.txt\n".to_string() } else { format!("{l}\n") })
            .collect();
        let bare = policy(&neutral, &[]);
        prop_assert_eq!(without.decide(&path).allowed(), bare.decide(&path).allowed());
        prop_assert!(!with.decide(&path).allowed() || without.decide(&path).allowed());
        let _ = with.explain(&with.decide(&path)).to_string();
    }

    /// The two vocabularies say the same thing for training.
    #[test]
    fn ai_train_no_is_train_ai_n(path in "/[ab]{0,3}", at in proptest::option::of("/[ab]{0,2}")) {
        let at = at.map(|p| format!("{p} ")).unwrap_or_default();
        let usage = policy(&format!("User-agent: *\nContent-Usage: {at}train-ai=n\n"), TRAINER);
        let signal = policy(&format!("User-agent: *\nContent-Signal: {at}ai-train=no\n"), TRAINER);
        prop_assert_eq!(usage.decide(&path).allowed(), signal.decide(&path).allowed());
    }
}
