//! Any bytes as a web answer's preference fields (`Content-Usage`,
//! `X-Robots-Tag`, `tdm-reservation`), split into fields at newlines, for a
//! page and an image, read for a bot that declares every use: nothing
//! panics; a refusal names a field that was among them, cut to 200
//! characters, and refuses a use that was declared; and with no field that
//! could refuse (none of those names), nothing is refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::robots::response::read;
use robots_proxy::robots::Use;

const NAMES: [&str; 4] = ["content-usage", "x-robots-tag", "tdm-reservation", "x-other"];

fuzz_target!(|data: &[u8]| {
    let declared = [Use::TrainAi, Use::TrainGenai, Use::Search, Use::AiInput];
    let fields: Vec<(&str, &[u8])> = data
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, v)| (NAMES[i % NAMES.len()], v))
        .collect();
    for content_type in [Some("text/html"), Some("image/png"), None] {
        for token in ["examplebot", ""] {
            let stated = read(fields.iter().copied(), content_type, token);
            if let Some(r) = stated.refused(&declared) {
                assert!(declared.contains(&r.declared));
                assert!(r.field.chars().count() <= 200);
                let name = r.field.split(':').next().unwrap_or("").to_ascii_lowercase();
                assert!(NAMES[..3].contains(&name.as_str()), "{}", r.field);
            }
            let none: Vec<(&str, &[u8])> = fields.iter().map(|(_, v)| ("x-other", *v)).collect();
            assert!(read(none, content_type, token).refused(&declared).is_none());
        }
    }
});
