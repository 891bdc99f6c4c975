//! Connecting to upstream servers: name resolution with a deadline, the
//! private-address rule applied to every resolved address, TCP connect with a
//! deadline, TLS with SNI, and trust on first use per host and port.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use thiserror::Error;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::addr::{ip_literal, unbracketed};
use crate::egress::Reach;
use crate::metrics::{Metrics, TlsSide};
use crate::pins::Pins;
use crate::tls;

/// Why an upstream could not be reached. All of these are the upstream's (or
/// the network's) doing, except `Refused`, which is the proxy's own rule.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum UpstreamError {
    #[error("cannot resolve {host}: {detail}")]
    Resolve { host: String, detail: String },
    #[error("{host}: the proxy does not connect there: {why}")]
    Refused { host: String, why: String },
    /// `limits.deny_hosts` lists it (`entry`: the name, `*.` name or range).
    #[error("{host} is never contacted: limits.deny_hosts lists {entry}")]
    DenyHosts { host: String, entry: String },
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

/// How an upstream's TLS certificate is trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Gemini's way: any certificate whose key signs the handshake, held to
    /// the one this host and port showed first (`pins/`).
    FirstUse,
    /// The web's way: a chain to the system's roots or `[http] extra_roots`,
    /// for the name asked (WebPKI); HTTP/1.1 offered by ALPN.
    Roots,
    /// As [`Trust::Roots`], HTTP/2 offered before HTTP/1.1 (a relayed
    /// request: the server chooses).
    RootsOfferingH2,
}

/// Everything needed to reach upstreams; shared by all connections.
pub struct Upstream {
    /// Gemini's TLS ([`Trust::FirstUse`]).
    connector: TlsConnector,
    /// The web's TLS ([`Trust::Roots`], and [`Trust::RootsOfferingH2`]'s),
    /// made at its first use: the system's roots are read then, not by every
    /// proxy that never speaks HTTPS.
    web: std::sync::OnceLock<Result<(TlsConnector, TlsConnector), String>>,
    /// `[http] extra_roots`, trusted beside the system's.
    extra_roots: Arc<[rustls::pki_types::CertificateDer<'static>]>,
    /// Which addresses and ports may be connected to.
    reach: Reach,
    connect_timeout: Duration,
    /// `limits.upstream_mark`: `SO_MARK` on every upstream socket.
    mark: Option<u32>,
    /// host:port → SHA-256 of the certificate first seen (trust on first use),
    /// kept across reloads and restarts (`pins/`).
    pins: Arc<Pins>,
    /// Where finished handshakes are counted (full or resumed).
    metrics: Option<Arc<Metrics>>,
    /// Names resolved lately: name → addresses, for [`NAMES_KEPT_FOR`].
    names: moka::sync::Cache<String, Arc<[IpAddr]>>,
    /// Certificate changes already logged (host, port, new fingerprint): one
    /// warning per change and [`CHANGE_WARNED_FOR`], not one per request.
    changes_warned: moka::sync::Cache<(String, u16, String), ()>,
}

/// How long a resolved name is used before it is resolved again. Short, as
/// HAProxy's default `hold valid` (10 s): a crawler asking one capsule for
/// page after page costs the resolver one lookup per 10 s instead of one per
/// request, and a name that moves is followed within seconds. Every address
/// is checked against the reach rules on every use, cached or not.
pub const NAMES_KEPT_FOR: Duration = Duration::from_secs(10);

/// Names kept at most (about 100 bytes each).
pub const NAMES_KEPT: u64 = 10_000;

impl Upstream {
    pub fn new(reach: Reach, connect_timeout: Duration) -> Result<Upstream, tls::TlsError> {
        Ok(Upstream {
            connector: TlsConnector::from(tls::client_config()?),
            web: std::sync::OnceLock::new(),
            extra_roots: Arc::new([]),
            reach,
            connect_timeout,
            mark: None,
            pins: Arc::new(Pins::in_memory()),
            metrics: None,
            names: moka::sync::Cache::builder()
                .max_capacity(NAMES_KEPT)
                .time_to_live(NAMES_KEPT_FOR)
                .build(),
            changes_warned: moka::sync::Cache::builder()
                .max_capacity(NAMES_KEPT)
                .time_to_live(CHANGE_WARNED_FOR)
                .build(),
        })
    }

    /// Keeps `tickets` TLS 1.3 session tickets per capsule to resume with
    /// (as many as handshakes may start at once to it: [`tls::sessions`]).
    pub fn with_tickets(mut self, tickets: usize) -> Result<Upstream, tls::TlsError> {
        self.connector = TlsConnector::from(tls::upstream_client_config(tickets)?);
        Ok(self)
    }

    /// Trusts `roots` (`[http] extra_roots`, read by
    /// [`tls::web::read_roots`]) for the web beside the system's.
    pub fn with_web_roots(
        mut self,
        roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    ) -> Upstream {
        self.extra_roots = roots.into();
        self.web = std::sync::OnceLock::new();
        self
    }

    /// Counts every finished upstream handshake in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Upstream {
        self.metrics = Some(metrics);
        self
    }

    /// The pins to hold capsules to (kept in the state directory, shared by
    /// the fleet in fleet mode, the same across reloads).
    pub fn with_pins(mut self, pins: Arc<Pins>) -> Upstream {
        self.pins = pins;
        self
    }

    /// The pins this upstream holds capsules to.
    pub fn pins(&self) -> &Arc<Pins> {
        &self.pins
    }

    /// Marks every upstream socket with `mark` (`SO_MARK`), robots.txt fetches
    /// included. Fails at once, rather than on the first request, when the
    /// process may not set marks (it needs `CAP_NET_ADMIN`).
    pub fn with_mark(mut self, mark: Option<u32>) -> std::io::Result<Upstream> {
        if let Some(mark) = mark {
            let probe = tokio::net::TcpSocket::new_v4()?;
            set_mark(&probe, mark)?;
        }
        self.mark = mark;
        Ok(self)
    }

    /// The rules every upstream address is checked against.
    pub fn reach(&self) -> &Reach {
        &self.reach
    }

    /// Resolves `host` and keeps the addresses the proxy may connect to. The
    /// port is checked first: a refused port is not even resolved.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, UpstreamError> {
        let refused = |why| UpstreamError::Refused {
            host: host.to_string(),
            why,
        };
        self.reach.check_port(port).map_err(refused)?;
        let denied = |entry| UpstreamError::DenyHosts {
            host: host.to_string(),
            entry,
        };
        if let Some(entry) = self.reach.deny.name(host) {
            return Err(denied(entry));
        }
        let found: Vec<SocketAddr> = match ip_literal(host) {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => self
                .lookup(host)
                .await?
                .iter()
                .map(|ip| SocketAddr::new(*ip, port))
                .collect(),
        };
        // A name whose every address is in a denied range is denied; one
        // with others keeps those.
        let mut in_denied = None;
        let found: Vec<SocketAddr> = found
            .into_iter()
            .filter(|a| match self.reach.deny.address(a.ip()) {
                Some(entry) => {
                    in_denied = Some(entry);
                    false
                }
                None => true,
            })
            .collect();
        if let (true, Some(entry)) = (found.is_empty(), in_denied) {
            return Err(denied(entry));
        }
        let mut why = Vec::new();
        let allowed: Vec<SocketAddr> = found
            .iter()
            .copied()
            .filter(|a| match self.reach.check_address(*a) {
                Ok(()) => true,
                Err(e) => {
                    why.push(e);
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            return Err(match why.is_empty() {
                true => UpstreamError::Resolve {
                    host: host.to_string(),
                    detail: "no addresses".into(),
                },
                false => refused(why.join("; ")),
            });
        }
        Ok(allowed)
    }

    /// The addresses of a host name: from the names resolved lately, or from
    /// the system's resolver within the connect deadline. Failures are not kept.
    async fn lookup(&self, host: &str) -> Result<Arc<[IpAddr]>, UpstreamError> {
        if let Some(ips) = self.names.get(host) {
            return Ok(ips);
        }
        let name = unbracketed(host);
        let ips: Arc<[IpAddr]> =
            tokio::time::timeout(self.connect_timeout, tokio::net::lookup_host((name, 0)))
                .await
                .map_err(|_| UpstreamError::Timeout {
                    what: format!("the resolver for {host}"),
                    after: self.connect_timeout,
                })?
                .map_err(|e| UpstreamError::Resolve {
                    host: host.to_string(),
                    detail: e.to_string(),
                })?
                .map(|a| a.ip())
                .collect();
        if !ips.is_empty() {
            self.names.insert(host.to_string(), ips.clone());
        }
        Ok(ips)
    }

    /// TCP to the first of `addrs` that answers, within the connect deadline each.
    pub async fn connect_tcp(
        &self,
        host: &str,
        addrs: &[SocketAddr],
    ) -> Result<TcpStream, UpstreamError> {
        let mut last = None;
        for &addr in addrs {
            match tokio::time::timeout(self.connect_timeout, self.connect_one(addr)).await {
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

    /// One TCP connection, marked when `limits.upstream_mark` says so.
    async fn connect_one(&self, addr: SocketAddr) -> std::io::Result<TcpStream> {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        if let Some(mark) = self.mark {
            set_mark(&socket, mark)?;
        }
        socket.connect(addr).await
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
        self.connect_tls(host, port, addrs, Trust::FirstUse).await
    }

    /// TLS to `host` (SNI; none for an IP literal) at addresses already
    /// resolved and checked, its certificate trusted as `trust` says.
    pub async fn connect_tls(
        &self,
        host: &str,
        port: u16,
        addrs: &[SocketAddr],
        trust: Trust,
    ) -> Result<TlsStream<TcpStream>, UpstreamError> {
        let tls_error = |detail: String| UpstreamError::Tls {
            host: host.to_string(),
            detail,
        };
        let connector = match trust {
            Trust::FirstUse => &self.connector,
            Trust::Roots => &self.web_connectors().map_err(tls_error)?.0,
            Trust::RootsOfferingH2 => &self.web_connectors().map_err(tls_error)?.1,
        };
        let tcp = self.connect_tcp(host, addrs).await?;
        let name = ServerName::try_from(unbracketed(host).to_string())
            .map_err(|e| tls_error(e.to_string()))?;
        let tls = tokio::time::timeout(self.connect_timeout, connector.connect(name, tcp))
            .await
            .map_err(|_| UpstreamError::Timeout {
                what: format!("the TLS handshake with {host}"),
                after: self.connect_timeout,
            })?
            .map_err(|e| tls_error(e.to_string()))?;
        if let Some(metrics) = &self.metrics {
            metrics.tls_handshake(TlsSide::Upstream, tls.get_ref().1.handshake_kind());
        }
        match trust {
            Trust::FirstUse => self.check_pin(host, port, tls).await,
            Trust::Roots | Trust::RootsOfferingH2 => Ok(tls),
        }
    }

    /// The web's connectors (HTTP/1.1 offered; HTTP/2 too), made at their
    /// first use.
    fn web_connectors(&self) -> Result<&(TlsConnector, TlsConnector), String> {
        self.web
            .get_or_init(|| {
                let config =
                    tls::web::client_config(&self.extra_roots).map_err(|e| e.to_string())?;
                let offering_h2 = tls::web::offering_h2(&config);
                Ok((TlsConnector::from(config), TlsConnector::from(offering_h2)))
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Trust on first use: the certificate must be the one this host and
    /// port showed first.
    async fn check_pin(
        &self,
        host: &str,
        port: u16,
        tls: TlsStream<TcpStream>,
    ) -> Result<TlsStream<TcpStream>, UpstreamError> {
        // A resumed session still carries the certificate it was made with.
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
        match self.pins.check(host, port, &seen).await {
            Ok(()) => Ok(tls),
            Err(m) => {
                self.warn_changed(host, port, &m.pinned, &seen);
                Err(UpstreamError::CertificateChanged {
                    host: host.to_string(),
                    port,
                    pinned: m.pinned,
                    now: seen,
                })
            }
        }
    }

    /// A changed certificate does not mend itself: every request to the
    /// capsule is refused until an operator forgets the pin, so it is a
    /// warning that names the action, once per change (and hour).
    fn warn_changed(&self, host: &str, port: u16, pinned: &str, seen: &str) {
        let key = (host.to_string(), port, seen.to_string());
        if self.changes_warned.contains_key(&key) {
            return;
        }
        self.changes_warned.insert(key, ());
        tracing::warn!(
            host,
            port,
            pinned,
            now = seen,
            "{host}:{port} shows another certificate than the one pinned on first use; every request to it is refused until the pin is forgotten. If the change is expected (a renewed certificate), forget the pin: the status page's host page, or POST /api/pins/forget?host={host}&port={port} on the admin listener"
        );
    }
}

/// How long a logged certificate change stays logged (then it is said again).
const CHANGE_WARNED_FOR: Duration = Duration::from_secs(3600);

/// Shared handle.
pub type SharedUpstream = Arc<Upstream>;

#[cfg(target_os = "linux")]
fn set_mark(socket: &tokio::net::TcpSocket, mark: u32) -> std::io::Result<()> {
    socket2::SockRef::from(socket).set_mark(mark)
}

#[cfg(not(target_os = "linux"))]
fn set_mark(_socket: &tokio::net::TcpSocket, _mark: u32) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "SO_MARK needs Linux",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::egress::PortSet;

    fn upstream(allow_private: bool, own: Vec<SocketAddr>) -> Upstream {
        let reach = Reach {
            allow_private,
            ports: PortSet::default_set(),
            own,
            deny: Default::default(),
        };
        Upstream::new(reach, Duration::from_secs(1)).unwrap()
    }

    #[tokio::test]
    async fn internal_upstreams_are_refused_unless_allowed() {
        let strict = upstream(false, vec![]);
        let err = strict.resolve("127.0.0.1", 1965).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Refused { .. }), "{err}");
        let err = strict.resolve("localhost", 1965).await.unwrap_err();
        assert!(matches!(err, UpstreamError::Refused { .. }), "{err}");
        let open = upstream(true, vec![]);
        assert_eq!(
            open.resolve("127.0.0.1", 1965).await.unwrap(),
            vec!["127.0.0.1:1965".parse().unwrap()]
        );
        // Allowing private upstreams opens private ranges only.
        for never in [
            "0.0.0.0",
            "[::]",
            "224.0.0.1",
            "[64:ff9b::a00:1]",
            "198.18.0.1",
        ] {
            let err = open.resolve(never, 1965).await.unwrap_err();
            assert!(
                matches!(err, UpstreamError::Refused { .. }),
                "{never}: {err}"
            );
        }
    }

    #[tokio::test]
    async fn names_are_kept_briefly_and_checked_on_every_use() {
        let open = upstream(true, vec![]);
        let first = open.resolve("localhost", 1965).await.unwrap();
        assert!(open.names.contains_key("localhost"));
        assert_eq!(open.resolve("localhost", 1965).await.unwrap(), first);
        // Kept addresses take the port of each request.
        let other = open.resolve("localhost", 1966).await.unwrap();
        assert!(other.iter().all(|a| a.port() == 1966));
        // A kept name is still checked: the same addresses, a stricter rule.
        let strict = upstream(false, vec![]);
        strict
            .names
            .insert("localhost".into(), first.iter().map(|a| a.ip()).collect());
        assert!(matches!(
            strict.resolve("localhost", 1965).await,
            Err(UpstreamError::Refused { .. })
        ));
    }

    #[tokio::test]
    async fn refused_ports_are_not_even_resolved() {
        let open = upstream(true, vec![]);
        for port in [22, 25, 6379, 11211] {
            let err = open.resolve("localhost", port).await.unwrap_err();
            assert!(err.to_string().contains("limits.upstream_ports"), "{err}");
        }
    }

    #[tokio::test]
    async fn the_proxy_itself_is_never_an_upstream() {
        let own: SocketAddr = "127.0.0.1:1965".parse().unwrap();
        let up = upstream(true, vec![own]);
        for spelling in ["127.0.0.1", "[::ffff:127.0.0.1]", "localhost"] {
            let r = up.resolve(spelling, 1965).await;
            if spelling == "localhost" {
                // ::1 is another socket than 127.0.0.1:1965; only it may remain.
                if let Ok(addrs) = r {
                    assert!(addrs.iter().all(|a| a.ip().is_ipv6()), "{addrs:?}");
                }
                continue;
            }
            assert!(
                matches!(r, Err(UpstreamError::Refused { .. })),
                "{spelling}: {r:?}"
            );
        }
        assert!(up.resolve("127.0.0.1", 1966).await.is_ok());
        // A listener on every address is reached by each of this machine's addresses.
        let any = upstream(
            true,
            vec![
                "0.0.0.0:7070".parse().unwrap(),
                "[::]:7071".parse().unwrap(),
            ],
        );
        for spelling in ["127.0.0.1", "127.0.0.2", "[::ffff:127.0.0.1]"] {
            assert!(any.resolve(spelling, 7070).await.is_err(), "{spelling}");
        }
        assert!(any.resolve("[::1]", 7071).await.is_err());
        assert!(any.resolve("127.0.0.1", 7072).await.is_ok());
    }
}
