//! robots.txt bytes to lines: LF, CRLF and CR end a line; each line comes with
//! its number, its content before any comment, and where its first colon is.

/// Bytes the line scanner stops at: line ends, the comment sign, the colon.
static SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'#' as usize] = true;
    t[b':' as usize] = true;
    t
};

/// The first of `\n`, `\r`, `#` or `:` in `bytes` from `from`: eight bytes
/// at a time (each compared with the four at once, in a word), then the tail.
fn find_special(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // High bit set in each byte of `v` that is zero (exact up to the first).
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
        let found = zero(w ^ (ONES * u64::from(b'\n')))
            | zero(w ^ (ONES * u64::from(b'\r')))
            | zero(w ^ (ONES * u64::from(b'#')))
            | zero(w ^ (ONES * u64::from(b':')));
        if found != 0 {
            return Some(i + (found.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    bytes
        .get(i..)?
        .iter()
        .position(|&b| SPECIAL[b as usize])
        .map(|p| i + p)
}

/// One line of a robots.txt: its number (1-based), its content before any
/// comment, and where its first colon is in that content.
pub(crate) struct Line<'a> {
    pub(crate) number: u32,
    pub(crate) content: &'a [u8],
    pub(crate) colon: Option<usize>,
}

/// Iterates the lines of `input`; LF, CRLF and CR end a line. One pass finds
/// the line's end, its comment and its colon (lines are short, so this beats
/// three `memchr` calls a line).
pub(crate) struct Lines<'a> {
    pub(crate) rest: &'a [u8],
    pub(crate) number: u32,
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        self.number += 1;
        let rest = self.rest;
        let (mut colon, mut comment) = (None, None);
        let mut end = rest.len();
        let mut i = 0;
        while let Some(at) = find_special(rest, i) {
            match rest[at] {
                b'\n' | b'\r' => {
                    end = at;
                    break;
                }
                b'#' => {
                    comment = Some(at);
                    end = memchr::memchr2(b'\n', b'\r', &rest[at..]).map_or(rest.len(), |e| at + e);
                    break;
                }
                _ => colon = colon.or(Some(at)),
            }
            i = at + 1;
        }
        let mut next = end;
        if next < rest.len() {
            next += if rest[next] == b'\r' && rest.get(next + 1) == Some(&b'\n') {
                2
            } else {
                1
            };
        }
        self.rest = &rest[next..];
        Some(Line {
            number: self.number,
            content: &rest[..comment.unwrap_or(end)],
            colon,
        })
    }
}
