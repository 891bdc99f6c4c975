//! Declared uses and the preferences robots.txt states about them:
//! `Content-Usage:` (IETF AIPREF, `draft-ietf-aipref-attach` and
//! `draft-ietf-aipref-vocab`: an optional path, then a structured-fields
//! dictionary such as `train-ai=n`) and `Content-Signal:` (Cloudflare's
//! `search=yes, ai-train=no, ai-input=no`, with the same optional path).
//!
//! Both vocabularies are read into one set of categories ([`Use`]):
//! Content-Signal's `ai-train` is AIPREF's `train-ai`; `ai-input` (using
//! content as input to an AI answer) has no AIPREF label and stays its own.
//! A use without a stated preference takes its parent's (`train-genai` →
//! `train-ai` → `bots`; `search`, `ai-input` → `bots`); none stated: no
//! preference. Pure: parsing and resolving only.

use std::fmt;

/// A category of use, as a bot declares it (`content_usage`) and as a
/// preference names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Use {
    /// AIPREF `bots`: any automated processing (the parent of the others).
    Bots,
    /// AIPREF `train-ai`; Content-Signal `ai-train`.
    TrainAi,
    /// AIPREF `train-genai`: training generative models (a kind of `train-ai`).
    TrainGenai,
    /// AIPREF and Content-Signal `search`.
    Search,
    /// Content-Signal `ai-input`: as input to an AI's answer (RAG, grounding).
    AiInput,
}

/// Every category, in bit order.
const ALL: [Use; 5] = [
    Use::Bots,
    Use::TrainAi,
    Use::TrainGenai,
    Use::Search,
    Use::AiInput,
];

impl Use {
    /// A declared use by its name (either vocabulary's).
    pub fn parse(name: &str) -> Result<Use, String> {
        match name {
            "train-ai" | "ai-train" => Ok(Use::TrainAi),
            "train-genai" => Ok(Use::TrainGenai),
            "search" => Ok(Use::Search),
            "ai-input" => Ok(Use::AiInput),
            _ => Err(format!(
                "{name:?}: a use is one of \"train-ai\" (or \"ai-train\"), \"train-genai\", \"search\", \"ai-input\""
            )),
        }
    }

    /// Its AIPREF label (`ai-input`: Content-Signal's).
    pub fn as_str(self) -> &'static str {
        match self {
            Use::Bots => "bots",
            Use::TrainAi => "train-ai",
            Use::TrainGenai => "train-genai",
            Use::Search => "search",
            Use::AiInput => "ai-input",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }

    /// The category whose preference applies when this one states none.
    fn parent(self) -> Option<Use> {
        match self {
            Use::Bots => None,
            Use::TrainGenai => Some(Use::TrainAi),
            Use::TrainAi | Use::Search | Use::AiInput => Some(Use::Bots),
        }
    }
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which field stated a preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vocabulary {
    /// `Content-Usage:` (AIPREF): `y` / `n`.
    ContentUsage,
    /// `Content-Signal:` (Cloudflare): `yes` / `no`.
    ContentSignal,
}

impl Vocabulary {
    pub fn field(self) -> &'static str {
        match self {
            Vocabulary::ContentUsage => "Content-Usage",
            Vocabulary::ContentSignal => "Content-Signal",
        }
    }

    /// A category's key in this vocabulary.
    fn key(self, use_: Use) -> &'static str {
        match (self, use_) {
            (Vocabulary::ContentSignal, Use::TrainAi) => "ai-train",
            (_, u) => u.as_str(),
        }
    }

    fn category(self, key: &str) -> Option<Use> {
        match (self, key) {
            (Vocabulary::ContentUsage, "bots") => Some(Use::Bots),
            (Vocabulary::ContentUsage, "train-ai") => Some(Use::TrainAi),
            (Vocabulary::ContentUsage, "train-genai") => Some(Use::TrainGenai),
            (Vocabulary::ContentSignal, "ai-train") => Some(Use::TrainAi),
            (Vocabulary::ContentSignal, "ai-input") => Some(Use::AiInput),
            (_, "search") => Some(Use::Search),
            _ => None,
        }
    }

    fn value(self, token: &str) -> Option<bool> {
        match (self, token) {
            (Vocabulary::ContentUsage, "y") | (Vocabulary::ContentSignal, "yes") => Some(true),
            (Vocabulary::ContentUsage, "n") | (Vocabulary::ContentSignal, "no") => Some(false),
            _ => None,
        }
    }
}

/// The preferences one line states: per category allowed (`y`) or refused
/// (`n`); the rest unstated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stated {
    yes: u8,
    no: u8,
}

impl Stated {
    pub fn get(self, use_: Use) -> Option<bool> {
        if self.no & use_.bit() != 0 {
            Some(false)
        } else if self.yes & use_.bit() != 0 {
            Some(true)
        } else {
            None
        }
    }

    /// A preference that refuses `use_` alone.
    pub fn refusing(use_: Use) -> Stated {
        Stated {
            yes: 0,
            no: use_.bit(),
        }
    }

    fn set(&mut self, use_: Use, allowed: bool) {
        // A dictionary's later member replaces an earlier one (RFC 9651 §4.2.2).
        self.yes &= !use_.bit();
        self.no &= !use_.bit();
        match allowed {
            true => self.yes |= use_.bit(),
            false => self.no |= use_.bit(),
        }
    }

    /// Two lines' preferences for the same paths: the most restrictive of
    /// each (`n` over `y` over unstated).
    pub fn strictest(self, other: Stated) -> Stated {
        let no = self.no | other.no;
        Stated {
            no,
            yes: (self.yes | other.yes) & !no,
        }
    }

    pub fn is_empty(self) -> bool {
        self.yes | self.no == 0
    }

    /// What applies to `use_`: its own preference, else its parent's; the
    /// category that stated it.
    pub fn resolve(self, use_: Use) -> Option<(Use, bool)> {
        let mut at = Some(use_);
        while let Some(u) = at {
            if let Some(allowed) = self.get(u) {
                return Some((u, allowed));
            }
            at = u.parent();
        }
        None
    }

    /// The stated categories, in a fixed order.
    pub fn iter(self) -> impl Iterator<Item = (Use, bool)> {
        ALL.into_iter()
            .filter_map(move |u| self.get(u).map(|allowed| (u, allowed)))
    }
}

/// A line's value: an optional path (starting with `/`), then the
/// dictionary. `None` when the dictionary does not parse (the line is
/// ignored, as RFC 9651 has a failed field ignored).
pub fn parse_line(vocabulary: Vocabulary, value: &[u8]) -> Option<(Option<&[u8]>, Stated)> {
    let (path, dict) = match value.first() {
        Some(b'/') => {
            let end = value
                .iter()
                .position(|b| b.is_ascii_whitespace())
                .unwrap_or(value.len());
            (Some(&value[..end]), &value[end..])
        }
        _ => (None, value),
    };
    parse_dictionary(vocabulary, dict).map(|stated| (path, stated))
}

/// An RFC 9651 dictionary (parsed whole by `sfv`, so a quoted string or an
/// inner list is read as the RFC reads it), read for `vocabulary`'s keys:
/// a member whose key is one of its categories and whose value is one of
/// its tokens states a preference (the last of a repeated key wins); other
/// members are for extensions. Anything that breaks the grammar fails the
/// whole dictionary.
fn parse_dictionary(vocabulary: Vocabulary, text: &[u8]) -> Option<Stated> {
    // Optional whitespace around the field value (RFC 9110) is not the
    // dictionary's.
    let text = text.trim_ascii();
    let dictionary = sfv::Parser::new(text).parse_dictionary().ok()?;
    let mut stated = Stated::default();
    for (key, member) in &dictionary {
        let sfv::ListEntry::Item(item) = member else {
            continue;
        };
        let sfv::BareItem::Token(token) = &item.bare_item else {
            continue;
        };
        if let (Some(category), Some(allowed)) = (
            vocabulary.category(key.as_str()),
            vocabulary.value(token.as_str()),
        ) {
            stated.set(category, allowed);
        }
    }
    Some(stated)
}

/// A preference as a refusal names it: the field and key as written in that
/// vocabulary, and its line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preference {
    pub vocabulary: Vocabulary,
    /// The category the line stated (perhaps the declared use's parent).
    pub category: Use,
    pub allowed: bool,
    pub line: u32,
}

impl fmt::Display for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.vocabulary;
        let value = match (v, self.allowed) {
            (Vocabulary::ContentUsage, true) => "y",
            (Vocabulary::ContentUsage, false) => "n",
            (Vocabulary::ContentSignal, true) => "yes",
            (Vocabulary::ContentSignal, false) => "no",
        };
        write!(
            f,
            "{}: {}={value} (line {})",
            v.field(),
            v.key(self.category),
            self.line
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cu(text: &str) -> Option<(Option<&[u8]>, Stated)> {
        parse_line(Vocabulary::ContentUsage, text.as_bytes())
    }

    #[test]
    fn content_usage_lines() {
        let (path, s) = cu("train-ai=n, search=y").unwrap();
        assert_eq!(path, None);
        assert_eq!(s.get(Use::TrainAi), Some(false));
        assert_eq!(s.get(Use::Search), Some(true));
        assert_eq!(s.get(Use::Bots), None);
        let (path, s) = cu("/private/ train-genai=n").unwrap();
        assert_eq!(path, Some(&b"/private/"[..]));
        assert_eq!(s.resolve(Use::TrainGenai), Some((Use::TrainGenai, false)));
        // Unknown keys, parameters and values are ignored; a later member wins.
        let (_, s) = cu("foo=bar;x=1, train-ai=y, train-ai=n, search=\"n\", bots").unwrap();
        assert_eq!(s.get(Use::TrainAi), Some(false));
        assert_eq!(s.get(Use::Search), None);
        assert_eq!(s.get(Use::Bots), None);
        // A broken dictionary is no line at all.
        for bad in [
            "Train-AI=n",
            "train-ai=",
            "train ai=n",
            "=n",
            "train-ai=n,,",
            "a=\"open, train-ai=n",
            "train-ai=n\u{e9}",
        ] {
            assert!(cu(bad).is_none(), "{bad:?}");
        }
        // What the RFC reads as one member is one member: a quoted comma,
        // an inner list, a byte sequence.
        for good in [
            "a=\"x, y\", train-ai=n",
            "a=(b c);q=1, train-ai=n",
            "a=:aGk=:, train-ai=n",
            "a=\"train-ai=y, \\\"\", train-ai=n",
        ] {
            let (_, s) = cu(good).unwrap_or_else(|| panic!("{good:?}"));
            assert_eq!(s.get(Use::TrainAi), Some(false), "{good:?}");
        }
        let (_, s) = cu("a=\"train-ai=n\"").unwrap();
        assert_eq!(s.get(Use::TrainAi), None, "inside a string is no member");
        // Content-Signal's vocabulary.
        let (_, s) = parse_line(
            Vocabulary::ContentSignal,
            b"search=yes, ai-train=no, ai-input=no",
        )
        .unwrap();
        assert_eq!(s.get(Use::TrainAi), Some(false));
        assert_eq!(s.get(Use::AiInput), Some(false));
        assert_eq!(s.get(Use::Search), Some(true));
        // Each vocabulary's words only.
        let (_, s) = parse_line(Vocabulary::ContentSignal, b"train-ai=n, search=n").unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn a_use_without_its_own_preference_takes_its_parents() {
        let (_, s) = cu("bots=n, search=y").unwrap();
        assert_eq!(s.resolve(Use::Search), Some((Use::Search, true)));
        assert_eq!(s.resolve(Use::TrainGenai), Some((Use::Bots, false)));
        let (_, s) = cu("train-ai=n").unwrap();
        assert_eq!(s.resolve(Use::TrainGenai), Some((Use::TrainAi, false)));
        assert_eq!(s.resolve(Use::AiInput), None);
    }

    #[test]
    fn conflicts_resolve_to_the_most_restrictive() {
        let (_, a) = cu("train-ai=y, search=y").unwrap();
        let (_, b) = cu("train-ai=n").unwrap();
        let s = a.strictest(b);
        assert_eq!(s.get(Use::TrainAi), Some(false));
        assert_eq!(s.get(Use::Search), Some(true));
        assert_eq!(b.strictest(a), s);
    }
}
