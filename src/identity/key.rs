//! A bot's Ed25519 key: made once (by ring) and kept in the state directory
//! as `web-bot-auth/BOT.key.pem` (PKCS#8, mode 0600), or brought by the
//! operator there (`openssl genpkey -algorithm ed25519`); its public half as
//! a JWK (RFC 8037) and named by its JWK thumbprint (RFC 7638), the `keyid`
//! of every signature it makes.

use std::path::{Path, PathBuf};

use base64::Engine;
use ring::signature::{Ed25519KeyPair, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;

/// Where the keys are kept, under the state directory.
pub const DIR: &str = "web-bot-auth";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the Web Bot Auth key {path} cannot be read or written: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the Web Bot Auth key {path} is no Ed25519 private key in PKCS#8 PEM ({why}); \
         make one with `openssl genpkey -algorithm ed25519 -out {path}`, or remove the file \
         for the proxy to make one"
    )]
    Unusable { path: PathBuf, why: String },
}

/// One bot's key.
pub struct Key {
    pair: Ed25519KeyPair,
    /// Its JWK thumbprint, base64url (RFC 7638): `keyid`.
    pub keyid: String,
    /// Where it is kept.
    pub path: PathBuf,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("keyid", &self.keyid).finish()
    }
}

fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

impl Key {
    /// Bot `bot`'s key in `state_dir`, made there if there is none.
    pub fn load_or_generate(state_dir: &Path, bot: &str) -> Result<Key, KeyError> {
        let dir = state_dir.join(DIR);
        let path = dir.join(format!("{bot}.key.pem"));
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| KeyError::Io { path, source }
        };
        let pem = match crate::state::read(&path, crate::state::SMALL_FILE) {
            Ok(pem) => pem,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir).map_err(io(&dir))?;
                let rng = ring::rand::SystemRandom::new();
                let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).map_err(|_| KeyError::Io {
                    path: path.clone(),
                    source: std::io::Error::other("no randomness to make a key with"),
                })?;
                let pem = pem_of(pkcs8.as_ref());
                crate::state::write(&path, pem.as_bytes(), 0o600).map_err(io(&path))?;
                pem.into_bytes()
            }
            Err(e) => return Err(io(&path)(e)),
        };
        Key::from_pem(&pem, path)
    }

    /// A key from its PEM text (kept at `path`, for messages).
    pub fn from_pem(pem: &[u8], path: PathBuf) -> Result<Key, KeyError> {
        let unusable = |why: String| KeyError::Unusable {
            path: path.clone(),
            why,
        };
        let der = match PrivateKeyDer::from_pem_slice(pem) {
            Ok(PrivateKeyDer::Pkcs8(der)) => der,
            Ok(_) => return Err(unusable("not PKCS#8".into())),
            Err(e) => return Err(unusable(e.to_string())),
        };
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der.secret_pkcs8_der())
            .map_err(|e| unusable(e.to_string()))?;
        let keyid = thumbprint(pair.public_key().as_ref());
        Ok(Key { pair, keyid, path })
    }

    /// The public key's 32 bytes.
    pub fn public(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// Its public half as a JWK (RFC 8037), with its thumbprint as `kid`.
    pub fn jwk(&self) -> serde_json::Value {
        serde_json::json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": b64url(self.public()),
            "kid": self.keyid,
        })
    }

    /// The Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        self.pair.sign(message).as_ref().to_vec()
    }
}

/// RFC 7638: SHA-256 over the JWK's required members in lexical order, no
/// white space, base64url.
pub fn thumbprint(public: &[u8]) -> String {
    let canonical = format!(
        r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#,
        b64url(public)
    );
    b64url(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()).as_ref())
}

/// PKCS#8 DER as PEM.
fn pem_of(der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in body.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).unwrap_or_default());
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    pem
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9421 B.1.4's Ed25519 key (test-key-ed25519): the thumbprint the
    /// Web Bot Auth draft gives for it.
    const RFC9421_KEY: &str = "-----BEGIN PRIVATE KEY-----\n\
        MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n\
        -----END PRIVATE KEY-----\n";

    #[test]
    fn the_keyid_is_the_jwk_thumbprint() {
        let key = Key::from_pem(RFC9421_KEY.as_bytes(), "test".into()).unwrap();
        assert_eq!(key.keyid, "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U");
        assert_eq!(
            key.jwk()["x"],
            "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"
        );
    }

    #[test]
    fn a_key_is_made_once_and_kept() {
        let dir = std::env::temp_dir().join(format!("rp-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = Key::load_or_generate(&dir, "examplebot").unwrap();
        let again = Key::load_or_generate(&dir, "examplebot").unwrap();
        assert_eq!(first.keyid, again.keyid);
        let other = Key::load_or_generate(&dir, "otherbot").unwrap();
        assert_ne!(first.keyid, other.keyid);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(&first.path, "not a key").unwrap();
        let e = Key::load_or_generate(&dir, "examplebot").unwrap_err();
        assert!(e.to_string().contains("openssl genpkey"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
