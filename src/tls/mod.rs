//! TLS on both sides: the listener's certificate (loaded, or generated once and
//! kept in the state directory so restarts show clients the same one), the
//! verifiers (`verify`: upstream certificates, client certificates) and the
//! drop-in CA (`authority`).
//!
//! Upstream, Gemini trusts on first use and self-signed certificates are normal,
//! so the verifier accepts any certificate *chain* — but it still verifies the
//! handshake signatures with the certificate's key, so the peer must hold that
//! key. Pinning (first use) is done per host and port by `upstream`. The web
//! verifies as browsers do (`web`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, ServerConfig};
use thiserror::Error;

mod authority;
pub mod leaves;
pub mod sessions;
mod verify;
pub mod web;
pub use authority::{Authority, MAX_STORED_LEAVES};
pub use verify::{ClientCerts, GeminiVerifier};

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Pem { path: PathBuf, message: String },
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
}

/// ring's provider, with the cipher suites in order of cost: suites hashing
/// with SHA-256 (AES-128-GCM, then ChaCha20-Poly1305) before those with
/// SHA-384 (AES-256-GCM). A handshake's key schedule is a few dozen HMACs, and
/// SHA-384 costs about twice SHA-256 where the CPU has SHA extensions; the
/// profile of a Gemini request showed it as the largest single cost. All of
/// them are modern AEADs. Key exchange stays X25519 first (the cheapest).
pub fn provider() -> Arc<CryptoProvider> {
    use rustls::CipherSuite::*;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|s| {
        matches!(
            s.suite(),
            TLS13_AES_256_GCM_SHA384
                | TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
                | TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
        )
    });
    Arc::new(provider)
}

/// How many capsules' TLS sessions the proxy keeps to resume (rustls keeps a
/// few tickets for each; a capsule visited again resumes instead of a full
/// handshake, sparing it a signature and the proxy a verification).
pub const UPSTREAM_SESSIONS: usize = 1024;

/// The listener side of resumption, shared by every config a listener uses:
/// stateless session tickets (rustls rotates their key every 6 hours), so a
/// crawler that resumes costs no memory here and one that never does costs
/// one ticket per connection.
pub fn resumption(config: &mut ServerConfig, ticketer: &Arc<dyn rustls::server::ProducesTickets>) {
    config.ticketer = ticketer.clone();
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    config.send_tls13_tickets = 1;
    // Our order (the cheapest suite first), not the client's.
    config.ignore_client_order = true;
}

/// A ticketer for [`resumption`].
pub fn ticketer() -> Result<Arc<dyn rustls::server::ProducesTickets>, TlsError> {
    Ok(rustls::crypto::ring::Ticketer::new()?)
}

/// The listener's certificate chain and key.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    /// Where the certificate is, for the operator.
    pub cert_path: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError + '_ {
    move |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Loads `cert` and `key` (PEM).
pub fn load_identity(cert: &Path, key: &Path) -> Result<Identity, TlsError> {
    let pem_err = |path: &Path| {
        let path = path.to_path_buf();
        move |e: rustls::pki_types::pem::Error| TlsError::Pem {
            path,
            message: e.to_string(),
        }
    };
    let cert_pem = crate::state::read(cert, crate::state::SMALL_FILE).map_err(io(cert))?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err(cert))?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.to_path_buf(),
            message: "no certificate in the file".into(),
        });
    }
    let key_pem = crate::state::read(key, crate::state::SMALL_FILE).map_err(io(key))?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::Pem {
            path: key.to_path_buf(),
            message: "no private key in the file".into(),
        },
        e => pem_err(key)(e),
    })?;
    Ok(Identity {
        chain,
        key: key_der,
        cert_path: cert.to_path_buf(),
    })
}

/// The names a generated listener certificate carries: the configured host
/// names, then the listen addresses as IP SANs (a listener on every address
/// gets both loopbacks), without repeats.
pub fn certificate_names(hostnames: &[String], listen: &[std::net::IpAddr]) -> Vec<String> {
    let mut names: Vec<String> = hostnames.to_vec();
    for ip in listen {
        let ips: Vec<std::net::IpAddr> = match ip.is_unspecified() {
            true => vec![
                std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::Ipv6Addr::LOCALHOST.into(),
            ],
            false => vec![*ip],
        };
        for ip in ips {
            let name = ip.to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Loads the certificate kept in `state_dir`, or generates and keeps one for
/// `names` (self-signed, as is usual in Gemini space; names that are IP
/// addresses become IP SANs). When the names differ from those the kept
/// certificate was made for (`gemini-cert.names`), it is made again for the
/// new names with the same key, and the change is logged: a changed
/// `tls.hostnames` never leaves the old certificate in place silently.
pub fn load_or_generate(state_dir: &Path, names: &[String]) -> Result<Identity, TlsError> {
    let cert_path = state_dir.join("gemini-cert.pem");
    let key_path = state_dir.join("gemini-key.pem");
    let names_path = state_dir.join("gemini-cert.names");
    let wanted = names.join("\n") + "\n";
    let small = crate::state::SMALL_FILE;
    let kept = crate::state::read_optional(&names_path, small).map_err(io(&names_path))?;
    if cert_path.exists() && key_path.exists() && kept.as_deref() == Some(wanted.as_str()) {
        return load_identity(&cert_path, &key_path);
    }
    std::fs::create_dir_all(state_dir).map_err(io(state_dir))?;
    let key = match crate::state::read_optional(&key_path, small).map_err(io(&key_path))? {
        Some(pem) => rcgen::KeyPair::from_pem(&pem)?,
        None => {
            let key = rcgen::KeyPair::generate()?;
            write_private(&key_path, key.serialize_pem().as_bytes())?;
            key
        }
    };
    if cert_path.exists() {
        tracing::warn!(
            certificate = %cert_path.display(),
            names = %names.join(", "),
            "the listener certificate is made again for changed names (same key); clients that pinned the old one will see a new certificate"
        );
    }
    let mut params = rcgen::CertificateParams::new(names.to_vec())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, names[0].clone());
    // Gemini clients pin on first use: a long validity spares them a change.
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let cert = params.self_signed(&key)?;
    crate::state::write(&cert_path, cert.pem().as_bytes(), 0o644).map_err(io(&cert_path))?;
    crate::state::write(&names_path, wanted.as_bytes(), 0o644).map_err(io(&names_path))?;
    load_identity(&cert_path, &key_path)
}

/// A private key or a leaf with its key: readable by the proxy's user only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    crate::state::write(path, bytes, 0o600).map_err(io(path))
}

/// TLS 1.2 and 1.3 for the listener, asking for an optional client
/// certificate, resuming sessions by ticket.
pub fn server_config(identity: Identity) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = provider();
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_client_cert_verifier(Arc::new(ClientCerts::new(provider)))
        .with_single_cert(identity.chain, identity.key)?;
    resumption(&mut config, &ticketer()?);
    Ok(Arc::new(config))
}

/// TLS 1.2 and 1.3 towards upstreams, with [`GeminiVerifier`], resuming
/// sessions with up to [`UPSTREAM_SESSIONS`] capsules.
pub fn client_config() -> Result<Arc<ClientConfig>, TlsError> {
    client_config_for(&[&rustls::version::TLS13, &rustls::version::TLS12])
}

/// [`client_config`] keeping `tickets` TLS 1.3 tickets per capsule
/// ([`sessions::tickets_for`] the concurrency towards it).
pub fn upstream_client_config(tickets: usize) -> Result<Arc<ClientConfig>, TlsError> {
    let mut config = (*client_config()?).clone();
    let store = sessions::UpstreamSessions::new(UPSTREAM_SESSIONS, tickets);
    config.resumption = rustls::client::Resumption::store(Arc::new(store));
    Ok(Arc::new(config))
}

/// [`client_config`] limited to some protocol versions.
pub fn client_config_for(
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let mut config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(GeminiVerifier::new(provider)))
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::in_memory_sessions(UPSTREAM_SESSIONS);
    Ok(Arc::new(config))
}

/// SHA-256 of a certificate, as hex: what TOFU pins and what operators compare.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::{ServerName, UnixTime};

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("robots-proxy-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A client that checks names, trusting only the generated certificate.
    fn verifies_as(identity: &Identity, name: &str) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(identity.chain[0].clone()).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .unwrap();
        verifier
            .verify_server_cert(
                &identity.chain[0],
                &[],
                &ServerName::try_from(name.to_string()).unwrap(),
                &[],
                UnixTime::now(),
            )
            .is_ok()
    }

    #[test]
    fn the_listener_certificate_names_its_listen_address_and_follows_name_changes() {
        let dir = temp_dir("listener");
        let names = certificate_names(&["localhost".into()], &["127.0.0.1".parse().unwrap()]);
        assert_eq!(names, ["localhost", "127.0.0.1"]);
        let first = load_or_generate(&dir, &names).unwrap();
        assert!(verifies_as(&first, "localhost"));
        assert!(
            verifies_as(&first, "127.0.0.1"),
            "clients of the default address check its IP"
        );
        assert!(!verifies_as(&first, "capsule.example"));
        // A restart with the same names shows the same certificate.
        let again = load_or_generate(&dir, &names).unwrap();
        assert_eq!(again.chain, first.chain);
        // Changed names: a new certificate for them, with the same key.
        let names = certificate_names(&["capsule.example".into()], &["0.0.0.0".parse().unwrap()]);
        assert_eq!(names, ["capsule.example", "127.0.0.1", "::1"]);
        let changed = load_or_generate(&dir, &names).unwrap();
        assert_ne!(changed.chain, first.chain);
        assert!(verifies_as(&changed, "capsule.example"));
        assert!(verifies_as(&changed, "::1"));
        assert!(!verifies_as(&changed, "localhost"));
        assert_eq!(
            changed.key.secret_der(),
            first.key.secret_der(),
            "the key is kept"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn drop_in_certificates_are_the_same_after_a_restart() {
        let dir = temp_dir("dropin");
        let before = Authority::load_or_generate(&dir).unwrap();
        let a = before.certificate_for("example.org").unwrap();
        let b = before.certificate_for("other.example").unwrap();
        assert_ne!(a.cert[0], b.cert[0]);
        drop(before);
        let after = Authority::load_or_generate(&dir).unwrap();
        assert_eq!(
            after.certificate_for("example.org").unwrap().cert[0],
            a.cert[0]
        );
        assert_eq!(
            after.certificate_for("EXAMPLE.org").unwrap().cert[0],
            a.cert[0]
        );
        // A new CA key never serves leaves of the old one.
        std::fs::remove_file(dir.join("ca-key.pem")).unwrap();
        std::fs::remove_file(dir.join("ca-cert.pem")).unwrap();
        let new_ca = Authority::load_or_generate(&dir).unwrap();
        assert_ne!(
            new_ca.certificate_for("example.org").unwrap().cert[0],
            a.cert[0]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
