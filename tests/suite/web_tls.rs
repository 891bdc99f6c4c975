//! The web's upstream TLS, from the side of a server that should or should
//! not be trusted: a chain to `[http] extra_roots` is, a self-signed
//! certificate or one for another name is not (as a browser would refuse
//! them), while Gemini keeps trusting on first use over the same connector.

use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{CertificateParams, KeyPair};
use robots_proxy::egress::{PortSet, Reach};
use robots_proxy::tls::web::read_roots;
use robots_proxy::upstream::{Trust, Upstream, UpstreamError};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::state_dir;
use crate::common::web::LocalCa;

/// A directory of its own for a test's files.
fn scratch() -> std::path::PathBuf {
    let dir = state_dir();
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A TLS acceptor showing a self-signed certificate for localhost, as a
/// Gemini capsule's is.
fn self_signed() -> tokio_rustls::TlsAcceptor {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(robots_proxy::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.der().clone()], key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// A TLS server on loopback that shows `acceptor`'s certificate and says
/// "hello" to each client that completes a handshake.
async fn tls_server(acceptor: tokio_rustls::TlsAcceptor) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let _ = tls.write_all(b"hello").await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    addr
}

fn upstream(roots: Vec<CertificateDer<'static>>) -> Upstream {
    let reach = Reach {
        allow_private: true,
        ports: PortSet::parse(&["1-65535"]).unwrap(),
        own: Vec::new(),
        deny: Default::default(),
    };
    Upstream::new(reach, std::time::Duration::from_secs(5))
        .unwrap()
        .with_web_roots(roots)
}

async fn hello(
    upstream: &Upstream,
    host: &str,
    addr: SocketAddr,
    trust: Trust,
) -> Result<String, UpstreamError> {
    let mut tls = upstream
        .connect_tls(host, addr.port(), &[addr], trust)
        .await?;
    let alpn = tls.get_ref().1.alpn_protocol().map(|p| p.to_vec());
    let mut said = String::new();
    tls.read_to_string(&mut said).await.unwrap();
    if trust == Trust::Roots {
        assert_eq!(
            alpn.as_deref(),
            Some(&b"http/1.1"[..]),
            "the web's TLS offers http/1.1"
        );
    }
    Ok(said)
}

#[tokio::test]
async fn a_server_chaining_to_an_extra_root_is_trusted_by_name() {
    let ca = LocalCa::new();
    let server = tls_server(ca.acceptor(&["localhost"])).await;
    let roots = read_roots(&[ca.pem_file(&scratch())]).unwrap();
    let trusting = upstream(roots);
    assert_eq!(
        hello(&trusting, "localhost", server, Trust::Roots)
            .await
            .unwrap(),
        "hello"
    );
    // The same server asked for by another name: its certificate does not
    // name it.
    let other = hello(&trusting, "127.0.0.1", server, Trust::Roots).await;
    assert!(
        matches!(&other, Err(UpstreamError::Tls { detail, .. }) if detail.contains("not valid for name")),
        "{other:?}"
    );
    // Without the extra root, the same chain leads nowhere trusted.
    let bare = hello(&upstream(Vec::new()), "localhost", server, Trust::Roots).await;
    assert!(
        matches!(&bare, Err(UpstreamError::Tls { detail, .. }) if detail.contains("UnknownIssuer")),
        "{bare:?}"
    );
}

#[tokio::test]
async fn a_self_signed_server_is_refused_for_the_web_and_pinned_for_gemini() {
    let server = tls_server(self_signed()).await;
    let ca = LocalCa::new();
    let upstream = upstream(read_roots(&[ca.pem_file(&scratch())]).unwrap());
    let web = hello(&upstream, "localhost", server, Trust::Roots).await;
    assert!(matches!(web, Err(UpstreamError::Tls { .. })), "{web:?}");
    // Gemini's way over the same upstream: trusted on first use.
    assert_eq!(
        hello(&upstream, "localhost", server, Trust::FirstUse)
            .await
            .unwrap(),
        "hello"
    );
}

#[test]
fn extra_roots_that_are_no_certificates_are_refused_at_start_naming_the_file() {
    let dir = scratch();
    let missing = dir.join("nowhere.pem");
    let err = read_roots(&[missing]).unwrap_err().to_string();
    assert!(err.contains("nowhere.pem"), "{err}");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let err = read_roots(&[empty]).unwrap_err().to_string();
    assert!(
        err.contains("empty.pem") && err.contains("no certificate"),
        "{err}"
    );
    let junk = dir.join("junk.pem");
    std::fs::write(
        &junk,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let err = read_roots(&[junk]).unwrap_err().to_string();
    assert!(err.contains("junk.pem"), "{err}");
}

/// A proxy whose `extra_roots` names a file that is not there does not start.
#[tokio::test]
async fn a_proxy_with_a_missing_extra_root_does_not_start() {
    let dir = state_dir();
    let config = crate::common::test_config_with(&format!(
        "[http]\nextra_roots = [\"{}\"]\n",
        dir.join("gone.pem").display()
    ));
    let err = robots_proxy::server::Proxy::start(config)
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("gone.pem"), "{err}");
}
