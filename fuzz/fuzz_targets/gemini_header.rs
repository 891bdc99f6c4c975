//! Any bytes as an upstream Gemini header: parsing never panics, an accepted
//! header has a status of 10-69 and no control character in its META, and the
//! header the proxy writes from that META is one line that parses back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::gemini::wire::{header, parse_header};

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_header(data) {
        assert!((10..=69).contains(&h.status));
        assert!(!h.meta.chars().any(char::is_control));
        let written = header(h.status, &h.meta);
        assert!(written.ends_with(b"\r\n"));
        let line = &written[..written.len() - 2];
        assert!(!line.contains(&b'\r') && !line.contains(&b'\n'));
        assert_eq!(parse_header(line).map(|again| again.status), Ok(h.status));
    }
    // Whatever META the proxy writes (its own refusals quote outside text).
    let meta = String::from_utf8_lossy(data);
    let written = header(53, &meta);
    assert!(written.len() <= 3 + 1024 + 2);
    assert_eq!(written.iter().filter(|&&b| b == b'\n').count(), 1);
});
