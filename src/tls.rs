//! TLS on both sides: the listener's certificate (loaded, or generated once and
//! kept in the state directory so restarts show clients the same one) and the
//! upstream verifier.
//!
//! Upstream, Gemini trusts on first use and self-signed certificates are normal,
//! so the verifier accepts any certificate *chain* — but it still verifies the
//! handshake signatures with the certificate's key, so the peer must hold that
//! key. Pinning (first use) is done per host and port by `upstream`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use thiserror::Error;

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

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
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
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(pem_err(cert))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem_err(cert))?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            path: cert.to_path_buf(),
            message: "no certificate in the file".into(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(pem_err(key))?;
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
    let kept = std::fs::read_to_string(&names_path).ok();
    if cert_path.exists() && key_path.exists() && kept.as_deref() == Some(wanted.as_str()) {
        return load_identity(&cert_path, &key_path);
    }
    std::fs::create_dir_all(state_dir).map_err(io(state_dir))?;
    let key = match std::fs::read_to_string(&key_path) {
        Ok(pem) => rcgen::KeyPair::from_pem(&pem)?,
        Err(_) => {
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
    std::fs::write(&cert_path, cert.pem()).map_err(io(&cert_path))?;
    std::fs::write(&names_path, wanted).map_err(io(&names_path))?;
    load_identity(&cert_path, &key_path)
}

#[cfg(unix)]
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))
}

#[cfg(not(unix))]
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), TlsError> {
    std::fs::write(path, bytes).map_err(io(path))
}

/// TLS 1.2 and 1.3 for the listener.
pub fn server_config(identity: Identity) -> Result<Arc<ServerConfig>, TlsError> {
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(identity.chain, identity.key)?;
    Ok(Arc::new(config))
}

/// TLS 1.2 and 1.3 towards upstreams, with [`GeminiVerifier`].
pub fn client_config() -> Result<Arc<ClientConfig>, TlsError> {
    client_config_for(&[&rustls::version::TLS13, &rustls::version::TLS12])
}

/// [`client_config`] limited to some protocol versions.
pub fn client_config_for(
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider();
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(GeminiVerifier { provider }))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Accepts any certificate (Gemini: self-signed is normal; pinning happens after
/// the handshake) while verifying every handshake signature against it.
pub struct GeminiVerifier {
    provider: Arc<CryptoProvider>,
}

impl fmt::Debug for GeminiVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GeminiVerifier")
    }
}

impl ServerCertVerifier for GeminiVerifier {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// SHA-256 of a certificate, as hex: what TOFU pins and what operators compare.
pub fn fingerprint(cert: &CertificateDer<'_>) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.as_ref());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The proxy's own certificate authority, for the SOCKS5 drop-in mode: it issues
/// a certificate for whatever Gemini host a client connects to. Generated once
/// and kept in the state directory; operators whose clients check certificates
/// trust `ca-cert.pem`.
pub struct Authority {
    key: rcgen::KeyPair,
    cert: rcgen::Certificate,
    pub cert_path: PathBuf,
    /// Where issued certificates are kept, so a host shows a TOFU client the
    /// same certificate after a restart: `state_dir/dropin/<CA>/<host>.pem`,
    /// named by SHA-256 (of the CA key, so a new CA never serves old leaves).
    store: PathBuf,
    /// Certificates kept on disk, up to [`MAX_STORED_LEAVES`].
    stored: std::sync::atomic::AtomicUsize,
    /// Certificates issued so far, by host name.
    issued: moka::sync::Cache<String, Arc<rustls::sign::CertifiedKey>>,
    provider: Arc<CryptoProvider>,
}

/// Drop-in certificates kept on disk at most (about 1.5 KiB each); past this,
/// new hosts get certificates that last until the proxy stops.
pub const MAX_STORED_LEAVES: usize = 100_000;

/// The CA's parameters: fixed, so the same key always makes an equivalent CA
/// certificate (same name, same key) when the proxy restarts.
fn ca_params() -> Result<rcgen::CertificateParams, rcgen::Error> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "robots-proxy drop-in CA");
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "robots-proxy");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2045, 1, 1);
    params.serial_number = Some(rcgen::SerialNumber::from(1u64));
    Ok(params)
}

impl Authority {
    /// Loads the CA key kept in `state_dir`, or generates one and keeps it.
    pub fn load_or_generate(state_dir: &Path) -> Result<Authority, TlsError> {
        let cert_path = state_dir.join("ca-cert.pem");
        let key_path = state_dir.join("ca-key.pem");
        let key = if key_path.exists() {
            let pem = std::fs::read_to_string(&key_path).map_err(io(&key_path))?;
            rcgen::KeyPair::from_pem(&pem)?
        } else {
            std::fs::create_dir_all(state_dir).map_err(io(state_dir))?;
            let key = rcgen::KeyPair::generate()?;
            write_private(&key_path, key.serialize_pem().as_bytes())?;
            key
        };
        let cert = ca_params()?.self_signed(&key)?;
        if !cert_path.exists() {
            std::fs::write(&cert_path, cert.pem()).map_err(io(&cert_path))?;
        }
        let ca_id = fingerprint(&CertificateDer::from(key.public_key_der()));
        let store = state_dir.join("dropin").join(&ca_id[..16]);
        std::fs::create_dir_all(&store).map_err(io(&store))?;
        let stored = std::fs::read_dir(&store).map_err(io(&store))?.count();
        Ok(Authority {
            key,
            cert,
            cert_path,
            store,
            stored: stored.into(),
            issued: moka::sync::Cache::new(10_000),
            provider: provider(),
        })
    }

    /// The CA certificate (DER), for tests and for clients to trust.
    pub fn cert_der(&self) -> CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A certificate for `host`, signed by this CA (made once, then cached).
    pub fn certificate_for(&self, host: &str) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let host = host.to_ascii_lowercase();
        if let Some(found) = self.issued.get(&host) {
            return Some(found);
        }
        let issued = self.issue(&host).ok()?;
        self.issued.insert(host, issued.clone());
        Some(issued)
    }

    /// The kept certificate for `host` when there is one (made by this CA),
    /// else a new one, kept if the store is not full.
    fn issue(&self, host: &str) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
        let digest = ring::digest::digest(&ring::digest::SHA256, host.as_bytes());
        let file: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let path = self.store.join(format!("{file}.pem"));
        if let Some(kept) = self.load_kept(&path) {
            return Ok(kept);
        }
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(vec![host.to_string()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host);
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2045, 1, 1);
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        use std::sync::atomic::Ordering;
        if self.stored.fetch_add(1, Ordering::Relaxed) < MAX_STORED_LEAVES {
            let pem = format!("{}{}", cert.pem(), key.serialize_pem());
            if let Err(e) = write_private(&path, pem.as_bytes()) {
                tracing::warn!(error = %e, "a drop-in certificate could not be kept");
            }
        } else {
            self.stored.fetch_sub(1, Ordering::Relaxed);
        }
        self.certified(cert.der().clone(), key.serialize_der(), host)
    }

    /// A kept certificate, if it is readable and was issued by this CA.
    fn load_kept(&self, path: &Path) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let pem = std::fs::read(path).ok()?;
        let cert = CertificateDer::from_pem_slice(&pem).ok()?;
        let key = PrivateKeyDer::from_pem_slice(&pem).ok()?;
        self.certified(cert, key.secret_der().to_vec(), "a kept certificate")
            .ok()
    }

    fn certified(
        &self,
        cert: CertificateDer<'static>,
        key_der: Vec<u8>,
        host: &str,
    ) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
        let der_key = PrivateKeyDer::try_from(key_der).map_err(|e| TlsError::Pem {
            path: PathBuf::from(host),
            message: e.to_string(),
        })?;
        let signing = self.provider.key_provider.load_private_key(der_key)?;
        Ok(Arc::new(rustls::sign::CertifiedKey::new(
            vec![cert, self.cert.der().clone()],
            signing,
        )))
    }

    /// A TLS server config for one SOCKS5 connection: the certificate follows the
    /// client's SNI, or `connect_host` (the CONNECT target) when it sends none.
    pub fn server_config(
        self: &Arc<Self>,
        connect_host: &str,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let resolver = HostResolver {
            authority: self.clone(),
            fallback: connect_host.to_string(),
        };
        let config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        Ok(Arc::new(config))
    }
}

#[derive(Debug)]
struct HostResolver {
    authority: Arc<Authority>,
    fallback: String,
}

impl fmt::Debug for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Authority")
    }
}

impl rustls::server::ResolvesServerCert for HostResolver {
    fn resolve(
        &self,
        hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let host = hello.server_name().unwrap_or(&self.fallback);
        self.authority.certificate_for(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
