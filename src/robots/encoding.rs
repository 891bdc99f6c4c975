//! The one percent-encoding normal form that patterns and targets are compared in.
//!
//! RFC 9309 §2.2.2: "the URI MUST be percent-encoded before comparison" and the
//! example there (`/foo/bar/%62%61%7A` matches `/foo/bar/baz`) needs the RFC 3986
//! §6.2.2 normalisations as well. Both sides therefore go through [`normalize`]:
//!
//! * `%XX` of an unreserved character (`A-Z a-z 0-9 - . _ ~`) is decoded;
//! * every other `%XX` keeps its escape, with upper-case hex digits;
//! * a `%` that starts no valid escape becomes `%25`;
//! * bytes that may stand raw in a URI path or query (unreserved, gen-delims and
//!   sub-delims) are kept;
//! * every other byte (controls, space, non-ASCII, `"<>\^`{|}`) is escaped.
//!
//! `*` and `$` are special in patterns (RFC 9309 §2.2.3). A target's own `*` and
//! `$` are escaped to `%2A` and `%24`, so that a pattern can match them only when it
//! spells them `%2A` / `%24`, as §2.2.3 asks. In a pattern, `*` stays a wildcard and
//! `$` is the end anchor only as the last byte; elsewhere it is a literal `%24`.
//!
//! The normal form is pure ASCII, so it can be handled as `&str`.

/// How a byte is treated in the normal form.
const fn keep_table() -> [bool; 256] {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b':'
                    | b'/'
                    | b'?'
                    | b'#'
                    | b'['
                    | b']'
                    | b'@'
                    | b'!'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        b += 1;
    }
    t
}

/// Bytes that stand for themselves in the normal form.
static KEEP: [bool; 256] = keep_table();

/// What a byte is to a pattern: [`PLAIN`], [`STAR`], [`DOLLAR`] or [`OTHER`].
static PATTERN_CLASS: [u8; 256] = pattern_class_table();
const PLAIN: u8 = 0;
const STAR: u8 = 1;
const DOLLAR: u8 = 2;
const OTHER: u8 = 4;

const fn pattern_class_table() -> [u8; 256] {
    let keep = keep_table();
    let mut t = [OTHER; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'*' => STAR,
            b'$' => DOLLAR,
            _ if keep[b] => PLAIN,
            _ => OTHER,
        };
        b += 1;
    }
    t
}

/// For a pattern that is already in normal form (the usual case: kept bytes,
/// `*`, and `$` only at the end), whether it holds a `*`; `None` when it must
/// be normalised. One pass with no early exit, so no branch depends on the bytes.
fn plain_pattern(input: &[u8]) -> Option<bool> {
    let (&last, body) = input.split_last()?;
    let class = body
        .iter()
        .fold(0, |class, &b| class | PATTERN_CLASS[b as usize]);
    let last = PATTERN_CLASS[last as usize];
    (class & (DOLLAR | OTHER) == 0 && last & OTHER == 0).then_some((class | last) & STAR != 0)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// What is being normalised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A robots.txt pattern: `*` is a wildcard, a final `$` the end anchor.
    Pattern,
    /// A target about to be matched: its own `*` and `$` are escaped.
    Target,
    /// A URL to forward: `*` and `$` stay as the client wrote them, since
    /// RFC 3986 does not make them equivalent to their escapes.
    Url,
}

/// Where normalised bytes go: a `Vec` when building, a stack buffer on the hot path.
pub(crate) trait Sink {
    fn push(&mut self, b: u8);
    /// Bytes that stand for themselves, pushed as one run.
    fn push_run(&mut self, run: &[u8]) {
        for &b in run {
            self.push(b);
        }
    }
    fn push_escape(&mut self, b: u8) {
        self.push(b'%');
        self.push(HEX[(b >> 4) as usize]);
        self.push(HEX[(b & 0xF) as usize]);
    }
}

impl Sink for Vec<u8> {
    fn push(&mut self, b: u8) {
        Vec::push(self, b);
    }
    fn push_run(&mut self, run: &[u8]) {
        self.extend_from_slice(run);
    }
}

impl Sink for String {
    fn push(&mut self, b: u8) {
        // Only ASCII is ever pushed: see the module comment.
        debug_assert!(b.is_ascii());
        String::push(self, b as char);
    }
}

/// True when `b` stands for itself in the normal form of a target.
#[inline(always)]
pub(crate) fn is_kept(b: u8) -> bool {
    KEEP[b as usize]
}

pub(crate) fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Writes the normal form of `input` into `out`; true when it wrote a
/// wildcard `*` (only patterns have them).
#[inline]
pub(crate) fn normalize(input: &[u8], mode: Mode, out: &mut impl Sink) -> bool {
    if mode == Mode::Pattern {
        if let Some(wild) = plain_pattern(input) {
            out.push_run(input);
            return wild;
        }
    }
    normalize_each(input, mode, out)
}

/// [`normalize`] byte by byte.
#[inline(never)]
fn normalize_each(input: &[u8], mode: Mode, out: &mut impl Sink) -> bool {
    let mut wild = false;
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        if KEEP[b as usize] {
            let run = input[i..].iter().take_while(|&&b| KEEP[b as usize]).count();
            out.push_run(&input[i..i + run]);
            i += run;
            continue;
        }
        match b {
            b'%' => {
                let decoded = match (input.get(i + 1), input.get(i + 2)) {
                    (Some(&h), Some(&l)) => match (hex_val(h), hex_val(l)) {
                        (Some(h), Some(l)) => Some(h << 4 | l),
                        _ => None,
                    },
                    _ => None,
                };
                match decoded {
                    Some(v) if is_unreserved(v) => {
                        out.push(v);
                        i += 3;
                    }
                    Some(v) => {
                        out.push_escape(v);
                        i += 3;
                    }
                    None => {
                        out.push_escape(b'%');
                        i += 1;
                    }
                }
            }
            b'*' | b'$' if mode == Mode::Url => {
                out.push(b);
                i += 1;
            }
            b'*' if mode == Mode::Pattern => {
                out.push(b'*');
                wild = true;
                i += 1;
            }
            b'$' if mode == Mode::Pattern && i + 1 == input.len() => {
                out.push(b'$');
                i += 1;
            }
            _ => {
                out.push_escape(b);
                i += 1;
            }
        }
    }
    wild
}

/// The normal form as an owned `String` (building patterns and targets).
pub(crate) fn normalized_string(input: &[u8], mode: Mode) -> String {
    let mut s = String::with_capacity(input.len());
    normalize(input, mode, &mut s);
    s
}

/// A fixed buffer for the hot path: normalising a target without allocating.
/// Paths whose normal form does not fit spill into a `Vec`.
pub(crate) struct StackBuf {
    buf: [u8; STACK_BUF],
    len: usize,
    spill: Option<Vec<u8>>,
}

/// Gemini requests are at most 1024 bytes; their normal form at most three times that.
const STACK_BUF: usize = 4096;

impl StackBuf {
    pub(crate) fn new() -> Self {
        StackBuf {
            buf: [0; STACK_BUF],
            len: 0,
            spill: None,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.spill {
            Some(v) => v.as_slice(),
            None => &self.buf[..self.len],
        }
    }
}

impl Sink for StackBuf {
    #[inline]
    fn push(&mut self, b: u8) {
        if let Some(v) = &mut self.spill {
            v.push(b);
        } else if self.len < STACK_BUF {
            self.buf[self.len] = b;
            self.len += 1;
        } else {
            let mut v = Vec::with_capacity(STACK_BUF * 2);
            v.extend_from_slice(&self.buf);
            v.push(b);
            self.spill = Some(v);
        }
    }
}

/// Decodes every valid `%XX`; a stray `%` stays as it is.
pub fn percent_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while i < input.len() {
        if input[i] == b'%' {
            let hi = input.get(i + 1).and_then(|&b| hex_val(b));
            let lo = input.get(i + 2).and_then(|&b| hex_val(b));
            if let (Some(hi), Some(lo)) = (hi, lo) {
                out.push(hi << 4 | lo);
                i += 3;
                continue;
            }
        }
        out.push(input[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(input: &str) -> String {
        normalized_string(input.as_bytes(), Mode::Target)
    }
    fn p(input: &str) -> String {
        normalized_string(input.as_bytes(), Mode::Pattern)
    }

    #[test]
    fn table() {
        let cases: &[(&str, &str, &str)] = &[
            // input, as target, as pattern
            (
                "/plain/path?q=1&b=2",
                "/plain/path?q=1&b=2",
                "/plain/path?q=1&b=2",
            ),
            ("/%70rivate", "/private", "/private"),
            ("/foo/bar/%62%61%7A", "/foo/bar/baz", "/foo/bar/baz"),
            ("/a%2fb", "/a%2Fb", "/a%2Fb"),
            ("/a%2Fb", "/a%2Fb", "/a%2Fb"),
            ("/ツ", "/%E3%83%84", "/%E3%83%84"),
            ("/%e3%83%84", "/%E3%83%84", "/%E3%83%84"),
            ("/a b", "/a%20b", "/a%20b"),
            ("/100%", "/100%25", "/100%25"),
            ("/%zz", "/%25zz", "/%25zz"),
            ("/*.pdf$", "/%2A.pdf%24", "/*.pdf$"),
            ("/a$b", "/a%24b", "/a%24b"),
            ("/%2A", "/%2A", "/%2A"),
            ("/a|b", "/a%7Cb", "/a%7Cb"),
            ("/a%7cb", "/a%7Cb", "/a%7Cb"),
            ("/%7e~", "/~~", "/~~"),
        ];
        for (input, target, pattern) in cases {
            assert_eq!(&t(input), target, "target form of {input:?}");
            assert_eq!(&p(input), pattern, "pattern form of {input:?}");
        }
    }

    #[test]
    fn normal_form_is_idempotent_and_ascii() {
        for input in ["/%70a b/ツ/%zz$*", "\u{0}\u{7f}\u{ff}", "%", "%4", "%41"] {
            let once = t(input);
            assert!(once.is_ascii());
            assert_eq!(t(&once), once);
        }
    }

    #[test]
    fn fast_path_agrees_with_normalize() {
        for input in ["/plain/x?y=1", "/a b", "/%41", "/*", "/ü"] {
            assert_eq!(input.bytes().all(is_kept), t(input) == input);
        }
    }

    proptest::proptest! {
        /// Patterns already in normal form are copied whole; the copy must be
        /// what the byte-by-byte reading writes, and say the same of `*`.
        #[test]
        fn plain_patterns_read_as_byte_by_byte(
            input in proptest::collection::vec(
                proptest::sample::select(&b"/a*$%2A \t\xff~|"[..]),
                0..12,
            )
        ) {
            let (mut whole, mut each) = (Vec::new(), Vec::new());
            let wild = normalize(&input, Mode::Pattern, &mut whole);
            let wild_each = normalize_each(&input, Mode::Pattern, &mut each);
            proptest::prop_assert_eq!(&whole, &each);
            proptest::prop_assert_eq!(wild, wild_each);
            proptest::prop_assert_eq!(wild, each.contains(&b'*'));
        }
    }

    #[test]
    fn stack_buffer_spills_without_losing_bytes() {
        let long = "ü".repeat(3000); // 6000 bytes -> 18000 escaped
        let mut buf = StackBuf::new();
        normalize(long.as_bytes(), Mode::Target, &mut buf);
        assert_eq!(buf.as_bytes(), t(&long).as_bytes());
        assert_eq!(buf.as_bytes().len(), 18000);
    }
}
