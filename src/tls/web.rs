//! The web's upstream TLS: certificates verified as browsers do (WebPKI: a
//! chain to a trusted root, the name in the certificate, its dates), against
//! the system's roots (`rustls-native-certs`: the operating system's store,
//! or `SSL_CERT_FILE` / `SSL_CERT_DIR`) plus the operator's own
//! (`[http] extra_roots`, PEM files). Unlike Gemini, nothing is trusted on
//! first use: a web server's certificate that does not verify is refused.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use super::{provider, TlsError, UPSTREAM_SESSIONS};

/// The most certificates one `extra_roots` file may hold.
pub const MAX_ROOTS_PER_FILE: usize = 1024;

/// The certificates of each `extra_roots` file, read at start (and reload):
/// a file that is missing, holds no certificate or is not PEM is an error
/// then, not a refused request later.
pub fn read_roots(files: &[PathBuf]) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let mut roots = Vec::new();
    for path in files {
        roots.extend(read_file(path)?);
    }
    Ok(roots)
}

fn read_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |message: String| TlsError::Pem {
        path: path.to_path_buf(),
        message,
    };
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| pem(e.to_string()))?;
    let mut certs = Vec::new();
    for cert in iter {
        certs.push(cert.map_err(|e| pem(e.to_string()))?);
        if certs.len() > MAX_ROOTS_PER_FILE {
            return Err(pem(format!("more than {MAX_ROOTS_PER_FILE} certificates")));
        }
    }
    if certs.is_empty() {
        return Err(pem("no certificate in it".into()));
    }
    // Each must be usable as a trust anchor: said now, not at the first
    // HTTPS request.
    let mut check = RootCertStore::empty();
    for cert in &certs {
        check
            .add(cert.clone())
            .map_err(|e| pem(format!("not a root certificate: {e}")))?;
    }
    Ok(certs)
}

/// The client configuration for the web's servers: the system's roots and
/// `extra`, `http/1.1` offered by ALPN (a robots.txt fetch; a relayed
/// request offers `h2` too: [`offering_h2`]).
/// The system's store may be empty (a minimal container): then only `extra`
/// is trusted, and a warning says so once.
pub fn client_config(extra: &[CertificateDer<'static>]) -> Result<Arc<ClientConfig>, TlsError> {
    let mut roots = RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(system.certs);
    if added == 0 {
        tracing::warn!(
            errors = system.errors.len(),
            "no system root certificates found: HTTPS servers verify only against [http] extra_roots"
        );
    }
    for cert in extra {
        roots.add(cert.clone())?;
    }
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.resumption = rustls::client::Resumption::in_memory_sessions(UPSTREAM_SESSIONS);
    Ok(Arc::new(config))
}

/// `config` with HTTP/2 offered before HTTP/1.1 (a relayed request's: the
/// server chooses); its roots and resumed sessions shared.
pub fn offering_h2(config: &Arc<ClientConfig>) -> Arc<ClientConfig> {
    let mut config = ClientConfig::clone(config);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}
