//! Web Bot Auth: a bot that proves who it is by signing its web requests
//! (HTTP Message Signatures, RFC 9421) with an Ed25519 key whose public half
//! the operator publishes in a key directory. Implemented as
//! draft-meunier-webbotauth-httpsig-protocol-00 (the request's signature:
//! `Signature-Agent`, `Signature-Input`, `Signature`, tag `web-bot-auth`) and
//! draft-meunier-http-message-signatures-directory-05 (the directory, its
//! media type, and the directory answer signed by each key, tag
//! `http-message-signatures-directory`).
//!
//! What a bot's config says ([`Signing`]) is pure; its key ([`key`]) is
//! kept in the state directory; [`sign`] builds the fields (pure, given the
//! key, the time and a nonce); [`directory`] serves the keys.

pub mod directory;
pub mod key;
pub mod sign;

use std::sync::Arc;

/// How long a signature is valid after it is made: long enough for a slow
/// server to read the request, short enough that a copied request is soon
/// worthless.
pub const VALIDITY: std::time::Duration = std::time::Duration::from_secs(60);

/// When a bot signs its web requests (`web_bot_auth`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum When {
    /// Never (the default).
    #[default]
    Off,
    /// Every request.
    Always,
    /// Only a `GET` or `HEAD` the server answered `401`, `403` or `429`
    /// with `Accept-Signature`: asked again, signed, as a new request.
    Challenged,
}

impl When {
    pub fn parse(text: &str) -> Result<When, String> {
        match text {
            "off" => Ok(When::Off),
            "always" => Ok(When::Always),
            "challenged" => Ok(When::Challenged),
            other => Err(format!(
                "{other:?}: web_bot_auth is \"off\", \"always\" or \"challenged\""
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            When::Off => "off",
            When::Always => "always",
            When::Challenged => "challenged",
        }
    }
}

/// A bot's Web Bot Auth, as configured: when it signs, and the URL it names
/// in `Signature-Agent` (the HTTPS origin where the operator publishes the
/// key directory).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Signing {
    pub when: When,
    /// `https://…` (checked by [`agent_url`]); empty when off.
    pub agent: String,
}

/// The longest `signature_agent` URL.
pub const MAX_AGENT_URL: usize = 512;

/// A `signature_agent` as written: an absolute `https://` URL of printable
/// ASCII without quotes or backslashes (it is sent as a structured-field
/// string), at most [`MAX_AGENT_URL`] bytes.
pub fn agent_url(text: &str) -> Result<String, String> {
    if text.len() > MAX_AGENT_URL {
        return Err(format!("at most {MAX_AGENT_URL} bytes"));
    }
    if !text
        .bytes()
        .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
    {
        return Err(format!(
            "{text:?}: a URL of printable ASCII, without spaces, quotes or backslashes"
        ));
    }
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is no URL: {e}"))?;
    if url.scheme() != "https" || url.host_str().is_none() {
        return Err(format!(
            "{text:?}: the key directory is published over HTTPS (https://your.origin)"
        ));
    }
    Ok(text.to_string())
}

/// One signing bot: its key and the URL it names.
pub struct Signer {
    pub key: key::Key,
    pub when: When,
    pub agent: String,
}

/// Every bot's signer, in the bots' order (`None`: the bot does not sign).
#[derive(Default)]
pub struct Signers(Vec<Option<Arc<Signer>>>);

impl Signers {
    /// Each bot's key, loaded from `state_dir` or made there, for the bots
    /// (named, with their signing) that sign.
    pub fn load<'a>(
        state_dir: &std::path::Path,
        bots: impl Iterator<Item = (&'a str, &'a Signing)>,
    ) -> Result<Signers, key::KeyError> {
        let mut signers = Vec::new();
        for (name, signing) in bots {
            signers.push(match signing.when {
                When::Off => None,
                when => Some(Arc::new(Signer {
                    key: key::Key::load_or_generate(state_dir, name)?,
                    when,
                    agent: signing.agent.clone(),
                })),
            });
        }
        Ok(Signers(signers))
    }

    /// Bot `bot`'s signer, if it signs.
    pub fn get(&self, bot: usize) -> Option<&Arc<Signer>> {
        self.0.get(bot).and_then(Option::as_ref)
    }

    /// Every key, once each (two bots may share none: each has its own file).
    pub fn keys(&self) -> impl Iterator<Item = &key::Key> {
        self.0.iter().flatten().map(|s| &s.key)
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(Option::is_none)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_is_an_https_url_fit_for_a_structured_field() {
        assert!(agent_url("https://crawler.example").is_ok());
        assert!(agent_url("https://crawler.example/bots/").is_ok());
        for bad in [
            "http://crawler.example",
            "crawler.example",
            "https://crawler.example/\"x",
            "https://crawler.example/a\\b",
            "https://crawler.example/ a",
            "https://crawler.example/é",
            "",
        ] {
            assert!(agent_url(bad).is_err(), "{bad}");
        }
        assert!(agent_url(&format!("https://a.example/{}", "x".repeat(600))).is_err());
    }

    #[test]
    fn when_reads_its_three_words() {
        assert_eq!(When::parse("always"), Ok(When::Always));
        assert_eq!(When::parse("challenged"), Ok(When::Challenged));
        assert_eq!(When::parse("off"), Ok(When::Off));
        assert!(When::parse("Always").is_err());
    }
}
