//! Property tests: any bytes parse without panicking; the compiled matcher agrees
//! with a naive reading of RFC 9309; equivalent spellings of a target decide alike.

use proptest::prelude::*;
use robots_proxy::check::decide_target;
use robots_proxy::robots::{BotProfile, RobotsTxt};
use robots_proxy::spelling::SelectorReading;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_parse_and_decide(body in proptest::collection::vec(any::<u8>(), 0..4096),
                                  path in proptest::collection::vec(any::<u8>(), 0..256)) {
        let robots = RobotsTxt::parse(&body);
        let policy = robots.policy(&BotProfile::new("bot").with_virtual_agent("indexer"));
        let d = policy.decide_bytes(&path);
        let _ = policy.explain(&d).to_string();
    }

    /// Any selector bytes: the spellings never panic; a selector that can be
    /// decided is decided no more leniently than as written, in either reading,
    /// and the literal reading never refuses what the safe one allows.
    #[test]
    fn any_selector_decides_over_its_spellings(
        selector in proptest::collection::vec(
            prop::sample::select(b"/%25Fab.?\t0x\x00rs".to_vec()), 0..40),
        rule in "(/|\\*)[a-z%/.]{0,6}",
    ) {
        use robots_proxy::spelling::{decide_selector, gopher_spellings};
        let policy = RobotsTxt::parse(format!("User-agent: *\nDisallow: {rule}\n").as_bytes())
            .policy(&BotProfile::new("bot"));
        match gopher_spellings(&selector, SelectorReading::Safe) {
            Ok(all) => {
                prop_assert_eq!(&all[0], &selector);
                let safe = decide_selector(&policy, &selector, SelectorReading::Safe).unwrap();
                let literal = decide_selector(&policy, &selector, SelectorReading::Literal).unwrap();
                let written = policy.decide_bytes(&selector);
                let robots_itself = policy.explain(&written).robots_txt_itself;
                prop_assert!(robots_itself || written.allowed() || !safe.allowed());
                prop_assert!(robots_itself || literal.allowed() || !safe.allowed());
            }
            Err(_) => prop_assert!(decide_selector(&policy, &selector, SelectorReading::Safe).is_err()),
        }
    }

    #[test]
    fn robots_like_junk_parses(
        lines in proptest::collection::vec((
            prop::sample::select(vec!["User-agent", "virtual-AGENT", "allow", "Disallow", "crawl-delay", "Sitemap", "x", ""]),
            prop::sample::select(vec![":", " ", ": ", "\t:\t", ""]),
            "[ -~]{0,16}",
            prop::sample::select(vec!["", "ü", "\u{feff}", "\u{0}", "#c", "*", "$"]),
            prop::sample::select(vec!["\n", "\r\n", "\r"]),
        ), 0..40)) {
        let body: String = lines.iter().map(|(f, sep, v, extra, end)| format!("{f}{sep}{v}{extra}{end}")).collect();
        let policy = RobotsTxt::parse(body.as_bytes()).policy(&BotProfile::new("bot"));
        let _ = policy.decide("/some/path");
    }
}

/// A naive RFC 9309 matcher: recursive wildcard matching, every rule tried.
fn reference_matches(pattern: &[u8], path: &[u8]) -> bool {
    match pattern.split_first() {
        None => true,
        Some((b'$', [])) => path.is_empty(),
        Some((b'*', rest)) => (0..=path.len()).any(|i| reference_matches(rest, &path[i..])),
        Some((c, rest)) => path.first() == Some(c) && reference_matches(rest, &path[1..]),
    }
}

fn reference_allowed(rules: &[(bool, String)], path: &str) -> bool {
    rules
        .iter()
        .filter(|(_, p)| reference_matches(p.as_bytes(), path.as_bytes()))
        .max_by_key(|(allow, p)| (p.len(), *allow))
        .is_none_or(|(allow, _)| *allow)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn compiled_matcher_agrees_with_reference(
        rules in proptest::collection::vec((any::<bool>(), "[/ab*]{1,6}\\$?"), 0..24),
        paths in proptest::collection::vec("[/ab]{0,8}", 1..16),
    ) {
        let body: String = std::iter::once("User-agent: *\n".to_string())
            .chain(rules.iter().map(|(allow, p)| format!("{}: {p}\n", if *allow { "Allow" } else { "Disallow" })))
            .collect();
        let policy = RobotsTxt::parse(body.as_bytes()).policy(&BotProfile::new("bot"));
        for path in &paths {
            if matches!(path.as_str(), "robots.txt" | "/robots.txt") {
                continue;
            }
            prop_assert_eq!(
                policy.decide(path).allowed(),
                reference_allowed(&rules, path),
                "path {:?} under\n{}", path, body
            );
        }
    }
}

/// One way of writing a segment character: as itself or percent-encoded in either case.
fn spell(c: char, how: u8) -> String {
    match how % 3 {
        0 => c.to_string(),
        1 => format!("%{:02X}", c as u32),
        _ => format!("%{:02x}", c as u32),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn equivalent_spellings_decide_alike(
        segments in proptest::collection::vec("[a-c0-9_~-]{1,4}", 1..5),
        rules in proptest::collection::vec((any::<bool>(), "/[a-c/*]{0,6}"), 1..8),
        spellings in proptest::collection::vec(any::<u8>(), 40),
        detours in proptest::collection::vec(0u8..4, 5),
        host_case in any::<bool>(),
        trailing_dot in any::<bool>(),
        explicit_port in any::<bool>(),
    ) {
        let body: String = std::iter::once("User-agent: *\n".to_string())
            .chain(rules.iter().map(|(allow, p)| format!("{}: {p}\n", if *allow { "Allow" } else { "Disallow" })))
            .collect();
        let policy = RobotsTxt::parse(body.as_bytes()).policy(&BotProfile::new("bot"));
        let canonical = format!("gemini://example.org/{}", segments.join("/"));

        let mut k = 0;
        let mut path = String::new();
        for (i, seg) in segments.iter().enumerate() {
            // Detours that dot-segment removal undoes.
            match detours[i % detours.len()] {
                1 => path.push_str("/."),
                2 => path.push_str("/zz/.."),
                3 => path.push_str("/%2E"),
                _ => {}
            }
            path.push('/');
            for c in seg.chars() {
                path.push_str(&spell(c, spellings[k % spellings.len()]));
                k += 1;
            }
        }
        let host = if host_case { "EXAMPLE.Org" } else { "example.org" };
        let dot = if trailing_dot { "." } else { "" };
        let port = if explicit_port { ":1965" } else { "" };
        let variant = format!("gemini://{host}{dot}{port}{path}");

        let (a, _) = decide_target(&policy, &canonical, SelectorReading::Safe).unwrap();
        let (b, _) = decide_target(&policy, &variant, SelectorReading::Safe).unwrap();
        prop_assert_eq!(a.allowed(), b.allowed(), "{} vs {}\n{}", canonical, variant, body);
    }
}
