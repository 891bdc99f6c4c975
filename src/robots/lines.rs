//! robots.txt bytes to lines: LF, CRLF and CR end a line; each line comes with
//! its number, its content before any comment, and where its first colon is.
//!
//! The bytes that matter (`\n`, `\r`, `#`, `:`) are found 64 at a time: each
//! block of the input becomes a 64-bit mask with one bit per such byte (plain
//! comparisons over a fixed-size array, which the compiler turns into vector
//! instructions), and the lines are cut by walking the set bits. Text between
//! them is never looked at twice.

/// Bytes per block: one bit each in a `u64`.
const BLOCK: usize = 64;

/// One bit per `\n`, `\r`, `#` or `:` in the first [`BLOCK`] bytes of `block`
/// (a shorter block is read as if padded with zeros).
#[inline]
fn special_mask(block: &[u8]) -> u64 {
    match block.first_chunk::<BLOCK>() {
        Some(full) => full_mask(full),
        None => {
            let mut padded = [0u8; BLOCK];
            padded[..block.len()].copy_from_slice(block);
            full_mask(&padded)
        }
    }
}

#[inline]
fn full_mask(block: &[u8; BLOCK]) -> u64 {
    // A 0 or 1 per byte: plain comparisons, which become vector instructions.
    let mut flags = [0u8; BLOCK];
    for (f, &b) in flags.iter_mut().zip(block) {
        *f = u8::from((b == b'\n') | (b == b'\r') | (b == b'#') | (b == b':'));
    }
    // Eight flags to eight bits: the multiplication moves flag i to bit 56 + i
    // and nothing carries into those bits.
    let mut mask = 0u64;
    for (i, eight) in flags.chunks_exact(8).enumerate() {
        let word = u64::from_le_bytes(eight.try_into().expect("eight bytes"));
        mask |= (word.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * i);
    }
    mask
}

/// The positions of `\n`, `\r`, `#` and `:` in order.
struct Specials<'a> {
    bytes: &'a [u8],
    /// Where the block of `mask` starts.
    block: usize,
    /// The positions not yet returned in the current block.
    mask: u64,
}

impl Specials<'_> {
    #[inline]
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block += BLOCK;
            let block = self.bytes.get(self.block..).filter(|b| !b.is_empty())?;
            self.mask = special_mask(block);
        }
        let at = self.block + self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(at)
    }
}

/// One line of a robots.txt: its number (1-based), its content before any
/// comment, and where its first colon is in that content.
pub(crate) struct Line<'a> {
    pub(crate) number: u32,
    pub(crate) content: &'a [u8],
    pub(crate) colon: Option<usize>,
}

/// Iterates the lines of `input`; LF, CRLF and CR end a line.
pub(crate) struct Lines<'a> {
    bytes: &'a [u8],
    /// Where the next line starts.
    start: usize,
    number: u32,
    specials: Specials<'a>,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Lines {
            bytes,
            start: 0,
            number: 0,
            specials: Specials {
                bytes,
                block: 0,
                mask: special_mask(bytes),
            },
        }
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let (bytes, start) = (self.bytes, self.start);
        if start >= bytes.len() {
            return None;
        }
        self.number += 1;
        let (mut colon, mut comment) = (None, None);
        let mut end = bytes.len();
        while let Some(at) = self.specials.next() {
            // The LF of a CRLF, already taken as part of the line before.
            if at < start {
                continue;
            }
            match bytes[at] {
                b'\n' | b'\r' => {
                    end = at;
                    break;
                }
                b'#' => comment = comment.or(Some(at)),
                _ if comment.is_none() => colon = colon.or(Some(at - start)),
                _ => {}
            }
        }
        self.start = match bytes.get(end) {
            None => end,
            Some(b'\r') if bytes.get(end + 1) == Some(&b'\n') => end + 2,
            Some(_) => end + 1,
        };
        Some(Line {
            number: self.number,
            content: &bytes[start..comment.unwrap_or(end)],
            colon,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8]) -> Vec<(u32, String, Option<usize>)> {
        Lines::new(input)
            .map(|l| {
                (
                    l.number,
                    String::from_utf8_lossy(l.content).into_owned(),
                    l.colon,
                )
            })
            .collect()
    }

    #[test]
    fn every_line_end_and_comment() {
        assert_eq!(
            lines(b"a:1\r\nb\rc:2#x:y\n\nd#e\r\r\n"),
            vec![
                (1, "a:1".into(), Some(1)),
                (2, "b".into(), None),
                (3, "c:2".into(), Some(1)),
                (4, "".into(), None),
                (5, "d".into(), None),
                (6, "".into(), None),
            ]
        );
        assert_eq!(lines(b"x: y"), vec![(1, "x: y".into(), Some(1))]);
        assert!(lines(b"").is_empty());
    }

    /// Lines that cross block boundaries, and CRLF split across two blocks,
    /// read as the one-byte-at-a-time reading does.
    #[test]
    fn blocks_do_not_show() {
        for pad in 0..(2 * BLOCK + 3) {
            for sep in [&b"\n"[..], b"\r\n", b"\r"] {
                let mut input = vec![b'x'; pad];
                input.extend_from_slice(b":v#c:");
                input.extend_from_slice(sep);
                input.extend_from_slice(b"k:w");
                input.extend_from_slice(sep);
                input.extend_from_slice(&vec![b'y'; pad]);
                let got = lines(&input);
                let first = "x".repeat(pad) + ":v";
                let mut want = vec![(1, first, Some(pad)), (2, "k:w".to_string(), Some(1))];
                if pad > 0 {
                    want.push((3, "y".repeat(pad), None));
                }
                assert_eq!(got, want, "pad {pad}, separator {sep:?}");
            }
        }
    }

    /// The plain reading, one byte at a time, that `Lines` must agree with.
    fn naive(input: &[u8]) -> Vec<(u32, String, Option<usize>)> {
        let mut out = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let end = rest
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
                .unwrap_or(rest.len());
            let line = &rest[..end];
            let content = &line[..line.iter().position(|&b| b == b'#').unwrap_or(line.len())];
            out.push((
                out.len() as u32 + 1,
                String::from_utf8_lossy(content).into_owned(),
                content.iter().position(|&b| b == b':'),
            ));
            let skip = match rest.get(end..end + 2) {
                Some(b"\r\n") => 2,
                _ => usize::from(end < rest.len()),
            };
            rest = &rest[end + skip..];
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn agrees_with_the_plain_reading(
            input in proptest::collection::vec(
                proptest::sample::select(&b"a :#\r\n\xff"[..]),
                0..300,
            )
        ) {
            proptest::prop_assert_eq!(lines(&input), naive(&input));
        }
    }
}
