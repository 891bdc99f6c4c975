//! Raw bytes as a web answer's preference fields (`Content-Usage`,
//! `X-Robots-Tag`, `tdm-reservation`), split into fields at newlines (so
//! repeated fields, obs-text, a CR or a fold's leading space and values as
//! long as the input, up to the head's 64 KiB), for a page or an image,
//! read for a bot with a token or one without (the input's last byte
//! chooses), declaring every use:
//! - nothing panics; a refusal names a field among them, cut to 200
//!   characters, and refuses a use that was declared;
//! - with no field that could refuse (none of those names), nothing is;
//! - a refusal anywhere among them, whatever the other bytes, refuses: a
//!   field `X-Robots-Tag: noai` at any place among the others, or
//!   `noai` first in a value whose rest is the input, or the input then
//!   `, examplebot: noai` for the bot named so, or a field
//!   `Content-Usage: train-ai=n`, or `tdm-reservation: 1`, each refuses
//!   `train-ai`, whatever else the answer says;
//! - the same bytes as an HTML page's head: nothing panics, a refusal names
//!   a meta tag; and a page that opens with `<meta name="robots"
//!   content="noai">`, whatever follows, refuses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use robots_proxy::robots::response::{read, ResponsePreferences};
use robots_proxy::robots::Use;

const NAMES: [&str; 4] = [
    "content-usage",
    "x-robots-tag",
    "tdm-reservation",
    "x-other",
];
const DECLARED: [Use; 4] = [Use::TrainAi, Use::TrainGenai, Use::Search, Use::AiInput];

fn refused<'a>(
    fields: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    content_type: Option<&[u8]>,
    token: &str,
    uses: &[Use],
) -> bool {
    read(fields, content_type, token).refused(uses).is_some()
}

/// `html` read as a page's head for `token`: the use refused, if any.
fn page(html: &[u8], token: &str, uses: &[Use]) -> Option<String> {
    let mut stated = ResponsePreferences::default();
    stated.page(html, token);
    stated.refused(uses).map(|r| r.field)
}

fuzz_target!(|data: &[u8]| {
    for token in ["examplebot", ""] {
        let data = &data[..data.len().min(64 * 1024)];
        if let Some(field) = page(data, token, &DECLARED) {
            assert!(field.starts_with("<meta name=\""), "{field}");
            assert!(field.chars().count() <= 200);
        }
        let opened = [
            &b"<html><head><meta name=\"robots\" content=\"noai\">"[..],
            data,
        ]
        .concat();
        assert!(page(&opened, token, &[Use::TrainAi]).is_some());
    }
    // The head's cap: no answer the proxy reads has more.
    let data = &data[..data.len().min(64 * 1024)];
    let fields: Vec<(&str, &[u8])> = data
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, v)| (NAMES[i % NAMES.len()], v))
        .collect();
    let at = data.first().map_or(0, |&b| b as usize % (fields.len() + 1));
    // The page or image, the bot with a token or without: chosen by the
    // input's last byte, one pair a run.
    let pick = data.last().copied().unwrap_or(0) as usize;
    let content_type = [Some(&b"text/html"[..]), Some(b"image/png"), None][pick % 3];
    let token = ["examplebot", ""][pick / 3 % 2];
    {
        {
            let stated = read(fields.iter().copied(), content_type, token);
            if let Some(r) = stated.refused(&DECLARED) {
                assert!(DECLARED.contains(&r.declared));
                assert!(r.field.chars().count() <= 200);
                let name = r.field.split(':').next().unwrap_or("").to_ascii_lowercase();
                assert!(NAMES[..3].contains(&name.as_str()), "{}", r.field);
            }
            let none: Vec<(&str, &[u8])> = fields.iter().map(|(_, v)| ("x-other", *v)).collect();
            assert!(!refused(none, content_type, token, &DECLARED));

            // A refusing field anywhere among the others.
            for (name, value) in [
                ("x-robots-tag", &b"noai"[..]),
                ("X-Robots-Tag", b" NOAI "),
                ("content-usage", b"train-ai=n"),
                ("tdm-reservation", b"1"),
            ] {
                let mut with = fields.clone();
                with.insert(at, (name, value));
                assert!(
                    refused(with, content_type, token, &[Use::TrainAi]),
                    "{name}: {value:?} at {at} of {fields:?}"
                );
            }
            // `noai` first, the input after it, in one value.
            let first = [b"noai, ", data].concat();
            let mut with = fields.clone();
            with.insert(at, ("x-robots-tag", &first));
            assert!(refused(
                with,
                content_type,
                token,
                &[Use::TrainAi, Use::AiInput]
            ));
            // The input, then a directive for this bot by name.
            let named = [data, b", examplebot: noai"].concat();
            let mut with = fields.clone();
            with.insert(at, ("x-robots-tag", &named));
            if token == "examplebot" {
                assert!(refused(with, content_type, token, &[Use::AiInput]));
            }
        }
    }
});
