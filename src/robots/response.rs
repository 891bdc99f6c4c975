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
//! Several fields (and several lines of one) combine; what cannot be read
//! is ignored (an unknown directive, a broken dictionary); each value is
//! read up to [`MAX_VALUE`] bytes. Pure: no I/O.

use std::fmt;

use super::usage::{parse_line, Stated, Use, Vocabulary};

/// The most bytes of one field's value read.
pub const MAX_VALUE: usize = 8 * 1024;

/// The signal that stated a preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// `Content-Usage: …=n`.
    ContentUsage,
    /// `X-Robots-Tag: noai` (perhaps scoped to this bot).
    NoAi,
    /// `X-Robots-Tag: noimageai` on an image.
    NoImageAi,
    /// TDMRep `tdm-reservation: 1`.
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

    fn content_usage(&mut self, value: &str) {
        let Some((None, stated)) = parse_line(Vocabulary::ContentUsage, value.as_bytes()) else {
            return;
        };
        self.stated = self.stated.strictest(stated);
        for (u, allowed) in stated.iter() {
            if !allowed && !self.by.iter().any(|(c, _, _)| *c == u) {
                self.by.push((
                    u,
                    Signal::ContentUsage,
                    cut(&format!("Content-Usage: {value}")),
                ));
            }
        }
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

/// Reads the preference fields among `fields` (name, value; names in any
/// case) for a response of `content_type`, as they apply to the bot whose
/// product token is `token` (lower case).
pub fn read<'a>(
    fields: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    content_type: Option<&str>,
    token: &str,
) -> ResponsePreferences {
    let image = content_type.is_some_and(|t| {
        t.trim_start()
            .get(..6)
            .is_some_and(|p| p.eq_ignore_ascii_case("image/"))
    });
    let mut out = ResponsePreferences::default();
    for (name, value) in fields {
        let value = &value[..value.len().min(MAX_VALUE)];
        let Ok(value) = std::str::from_utf8(value) else {
            continue;
        };
        if name.eq_ignore_ascii_case("content-usage") {
            out.content_usage(value.trim());
        } else if name.eq_ignore_ascii_case("x-robots-tag") {
            robots_tag(&mut out, value, image, token);
        } else if name.eq_ignore_ascii_case("tdm-reservation") && value.trim() == "1" {
            out.refuse(&AI_USES, Signal::TdmReservation, "tdm-reservation: 1");
        }
    }
    out
}

/// One `X-Robots-Tag` value: `directive, directive` for every bot, or
/// `botname: directive, …` for that bot only (RFC-less, as Google reads
/// it: a leading name and colon that is not a directive taking a value).
fn robots_tag(out: &mut ResponsePreferences, value: &str, image: bool, token: &str) {
    let mut directives = value;
    if let Some((name, rest)) = value.split_once(':') {
        let name = name.trim();
        let takes_value = [
            "unavailable_after",
            "max-snippet",
            "max-image-preview",
            "max-video-preview",
        ]
        .iter()
        .any(|d| name.eq_ignore_ascii_case(d));
        if !takes_value && !name.contains(',') && !name.is_empty() {
            if !name.eq_ignore_ascii_case(token) || token.is_empty() {
                return;
            }
            directives = rest;
        }
    }
    for directive in directives.split(',').map(str::trim) {
        if directive.eq_ignore_ascii_case("noai") {
            out.refuse(
                &AI_USES,
                Signal::NoAi,
                &format!("X-Robots-Tag: {}", value.trim()),
            );
        } else if directive.eq_ignore_ascii_case("noimageai") && image {
            out.refuse(
                &AI_USES,
                Signal::NoImageAi,
                &format!("X-Robots-Tag: {}", value.trim()),
            );
        }
    }
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
        read(fields.iter().map(|(n, v)| (*n, v.as_bytes())), ct, token).refused(uses)
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
    fn what_cannot_be_read_is_ignored_and_huge_values_are_bounded() {
        for bad in [
            "train-ai",
            "train-ai=maybe",
            "TRAIN-AI=n",
            "train-ai=n,,",
            "\u{0}",
        ] {
            assert!(
                refused(&[("Content-Usage", bad)], None, "bot", &[Use::TrainAi]).is_none(),
                "{bad:?}"
            );
        }
        let huge = format!("{}train-ai=n", "x=y, ".repeat(10_000));
        assert!(refused(&[("Content-Usage", &huge)], None, "bot", &[Use::TrainAi]).is_none());
        let long_tag = format!("{}noai", "a, ".repeat(5_000));
        assert!(refused(&[("X-Robots-Tag", &long_tag)], None, "bot", &[Use::TrainAi]).is_none());
        let invalid = [("X-Robots-Tag", &b"\xffnoai"[..])];
        assert!(read(invalid.iter().map(|(n, v)| (*n, *v)), None, "bot")
            .refused(&[Use::TrainAi])
            .is_none());
        // A refusal's detail is cut.
        let tag = format!("noai, {}", "x".repeat(1000));
        let r = refused(&[("X-Robots-Tag", &tag)], None, "bot", &[Use::TrainAi]).unwrap();
        assert!(r.field.chars().count() <= 200);
    }
}
