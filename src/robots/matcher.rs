//! Compiled rules for one agent: longest match wins, `Allow` wins a tie
//! (RFC 9309 §2.2.2), `*` matches any run of characters and a final `$` anchors
//! the end (§2.2.3).
//!
//! Rules are sorted by priority (pattern length, then `Allow` before `Disallow`),
//! so the first rule that matches is the answer. To avoid trying every rule,
//! rules whose first two bytes are literal are bucketed by their second byte
//! (the first is nearly always `/`); a target only tries its own bucket and the
//! few rules that start with a wildcard. A decision allocates nothing.

use std::collections::HashSet;
use std::sync::Arc;

use super::encoding::is_kept;
use super::parse::{Rule, RuleKind};

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// No wildcard, no anchor: a prefix test.
    Prefix,
    /// Ends in `$`, no wildcard: equality with the pattern minus the `$`.
    Exact,
    /// Holds `*`: literal pieces between the stars, in `RuleSet::pieces`.
    Wild {
        first_piece: u32,
        piece_count: u32,
        anchored: bool,
    },
}

#[derive(Clone, Debug)]
pub(crate) struct CompiledRule {
    pub(crate) kind: RuleKind,
    pub(crate) line: u32,
    /// RFC 9309 §2.2.2 "most octets": the length of the pattern in normal
    /// form, as written (`arena[start..start + priority]`).
    priority: u32,
    /// What is matched, `arena[start..end]`: the pattern without trailing `*`.
    start: u32,
    end: u32,
    shape: Shape,
    /// Bigrams every path this rule matches must hold (see [`signature`]).
    needs: Sig,
}

/// A 64-bit Bloom filter of the byte pairs in `bytes`. A wildcard rule can only
/// match a path whose signature holds all the bits of its literal pieces, so one
/// AND rules out most wildcard rules without searching the path.
#[inline]
fn signature(bytes: &[u8]) -> Sig {
    let mut sig = 0;
    for pair in bytes.windows(2) {
        sig |= pair_bit(pair[0], pair[1]);
    }
    sig
}

type Sig = u64;

#[inline(always)]
fn pair_bit(a: u8, b: u8) -> Sig {
    let h = (u32::from(a).wrapping_mul(0x9E37) ^ u32::from(b).wrapping_mul(0x85EB)) >> 7;
    1 << (h & 63)
}

/// The first position of `needle` in `hay`, in time linear in both
/// (memchr's Two-Way search): a file of wildcard rules written to defeat the
/// signatures, against a long path, must not cost a comparison per position
/// and byte.
#[inline]
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(hay, needle)
}

/// One pass over a target: `None` when it is not already in normal form
/// (it must be normalised first), else its signature.
#[inline]
pub(crate) fn scan_normal_target(bytes: &[u8]) -> Option<Sig> {
    let (&first, rest) = match bytes.split_first() {
        Some(split) => split,
        None => return Some(0),
    };
    if !is_kept(first) {
        return None;
    }
    let mut sig = 0;
    let mut prev = first;
    for &b in rest {
        if !is_kept(b) {
            return None;
        }
        sig |= pair_bit(prev, b);
        prev = b;
    }
    Some(sig)
}

/// Stands for "compute the signature only if a rule needs it".
pub(crate) const NO_SIGNATURE: Option<Sig> = None;

/// All rules that apply to one agent, ready to match.
#[derive(Clone, Debug)]
pub(crate) struct RuleSet {
    /// The parsed file's arena, shared: the patterns are read where the
    /// parser put them, never copied.
    arena: Arc<Vec<u8>>,
    pieces: Vec<(u32, u32)>,
    /// `rules[..any]`: rules every target must try, by priority.
    /// `rules[any..]`: rules bucketed by the pattern's second byte, by priority
    /// within a bucket; `buckets[b]..buckets[b + 1]` (offsets from `any`).
    rules: Vec<CompiledRule>,
    any: usize,
    buckets: Option<Box<[u32; 257]>>,
}

/// Patterns are shorter than this (the parser reads at most 500 KiB); a
/// longer one would rank as if it were this long.
const MAX_PRIORITY: u32 = (1 << 20) - 1;
const _: () = assert!(super::parse::PARSE_LIMIT < MAX_PRIORITY as usize);

/// Below this many rules a plain scan beats the bucket table.
const BUCKET_THRESHOLD: usize = 8;

/// Rules that rank alike are searched for twins one by one up to this many,
/// and through a hash set beyond.
const SCANNED_RUN: usize = 16;

/// A rule's place in the compiled order, as one integer, so that sorting
/// moves and compares words rather than rules. From the top bits down:
/// the bucket (0 for rules every target tries, else 1 + the pattern's second
/// byte), priority (longest first), `Allow` before `Disallow`, and the rule's
/// place in the input (its line order) in the low 32 bits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct SortKey(u64);

impl SortKey {
    fn new(bucket: Option<u8>, priority: u32, kind: RuleKind, place: u32) -> SortKey {
        let slot = bucket.map_or(0, |b| u64::from(b) + 1);
        let rank = u64::from(MAX_PRIORITY - priority.min(MAX_PRIORITY));
        SortKey(
            slot << 53
                | rank << 33
                | u64::from(kind == RuleKind::Disallow) << 32
                | u64::from(place),
        )
    }

    /// The pattern's second byte, for a bucketed rule.
    fn bucket(self) -> Option<u8> {
        ((self.0 >> 53) as usize).checked_sub(1).map(|b| b as u8)
    }

    /// Everything but the place: rules that rank alike.
    fn rank(self) -> u64 {
        self.0 >> 32
    }

    fn place(self) -> usize {
        self.0 as u32 as usize
    }
}

impl RuleSet {
    /// The heap this set holds, allocator rounding aside; the arena is the
    /// parsed file's, counted there.
    pub(crate) fn heap_size(&self) -> usize {
        self.pieces.capacity() * std::mem::size_of::<(u32, u32)>()
            + self.rules.capacity() * std::mem::size_of::<CompiledRule>()
            + self.buckets.as_ref().map_or(0, |_| 257 * 4)
    }

    /// Compiles `rules` (in file order), whose patterns, in normal form, lie in `arena`.
    pub(crate) fn build(arena: &Arc<Vec<u8>>, rules: &[Rule]) -> RuleSet {
        let pattern = |r: &Rule| &arena[r.pattern.start as usize..r.pattern.end as usize];
        let bucketed = rules.len() >= BUCKET_THRESHOLD;
        // The keys alone are sorted; the rules are compiled afterwards, in order.
        let mut keys: Vec<SortKey> = rules
            .iter()
            .enumerate()
            .map(|(place, r)| {
                // A trailing `*` does not change the second byte: when the
                // pattern is `[a, *]`, it has no bucket either way.
                let bucket = match pattern(r) {
                    [a, b, ..] if bucketed && *a != b'*' && *b != b'*' && *b != b'$' => Some(*b),
                    _ => None,
                };
                // RFC 9309 counts the octets of the rule as written, trailing `*` included.
                let priority = r.pattern.end - r.pattern.start;
                SortKey::new(bucket, priority, r.kind, place as u32)
            })
            .collect();
        keys.sort_unstable();
        // A rule written twice ranks alike and lands in the same run as its
        // twin: only the first is kept, since it decides nothing new. Twins
        // are looked for by a scan while the run is short, and in a hash set
        // once it is long: a file of thousands of distinct rules of one
        // length and bucket would otherwise cost a comparison per pair.
        let mut seen: Option<HashSet<&[u8]>> = None;
        let (mut kept, mut run_start) = (0, 0);
        for i in 0..keys.len() {
            let k = keys[i];
            if kept > 0 && keys[kept - 1].rank() != k.rank() {
                run_start = kept;
                if let Some(seen) = &mut seen {
                    seen.clear();
                }
            }
            let run = &keys[run_start..kept];
            let written = || pattern(&rules[k.place()]);
            let twin = if run.len() < SCANNED_RUN {
                run.iter().any(|o| pattern(&rules[o.place()]) == written())
            } else {
                let seen = seen.get_or_insert_with(HashSet::new);
                if seen.is_empty() {
                    seen.extend(run.iter().map(|o| pattern(&rules[o.place()])));
                }
                !seen.insert(written())
            };
            if !twin {
                keys[kept] = k;
                kept += 1;
            }
        }
        keys.truncate(kept);

        let mut set = RuleSet {
            arena: Arc::clone(arena),
            // Two pieces per wildcard rule, the usual `/a*b` (more grow the vector).
            pieces: Vec::with_capacity(2 * rules.iter().filter(|r| r.wild).count()),
            rules: Vec::with_capacity(keys.len()),
            any: keys.partition_point(|k| k.bucket().is_none()),
            buckets: None,
        };
        for k in &keys {
            let rule = set.compile(&rules[k.place()]);
            set.rules.push(rule);
        }
        if set.any < keys.len() {
            // buckets[b]: how many bucketed rules have a second byte below b.
            let mut buckets = Box::new([0u32; 257]);
            let mut next = 0;
            for (i, k) in keys[set.any..].iter().enumerate() {
                let b = usize::from(k.bucket().unwrap_or(0));
                if next <= b {
                    buckets[next..=b].fill(i as u32);
                    next = b + 1;
                }
            }
            buckets[next..].fill((keys.len() - set.any) as u32);
            set.buckets = Some(buckets);
        }
        set
    }

    /// One rule: its shape, and its pieces when it has wildcards.
    fn compile(&mut self, rule: &Rule) -> CompiledRule {
        let Rule {
            kind,
            pattern: span,
            wild,
            line,
        } = *rule;
        let start = span.start;
        let mut end = span.end;
        if wild {
            // A trailing `*` (unanchored) matches nothing more than its
            // absence, and stars alone match what the empty prefix does.
            let written = &self.arena[start as usize..end as usize];
            end -= written.iter().rev().take_while(|&&b| b == b'*').count() as u32;
        }
        let pattern = &self.arena[start as usize..end as usize];
        // Trailing stars aside, is a `*` left?
        let wild = wild && pattern.contains(&b'*');
        let (shape, needs) = if wild {
            let anchored = pattern.last() == Some(&b'$');
            let body = if anchored { end - 1 } else { end };
            let first_piece = self.pieces.len() as u32;
            let mut piece_start = start;
            let mut needs = 0;
            for (i, &b) in pattern[..(body - start) as usize].iter().enumerate() {
                if b == b'*' {
                    let piece = (piece_start, start + i as u32);
                    needs |= signature(&self.arena[piece.0 as usize..piece.1 as usize]);
                    self.pieces.push(piece);
                    piece_start = piece.1 + 1;
                }
            }
            needs |= signature(&self.arena[piece_start as usize..body as usize]);
            self.pieces.push((piece_start, body));
            let shape = Shape::Wild {
                first_piece,
                piece_count: self.pieces.len() as u32 - first_piece,
                anchored,
            };
            (shape, needs)
        } else if pattern.last() == Some(&b'$') {
            (Shape::Exact, 0)
        } else {
            (Shape::Prefix, 0)
        };
        CompiledRule {
            kind,
            line,
            priority: span.end - start,
            start,
            end,
            shape,
            needs,
        }
    }

    /// The index of the rule that decides `path` (in normal form), if any
    /// matches. Each wildcard search (the costly step: a search of the path
    /// per piece) takes one from `budget`; at zero, wildcard rules are passed
    /// over and the caller must not trust the answer (see
    /// `Policy::decide_within`).
    #[inline]
    pub(crate) fn best(&self, path: &[u8], mut sig: Option<Sig>, budget: &mut u64) -> Option<u32> {
        let mut best = match (&self.buckets, path.get(1)) {
            (Some(b), Some(&k)) => (self.any + b[k as usize] as usize
                ..self.any + b[k as usize + 1] as usize)
                .find(|&i| self.matches(&self.rules[i], path, Sig::MAX, budget)),
            _ => None,
        };
        // The path's signature, if not given, is computed only if a wildcard rule needs it.
        for (i, rule) in self.rules[..self.any].iter().enumerate() {
            if let Some(b) = best {
                let current = &self.rules[b];
                // Sorted by priority: nothing further down can outrank `current`.
                let outranks = rule.priority > current.priority
                    || (rule.priority == current.priority
                        && rule.kind == RuleKind::Allow
                        && current.kind == RuleKind::Disallow);
                if !outranks {
                    break;
                }
            }
            let path_sig = if rule.needs == 0 {
                Sig::MAX
            } else {
                *sig.get_or_insert_with(|| signature(path))
            };
            if self.matches(rule, path, path_sig, budget) {
                best = Some(i);
            }
        }
        best.map(|i| i as u32)
    }

    #[inline]
    fn matches(&self, rule: &CompiledRule, path: &[u8], path_sig: Sig, budget: &mut u64) -> bool {
        if rule.needs & !path_sig != 0 {
            return false;
        }
        let pattern = &self.arena[rule.start as usize..rule.end as usize];
        match rule.shape {
            Shape::Prefix => path.starts_with(pattern),
            Shape::Exact => path == &pattern[..pattern.len() - 1],
            Shape::Wild {
                first_piece,
                piece_count,
                anchored,
            } => {
                if *budget == 0 {
                    return false;
                }
                *budget -= 1;
                let pieces =
                    &self.pieces[first_piece as usize..(first_piece + piece_count) as usize];
                self.wild_match(pieces, anchored, path)
            }
        }
    }

    /// `p0*p1*…*pn`: p0 is a prefix, the middle pieces are found leftmost in order
    /// (leftmost is always safe: it leaves the most room for what follows), and pn
    /// is found after them, or is a suffix when the pattern is anchored.
    fn wild_match(&self, pieces: &[(u32, u32)], anchored: bool, path: &[u8]) -> bool {
        let piece = |p: &(u32, u32)| &self.arena[p.0 as usize..p.1 as usize];
        let Some((first, rest)) = pieces.split_first() else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            return false;
        };
        let first = piece(first);
        if !path.starts_with(first) {
            return false;
        }
        let mut pos = first.len();
        for p in middle {
            let p = piece(p);
            match find(&path[pos..], p) {
                Some(i) => pos += i + p.len(),
                None => return false,
            }
        }
        let last = piece(last);
        if anchored {
            path.len() - pos >= last.len() && path.ends_with(last)
        } else {
            find(&path[pos..], last).is_some()
        }
    }

    /// Every rule that matches `path` with the longest pattern, ties
    /// included (for preferences, where equally specific lines combine).
    pub(crate) fn longest_matches(
        &self,
        path: &[u8],
        sig: Option<Sig>,
        budget: &mut u64,
    ) -> Vec<u32> {
        let Some(best) = self.best(path, sig, budget) else {
            return Vec::new();
        };
        let top = self.rules[best as usize].priority;
        let path_sig = sig.unwrap_or_else(|| signature(path));
        (0..self.rules.len())
            .filter(|&i| {
                let rule = &self.rules[i];
                rule.priority == top
                    && (i == best as usize || self.matches(rule, path, path_sig, budget))
            })
            .map(|i| i as u32)
            .collect()
    }

    pub(crate) fn rule(&self, index: u32) -> (&CompiledRule, &str) {
        let r = &self.rules[index as usize];
        // Patterns are in normal form, which is ASCII.
        let written = &self.arena[r.start as usize..(r.start + r.priority) as usize];
        let pattern = std::str::from_utf8(written);
        (r, pattern.unwrap_or_default())
    }

    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::Span;
    use super::*;
    use RuleKind::{Allow, Disallow};

    fn set(rules: &[(RuleKind, &str)]) -> RuleSet {
        let mut arena = Vec::new();
        let mut parsed = Vec::new();
        for (i, (kind, p)) in rules.iter().enumerate() {
            let start = arena.len() as u32;
            arena.extend_from_slice(p.as_bytes());
            parsed.push(Rule {
                kind: *kind,
                pattern: Span {
                    start,
                    end: arena.len() as u32,
                },
                wild: p.contains('*'),
                line: i as u32 + 1,
            });
        }
        RuleSet::build(&Arc::new(arena), &parsed)
    }

    fn verdict(s: &RuleSet, path: &str) -> Option<(RuleKind, u32)> {
        s.best(path.as_bytes(), NO_SIGNATURE, &mut { u64::MAX })
            .map(|i| (s.rule(i).0.kind, s.rule(i).0.line))
    }

    #[test]
    fn shapes() {
        // (pattern, path, matches)
        let cases: &[(&str, &str, bool)] = &[
            ("/fish", "/fish", true),
            ("/fish", "/fish.html", true),
            ("/fish", "/Fish", false),
            ("/fish", "/catfish", false),
            ("/fish/", "/fish", false),
            ("/*.php", "/index.php", true),
            ("/*.php", "/folder/any.php.file.html", true),
            ("/*.php", "/", false),
            ("/*.php$", "/filename.php", true),
            ("/*.php$", "/filename.php?parameters", false),
            ("/*.php$", "/filename.php/", false),
            ("/fish*.php", "/fish.php", true),
            ("/fish*.php", "/fishheads/catfish.php?parameters", true),
            ("/fish*.php", "/Fish.PHP", false),
            ("/$", "/", true),
            ("/$", "/a", false),
            ("/a*b*c$", "/aXbYc", true),
            ("/a*b*c$", "/abcbc", true),
            ("/a*b*c$", "/acb", false),
            ("/a*bc$", "/abc", true),
            ("/ab*bc$", "/abc", false),
            ("*/", "0/foo", true),
            ("*/", "users", false),
            ("/", "users", false),
            ("*", "", true),
            ("/**x", "/yx", true),
        ];
        for (pattern, path, want) in cases {
            let s = set(&[(Disallow, pattern)]);
            assert_eq!(
                s.best(path.as_bytes(), NO_SIGNATURE, &mut { u64::MAX })
                    .is_some(),
                *want,
                "{pattern:?} vs {path:?}"
            );
        }
    }

    #[test]
    fn longest_match_and_ties() {
        let s = set(&[(Disallow, "/"), (Allow, "/x/"), (Disallow, "/x/page")]);
        assert_eq!(verdict(&s, "/x/page.html"), Some((Disallow, 3)));
        assert_eq!(verdict(&s, "/x/other"), Some((Allow, 2)));
        assert_eq!(verdict(&s, "/y"), Some((Disallow, 1)));
        let tie = set(&[(Disallow, "/folder"), (Allow, "/folder")]);
        assert_eq!(verdict(&tie, "/folder/page"), Some((Allow, 2)));
        // "Most octets" is the pattern's length, not the matched text's.
        let len = set(&[(Allow, "/x/page."), (Disallow, "/*.html")]);
        assert_eq!(verdict(&len, "/x/page.html"), Some((Allow, 1)));
    }

    /// Twins are dropped however many rules rank alike (past [`SCANNED_RUN`]
    /// they are found through a hash set), and the first of each decides.
    #[test]
    fn twins_in_long_runs_are_dropped_and_the_first_decides() {
        let patterns: Vec<String> = (0..3 * SCANNED_RUN).map(|i| format!("/a{i:03}")).collect();
        // Every pattern, then every pattern again, then an Allow twin of one:
        // the Allow ranks apart (it wins the tie), so it is no twin.
        let mut rules: Vec<(RuleKind, &str)> = Vec::new();
        for _ in 0..2 {
            rules.extend(patterns.iter().map(|p| (Disallow, p.as_str())));
        }
        rules.push((Allow, "/a007"));
        let s = set(&rules);
        assert_eq!(s.len(), patterns.len() + 1);
        for (i, p) in patterns.iter().enumerate() {
            let want = if i == 7 {
                (Allow, rules.len() as u32)
            } else {
                (Disallow, i as u32 + 1)
            };
            assert_eq!(verdict(&s, &format!("{p}/x")), Some(want), "{p}");
        }
        assert_eq!(verdict(&s, "/a999"), None);
    }

    #[test]
    fn bucketed_and_scanned_sets_agree() {
        let patterns = [
            "/a", "/ab", "/abc$", "/*c", "/b*", "/ba/", "*x", "/c", "/a*z$", "/b", "/", "/zz",
            "/a/b",
        ];
        let rules: Vec<(RuleKind, &str)> = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| (if i % 3 == 0 { Allow } else { Disallow }, *p))
            .collect();
        let big = set(&rules);
        assert!(big.buckets.is_some());
        for path in [
            "/a", "/abc", "/abz", "/bac", "/ba/x", "/x", "/cx", "/zz", "", "/", "a/b",
        ] {
            // Reference: try every rule, keep the best by (priority, allow).
            let reference = rules
                .iter()
                .enumerate()
                .filter(|(_, (k, p))| {
                    set(&[(*k, p)])
                        .best(path.as_bytes(), NO_SIGNATURE, &mut { u64::MAX })
                        .is_some()
                })
                .max_by_key(|(i, (k, p))| (p.len(), *k == Allow, usize::MAX - i))
                .map(|(i, (k, _))| (*k, i as u32 + 1));
            let got = verdict(&big, path);
            assert_eq!(
                got.map(|g| (g.0, rules[g.1 as usize - 1].1.len())),
                reference.map(|r| (r.0, rules[r.1 as usize - 1].1.len())),
                "{path:?}"
            );
        }
    }
}
