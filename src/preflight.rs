//! What can be checked before anything is bound, by `--check-config` and at
//! start-up alike: the state directory can be made and written, the
//! certificate and key `[tls]` names read and belong together, and each
//! extra roots file reads and holds root certificates. Each error names the
//! key or flag to change.

use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::config::Config;
use crate::tls::{self, TlsError};

#[derive(Debug, Error)]
pub enum PreflightError {
    #[error(
        "{origin}: the state directory {} cannot be made or written ({source}); give one \
         the proxy's user can write with --state-dir DIR (or state_dir in the config)",
        path.display()
    )]
    StateDir {
        origin: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{key}: {source}; {help}")]
    Tls {
        key: &'static str,
        source: TlsError,
        /// What the file should be, and what to do.
        help: String,
    },
}

/// Every check, in the order start-up would meet them.
pub fn check(config: &Config) -> Result<(), PreflightError> {
    state_dir(config)?;
    if let Some((cert, key)) = &config.tls.cert_and_key {
        tls_files(cert, key)?;
    }
    extra_roots(config)
}

/// Each extra roots file (`http.extra_roots`, `--extra-roots`) reads and
/// holds root certificates.
fn extra_roots(config: &Config) -> Result<(), PreflightError> {
    for (key, file) in config.http.extra_roots_named() {
        tls::web::read_roots(std::slice::from_ref(file)).map_err(|source| PreflightError::Tls {
            key,
            source,
            help: "give a PEM file of root certificates the proxy's user can read".into(),
        })?;
    }
    Ok(())
}

/// The state directory exists (it is made, owner-only, if not) and a file can
/// be written in it.
fn state_dir(config: &Config) -> Result<(), PreflightError> {
    let dir = &config.state_dir;
    let fail = |source| PreflightError::StateDir {
        origin: config.state_dir_origin,
        path: dir.clone(),
        source,
    };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(fail)?;
    let probe = dir.join(".write-probe");
    crate::state::write_unsynced(&probe, b"", 0o600).map_err(fail)?;
    std::fs::remove_file(&probe).map_err(fail)
}

/// `tls.cert` and `tls.key` read, parse, and make a listener certificate.
pub fn tls_files(cert: &Path, key: &Path) -> Result<(), PreflightError> {
    tls_identity(cert, key).map(drop)
}

/// `tls.cert` and `tls.key`, read and checked to belong together: the
/// listener's identity, or an error saying which file is what and what to do.
pub fn tls_identity(cert: &Path, key: &Path) -> Result<tls::Identity, PreflightError> {
    let fail = |e| tls_error(cert, key, e);
    let identity = tls::load_identity(cert, key).map_err(fail)?;
    // The pair is tried once (a key of another certificate is refused here,
    // not at the first handshake).
    let again = tls::Identity {
        chain: identity.chain.clone(),
        key: identity.key.clone_key(),
        cert_path: identity.cert_path.clone(),
    };
    tls::server_config(again).map_err(fail)?;
    Ok(identity)
}

/// What `[tls]`'s files are for, and the way out the operator always has.
const TLS_FILES: &str =
    "tls.cert is the listener's certificate chain (PEM, \"BEGIN CERTIFICATE\"), \
     tls.key its private key (PEM, \"BEGIN PRIVATE KEY\"); fix the path, or remove tls.cert \
     and tls.key to use the certificate the proxy generates and keeps in the state directory";

/// A TLS error while reading `[tls]`'s files, named by the key of the file it
/// is about, with what that file should hold and what to do.
pub fn tls_error(cert: &Path, key: &Path, source: TlsError) -> PreflightError {
    let (name, help) = match &source {
        TlsError::Io { path, .. } if path == key => ("tls.key", TLS_FILES.to_string()),
        TlsError::Io { .. } => ("tls.cert", TLS_FILES.to_string()),
        TlsError::Pem { path, .. } if path == key => (
            "tls.key",
            format!("{}{TLS_FILES}", holds_instead(path, "a certificate")),
        ),
        TlsError::Pem { path, .. } => (
            "tls.cert",
            format!("{}{TLS_FILES}", holds_instead(path, "a private key")),
        ),
        _ => (
            "tls.cert and tls.key",
            format!(
                "the key in {} must be the private key of the first certificate in {}; {TLS_FILES}",
                key.display(),
                cert.display()
            ),
        ),
    };
    PreflightError::Tls {
        key: name,
        source,
        help,
    }
}

/// "it holds a private key: are tls.cert and tls.key swapped? " when the
/// file holds `other` instead of what it should.
fn holds_instead(path: &Path, other: &str) -> String {
    let marker = match other {
        "a certificate" => "-----BEGIN CERTIFICATE-----",
        _ => "PRIVATE KEY-----",
    };
    let text = crate::state::read(path, crate::state::SMALL_FILE).unwrap_or_default();
    match String::from_utf8_lossy(&text).contains(marker) {
        true => format!("it holds {other}: are tls.cert and tls.key swapped? "),
        false => String::new(),
    }
}
