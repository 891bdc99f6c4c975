//! Any bytes as a Gopher menu or a Nex listing rendered for a Gemini client,
//! cut into chunks the input chooses: the output is the same as for the input
//! fed whole, it is UTF-8, it holds no control character but its line ends
//! (and tabs), and no line is a preformatting toggle.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::gateway::gemtext::{gopher_menu, nex_listing, GopherMenu, NexListing};
use robots_proxy::gopher::menu::{MenuLine, MenuLines};

fn render<H: MenuLine>(mut lines: MenuLines<H>, input: &[u8], cuts: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = input;
    let mut sizes = cuts.iter().map(|&c| usize::from(c).max(1)).cycle();
    while !rest.is_empty() {
        let n = if cuts.is_empty() {
            rest.len()
        } else {
            sizes.next().unwrap().min(rest.len())
        };
        let (piece, more) = rest.split_at(n);
        lines.feed(piece, &mut out);
        rest = more;
    }
    lines.finish(&mut out);
    out
}

fn harmless(out: &[u8]) {
    let text = std::str::from_utf8(out).expect("gemtext is UTF-8");
    assert!(!text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t'));
    assert!(!text.lines().any(|l| l.starts_with("```")));
}

fuzz_target!(|data: &[u8]| {
    let split = usize::from(data.first().copied().unwrap_or(0) % 16).min(data.len());
    let (cuts, input) = data.split_at(split);
    let menu = render::<GopherMenu>(gopher_menu(), input, &[]);
    assert_eq!(menu, render(gopher_menu(), input, cuts));
    harmless(&menu);
    let listing = render::<NexListing>(nex_listing(), input, &[]);
    assert_eq!(listing, render(nex_listing(), input, cuts));
    harmless(&listing);
});
