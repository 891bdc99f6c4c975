//! What can be checked before anything is bound, by `--check-config` and at
//! start-up alike: the state directory can be made and written, and the
//! certificate and key `[tls]` names read and belong together. Each error
//! names the key or flag to change.

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
    #[error("{key}: {source}")]
    Tls { key: &'static str, source: TlsError },
}

/// Every check, in the order start-up would meet them.
pub fn check(config: &Config) -> Result<(), PreflightError> {
    state_dir(config)?;
    if let Some((cert, key)) = &config.tls.cert_and_key {
        tls_files(cert, key)?;
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
    let identity = tls::load_identity(cert, key).map_err(|e| tls_error(key, e))?;
    tls::server_config(identity).map_err(|e| tls_error(key, e))?;
    Ok(())
}

/// A TLS error while reading `[tls]`'s files, named by the key of the file it
/// is about (`key` is `tls.key`'s path).
pub fn tls_error(key: &Path, source: TlsError) -> PreflightError {
    let name = match &source {
        TlsError::Io { path, .. } | TlsError::Pem { path, .. } if path == key => "tls.key",
        TlsError::Io { .. } | TlsError::Pem { .. } => "tls.cert",
        _ => "tls.cert and tls.key",
    };
    PreflightError::Tls { key: name, source }
}
