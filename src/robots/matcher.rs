//! Compiled rules for one agent: longest match wins, `Allow` wins a tie
//! (RFC 9309 §2.2.2), `*` matches any run of characters and a final `$` anchors
//! the end (§2.2.3).
//!
//! Rules are sorted by priority (pattern length, then `Allow` before `Disallow`),
//! so the first rule that matches is the answer. To avoid trying every rule,
//! rules whose first two bytes are literal are bucketed by their second byte
//! (the first is nearly always `/`); a target only tries its own bucket and the
//! few rules that start with a wildcard. A decision allocates nothing.

use super::encoding::is_kept;
use super::parse::RuleKind;

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
    /// RFC 9309 §2.2.2 "most octets": the length of the pattern in normal form.
    priority: u32,
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

/// The first position of `needle` in `hay`. Paths are short and the signature
/// has already ruled out most misses, so a plain scan is all this needs.
#[inline]
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    let Some((&first, rest)) = needle.split_first() else {
        return Some(0);
    };
    let last_start = hay.len().checked_sub(needle.len())?;
    (0..=last_start).find(|&i| hay[i] == first && &hay[i + 1..i + needle.len()] == rest)
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
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleSet {
    arena: Vec<u8>,
    pieces: Vec<(u32, u32)>,
    /// `rules[..any]`: rules every target must try, by priority.
    /// `rules[any..]`: rules bucketed by the pattern's second byte, by priority
    /// within a bucket; `buckets[b]..buckets[b + 1]` (offsets from `any`).
    rules: Vec<CompiledRule>,
    any: usize,
    buckets: Option<Box<[u32; 257]>>,
}

/// Priorities and rule counts are below this (the parser reads at most
/// 500 KiB, so no pattern and no count of rules reaches it); the sort key
/// packs both.
const MAX_PRIORITY: u32 = (1 << 20) - 1;
const _: () = assert!(super::parse::PARSE_LIMIT < MAX_PRIORITY as usize);

/// Below this many rules a plain scan beats the bucket table.
const BUCKET_THRESHOLD: usize = 8;

impl RuleSet {
    /// The heap this set holds, allocator rounding aside.
    pub(crate) fn heap_size(&self) -> usize {
        self.arena.capacity()
            + self.pieces.capacity() * std::mem::size_of::<(u32, u32)>()
            + self.rules.capacity() * std::mem::size_of::<CompiledRule>()
            + self.buckets.as_ref().map_or(0, |_| 257 * 4)
    }

    /// Compiles patterns (already in normal form) with their kind and line.
    /// `count` and `bytes` size the buffers: how many rules, how many pattern bytes.
    pub(crate) fn build<'a>(
        rules: impl Iterator<Item = (RuleKind, &'a [u8], u32)>,
        count: usize,
        bytes: usize,
    ) -> RuleSet {
        let mut set = RuleSet {
            arena: Vec::with_capacity(bytes + 1),
            pieces: Vec::with_capacity(count),
            ..RuleSet::default()
        };
        // Every rule in the order of the file, and the key it sorts by: one
        // integer per rule, so sorting moves and compares words, not rules.
        // Bucketed or not, the bucket, priority (longest first), Allow first,
        // then the rule's place in the file (its line order). The parser's
        // 500 KiB limit keeps priorities and places under 2^20.
        let mut compiled: Vec<CompiledRule> = Vec::with_capacity(count);
        let mut keys: Vec<u64> = Vec::with_capacity(count);
        let bucketed = count >= BUCKET_THRESHOLD;
        for (kind, original, line) in rules {
            // A trailing `*` (unanchored) matches nothing more than its absence;
            // the priority stays the length of the rule as written.
            let trimmed = original.strip_suffix(b"*").map_or(original, |t| {
                let n = t.iter().rev().take_while(|&&b| b == b'*').count();
                &t[..t.len() - n]
            });
            let pattern: &[u8] = if trimmed.is_empty() { b"*" } else { trimmed };
            let start = set.arena.len() as u32;
            set.arena.extend_from_slice(pattern);
            let end = set.arena.len() as u32;
            let shape = if pattern.contains(&b'*') {
                let anchored = pattern.last() == Some(&b'$');
                let body = if anchored { end - 1 } else { end };
                let first_piece = set.pieces.len() as u32;
                let mut piece_start = start;
                for (i, &b) in pattern[..(body - start) as usize].iter().enumerate() {
                    if b == b'*' {
                        set.pieces.push((piece_start, start + i as u32));
                        piece_start = start + i as u32 + 1;
                    }
                }
                set.pieces.push((piece_start, body));
                Shape::Wild {
                    first_piece,
                    piece_count: set.pieces.len() as u32 - first_piece,
                    anchored,
                }
            } else if pattern.last() == Some(&b'$') {
                Shape::Exact
            } else {
                Shape::Prefix
            };
            let needs = match shape {
                Shape::Wild {
                    first_piece,
                    piece_count,
                    ..
                } => set.pieces[first_piece as usize..(first_piece + piece_count) as usize]
                    .iter()
                    .fold(0, |acc, &(a, b)| {
                        acc | signature(&set.arena[a as usize..b as usize])
                    }),
                _ => 0,
            };
            let rule = CompiledRule {
                kind,
                line,
                // RFC 9309 counts the octets of the rule as written, trailing `*` included.
                priority: original.len() as u32,
                start,
                end,
                shape,
                needs,
            };
            let bucket = match pattern {
                [a, b, ..] if bucketed && *a != b'*' && *b != b'*' && *b != b'$' => Some(*b),
                _ => None,
            };
            let priority = u64::from(MAX_PRIORITY - rule.priority.min(MAX_PRIORITY));
            keys.push(
                u64::from(bucket.is_some()) << 49
                    | u64::from(bucket.unwrap_or(0)) << 41
                    | priority << 21
                    | u64::from(rule.kind == RuleKind::Disallow) << 20
                    | (compiled.len() as u64).min(u64::from(MAX_PRIORITY)),
            );
            compiled.push(rule);
        }

        // Priority first (longest, then Allow), then line. A rule written twice
        // has the same priority and kind, so it lands in the same run as its twin
        // and only the first line is kept: it decides nothing new.
        keys.sort_unstable();
        // A rule written twice has the same bucket, priority and kind, so it
        // lands in the same run as its twin: only the first is kept, since
        // it decides nothing new.
        let place = |k: u64| (k & u64::from(MAX_PRIORITY)) as usize;
        let pattern = |k: u64| {
            let r = &compiled[place(k)];
            &set.arena[r.start as usize..r.end as usize]
        };
        let (mut kept, mut run_start) = (0, 0);
        for i in 0..keys.len() {
            let k = keys[i];
            if kept > 0 && keys[kept - 1] >> 20 != k >> 20 {
                run_start = kept;
            }
            if !keys[run_start..kept]
                .iter()
                .any(|&o| pattern(o) == pattern(k))
            {
                keys[kept] = k;
                kept += 1;
            }
        }
        keys.truncate(kept);
        set.any = keys.partition_point(|k| k >> 49 == 0);
        set.rules = keys.iter().map(|&k| compiled[place(k)].clone()).collect();
        if set.any == set.rules.len() {
            return set;
        }
        let mut buckets = Box::new([0u32; 257]);
        for k in &keys[set.any..] {
            buckets[(k >> 41) as u8 as usize + 1] += 1;
        }
        for i in 1..257 {
            buckets[i] += buckets[i - 1];
        }
        set.buckets = Some(buckets);
        set
    }

    /// The index of the rule that decides `path` (in normal form), if any matches.
    #[inline]
    pub(crate) fn best(&self, path: &[u8], mut sig: Option<Sig>) -> Option<u32> {
        let mut best = match (&self.buckets, path.get(1)) {
            (Some(b), Some(&k)) => (self.any + b[k as usize] as usize
                ..self.any + b[k as usize + 1] as usize)
                .find(|&i| self.matches(&self.rules[i], path, Sig::MAX)),
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
            if self.matches(rule, path, path_sig) {
                best = Some(i);
            }
        }
        best.map(|i| i as u32)
    }

    #[inline]
    fn matches(&self, rule: &CompiledRule, path: &[u8], path_sig: Sig) -> bool {
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

    pub(crate) fn rule(&self, index: u32) -> (&CompiledRule, &str) {
        let r = &self.rules[index as usize];
        // Patterns are in normal form, which is ASCII.
        let pattern = std::str::from_utf8(&self.arena[r.start as usize..r.end as usize]);
        (r, pattern.unwrap_or_default())
    }

    pub(crate) fn len(&self) -> usize {
        self.rules.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RuleKind::{Allow, Disallow};

    fn set(rules: &[(RuleKind, &str)]) -> RuleSet {
        RuleSet::build(
            rules
                .iter()
                .enumerate()
                .map(|(i, (k, p))| (*k, p.as_bytes(), i as u32 + 1)),
            rules.len(),
            64,
        )
    }

    fn verdict(s: &RuleSet, path: &str) -> Option<(RuleKind, u32)> {
        s.best(path.as_bytes(), NO_SIGNATURE)
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
                s.best(path.as_bytes(), NO_SIGNATURE).is_some(),
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
                        .best(path.as_bytes(), NO_SIGNATURE)
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
