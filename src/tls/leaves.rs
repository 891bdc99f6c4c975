//! The web's leaves, issued by the proxy's CA for the hosts crawlers
//! `CONNECT` to: as browsers require of a server certificate (`serverAuth`,
//! at most 397 days, the name or IP address the client asked for as a SAN),
//! kept in memory only (a bounded cache: nothing about the hosts crawled is
//! written), all sharing one key made at start (a leaf costs one signature,
//! not a key generation), and issued at a bounded rate per client, so one
//! client naming a million hosts cannot take the CPU from the others.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

use super::TlsError;

/// Web leaves kept at most (about 1 KiB each).
pub const MAX_WEB_LEAVES: u64 = 10_000;

/// How long a web leaf is valid: browsers refuse more than 398 days.
pub const WEB_LEAF_DAYS: i64 = 397;

/// New web leaves one client may have issued per minute (hosts it had none
/// for); past it, its `CONNECT` is answered "slow down".
pub const WEB_LEAVES_PER_MINUTE: u32 = 600;

/// The web's leaves and what issues them.
pub struct WebLeaves {
    /// The one key every web leaf certifies.
    key: rcgen::KeyPair,
    signing: Arc<dyn rustls::sign::SigningKey>,
    /// Issued leaves by host, for a while: a leaf is reissued a day before
    /// the cache forgets it.
    issued: moka::sync::Cache<String, Arc<CertifiedKey>>,
    /// New leaves per client in the current minute.
    per_client: moka::sync::Cache<IpAddr, Arc<std::sync::atomic::AtomicU32>>,
}

/// Why a leaf was not issued.
#[derive(Debug, thiserror::Error)]
pub enum LeafError {
    #[error("this client had {WEB_LEAVES_PER_MINUTE} certificates issued this minute; slow down")]
    TooMany,
    #[error("issuing a certificate: {0}")]
    Tls(#[from] TlsError),
}

impl WebLeaves {
    pub fn new(provider: &rustls::crypto::CryptoProvider) -> Result<WebLeaves, TlsError> {
        let key = rcgen::KeyPair::generate()?;
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = provider.key_provider.load_private_key(der)?;
        Ok(WebLeaves {
            key,
            signing,
            issued: moka::sync::Cache::builder()
                .max_capacity(MAX_WEB_LEAVES)
                .time_to_live(Duration::from_secs(30 * 86_400))
                .build(),
            per_client: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(60))
                .build(),
        })
    }

    /// The leaf for `host` (a canonical name, or an IP literal, IPv6 in
    /// brackets) asked for by `client`, signed by `ca`.
    pub fn leaf(
        &self,
        host: &str,
        client: IpAddr,
        (ca_cert, ca_key): (&rcgen::Certificate, &rcgen::KeyPair),
    ) -> Result<Arc<CertifiedKey>, LeafError> {
        if let Some(found) = self.issued.get(host) {
            return Ok(found);
        }
        let count = self
            .per_client
            .get_with(crate::slots::ClientKey::of(client).ip(), Default::default);
        if count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= WEB_LEAVES_PER_MINUTE {
            return Err(LeafError::TooMany);
        }
        let leaf = self.issue(host, (ca_cert, ca_key))?;
        self.issued.insert(host.to_string(), leaf.clone());
        Ok(leaf)
    }

    fn issue(
        &self,
        host: &str,
        (ca_cert, ca_key): (&rcgen::Certificate, &rcgen::KeyPair),
    ) -> Result<Arc<CertifiedKey>, TlsError> {
        let name = host.trim_start_matches('[').trim_end_matches(']');
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = vec![match name.parse::<IpAddr>() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            Err(_) => rcgen::SanType::DnsName(name.to_string().try_into()?),
        }];
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
        let now = time::OffsetDateTime::now_utc();
        // A day back: a client whose clock is a little behind still accepts it.
        params.not_before = now - time::Duration::days(1);
        params.not_after = now + time::Duration::days(WEB_LEAF_DAYS - 1);
        params.serial_number = Some(random_serial());
        let cert = params.signed_by(&self.key, ca_cert, ca_key)?;
        Ok(Arc::new(CertifiedKey::new(
            vec![
                cert.der().clone(),
                CertificateDer::from(ca_cert.der().to_vec()),
            ],
            self.signing.clone(),
        )))
    }
}

/// 16 random bytes, the top bit clear (a positive serial).
fn random_serial() -> rcgen::SerialNumber {
    let mut serial = [0u8; 16];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut serial);
    serial[0] &= 0x7f;
    rcgen::SerialNumber::from_slice(&serial)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One client naming host after host has at most its minute's share
    /// of new leaves issued; a host it had one for costs nothing, and
    /// another client is not held back.
    #[test]
    fn new_leaves_are_bounded_per_client() {
        let provider = crate::tls::provider();
        let leaves = WebLeaves::new(&provider).unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.2".parse().unwrap();
        for i in 0..WEB_LEAVES_PER_MINUTE {
            let host = format!("h{i}.example");
            assert!(leaves.leaf(&host, one, (&ca, &ca_key)).is_ok(), "{host}");
        }
        let past = leaves.leaf("one-more.example", one, (&ca, &ca_key));
        assert!(matches!(past, Err(LeafError::TooMany)), "{:?}", past.err());
        assert!(
            leaves.leaf("h0.example", one, (&ca, &ca_key)).is_ok(),
            "already issued"
        );
        assert!(leaves
            .leaf("one-more.example", other, (&ca, &ca_key))
            .is_ok());
        assert!(
            leaves.leaf("[::1]", other, (&ca, &ca_key)).is_ok(),
            "an address"
        );
    }
}
