//! Any bytes as a Gopher menu, cut into chunks the input chooses: the output is
//! the same as for the menu fed whole, every line ends in CR LF, and every
//! line naming a Gopher item names the proxy as its host and port.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::gopher::wire::MenuRewriter;

fn rewrite(menu: &[u8], cuts: &[u8]) -> Vec<u8> {
    let mut rw = MenuRewriter::new("proxy.local", 7070);
    let mut out = Vec::new();
    let mut rest = menu;
    let mut sizes = cuts.iter().map(|&c| usize::from(c).max(1)).cycle();
    while !rest.is_empty() {
        let n = if cuts.is_empty() {
            rest.len()
        } else {
            sizes.next().unwrap().min(rest.len())
        };
        let (piece, more) = rest.split_at(n);
        rw.feed(piece, &mut out);
        rest = more;
    }
    rw.finish(&mut out);
    out
}

fuzz_target!(|data: &[u8]| {
    // The first bytes choose the chunk sizes; the rest is the menu.
    let split = usize::from(data.first().copied().unwrap_or(0) % 16).min(data.len());
    let (cuts, menu) = data.split_at(split);
    let whole = rewrite(menu, &[]);
    assert_eq!(whole, rewrite(menu, cuts));
    let mut rest = whole.as_slice();
    loop {
        let (line, more) = match rest.windows(2).position(|w| w == b"\r\n") {
            Some(i) => (&rest[..i], Some(&rest[i + 2..])),
            None => (rest, None),
        };
        assert!(!line.contains(&b'\r') && !line.contains(&b'\n'));
        let fields: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
        if fields.len() >= 2 {
            let text_or_other = match fields[0].first() {
                Some(b'i' | b'3' | b'8' | b'T' | b'2') => true,
                Some(b'h') => fields[1].starts_with(b"URL:"),
                _ => false,
            };
            if !text_or_other {
                assert!(fields.len() >= 4);
                assert_eq!(fields[2], b"proxy.local");
                assert_eq!(fields[3], b"7070");
            }
        }
        match more {
            Some(m) => rest = m,
            None => break,
        }
    }
});
