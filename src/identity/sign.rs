//! The signature fields (RFC 9421 §2.5, §4): what is covered, the signature
//! base, and the `Signature-Input` and `Signature` values. Pure: the key,
//! the time and the nonce are given.
//!
//! A request (Web Bot Auth): `"@authority"` and `"signature-agent";key="agent1"`,
//! with `created`, `expires`, `keyid`, `alg`, `nonce` and `tag="web-bot-auth"`.
//! The key directory's answer: `"@authority";req`, tag
//! `"http-message-signatures-directory"`, one signature per key.

use base64::Engine;

use super::key::Key;

/// The `Signature-Agent` member the request's signature covers.
pub const AGENT_LABEL: &str = "agent1";

/// A request's fields: `Signature-Agent`, `Signature-Input`, `Signature`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed {
    pub signature_agent: String,
    pub signature_input: String,
    pub signature: String,
}

/// A structured-field string (RFC 8941 §3.3.3): the caller gives printable
/// ASCII; `"` and `\` are escaped.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// What one signature covers and says of itself.
struct Params<'a> {
    /// The covered components, serialized (`"@authority"`, …).
    components: &'a [&'a str],
    created: u64,
    expires: u64,
    keyid: &'a str,
    nonce: &'a [u8],
    tag: &'a str,
}

impl Params<'_> {
    /// `@signature-params`' value, which is also `Signature-Input`'s member.
    fn serialized(&self) -> String {
        let nonce = base64::engine::general_purpose::STANDARD.encode(self.nonce);
        format!(
            "({});created={};expires={};keyid={};alg=\"ed25519\";nonce={};tag={}",
            self.components.join(" "),
            self.created,
            self.expires,
            sf_string(self.keyid),
            sf_string(&nonce),
            sf_string(self.tag),
        )
    }
}

/// The signature base (RFC 9421 §2.5): one line per covered component
/// (`values` in the same order), then `@signature-params`; and the
/// `Signature-Input` member it goes with.
fn base(params: &Params, values: &[&str]) -> (String, String) {
    let mut base = String::new();
    for (component, value) in params.components.iter().zip(values) {
        base.push_str(component);
        base.push_str(": ");
        base.push_str(value);
        base.push('\n');
    }
    let input = params.serialized();
    base.push_str("\"@signature-params\": ");
    base.push_str(&input);
    (base, input)
}

fn byte_sequence(bytes: &[u8]) -> String {
    format!(
        ":{}:",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

/// The Web Bot Auth fields for a request to `authority` (the target's
/// host, and its port when not the scheme's default: RFC 9421 §2.2.3),
/// signed by `key` at `now` (Unix seconds), naming `agent`.
pub fn request(key: &Key, agent: &str, authority: &str, now: u64, nonce: &[u8]) -> Signed {
    let signature_agent = format!("{AGENT_LABEL}={}", sf_string(agent));
    let agent_component = format!("\"signature-agent\";key=\"{AGENT_LABEL}\"");
    let components = ["\"@authority\"", agent_component.as_str()];
    let params = Params {
        components: &components,
        created: now,
        expires: now + super::VALIDITY.as_secs(),
        keyid: &key.keyid,
        nonce,
        tag: "web-bot-auth",
    };
    let authority = authority.to_ascii_lowercase();
    let (base, input) = base(&params, &[&authority, &sf_string(agent)]);
    Signed {
        signature_agent,
        signature_input: format!("sig1={input}"),
        signature: format!("sig1={}", byte_sequence(&key.sign(base.as_bytes()))),
    }
}

/// The key directory answer's `Signature-Input` and `Signature`: one
/// signature per key (`binding0`, `binding1`, …) over the request's
/// `@authority` (its `Host`).
pub fn directory<'a>(
    keys: impl Iterator<Item = &'a Key>,
    authority: &str,
    now: u64,
    nonce: &[u8],
) -> (String, String) {
    let authority = authority.to_ascii_lowercase();
    let (mut inputs, mut signatures) = (Vec::new(), Vec::new());
    for (i, key) in keys.enumerate() {
        let params = Params {
            components: &["\"@authority\";req"],
            created: now,
            expires: now + super::VALIDITY.as_secs(),
            keyid: &key.keyid,
            nonce,
            tag: "http-message-signatures-directory",
        };
        let (base, input) = base(&params, &[&authority]);
        inputs.push(format!("binding{i}={input}"));
        signatures.push(format!(
            "binding{i}={}",
            byte_sequence(&key.sign(base.as_bytes()))
        ));
    }
    (inputs.join(", "), signatures.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        let pem = "-----BEGIN PRIVATE KEY-----\n\
            MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n\
            -----END PRIVATE KEY-----\n";
        Key::from_pem(pem.as_bytes(), "test".into()).unwrap()
    }

    #[test]
    fn a_request_s_fields_name_what_they_cover() {
        let signed = request(
            &key(),
            "https://crawler.example",
            "Site.Example:8443",
            1000,
            &[7; 64],
        );
        assert_eq!(signed.signature_agent, "agent1=\"https://crawler.example\"");
        assert!(signed.signature_input.starts_with(
            "sig1=(\"@authority\" \"signature-agent\";key=\"agent1\");created=1000;expires=1060;\
             keyid=\"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U\";alg=\"ed25519\";nonce=\""
        ), "{}", signed.signature_input);
        assert!(signed.signature_input.ends_with(";tag=\"web-bot-auth\""));
        assert!(signed.signature.starts_with("sig1=:") && signed.signature.ends_with(':'));
    }

    /// The base is checked with ring's verifier here; an independent
    /// implementation checks whole requests in tests/suite/web_bot_auth.rs.
    #[test]
    fn the_signature_is_over_the_base_rfc_9421_describes() {
        let key = key();
        let nonce = [1u8; 64];
        let signed = request(
            &key,
            "https://crawler.example",
            "site.example",
            1000,
            &nonce,
        );
        let input = signed.signature_input.strip_prefix("sig1=").unwrap();
        let base = format!(
            "\"@authority\": site.example\n\"signature-agent\";key=\"agent1\": \"https://crawler.example\"\n\"@signature-params\": {input}"
        );
        let sig = signed
            .signature
            .strip_prefix("sig1=:")
            .unwrap()
            .strip_suffix(':')
            .unwrap();
        let sig = base64::engine::general_purpose::STANDARD
            .decode(sig)
            .unwrap();
        let public =
            ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, key.public());
        assert!(public.verify(base.as_bytes(), &sig).is_ok());
        assert!(public
            .verify(base.replace("site.", "other.").as_bytes(), &sig)
            .is_err());
    }

    #[test]
    fn the_directory_is_signed_once_per_key() {
        let (k1, k2) = (key(), key());
        let (input, signature) = directory([&k1, &k2].into_iter(), "Bots.Example", 5, &[0; 32]);
        assert!(input.starts_with("binding0=(\"@authority\";req);created=5;expires=65;"));
        assert!(input.contains(", binding1=(\"@authority\";req)"));
        assert!(input.contains("tag=\"http-message-signatures-directory\""));
        assert_eq!(signature.matches("binding").count(), 2);
    }
}
