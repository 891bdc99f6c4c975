//! Any bytes as a Nex path line (SOCKS5, transparent mode) and as the text
//! of a refusal. An accepted line is sent upstream exactly as the client
//! wrote it, one line, and reads back as the same target; a refusal is a
//! document whose first line starts with the mark and the status, one line
//! of bounded length however hostile the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::nex::wire::{parse_path_line, refusal_document, REFUSAL_MARK};

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_path_line("example.org", 1900, data) {
        let line = r.upstream_line();
        assert_eq!(&line[..line.len() - 2], data);
        assert!(line.ends_with(b"\r\n"));
        assert!(!data.contains(&b'\r') && !data.contains(&b'\n') && !data.contains(&0));
        let again = parse_path_line("example.org", 1900, data).expect("accepted again");
        assert_eq!(again, r);
        assert_eq!(again.target.url(), r.target.url());
    }
    let text = String::from_utf8_lossy(data);
    let doc = String::from_utf8(refusal_document(44, &text)).expect("UTF-8");
    let first = doc.lines().next().unwrap();
    assert!(first.starts_with(REFUSAL_MARK));
    assert!(first[REFUSAL_MARK.len()..].starts_with("44 "));
    assert!(first.len() <= REFUSAL_MARK.len() + 3 + 1024);
    assert!(!first.contains('\r'));
});
