//! Any bytes as a Gopher URL line (the Gopher listener) or a bare selector line
//! (SOCKS5): parsing never panics; what would go upstream is exactly one line;
//! an accepted URL's canonical form parses back to the same target.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::gopher::wire::{parse_request, parse_selector_line};
use robots_proxy::target::Target;

fn one_line(up: &[u8]) -> bool {
    up.ends_with(b"\r\n")
        && !up[..up.len() - 2]
            .iter()
            .any(|b| matches!(b, b'\r' | b'\n' | 0))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = parse_request(data) {
        assert!(one_line(&request.upstream_line()));
        let url = request.target.url();
        let again = Target::parse(&url).expect("a canonical URL parses");
        assert_eq!(again.url(), url);
    }
    if let Ok(request) = parse_selector_line("127.0.0.1", 70, data) {
        assert!(one_line(&request.upstream_line()));
    }
});
