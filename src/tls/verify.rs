//! Certificate verifiers for Gemini, where self-signed certificates are the
//! norm on both sides: any certificate is accepted as such (trust comes from
//! pinning upstreams, and from fingerprints listed by bots for clients), but
//! every handshake signature is verified with the certificate's key, so the
//! peer must hold that key.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

/// The handshake-signature half of a verifier, the same on both sides: every
/// signature is checked with the provider's algorithms against the peer's
/// certificate (`self.provider`).
macro_rules! handshake_signatures {
    () => {
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
    };
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

    handshake_signatures!();
}

impl GeminiVerifier {
    pub fn new(provider: Arc<CryptoProvider>) -> GeminiVerifier {
        GeminiVerifier { provider }
    }
}

/// The listeners' side: asks every client for a certificate, optionally
/// (`access.require_client_cert` and the bots decide after the handshake what
/// a missing or unknown one means, with Gemini's `60` and `61`), accepts any
/// certificate and verifies the client's signature with it.
pub struct ClientCerts {
    provider: Arc<CryptoProvider>,
}

impl ClientCerts {
    pub fn new(provider: Arc<CryptoProvider>) -> ClientCerts {
        ClientCerts { provider }
    }
}

impl fmt::Debug for ClientCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientCerts")
    }
}

impl ClientCertVerifier for ClientCerts {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    handshake_signatures!();
}
