//! Connecting to upstream servers: name resolution with a deadline, the
//! private-address rule applied to every resolved address, TCP connect with a
//! deadline, TLS with SNI, and trust on first use per host and port.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use thiserror::Error;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::tls;

/// Why an upstream could not be reached. All of these are the upstream's (or
/// the network's) doing, except `Refused`, which is the proxy's own rule.
#[derive(Debug, Error)]
pub enum UpstreamError {
    #[error("cannot resolve {host}: {detail}")]
    Resolve { host: String, detail: String },
    #[error("{host} resolves only to addresses the proxy does not connect to ({addrs}); see --allow-private-upstreams")]
    Refused { host: String, addrs: String },
    #[error("cannot connect to {addr}: {detail}")]
    Connect { addr: String, detail: String },
    #[error("no answer from {what} within {after:?}")]
    Timeout { what: String, after: Duration },
    #[error("TLS with {host}: {detail}")]
    Tls { host: String, detail: String },
    #[error(
        "{host}:{port} shows certificate {now}, not {pinned} it showed first (trust on first use)"
    )]
    CertificateChanged {
        host: String,
        port: u16,
        pinned: String,
        now: String,
    },
}

/// Addresses a crawler proxy must not be a way into: loopback, private,
/// link-local, shared (CGNAT), unspecified, multicast, broadcast, unique-local,
/// documentation; IPv4-mapped IPv6 addresses are judged as their IPv4 address.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // unique local
                || (s[0] & 0xffc0) == 0xfe80 // link local
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        }
    }
}

/// Everything needed to reach upstreams; shared by all connections.
pub struct Upstream {
    connector: TlsConnector,
    allow_internal: bool,
    connect_timeout: Duration,
    /// The proxy's own listening addresses: a request that would loop back is refused.
    own_addrs: Vec<SocketAddr>,
    /// host:port → SHA-256 of the certificate first seen (trust on first use).
    pins: Mutex<HashMap<(String, u16), String>>,
}

impl Upstream {
    pub fn new(
        allow_internal: bool,
        connect_timeout: Duration,
        own_addrs: Vec<SocketAddr>,
    ) -> Result<Upstream, tls::TlsError> {
        Ok(Upstream {
            connector: TlsConnector::from(tls::client_config()?),
            allow_internal,
            connect_timeout,
            own_addrs,
            pins: Mutex::new(HashMap::new()),
        })
    }

    /// Resolves `host` and keeps the addresses the proxy may connect to.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, UpstreamError> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let found: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => {
                tokio::time::timeout(self.connect_timeout, tokio::net::lookup_host((bare, port)))
                    .await
                    .map_err(|_| UpstreamError::Timeout {
                        what: format!("the resolver for {host}"),
                        after: self.connect_timeout,
                    })?
                    .map_err(|e| UpstreamError::Resolve {
                        host: host.to_string(),
                        detail: e.to_string(),
                    })?
                    .collect()
            }
        };
        let allowed: Vec<SocketAddr> = found
            .iter()
            .copied()
            .filter(|a| self.allow_internal || !is_internal(a.ip()))
            .filter(|a| !self.is_own(*a))
            .collect();
        if allowed.is_empty() {
            return Err(if found.is_empty() {
                UpstreamError::Resolve {
                    host: host.to_string(),
                    detail: "no addresses".into(),
                }
            } else {
                UpstreamError::Refused {
                    host: host.to_string(),
                    addrs: found
                        .iter()
                        .map(|a| a.ip().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                }
            });
        }
        Ok(allowed)
    }

    fn is_own(&self, addr: SocketAddr) -> bool {
        self.own_addrs.iter().any(|own| {
            own.port() == addr.port()
                && (own.ip() == addr.ip() || (own.ip().is_unspecified() && is_internal(addr.ip())))
        })
    }

    /// TCP to the first of `addrs` that answers, within the connect deadline each.
    pub async fn connect_tcp(
        &self,
        host: &str,
        addrs: &[SocketAddr],
    ) -> Result<TcpStream, UpstreamError> {
        let mut last = None;
        for &addr in addrs {
            match tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(e)) => {
                    last = Some(UpstreamError::Connect {
                        addr: addr.to_string(),
                        detail: e.to_string(),
                    })
                }
                Err(_) => {
                    last = Some(UpstreamError::Timeout {
                        what: addr.to_string(),
                        after: self.connect_timeout,
                    })
                }
            }
        }
        Err(last.unwrap_or_else(|| UpstreamError::Resolve {
            host: host.to_string(),
            detail: "no addresses".into(),
        }))
    }

    /// TLS to a Gemini server: SNI is the host; its certificate is pinned on
    /// first use and must stay the same for this host and port.
    pub async fn connect_gemini(
        &self,
        host: &str,
        port: u16,
    ) -> Result<TlsStream<TcpStream>, UpstreamError> {
        let addrs = self.resolve(host, port).await?;
        self.connect_gemini_to(host, port, &addrs).await
    }

    /// [`connect_gemini`](Self::connect_gemini) to addresses already resolved
    /// (and checked) by [`resolve`](Self::resolve).
    pub async fn connect_gemini_to(
        &self,
        host: &str,
        port: u16,
        addrs: &[SocketAddr],
    ) -> Result<TlsStream<TcpStream>, UpstreamError> {
        let tcp = self.connect_tcp(host, addrs).await?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(bare.to_string()).map_err(|e| UpstreamError::Tls {
            host: host.to_string(),
            detail: e.to_string(),
        })?;
        let tls = tokio::time::timeout(self.connect_timeout, self.connector.connect(name, tcp))
            .await
            .map_err(|_| UpstreamError::Timeout {
                what: format!("the TLS handshake with {host}"),
                after: self.connect_timeout,
            })?
            .map_err(|e| UpstreamError::Tls {
                host: host.to_string(),
                detail: e.to_string(),
            })?;
        let cert = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .ok_or_else(|| UpstreamError::Tls {
                host: host.to_string(),
                detail: "no certificate".into(),
            })?;
        let seen = tls::fingerprint(cert);
        let mut pins = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        match pins.get(&(host.to_string(), port)) {
            Some(pinned) if *pinned != seen => Err(UpstreamError::CertificateChanged {
                host: host.to_string(),
                port,
                pinned: pinned.clone(),
                now: seen,
            }),
            Some(_) => Ok(tls),
            None => {
                pins.insert((host.to_string(), port), seen);
                Ok(tls)
            }
        }
    }
}

/// Shared handle.
pub type SharedUpstream = Arc<Upstream>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses() {
        let internal = [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "0.0.0.0",
            "100.64.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            "192.0.2.1",
            "0.1.2.3",
            "240.0.0.1",
        ];
        let external = [
            "1.1.1.1",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ];
        for a in internal {
            assert!(is_internal(a.parse().unwrap()), "{a} is internal");
        }
        for a in external {
            assert!(!is_internal(a.parse().unwrap()), "{a} is external");
        }
    }

    #[tokio::test]
    async fn internal_upstreams_are_refused_unless_allowed() {
        let strict = Upstream::new(false, Duration::from_secs(1), vec![]).unwrap();
        let err = strict.resolve("127.0.0.1", 1965).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Refused { .. }), "{err}");
        let err = strict.resolve("localhost", 1965).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Refused { .. }), "{err}");
        let open = Upstream::new(true, Duration::from_secs(1), vec![]).unwrap();
        assert_eq!(
            open.resolve("127.0.0.1", 1965).await.unwrap(),
            vec!["127.0.0.1:1965".parse().unwrap()]
        );
    }

    #[tokio::test]
    async fn the_proxy_itself_is_never_an_upstream() {
        let own: SocketAddr = "127.0.0.1:1965".parse().unwrap();
        let up = Upstream::new(true, Duration::from_secs(1), vec![own]).unwrap();
        assert!(matches!(
            up.resolve("127.0.0.1", 1965).await,
            Err(UpstreamError::Refused { .. })
        ));
        assert!(up.resolve("127.0.0.1", 1966).await.is_ok());
    }
}
