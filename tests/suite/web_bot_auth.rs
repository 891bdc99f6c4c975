//! Web Bot Auth, checked from the server's side with an independent
//! implementation (Cloudflare's `web-bot-auth` crate), never the proxy's own
//! code: a signing bot's requests verify against the keys its key directory
//! lists, and stop verifying once anything they cover is changed; the
//! directory's own signature verifies over the host it was asked for; a
//! signing bot's client cannot pass off signature fields of its own; a bot that signs when challenged asks again, signed, as
//! a new request, and only for GET and HEAD.

use std::sync::{Arc, Mutex};

use hyper::header::HeaderMap;
use robots_proxy::listener::Listener;
use web_bot_auth::components::{
    CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters,
};
use web_bot_auth::keyring::{JSONWebKeySet, KeyRing};
use web_bot_auth::message_signatures::{MessageVerifier, SignedMessage};
use web_bot_auth::{SignatureAgentLink, WebBotAuthVerifier};

use crate::common::web::{basic, raw_exchange, web_config_with, WebClient, WebOrigin};
use crate::common::*;

const AGENT: &str = "https://bots.example";

/// A request or an answer as a verifier sees it: its authority and fields.
struct Seen {
    authority: String,
    fields: HeaderMap,
}

impl SignedMessage for Seen {
    fn lookup_component(&self, name: &CoveredComponent) -> Vec<String> {
        match name {
            CoveredComponent::Derived(DerivedComponent::Authority { .. }) => {
                vec![self.authority.clone()]
            }
            CoveredComponent::HTTP(HTTPField { name, parameters }) => {
                let values: Vec<String> = self
                    .fields
                    .get_all(name.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok().map(String::from))
                    .collect();
                let key = parameters.0.iter().find_map(|p| match p {
                    HTTPFieldParameters::Key(key) => Some(key.clone()),
                    _ => None,
                });
                match key {
                    // RFC 9421 §2.1.2: the member's value, serialized.
                    Some(key) => member(&values.join(", "), &key).into_iter().collect(),
                    None => values,
                }
            }
            _ => vec![],
        }
    }
}

/// Member `key` of a dictionary field, serialized (RFC 8941).
fn member(dictionary: &str, key: &str) -> Option<String> {
    use sfv::SerializeValue;
    let parsed = sfv::Parser::new(dictionary).parse_dictionary().ok()?;
    match parsed.get(key)? {
        sfv::ListEntry::Item(item) => Some(item.serialize_value().to_string()),
        sfv::ListEntry::InnerList(_) => None,
    }
}

/// A proxy whose `signer` bot signs `when`, the key directory listening,
/// and a bot `plain` that does not sign.
async fn signing_proxy(when: &str, extra: &str) -> robots_proxy::server::Proxy {
    let mut config = web_config_with(&format!(
        r#"
[socks5]
users = [{{ name = "s", password = "s-pass" }}, {{ name = "p", password = "p-pass" }}]
[bot]
name = "anon"
agent = "anonbot"
[[bots]]
name = "signer"
agent = "examplebot"
socks5_users = ["s"]
web_bot_auth = "{when}"
signature_agent = "{AGENT}"
{extra}
[[bots]]
name = "plain"
agent = "plainbot"
socks5_users = ["p"]
"#
    ));
    config
        .listen
        .set(Listener::KeyDirectory, Some("127.0.0.1:0".parse().unwrap()));
    start_proxy(config).await
}

/// The key directory as `host` asks for it: the answer's fields and its keys.
async fn directory(proxy: &robots_proxy::server::Proxy, host: &str) -> (HeaderMap, KeyRing) {
    let ask = format!(
        "GET /.well-known/http-message-signatures-directory HTTP/1.1\r\nHost: {host}\r\n\r\n"
    );
    let answer = raw_exchange(proxy.addr(Listener::KeyDirectory), ask.as_bytes()).await;
    let (head, body) = answer.split_once("\r\n\r\n").expect("an answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{answer}");
    let mut fields = HeaderMap::new();
    for line in head.lines().skip(1) {
        let (name, value) = line.split_once(':').unwrap();
        fields.append(
            hyper::header::HeaderName::from_bytes(name.trim().as_bytes()).unwrap(),
            value.trim().parse().unwrap(),
        );
    }
    assert_eq!(
        fields["content-type"],
        "application/http-message-signatures-directory+json"
    );
    let jwks: JSONWebKeySet = serde_json::from_str(body).expect("a JWK set");
    let mut keys = KeyRing::default();
    assert!(keys.import_jwks(jwks).iter().all(Option::is_none));
    (fields, keys)
}

/// Whether a request the origin saw verifies as Web Bot Auth with `keys`.
fn verifies(seen: &Seen, keys: &KeyRing) -> Result<(), String> {
    let verifier = WebBotAuthVerifier::parse(seen).map_err(|e| e.to_string())?;
    verifier
        .verify(keys, None)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The request the origin saw at `path`, as its verifier would see it.
fn seen_at(origin: &WebOrigin, path: &str) -> Seen {
    let seen = origin
        .seen()
        .into_iter()
        .rev()
        .find(|s| s.target == path)
        .unwrap_or_else(|| panic!("{path} never reached the origin"));
    Seen {
        authority: seen.headers["host"].to_str().unwrap().to_string(),
        fields: seen.headers,
    }
}

#[tokio::test]
async fn a_signing_bot_s_requests_verify_with_an_independent_implementation() {
    let origin = WebOrigin::site("User-agent: *\nDisallow: /private/\n").await;
    let proxy = signing_proxy("always", "").await;
    let (_, keys) = directory(&proxy, "bots.example").await;
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let signer = basic("s", "s-pass");
    let answer = client
        .get(&origin.url("/page"), &[("proxy-authorization", &signer)])
        .await;
    assert_eq!(answer.status, 200);
    let seen = seen_at(&origin, "/page");
    verifies(&seen, &keys).unwrap();
    let verifier = WebBotAuthVerifier::parse(&seen).unwrap();
    assert_eq!(
        verifier.get_signature_agents(),
        &vec![SignatureAgentLink::External(AGENT.into())]
    );
    // robots.txt is the proxy's own fetch: never signed as the bot.
    assert!(!origin.seen()[0].headers.contains_key("signature"));

    // Tampering with anything covered breaks it.
    let tampered_authority = Seen {
        authority: "other.example".into(),
        fields: seen.fields.clone(),
    };
    assert!(verifies(&tampered_authority, &keys).is_err());
    let mut agent = seen.fields.clone();
    agent.insert(
        "signature-agent",
        "agent1=\"https://evil.example\"".parse().unwrap(),
    );
    assert!(verifies(
        &Seen {
            authority: seen.authority.clone(),
            fields: agent
        },
        &keys
    )
    .is_err());
    let mut bytes = seen.fields.clone();
    let signature = bytes["signature"].to_str().unwrap().to_string();
    // One character of the signature's base64 changed.
    let at = "sig1=:".len();
    let changed = if &signature[at..=at] == "A" { "B" } else { "A" };
    let flipped = format!("{}{changed}{}", &signature[..at], &signature[at + 1..]);
    bytes.insert("signature", flipped.parse().unwrap());
    assert!(verifies(
        &Seen {
            authority: seen.authority.clone(),
            fields: bytes
        },
        &keys
    )
    .is_err());
    // Another key does not verify it.
    let other =
        robots_proxy::identity::key::Key::load_or_generate(&state_dir(), "someone").unwrap();
    let mut wrong = KeyRing::default();
    wrong.import_raw(
        seen.fields["signature-input"]
            .to_str()
            .unwrap()
            .split("keyid=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .to_string(),
        web_bot_auth::keyring::Algorithm::Ed25519,
        other.public().to_vec(),
    );
    assert!(verifies(&seen, &wrong).is_err());
}

#[tokio::test]
async fn the_directory_is_signed_over_the_host_it_was_asked_for() {
    let proxy = signing_proxy("always", "").await;
    let (fields, keys) = directory(&proxy, "bots.example").await;
    let answer = Seen {
        authority: "bots.example".into(),
        fields: fields.clone(),
    };
    let verifier = MessageVerifier::parse(&answer, |(_, inner)| {
        inner
            .params
            .get("tag")
            .and_then(|t| t.as_string())
            .is_some_and(|t| t.as_str() == "http-message-signatures-directory")
    })
    .unwrap();
    verifier.verify(&keys, None).unwrap();
    let elsewhere = Seen {
        authority: "mirror.example".into(),
        fields,
    };
    let verifier = MessageVerifier::parse(&elsewhere, |_| true).unwrap();
    assert!(verifier.verify(&keys, None).is_err());
    // Only the bot that signs has a key there.
    let (_, keys) = directory(&proxy, "bots.example").await;
    let listed = serde_json::to_value(keys_of(&proxy, "bots.example").await).unwrap();
    assert_eq!(listed["keys"].as_array().unwrap().len(), 1);
    drop(keys);
}

/// The directory's JWK set as served.
async fn keys_of(proxy: &robots_proxy::server::Proxy, host: &str) -> serde_json::Value {
    let ask = format!(
        "GET /.well-known/http-message-signatures-directory HTTP/1.1\r\nHost: {host}\r\n\r\n"
    );
    let answer = raw_exchange(proxy.addr(Listener::KeyDirectory), ask.as_bytes()).await;
    serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap()
}

#[tokio::test]
async fn a_client_cannot_pass_off_its_own_signature() {
    let origin = WebOrigin::site("").await;
    let proxy = signing_proxy("always", "").await;
    let (_, keys) = directory(&proxy, "bots.example").await;
    let forged = [
        ("signature-agent", "agent1=\"https://evil.example\""),
        (
            "signature-input",
            "sig1=(\"@authority\");created=1;expires=9999999999;keyid=\"x\";tag=\"web-bot-auth\"",
        ),
        ("signature", "sig1=:AAAA:"),
    ];
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let signer = basic("s", "s-pass");
    let mut asked = vec![("proxy-authorization", signer.as_str())];
    asked.extend(forged);
    assert_eq!(client.get(&origin.url("/mine"), &asked).await.status, 200);
    let seen = seen_at(&origin, "/mine");
    assert_eq!(seen.fields.get_all("signature").iter().count(), 1);
    assert_eq!(
        seen.fields["signature-agent"],
        "agent1=\"https://bots.example\""
    );
    verifies(&seen, &keys).unwrap();
    // A bot that does not sign passes the crawler's own fields on as sent:
    // forged ones verify with nothing.
    let plain = basic("p", "p-pass");
    let mut asked = vec![("proxy-authorization", plain.as_str())];
    asked.extend(forged);
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    assert_eq!(client.get(&origin.url("/theirs"), &asked).await.status, 200);
    let seen = seen_at(&origin, "/theirs");
    assert!(verifies(&seen, &keys).is_err());
}

/// A site that answers an unsigned request `status` with `Accept-Signature`,
/// and a signed one its page; each request's path and whether it was signed.
async fn challenging_site(status: u16) -> (WebOrigin, Arc<Mutex<Vec<(String, bool)>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let origin = WebOrigin::start_asked(move |path, asked| {
        if path == "/robots.txt" {
            return (404, vec![], vec![]);
        }
        let signed = asked.contains_key("signature");
        seen.lock().unwrap().push((path.to_string(), signed));
        match signed {
            true => (200, vec![], b"welcome, signed bot".to_vec()),
            false => (
                status,
                vec![(
                    "accept-signature",
                    "sig1=(\"@authority\" \"signature-agent\");tag=\"web-bot-auth\"".into(),
                )],
                b"sign first".to_vec(),
            ),
        }
    })
    .await;
    (origin, log)
}

#[tokio::test]
async fn a_bot_that_signs_when_challenged_asks_again_signed_as_a_new_request() {
    for status in [401, 403, 429] {
        let (origin, log) = challenging_site(status).await;
        let proxy = signing_proxy(
            "challenged",
            "min_delay = \"300ms\"\ndaily_requests_per_server = 2",
        )
        .await;
        let (_, keys) = directory(&proxy, "bots.example").await;
        let signer = basic("s", "s-pass");
        let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
        let answer = client
            .get(&origin.url("/gate"), &[("proxy-authorization", &signer)])
            .await;
        assert_eq!(
            (answer.status, answer.body.as_str()),
            (200, "welcome, signed bot"),
            "{status}"
        );
        assert_eq!(
            *log.lock().unwrap(),
            [("/gate".to_string(), false), ("/gate".to_string(), true)],
            "{status}"
        );
        verifies(&seen_at(&origin, "/gate"), &keys).unwrap();
        // The retry is a new request: spaced by the bot's min_delay.
        let starts: Vec<_> = origin
            .seen()
            .iter()
            .filter(|s| s.target == "/gate")
            .map(|s| s.at)
            .collect();
        assert!(
            starts[1] - starts[0] >= std::time::Duration::from_millis(290),
            "{status}"
        );
        // And counted: the two starts spent the bot's daily budget here.
        let next = client
            .get(&origin.url("/next"), &[("proxy-authorization", &signer)])
            .await;
        assert_ne!(next.status, 200, "{status}: {next:?}");
        assert!(log.lock().unwrap().iter().all(|(p, _)| p != "/next"));
    }
}

/// A challenged POST is answered as it is: never sent twice.
#[tokio::test]
async fn a_challenged_post_is_never_sent_twice() {
    let (origin, log) = challenging_site(401).await;
    let proxy = signing_proxy("challenged", "http_methods = [\"GET\", \"HEAD\", \"POST\"]").await;
    let signer = basic("s", "s-pass");
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let post = client
        .send(
            "POST",
            &origin.url("/form"),
            &[("proxy-authorization", &signer)],
        )
        .await
        .unwrap();
    assert_eq!(post.status, 401);
    assert_eq!(*log.lock().unwrap(), [("/form".to_string(), false)]);
}

#[tokio::test]
async fn a_challenge_is_not_answered_by_a_bot_that_does_not_sign_on_challenge() {
    let (origin, log) = challenging_site(401).await;
    let proxy = signing_proxy("challenged", "").await;
    let plain = basic("p", "p-pass");
    let mut client = WebClient::connect(proxy.addr(Listener::Http)).await;
    let answer = client
        .get(&origin.url("/gate"), &[("proxy-authorization", &plain)])
        .await;
    assert_eq!(answer.status, 401);
    assert_eq!(log.lock().unwrap().len(), 1);
    // A 401 without Accept-Signature is no challenge, even for the signer.
    let origin = WebOrigin::start(|path| match path {
        "/robots.txt" => (404, vec![], vec![]),
        _ => (401, vec![], b"no".to_vec()),
    })
    .await;
    let signer = basic("s", "s-pass");
    let answer = client
        .get(&origin.url("/x"), &[("proxy-authorization", &signer)])
        .await;
    assert_eq!(answer.status, 401);
    assert_eq!(origin.targets().iter().filter(|t| *t == "/x").count(), 1);
}

#[test]
fn signing_needs_a_directory_origin() {
    for (toml, says) in [
        ("[bot]\nagent = \"a\"\nweb_bot_auth = \"always\"\n", "bot.signature_agent"),
        (
            "[bot]\nagent = \"a\"\nweb_bot_auth = \"always\"\nsignature_agent = \"http://bots.example\"\n",
            "over HTTPS",
        ),
        ("[bot]\nagent = \"a\"\nweb_bot_auth = \"sometimes\"\n", "\"challenged\""),
        (
            "[bot]\nagent = \"a\"\nweb_bot_auth = \"always\"\nsignature_agent = \"https://bots.example/\\\"x\"\n",
            "quotes",
        ),
    ] {
        let raw = robots_proxy::config::RawConfig::parse(toml).unwrap();
        let e = raw
            .resolve(&robots_proxy::cli::RunArgs::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{toml}: {e}");
    }
}
