//! design.md, "robots.txt semantics" and "Canonical targets", one table per rule.
//! Each row: robots.txt, bot (token + virtual agents), target, expected verdict.

use robots_proxy::check::decide_target;
use robots_proxy::robots::{BotProfile, RobotsTxt, RuleKind, Selected};
use robots_proxy::spelling::SelectorReading;

struct Row {
    robots: &'static str,
    agent: &'static str,
    virtuals: &'static [&'static str],
    target: &'static str,
    allowed: bool,
}

const fn row(
    robots: &'static str,
    agent: &'static str,
    virtuals: &'static [&'static str],
    target: &'static str,
    allowed: bool,
) -> Row {
    Row {
        robots,
        agent,
        virtuals,
        target,
        allowed,
    }
}

fn bot(agent: &str, virtuals: &[&str]) -> BotProfile {
    virtuals
        .iter()
        .fold(BotProfile::new(agent), |b, v| b.with_virtual_agent(v))
}

fn run(table: &[Row]) {
    for (i, r) in table.iter().enumerate() {
        let policy = RobotsTxt::parse(r.robots.as_bytes()).policy(&bot(r.agent, r.virtuals));
        let (decision, _) =
            decide_target(&policy, r.target, SelectorReading::Safe).expect(r.target);
        assert_eq!(
            decision.allowed(),
            r.allowed,
            "row {i}: agent {} {:?}, target {:?}, robots:\n{}\nexplained: {}",
            r.agent,
            r.virtuals,
            r.target,
            r.robots,
            policy.explain(&decision)
        );
    }
}

const MIXED: &str = "\
User-agent: examplebot
Disallow: /own

User-agent: indexer
Disallow: /idx

Virtual-agent: archiver
Disallow: /arc

User-agent: *
Disallow: /star
";

#[test]
fn group_selection_order() {
    run(&[
        // 1. Own product token first; the other groups do not apply.
        row(MIXED, "examplebot", &["indexer"], "/own", false),
        row(MIXED, "examplebot", &["indexer"], "/idx", true),
        row(MIXED, "examplebot", &["indexer"], "/star", true),
        // Case-insensitive, version ignored on both sides.
        row(MIXED, "ExampleBot/2.1", &[], "/own", false),
        row(
            "User-agent: ExampleBot/2.1\nDisallow: /v\n",
            "examplebot",
            &[],
            "/v",
            false,
        ),
        // A longer token is another bot.
        row(MIXED, "examplebot2", &[], "/own", true),
        row(MIXED, "examplebot2", &[], "/star", false),
        // 2. Virtual agents, by User-agent: or Virtual-agent:.
        row(MIXED, "otherbot", &["indexer"], "/idx", false),
        row(MIXED, "otherbot", &["indexer"], "/star", true),
        row(MIXED, "otherbot", &["archiver"], "/arc", false),
        row(MIXED, "otherbot", &["archiver"], "/star", true),
        // Several virtual agents: allowed only if every one allows.
        row(MIXED, "otherbot", &["indexer", "archiver"], "/idx", false),
        row(MIXED, "otherbot", &["indexer", "archiver"], "/arc", false),
        row(MIXED, "otherbot", &["indexer", "archiver"], "/free", true),
        // A virtual agent with no group of its own does not pull in `*` beside the others.
        row(MIXED, "otherbot", &["indexer", "researcher"], "/star", true),
        // 3. Otherwise `*`.
        row(MIXED, "otherbot", &["researcher"], "/star", false),
        row(MIXED, "otherbot", &[], "/star", false),
        row(MIXED, "otherbot", &[], "/own", true),
        // 4. Otherwise everything is allowed.
        row(
            "User-agent: somebot\nDisallow: /\n",
            "otherbot",
            &["indexer"],
            "/x",
            true,
        ),
        row("", "otherbot", &[], "/x", true),
    ]);
}

#[test]
fn same_agent_groups_merge_and_virtual_spellings_merge() {
    let robots = "User-agent: indexer\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\n\
                  Virtual-agent: Indexer\nDisallow: /b\nAllow: /b/ok\n";
    run(&[
        row(robots, "bot", &["indexer"], "/a", false),
        row(robots, "bot", &["indexer"], "/b", false),
        row(robots, "bot", &["indexer"], "/b/ok", true),
        row(robots, "bot", &["indexer"], "/c", true),
    ]);
}

#[test]
fn matching_rules() {
    let robots = "User-agent: *\nDisallow: /private\nAllow: /private/public\nDisallow: /*.gmi$\n\
                  Allow: /tie\nDisallow: /tie\nDisallow: /%70ct\nDisallow: /lit%2Astar\nDisallow: /q?x=1\n";
    run(&[
        row(robots, "bot", &[], "/private", false),
        row(robots, "bot", &[], "/private/x", false),
        row(robots, "bot", &[], "/private/public/x", true),
        row(robots, "bot", &[], "/privatex", false),
        row(robots, "bot", &[], "/Private", true),
        row(robots, "bot", &[], "/doc.gmi", false),
        row(robots, "bot", &[], "/doc.gmi?x", true),
        row(robots, "bot", &[], "/tie/x", true),
        // Percent-encoding is normalised on both sides.
        row(robots, "bot", &[], "/pct", false),
        row(robots, "bot", &[], "/%70ct", false),
        row(robots, "bot", &[], "/%70%63t", false),
        // %2A in a rule is a literal star, and only that.
        row(robots, "bot", &[], "/lit*star", false),
        row(robots, "bot", &[], "/litXstar", true),
        // The query is part of what is matched.
        row(robots, "bot", &[], "/q?x=1", false),
        row(robots, "bot", &[], "/q?x=2", true),
        // /robots.txt is always allowed.
        row(
            "User-agent: *\nDisallow: /\n",
            "bot",
            &[],
            "/robots.txt",
            true,
        ),
        row(
            "User-agent: *\nDisallow: /\n",
            "bot",
            &[],
            "gemini://example.org/robots.txt",
            true,
        ),
        // An empty Disallow allows everything.
        row("User-agent: *\nDisallow:\n", "bot", &[], "/anything", true),
    ]);
}

#[test]
fn gopher_selectors_get_an_implied_slash_unless_read_literally() {
    run(&[
        // Bare `check` targets are paths as written: no slash is implied.
        row("User-agent: *\nDisallow: /\n", "bot", &[], "users", true),
        row("User-agent: *\nDisallow: /\n", "bot", &[], "0/foo", true),
        row(
            "User-agent: *\nDisallow: /\n",
            "bot",
            &[],
            "robots.txt",
            true,
        ),
        row("User-agent: *\nDisallow: /\n", "bot", &[], "/users", false),
        // Gopher URLs: servers read `users` as `/users`.
        row(
            "User-agent: *\nDisallow: /\n",
            "bot",
            &[],
            "gopher://example.org/1users",
            false,
        ),
        row(
            "User-agent: *\nDisallow: /\n",
            "bot",
            &[],
            "gopher://example.org/1/users",
            false,
        ),
        row(
            "User-agent: *\nDisallow: /\n",
            "bot",
            &[],
            "gopher://example.org/0robots.txt",
            true,
        ),
        // `*/` blocks any selector holding a slash, and any a server reads with one.
        row("User-agent: *\nDisallow: */\n", "bot", &[], "0/foo", false),
        row("User-agent: *\nDisallow: */\n", "bot", &[], "/x", false),
        row("User-agent: *\nDisallow: */\n", "bot", &[], "users", true),
        // The fallback robots.txt selectors are always allowed.
        row(
            "User-agent: *\nDisallow: *\n",
            "bot",
            &[],
            "gopher://example.org/00/robots.txt",
            true,
        ),
    ]);
    // The proposal's letter: no implied slash.
    let policy = RobotsTxt::parse(b"User-agent: *\nDisallow: /\n").policy(&bot("bot", &[]));
    let literal = |t| {
        decide_target(&policy, t, SelectorReading::Literal)
            .unwrap()
            .0
            .allowed()
    };
    assert!(literal("gopher://example.org/1users"));
    assert!(!literal("gopher://example.org/1/users"));
}

#[test]
fn spellings_that_try_to_dodge_a_rule() {
    let robots = "User-agent: *\nDisallow: /private\n";
    let dodges = [
        "gemini://example.org/private",
        "gemini://example.org/%70rivate",
        "gemini://example.org/%70RIVATE/../private",
        "gemini://example.org/a/../private",
        "gemini://example.org/a/%2e%2e/private",
        "gemini://example.org/./private",
        "gemini://EXAMPLE.org:1965/private",
        "gemini://example.org.:1965/private",
        "gemini://example.org//private",
        "gopher://example.org/1/private",
        "gopher://example.org/1//private/x",
        "gopher://example.org/1/./private/x",
        "gopher://example.org/1/a/../private/x",
        "gopher://example.org/1%2Fprivate",
        "//private/x",
        "/./private/x",
        "/%70rivate",
    ];
    for target in dodges {
        run(&[row(robots, "bot", &[], target, false)]);
    }
    run(&[row(robots, "bot", &[], "gemini://example.org/public", true)]);
}

#[test]
fn crawl_delay_of_the_selected_groups() {
    let robots = "User-agent: examplebot\nCrawl-delay: 1.5\n\nUser-agent: indexer\nCrawl-delay: 4\n\n\
                  Virtual-agent: archiver\nCrawl-delay: 10\nCrawl-delay: soon\n\nUser-agent: *\nCrawl-delay: 20\n";
    let delay = |agent: &str, virtuals: &[&str]| {
        RobotsTxt::parse(robots.as_bytes())
            .policy(&bot(agent, virtuals))
            .crawl_delay_secs()
    };
    assert_eq!(delay("examplebot", &["archiver"]), Some(1.5));
    assert_eq!(delay("otherbot", &["indexer"]), Some(4.0));
    assert_eq!(delay("otherbot", &["indexer", "archiver"]), Some(10.0));
    assert_eq!(delay("otherbot", &[]), Some(20.0));
    let none = RobotsTxt::parse(b"User-agent: *\nCrawl-delay: -3\nCrawl-delay: 2s\n");
    assert_eq!(none.policy(&bot("x", &[])).crawl_delay_secs(), None);
    assert_eq!(
        RobotsTxt::parse(b"User-agent: *\nCrawl-delay: 0.25\n")
            .policy(&bot("x", &[]))
            .crawl_delay(),
        Some(std::time::Duration::from_millis(250))
    );
}

#[test]
fn decisions_explain_group_and_rule() {
    let robots = "# comment\nUser-agent: examplebot\nAllow: /p/ok\nDisallow: /p\n\nUser-agent: examplebot\nDisallow: /q\n";
    let policy = RobotsTxt::parse(robots.as_bytes()).policy(&bot("examplebot", &[]));
    assert_eq!(policy.selected(), Selected::OwnToken);

    let d = policy.decide("/p/x");
    let why = policy.explain(&d);
    let group = why.group.expect("a group decided");
    let rule = why.rule.expect("a rule decided");
    assert_eq!((group.name, group.lines), ("examplebot", &[2u32, 6][..]));
    assert_eq!(
        (rule.kind, rule.pattern, rule.line),
        (RuleKind::Disallow, "/p", 4)
    );
    assert_eq!(
        why.to_string(),
        "group examplebot (lines 2, 6)\trule Disallow: /p (line 4)"
    );

    let d = policy.decide("/elsewhere");
    assert!(d.allowed());
    assert_eq!(
        policy.explain(&d).to_string(),
        "group examplebot (lines 2, 6)\tno rule matches"
    );

    let virtual_policy =
        RobotsTxt::parse(b"Virtual-agent: indexer\nDisallow: /i\n").policy(&bot("x", &["indexer"]));
    let d = virtual_policy.decide("/i");
    assert_eq!(
        virtual_policy.explain(&d).to_string(),
        "group indexer [virtual agent] (line 1)\trule Disallow: /i (line 2)"
    );
    let nothing = RobotsTxt::parse(b"").policy(&bot("x", &[]));
    assert_eq!(
        nothing.explain(&nothing.decide("/")).to_string(),
        "no group applies to this bot"
    );
}

/// A pattern's trailing stars match nothing more, but the explanation quotes
/// the rule as the file wrote it; stars alone disallow everything.
#[test]
fn trailing_stars_are_explained_as_written() {
    let robots = "User-agent: *\nDisallow: /private**\nAllow: /private/open\n\nUser-agent: all\nDisallow: ***\n";
    let robots = RobotsTxt::parse(robots.as_bytes());
    let star = robots.policy(&bot("examplebot", &[]));
    let d = star.decide("/private/x");
    assert!(!d.allowed());
    assert_eq!(
        star.explain(&d).to_string(),
        "group * (line 1)\trule Disallow: /private** (line 2)"
    );
    // The longer rule wins against the shorter trimmed pattern, counted as written.
    assert!(star.decide("/private/open").allowed());
    assert!(star.decide("/privat").allowed());
    let all = robots.policy(&bot("all", &[]));
    for target in ["/", "/x", "", "/robots.txt.bak"] {
        let d = all.decide(target);
        assert!(!d.allowed(), "{target:?}");
        assert_eq!(
            all.explain(&d).to_string(),
            "group all (line 5)\trule Disallow: *** (line 6)"
        );
    }
}

/// Policies read their patterns from the parsed file's arena, which they
/// share: a policy keeps deciding, and explaining, after the file is gone,
/// and groups merged from several places in the file keep every rule.
#[test]
fn a_policy_outlives_the_parsed_file_it_came_from() {
    let robots = RobotsTxt::parse(
        b"User-agent: a\nDisallow: /one\n\nUser-agent: b\nDisallow: /b\n\nUser-agent: a\nDisallow: /two*.x$\n",
    );
    let merged = robots.policy(&bot("a", &[]));
    let single = robots.policy(&bot("b", &[]));
    drop(robots);
    for (policy, target, allowed, why) in [
        (
            &merged,
            "/one/x",
            false,
            "group a (lines 1, 7)\trule Disallow: /one (line 2)",
        ),
        (
            &merged,
            "/two/y.x",
            false,
            "group a (lines 1, 7)\trule Disallow: /two*.x$ (line 8)",
        ),
        (
            &merged,
            "/two/y.xy",
            true,
            "group a (lines 1, 7)\tno rule matches",
        ),
        (&merged, "/b", true, "group a (lines 1, 7)\tno rule matches"),
        (
            &single,
            "/b/c",
            false,
            "group b (line 4)\trule Disallow: /b (line 5)",
        ),
        (&single, "/one", true, "group b (line 4)\tno rule matches"),
    ] {
        let d = policy.decide(target);
        assert_eq!(d.allowed(), allowed, "{target:?}");
        assert_eq!(policy.explain(&d).to_string(), why, "{target:?}");
    }
}

/// The example of the Gemini mailing-list reply (shared seed 001), read as written.
#[test]
fn mailing_list_example() {
    let robots = "\
# The GUS agent, plus any agent that identifies as an \"indexer\"
User-agent: GUS
Virtual-agent: indexer
Allow: /private/butpublic
Disallow: /private
Crawl-delay: 10

Virtual-agent: feed
Disallow: /private
Check: 21600

User-agent: *
Disallow: /private
Crawl-delay: 20
";
    run(&[
        row(robots, "gus", &[], "/private/butpublic/x", true),
        row(robots, "gus", &[], "/private/x", false),
        row(robots, "crawler", &["indexer"], "/private/butpublic", true),
        row(robots, "crawler", &["feed"], "/private/butpublic", false),
        row(robots, "crawler", &[], "/private/butpublic", false),
    ]);
    let parsed = RobotsTxt::parse(robots.as_bytes());
    assert_eq!(
        parsed.policy(&bot("gus", &[])).crawl_delay_secs(),
        Some(10.0)
    );
    assert_eq!(
        parsed.policy(&bot("crawler", &["feed"])).crawl_delay_secs(),
        None
    );
    assert_eq!(
        parsed.policy(&bot("crawler", &[])).crawl_delay_secs(),
        Some(20.0)
    );
}

/// The example files operators are pointed to (config/robots/) say what they do.
#[test]
fn example_files_in_config_decide_as_documented() {
    let capsule = include_str!("../../config/robots/gemini-capsule.txt");
    run(&[
        row(
            capsule,
            "examplebot",
            &["indexer"],
            "gemini://example.org/log/2026.gmi",
            true,
        ),
        row(
            capsule,
            "examplebot",
            &["indexer"],
            "gemini://example.org/log/2026.gmi?q",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &["indexer"],
            "gemini://example.org/cgi-bin/search",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &["archiver"],
            "gemini://example.org/drafts/x.gmi",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &["archiver"],
            "gemini://example.org/cgi-bin/x",
            true,
        ),
        row(
            capsule,
            "examplebot",
            &["indexer", "archiver"],
            "gemini://example.org/drafts/x.gmi",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &["webproxy"],
            "gemini://example.org/about.gmi",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &["webproxy"],
            "gemini://example.org/log/",
            true,
        ),
        row(
            capsule,
            "GreedyBot/1.0",
            &["indexer"],
            "gemini://example.org/log/",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &[],
            "gemini://example.org/cgi-bin/x",
            false,
        ),
        row(
            capsule,
            "examplebot",
            &[],
            "gemini://example.org/log/",
            true,
        ),
    ]);
    let delay = |virtuals: &[&str]| {
        RobotsTxt::parse(capsule.as_bytes())
            .policy(&bot("examplebot", virtuals))
            .crawl_delay_secs()
    };
    assert_eq!(delay(&["indexer"]), Some(2.0));
    assert_eq!(delay(&["archiver"]), None);
    assert_eq!(delay(&[]), Some(10.0));

    let hole = include_str!("../../config/robots/gopherhole.txt");
    run(&[
        row(
            hole,
            "examplebot",
            &[],
            "gopher://example.org/1/phlog",
            true,
        ),
        row(
            hole,
            "examplebot",
            &[],
            "gopher://example.org/1/phlog/drafts/x",
            false,
        ),
        row(
            hole,
            "examplebot",
            &[],
            "gopher://example.org/7/search",
            false,
        ),
        row(
            hole,
            "examplebot",
            &[],
            "gopher://example.org/1/bin/cgi-thing",
            false,
        ),
        row(
            hole,
            "examplebot",
            &[],
            "gopher://example.org/0about.txt",
            true,
        ),
        row(
            hole,
            "examplebot",
            &[],
            "gopher://example.org/0robots.txt",
            true,
        ),
    ]);
}
