//! The proxy's own certificate authority for the SOCKS5 drop-in mode, and the
//! leaf certificates it issues and keeps.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

use super::{fingerprint, io, provider, write_private, ClientCerts, TlsError};

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
    /// One ticketer for every drop-in connection, so a crawler can resume.
    ticketer: Arc<dyn rustls::server::ProducesTickets>,
    /// The web's leaves: in memory, one key, bounded per client.
    web: super::leaves::WebLeaves,
}

/// Drop-in certificates kept on disk at most (about 1.5 KiB each); past this,
/// new hosts get certificates that last until the proxy stops.
pub const MAX_STORED_LEAVES: usize = 100_000;

/// The CA name of installs made before the name said which install it is:
/// their `ca-cert.pem`, already trusted by their clients, is kept.
const LEGACY_CA_NAME: &str = "robots-proxy drop-in CA";

/// The CA's parameters, derived from its key alone, so the same key always
/// makes an equivalent CA certificate when the proxy restarts: its name
/// says which install it is (`robots-proxy CA` and 16 hex digits of the
/// key's SHA-256, random per install) and its serial is 16 bytes of that
/// hash, so two proxies' CAs never share a name or a serial. An install
/// whose `ca-cert.pem` bears the old fixed name (`legacy`) keeps it.
fn ca_params(key: &rcgen::KeyPair, legacy: bool) -> Result<rcgen::CertificateParams, rcgen::Error> {
    let id = fingerprint(&CertificateDer::from(key.public_key_der()));
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    let name = match legacy {
        true => LEGACY_CA_NAME.to_string(),
        false => format!("robots-proxy CA {}", &id[..16]),
    };
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
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
    params.serial_number = Some(match legacy {
        true => rcgen::SerialNumber::from(1u64),
        false => {
            let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key_der().as_ref());
            let mut serial = [0u8; 16];
            serial.copy_from_slice(&digest.as_ref()[..16]);
            serial[0] &= 0x7f;
            rcgen::SerialNumber::from_slice(&serial)
        }
    });
    Ok(params)
}

/// Whether the `ca-cert.pem` kept at `path` was made under the old fixed
/// name.
fn legacy_cert(path: &Path) -> bool {
    CertificateDer::from_pem_file(path).is_ok_and(|der| {
        der.as_ref()
            .windows(LEGACY_CA_NAME.len())
            .any(|w| w == LEGACY_CA_NAME.as_bytes())
    })
}

impl Authority {
    /// Loads the CA key kept in `state_dir`, or generates one and keeps it.
    pub fn load_or_generate(state_dir: &Path) -> Result<Authority, TlsError> {
        let cert_path = state_dir.join("ca-cert.pem");
        let key_path = state_dir.join("ca-key.pem");
        let kept = crate::state::read_optional(&key_path, crate::state::SMALL_FILE)
            .map_err(io(&key_path))?;
        let key = if let Some(pem) = kept {
            rcgen::KeyPair::from_pem(&pem)?
        } else {
            std::fs::create_dir_all(state_dir).map_err(io(state_dir))?;
            let key = rcgen::KeyPair::generate()?;
            write_private(&key_path, key.serialize_pem().as_bytes())?;
            key
        };
        let cert = ca_params(&key, legacy_cert(&cert_path))?.self_signed(&key)?;
        if !cert_path.exists() {
            crate::state::write(&cert_path, cert.pem().as_bytes(), 0o644)
                .map_err(io(&cert_path))?;
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
            web: super::leaves::WebLeaves::new(&provider())?,
            provider: provider(),
            ticketer: super::ticketer()?,
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
            // Written while the client's handshake waits: not synced (a leaf
            // lost in a crash is issued again).
            if let Err(e) = crate::state::write_unsynced(&path, pem.as_bytes(), 0o600) {
                tracing::warn!(error = %e, "a drop-in certificate could not be kept");
            }
        } else {
            self.stored.fetch_sub(1, Ordering::Relaxed);
        }
        self.certified(cert.der().clone(), key.serialize_der(), host)
    }

    /// A kept certificate, if it is readable and was issued by this CA.
    fn load_kept(&self, path: &Path) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let pem = crate::state::read(path, crate::state::SMALL_FILE).ok()?;
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
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
            .with_client_cert_verifier(Arc::new(ClientCerts::new(self.provider.clone())))
            .with_cert_resolver(Arc::new(resolver));
        super::resumption(&mut config, &self.ticketer);
        Ok(Arc::new(config))
    }
}

impl Authority {
    /// A TLS server config for one web tunnel (`CONNECT host:port`, by
    /// `client`): the web leaf for `host` whatever the SNI says (a request
    /// on a tunnel whose SNI names another host is answered `421`), and
    /// `http/1.1` the only protocol offered (a client offering only `h2` is
    /// refused in the handshake). The leaf is issued now, so a client past
    /// its rate is answered before the tunnel opens.
    pub fn web_server_config(
        &self,
        host: &str,
        client: std::net::IpAddr,
    ) -> Result<Arc<ServerConfig>, super::leaves::LeafError> {
        let leaf = self.web.leaf(host, client, (&self.cert, &self.key))?;
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(TlsError::from)?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(OneLeaf(leaf)));
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        super::resumption(&mut config, &self.ticketer);
        Ok(Arc::new(config))
    }
}

/// One web tunnel's leaf, whatever the client asks.
#[derive(Debug)]
struct OneLeaf(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for OneLeaf {
    fn resolve(
        &self,
        _: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
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

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "robots-proxy-ca-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(der: &[u8]) -> bool {
        der.windows(LEGACY_CA_NAME.len())
            .any(|w| w == LEGACY_CA_NAME.as_bytes())
    }

    #[test]
    fn each_install_s_ca_names_itself_and_keeps_its_name_across_restarts() {
        let (one, two) = (dir("one"), dir("two"));
        let a = Authority::load_or_generate(&one).unwrap();
        let b = Authority::load_or_generate(&two).unwrap();
        assert_ne!(
            a.cert.params().distinguished_name,
            b.cert.params().distinguished_name
        );
        assert_ne!(a.cert.params().serial_number, b.cert.params().serial_number);
        assert!(!names(a.cert_der().as_ref()));
        let again = Authority::load_or_generate(&one).unwrap();
        assert_eq!(
            again.cert.params().distinguished_name,
            a.cert.params().distinguished_name
        );
        assert_eq!(
            again.cert.params().serial_number,
            a.cert.params().serial_number
        );
    }

    /// An install made under the old fixed name keeps it: its clients
    /// trust that certificate.
    #[test]
    fn an_install_under_the_old_name_keeps_it() {
        let d = dir("legacy");
        let key = rcgen::KeyPair::generate().unwrap();
        std::fs::write(d.join("ca-key.pem"), key.serialize_pem()).unwrap();
        let old = ca_params(&key, true).unwrap().self_signed(&key).unwrap();
        std::fs::write(d.join("ca-cert.pem"), old.pem()).unwrap();
        let kept = Authority::load_or_generate(&d).unwrap();
        assert!(names(kept.cert_der().as_ref()));
        assert_eq!(
            kept.cert.params().serial_number,
            Some(rcgen::SerialNumber::from(1u64))
        );
    }
}
