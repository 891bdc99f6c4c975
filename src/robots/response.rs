//! Preferences a site states on a response, about the uses a bot declares
//! (`content_usage`), beside the ones robots.txt states: the same
//! vocabulary ([`Use`]), the most restrictive signal winning.
//!
//! | signal | refuses |
//! | --- | --- |
//! | `Content-Usage` (AIPREF attach draft: a structured dictionary) | what it says: `train-ai=n` |
//! | `X-Robots-Tag: noai` (or `examplebot: noai`, for that bot only) | `train-ai`, `ai-input` |
//! | `X-Robots-Tag: noimageai` on an `image/*` response | `train-ai`, `ai-input` |
//! | TDMRep `tdm-reservation: 1` | `train-ai`, `ai-input` (not `search`) |
//!
//! An HTML page's head says the same in meta tags ([`super::page`]), read
//! by [`ResponsePreferences::page`]: `<meta name="robots" content="noai">`
//! (or `noimageai`: the page's images, which the proxy cannot tell apart
//! when they are asked for, so the page), the bot's own name for `robots`
//! (`<meta name="examplebot" content="noai">`), and TDMRep's
//! `<meta name="tdm-reservation" content="1">`.
//!
//! Several fields (and several lines of one) combine. A field is bytes
//! (RFC 9110 allows obs-text): its tokens are read from the bytes wherever
//! they are in it, whatever else it holds, and the whole of it is read (the
//! answer's head is bounded, 64 KiB): no read limit of the proxy's turns a
//! refusal into "no preference". What a standard says to ignore is ignored:
//! an unknown directive, a `Content-Usage` that is no RFC 9651 dictionary.
//! Pure: no I/O.

use std::fmt;

use super::usage::{parse_line, Stated, Use, Vocabulary};

/// The signal that stated a preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// `Content-Usage: …=n`.
    ContentUsage,
    /// `X-Robots-Tag: noai` (perhaps scoped to this bot), or a page's
    /// `<meta name="robots" content="noai">`.
    NoAi,
    /// `X-Robots-Tag: noimageai` on an image, or in a page's meta tag.
    NoImageAi,
    /// TDMRep `tdm-reservation: 1`, as a field or a page's meta tag.
    TdmReservation,
}

/// A declared use a response refuses, and the signal that refused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The use the bot declared.
    pub declared: Use,
    /// The category the signal stated (the declared use or its parent).
    pub category: Use,
    pub signal: Signal,
    /// The field as the response wrote it, cut to 200 characters.
    pub field: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} refuses {}", self.field, self.declared)
    }
}

/// What the response's preference fields state, each category with the
/// field that stated it most restrictively.
#[derive(Debug, Default)]
pub struct ResponsePreferences {
    stated: Stated,
    /// Who said `n` for each category (by bit order of [`Use`]).
    by: Vec<(Use, Signal, String)>,
}

/// The uses `noai`, `noimageai` and a TDM reservation refuse.
const AI_USES: [Use; 2] = [Use::TrainAi, Use::AiInput];

impl ResponsePreferences {
    fn refuse(&mut self, uses: &[Use], signal: Signal, field: &str) {
        for &u in uses {
            self.stated = self.stated.strictest(Stated::refusing(u));
            if !self.by.iter().any(|(c, _, _)| *c == u) {
                self.by.push((u, signal, cut(field)));
            }
        }
    }

    fn content_usage(&mut self, value: &[u8]) {
        let Some((None, stated)) = parse_line(Vocabulary::ContentUsage, value) else {
            return;
        };
        self.stated = self.stated.strictest(stated);
        for (u, allowed) in stated.iter() {
            if !allowed && !self.by.iter().any(|(c, _, _)| *c == u) {
                self.by.push((
                    u,
                    Signal::ContentUsage,
                    cut(&format!("Content-Usage: {}", text(value))),
                ));
            }
        }
    }

    /// A page's head (`html`, a prefix of an HTML answer, decoded) read for
    /// its meta tags, as they apply to the bot whose product token is
    /// `token` (lower case).
    pub fn page(&mut self, html: &[u8], token: &str) -> super::page::Head {
        let head = super::page::scan(html, |name| {
            name == "robots" || name == "tdm-reservation" || (!token.is_empty() && name == token)
        });
        for meta in &head.metas {
            let signal = match meta.name == "tdm-reservation" {
                true => (meta.content.trim_ascii() == b"1").then_some(Signal::TdmReservation),
                // `robots` is every bot's, the bot's own name its alone;
                // either way read as an `X-Robots-Tag` value would be (a
                // page's `noimageai` is about the page's images: refused
                // with it).
                false => directives(&meta.content, (true, token)),
            };
            if let Some(signal) = signal {
                let field = format!(
                    "<meta name=\"{}\" content=\"{}\">",
                    meta.name,
                    text(&meta.content)
                );
                self.refuse(&AI_USES, signal, &field);
            }
        }
        head
    }

    /// The first of `declared` the response refuses, if any.
    pub fn refused(&self, declared: &[Use]) -> Option<Refused> {
        declared.iter().find_map(|&use_| {
            let (category, allowed) = self.stated.resolve(use_)?;
            if allowed {
                return None;
            }
            let (_, signal, field) = self.by.iter().find(|(c, _, _)| *c == category)?;
            Some(Refused {
                declared: use_,
                category,
                signal: *signal,
                field: field.clone(),
            })
        })
    }
}

/// Text cut to 200 characters, for a refusal's detail.
fn cut(text: &str) -> String {
    text.chars().take(200).collect()
}

/// A field's bytes as text for a refusal's detail (what is no UTF-8
/// replaced), its ends trimmed; at most the first 800 bytes are looked at,
/// enough for the 200 characters shown.
fn text(value: &[u8]) -> String {
    let value = value.trim_ascii();
    String::from_utf8_lossy(&value[..value.len().min(800)]).into_owned()
}

/// Reads the preference fields among `fields` (name, value as bytes; names
/// in any case) for a response whose `Content-Type` is `content_type`, as
/// they apply to the bot whose product token is `token` (lower case).
pub fn read<'a>(
    fields: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    content_type: Option<&[u8]>,
    token: &str,
) -> ResponsePreferences {
    let image = content_type.is_some_and(|t| {
        t.trim_ascii_start()
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"image/"))
    });
    let mut out = ResponsePreferences::default();
    for (name, value) in fields {
        if name.eq_ignore_ascii_case("content-usage") {
            out.content_usage(value.trim_ascii());
        } else if name.eq_ignore_ascii_case("x-robots-tag") {
            robots_tag(&mut out, value, image, token);
        } else if name.eq_ignore_ascii_case("tdm-reservation") && value.trim_ascii() == b"1" {
            out.refuse(&AI_USES, Signal::TdmReservation, "tdm-reservation: 1");
        }
    }
    out
}

/// The `X-Robots-Tag` directives that take a value after a colon: what
/// precedes their colon is no bot's name.
const TAKES_VALUE: [&[u8]; 4] = [
    b"unavailable_after",
    b"max-snippet",
    b"max-image-preview",
    b"max-video-preview",
];

/// One `X-Robots-Tag` value, as Google reads it: comma-separated
/// directives, for every bot until one is preceded by `botname:`, from
/// which on they are that bot's (`otherbot: noindex, examplebot: noai`: the
/// `noai` is examplebot's). A name is a product token (no space, no
/// separator) that is not a directive taking a value (`unavailable_after:
/// …`). Read from the bytes: a directive is found whatever the bytes around
/// it.
fn robots_tag(out: &mut ResponsePreferences, value: &[u8], image: bool, token: &str) {
    // The field is written out only for a refusal's detail.
    if let Some(signal) = directives(value, (image, token)) {
        out.refuse(&AI_USES, signal, &format!("X-Robots-Tag: {}", text(value)));
    }
}

/// The first of robots directives (`noai`, `noimageai` when `image`),
/// comma-separated, every bot's until a `botname:` names one, that refuses
/// the bot whose token is `token`. (Each refuses the same uses: the first
/// is the one a refusal names.)
fn directives(value: &[u8], (image, token): (bool, &str)) -> Option<Signal> {
    let mut ours = true;
    for item in value.split(|&b| b == b',') {
        let mut directive = item.trim_ascii();
        if let Some(colon) = directive.iter().position(|&b| b == b':') {
            let name = directive[..colon].trim_ascii();
            if is_token(name) && !TAKES_VALUE.iter().any(|d| name.eq_ignore_ascii_case(d)) {
                ours = !token.is_empty() && name.eq_ignore_ascii_case(token.as_bytes());
                directive = directive[colon + 1..].trim_ascii();
            }
        }
        if !ours {
            continue;
        }
        if directive.eq_ignore_ascii_case(b"noai") {
            return Some(Signal::NoAi);
        }
        if directive.eq_ignore_ascii_case(b"noimageai") && image {
            return Some(Signal::NoImageAi);
        }
    }
    None
}

/// An RFC 9110 token: one or more `tchar`.
fn is_token(name: &[u8]) -> bool {
    !name.is_empty()
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(
        fields: &[(&str, &str)],
        ct: Option<&str>,
        token: &str,
        uses: &[Use],
    ) -> Option<Refused> {
        read(
            fields.iter().map(|(n, v)| (*n, v.as_bytes())),
            ct.map(str::as_bytes),
            token,
        )
        .refused(uses)
    }

    /// [`refused`] for fields given as bytes.
    fn refused_bytes(fields: &[(&str, &[u8])], uses: &[Use]) -> Option<Refused> {
        read(fields.iter().copied(), None, "examplebot").refused(uses)
    }

    #[test]
    fn content_usage_says_what_it_refuses() {
        let r = refused(
            &[("Content-Usage", "train-ai=n")],
            None,
            "bot",
            &[Use::TrainAi],
        )
        .unwrap();
        assert_eq!(
            (r.declared, r.category, r.signal),
            (Use::TrainAi, Use::TrainAi, Signal::ContentUsage)
        );
        assert_eq!(r.to_string(), "Content-Usage: train-ai=n refuses train-ai");
        // A child inherits; search is left alone.
        assert!(refused(
            &[("content-usage", "train-ai=n")],
            None,
            "bot",
            &[Use::TrainGenai]
        )
        .is_some());
        assert!(refused(
            &[("content-usage", "train-ai=n")],
            None,
            "bot",
            &[Use::Search]
        )
        .is_none());
        assert!(refused(&[("content-usage", "bots=n")], None, "bot", &[Use::Search]).is_some());
        assert!(refused(
            &[("content-usage", "train-ai=y")],
            None,
            "bot",
            &[Use::TrainAi]
        )
        .is_none());
    }

    #[test]
    fn the_most_restrictive_of_several_fields_wins() {
        let fields = [
            ("Content-Usage", "train-ai=y"),
            ("Content-Usage", "train-ai=n"),
        ];
        assert!(refused(&fields, None, "bot", &[Use::TrainAi]).is_some());
        let fields = [("Content-Usage", "train-ai=y"), ("X-Robots-Tag", "noai")];
        let r = refused(&fields, None, "bot", &[Use::TrainAi]).unwrap();
        assert_eq!(r.signal, Signal::NoAi);
    }

    #[test]
    fn noai_refuses_training_and_ai_input_not_search() {
        for tag in ["noai", "NOAI", "noindex, noai", " noarchive ,noai "] {
            assert!(
                refused(&[("X-Robots-Tag", tag)], None, "bot", &[Use::TrainAi]).is_some(),
                "{tag}"
            );
            assert!(
                refused(&[("X-Robots-Tag", tag)], None, "bot", &[Use::AiInput]).is_some(),
                "{tag}"
            );
            assert!(
                refused(&[("X-Robots-Tag", tag)], None, "bot", &[Use::Search]).is_none(),
                "{tag}"
            );
        }
        assert!(refused(&[("X-Robots-Tag", "noindex")], None, "bot", &[Use::TrainAi]).is_none());
        assert!(refused(&[("X-Robots-Tag", "noaix")], None, "bot", &[Use::TrainAi]).is_none());
    }

    #[test]
    fn a_bot_scoped_tag_applies_to_that_bot_only() {
        let f = [("X-Robots-Tag", "examplebot: noai")];
        assert!(refused(&f, None, "examplebot", &[Use::TrainAi]).is_some());
        assert!(refused(&f, None, "otherbot", &[Use::TrainAi]).is_none());
        assert!(refused(&f, None, "", &[Use::TrainAi]).is_none());
        let f = [("X-Robots-Tag", "ExampleBot: noindex, noai")];
        assert!(refused(&f, None, "examplebot", &[Use::TrainAi]).is_some());
        // A directive that takes a value is not a bot's name.
        let f = [("X-Robots-Tag", "unavailable_after: 2030-01-01, noai")];
        assert!(refused(&f, None, "examplebot", &[Use::TrainAi]).is_some());
    }

    #[test]
    fn noimageai_is_for_images() {
        let f = [("X-Robots-Tag", "noimageai")];
        assert!(refused(&f, Some("image/png"), "bot", &[Use::TrainAi]).is_some());
        assert!(refused(&f, Some("IMAGE/jpeg; q=1"), "bot", &[Use::AiInput]).is_some());
        assert!(refused(&f, Some("text/html"), "bot", &[Use::TrainAi]).is_none());
        assert!(refused(&f, None, "bot", &[Use::TrainAi]).is_none());
    }

    #[test]
    fn a_tdm_reservation_refuses_ai_uses_not_search() {
        let f = [("tdm-reservation", "1")];
        assert_eq!(
            refused(&f, None, "bot", &[Use::TrainGenai]).unwrap().signal,
            Signal::TdmReservation
        );
        assert!(refused(&f, None, "bot", &[Use::Search]).is_none());
        assert!(refused(&[("tdm-reservation", "0")], None, "bot", &[Use::TrainAi]).is_none());
        assert!(refused(&[("tdm-reservation", "yes")], None, "bot", &[Use::TrainAi]).is_none());
    }

    #[test]
    fn what_cannot_be_read_is_ignored() {
        for bad in [
            "train-ai",
            "train-ai=maybe",
            "TRAIN-AI=n",
            "train-ai=n,,",
            "\u{0}",
            "train-ai=n, caf\u{e9}=y",
        ] {
            assert!(
                refused(&[("Content-Usage", bad)], None, "bot", &[Use::TrainAi]).is_none(),
                "{bad:?}"
            );
        }
        // Not the token `noai`.
        for tag in [&b"\xffnoai"[..], b"no ai", b"noai\xff", b"no-ai"] {
            assert!(
                refused_bytes(&[("X-Robots-Tag", tag)], &[Use::TrainAi]).is_none(),
                "{tag:?}"
            );
        }
    }

    /// A field is bytes: `noai` among directives that are no UTF-8, or cut
    /// anywhere, or after 60 KB of other directives, still refuses; a
    /// valid dictionary of any length is read whole.
    #[test]
    fn a_refusal_is_read_from_the_bytes_whatever_surrounds_it() {
        let euros = "\u{20ac}".repeat(3_000);
        let long = format!("{}noai", "a, ".repeat(20_000));
        let cases: [Vec<u8>; 6] = [
            b"noai, caf\xe9".to_vec(),
            b"caf\xe9, noai".to_vec(),
            format!("noai, {euros}").into_bytes(),
            [&format!("noai, {euros}").into_bytes()[..8_193], b"\xe2"].concat(),
            long.into_bytes(),
            b"\x80\x81, examplebot: noai, \xfe".to_vec(),
        ];
        for tag in &cases {
            let r = refused_bytes(&[("X-Robots-Tag", tag)], &[Use::TrainAi]);
            let r = r.unwrap_or_else(|| panic!("{:?}", String::from_utf8_lossy(tag)));
            assert_eq!(r.signal, Signal::NoAi);
            assert!(r.field.chars().count() <= 200);
        }
        let huge = format!("{}train-ai=n", "x=y, ".repeat(10_000));
        assert!(refused(&[("Content-Usage", &huge)], None, "bot", &[Use::TrainAi]).is_some());
        // A refusal's detail is cut.
        let tag = format!("noai, {}", "x".repeat(1000));
        let r = refused(&[("X-Robots-Tag", &tag)], None, "bot", &[Use::TrainAi]).unwrap();
        assert!(r.field.chars().count() <= 200);
    }

    /// Several bots in one value: each directive is the last named bot's.
    #[test]
    fn names_in_one_value_scope_the_directives_after_them() {
        let cases = [
            ("otherbot: noindex, examplebot: noai", true),
            ("examplebot: noai, otherbot: noindex", true),
            ("examplebot: noindex, otherbot: noai", false),
            ("otherbot: noindex, noai", false),
            ("noai, otherbot: noindex", true),
            ("otherbot: noai, examplebot: nofollow, noai", true),
            ("unavailable_after: 25 Jun 2030 15:00:00 PST, noai", true),
            ("Other Bot: noindex, noai", true),
        ];
        for (tag, refuses) in cases {
            let r = refused(
                &[("X-Robots-Tag", tag)],
                None,
                "examplebot",
                &[Use::TrainAi],
            );
            assert_eq!(r.is_some(), refuses, "{tag}");
        }
        let r = refused(
            &[("X-Robots-Tag", "examplebot: noai")],
            None,
            "",
            &[Use::TrainAi],
        );
        assert!(r.is_none(), "a bot without a token is named by none");
    }

    /// A page's meta tags say what the fields say: `robots` for every bot,
    /// the bot's own name for it alone, TDMRep's reservation.
    #[test]
    fn a_page_s_meta_tags_refuse_as_fields_do() {
        let page = |html: &str, token: &str, uses: &[Use]| {
            let mut prefs = ResponsePreferences::default();
            prefs.page(html.as_bytes(), token);
            prefs.refused(uses)
        };
        let ai = [Use::TrainAi];
        for (html, token, refuses) in [
            (r#"<meta name="robots" content="noai">"#, "examplebot", true),
            (
                r#"<meta name="robots" content="noindex,noimageai">"#,
                "examplebot",
                true,
            ),
            (
                r#"<meta name="ExampleBot" content="noai">"#,
                "examplebot",
                true,
            ),
            (
                r#"<meta name="otherbot" content="noai">"#,
                "examplebot",
                false,
            ),
            (r#"<meta name="examplebot" content="noai">"#, "", false),
            (r#"<meta name="tdm-reservation" content=" 1 ">"#, "", true),
            (r#"<meta name="tdm-reservation" content="0">"#, "", false),
            (
                r#"<meta name="robots" content="noindex">"#,
                "examplebot",
                false,
            ),
            (
                r#"<!-- <meta name="robots" content="noai"> -->"#,
                "examplebot",
                false,
            ),
            (
                r#"<body><meta name="robots" content="noai">"#,
                "examplebot",
                false,
            ),
        ] {
            assert_eq!(
                page(html, token, &ai).is_some(),
                refuses,
                "{html} {token:?}"
            );
        }
        let r = page(r#"<meta name=robots content="noai">"#, "b", &[Use::AiInput]).unwrap();
        assert_eq!(r.signal, Signal::NoAi);
        assert_eq!(r.field, r#"<meta name="robots" content="noai">"#);
        assert!(page(r#"<meta name=robots content=noai>"#, "b", &[Use::Search]).is_none());
    }
}
