//! Any string as a target URL: parsing never panics, and a parsed target's
//! canonical URL parses back to the same target (the canonical form is stable).
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::target::Target;

fuzz_target!(|data: &str| {
    if let Ok(target) = Target::parse(data) {
        let url = target.url();
        let again = Target::parse(&url).expect("a canonical URL parses");
        assert_eq!(again.url(), url);
        assert_eq!(again.authority(), target.authority());
        assert_eq!(again.matched_path(), target.matched_path());
    }
});
