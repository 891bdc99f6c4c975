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

/// Loads the certificate kept in `state_dir`, or generates and keeps one for
/// `hostnames` (self-signed, as is usual in Gemini space).
pub fn load_or_generate(state_dir: &Path, hostnames: &[String]) -> Result<Identity, TlsError> {
    let cert_path = state_dir.join("gemini-cert.pem");
    let key_path = state_dir.join("gemini-key.pem");
    if cert_path.exists() && key_path.exists() {
        return load_identity(&cert_path, &key_path);
    }
    std::fs::create_dir_all(state_dir).map_err(io(state_dir))?;
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(hostnames.to_vec())?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, hostnames[0].clone());
    // Gemini clients pin on first use: a long validity spares them a change.
    params.not_before = rcgen::date_time_ymd(2025, 1, 1);
    params.not_after = rcgen::date_time_ymd(2045, 1, 1);
    let cert = params.self_signed(&key)?;
    write_private(&key_path, key.serialize_pem().as_bytes())?;
    std::fs::write(&cert_path, cert.pem()).map_err(io(&cert_path))?;
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
    /// Certificates issued so far, by host name.
    issued: moka::sync::Cache<String, Arc<rustls::sign::CertifiedKey>>,
    provider: Arc<CryptoProvider>,
}

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
        Ok(Authority {
            key,
            cert,
            cert_path,
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

    fn issue(&self, host: &str) -> Result<Arc<rustls::sign::CertifiedKey>, TlsError> {
        let key = rcgen::KeyPair::generate()?;
        let mut params = rcgen::CertificateParams::new(vec![host.to_string()])?;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, host);
        params.not_before = rcgen::date_time_ymd(2025, 1, 1);
        params.not_after = rcgen::date_time_ymd(2045, 1, 1);
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        let der_key = PrivateKeyDer::try_from(key.serialize_der()).map_err(|e| TlsError::Pem {
            path: PathBuf::from(host),
            message: e.to_string(),
        })?;
        let signing = self.provider.key_provider.load_private_key(der_key)?;
        Ok(Arc::new(rustls::sign::CertifiedKey::new(
            vec![cert.der().clone(), self.cert.der().clone()],
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
