//! Any bytes as a Gemini request line: parsing never panics, and an accepted
//! request's canonical URL is one line that is accepted again as itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::gemini::wire::parse_request;

fuzz_target!(|data: &[u8]| {
    if let Ok(target) = parse_request(data) {
        let url = target.url();
        assert!(!url.contains(['\r', '\n', '\0']));
        let again = parse_request(url.as_bytes()).expect("a canonical URL is a request");
        assert_eq!(again.url(), url);
    }
});
