//! Transparent mode (docs/architecture.md, "Transparent mode"): connections the
//! kernel redirected to the proxy (iptables or nftables `REDIRECT`), where each
//! one was going, and who is on this machine. The firewall rules that send
//! crawlers here are written by [`rules`]; [`serve`] takes a redirected
//! connection to the way in the drop-in listeners share ([`crate::dropin`]).
//!
//! The syscalls sit behind [`OriginalDestination`] and [`LocalAddresses`], so the
//! rest of the path is tested in-process with addresses a test supplies.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::addr::unmapped;

pub mod rules;
pub mod serve;

/// What the transparent listener asks the kernel.
#[derive(Clone)]
pub struct Kernel {
    pub original: Arc<dyn OriginalDestination>,
    pub local: Arc<dyn LocalAddresses>,
}

impl Kernel {
    /// Netfilter and this machine's interfaces.
    pub fn real() -> Kernel {
        Kernel {
            original: Arc::new(Netfilter),
            local: Arc::new(Interfaces::new()),
        }
    }
}

/// Where a redirected connection was going before the kernel sent it here.
pub trait OriginalDestination: Send + Sync + 'static {
    /// An error when the connection was not redirected (no NAT entry for it).
    fn original_destination(&self, stream: &TcpStream) -> io::Result<SocketAddr>;
}

/// Netfilter's answer: `SO_ORIGINAL_DST` for IPv4, `IP6T_SO_ORIGINAL_DST` for
/// IPv6 (through socket2: no hand-written `unsafe`). Linux only.
pub struct Netfilter;

impl OriginalDestination for Netfilter {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn original_destination(&self, stream: &TcpStream) -> io::Result<SocketAddr> {
        let socket = socket2::SockRef::from(stream);
        // An IPv4 connection on a dual-stack socket has an IPv4-mapped local
        // address; its NAT entry is IPv4's.
        let found = match stream.local_addr()? {
            SocketAddr::V6(local) if local.ip().to_ipv4_mapped().is_none() => {
                socket.original_dst_v6()?
            }
            _ => socket.original_dst_v4()?,
        };
        let addr = found
            .as_socket()
            .ok_or_else(|| io::Error::other("the original destination is not an IP address"))?;
        Ok(SocketAddr::new(unmapped(addr.ip()), addr.port()))
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn original_destination(&self, _stream: &TcpStream) -> io::Result<SocketAddr> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "transparent mode needs Linux (netfilter's SO_ORIGINAL_DST)",
        ))
    }
}

/// Is an address one of this machine's own? A crawler on this machine whose
/// connection was redirected comes from the address the kernel chose for the
/// original destination (`192.0.2.7`, not `127.0.0.1`): it is still a local
/// process, admitted where loopback is.
pub trait LocalAddresses: Send + Sync + 'static {
    fn is_local(&self, ip: IpAddr) -> bool;
}

/// The addresses of this machine's interfaces (`getifaddrs`), asked of the
/// kernel at most once a second. An address that is merely bindable
/// (`ip_nonlocal_bind`) is not one of them.
pub struct Interfaces {
    known: Mutex<Option<(Instant, Arc<[IpAddr]>)>>,
}

impl Interfaces {
    const FRESH: Duration = Duration::from_secs(1);

    pub fn new() -> Interfaces {
        Interfaces {
            known: Mutex::new(None),
        }
    }

    fn addresses(&self) -> Arc<[IpAddr]> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, addrs)) = known.as_ref() {
            if at.elapsed() < Self::FRESH {
                return addrs.clone();
            }
        }
        let addrs: Arc<[IpAddr]> = interface_addresses().into();
        *known = Some((Instant::now(), addrs.clone()));
        addrs
    }
}

impl Default for Interfaces {
    fn default() -> Self {
        Interfaces::new()
    }
}

impl LocalAddresses for Interfaces {
    fn is_local(&self, ip: IpAddr) -> bool {
        let ip = unmapped(ip);
        ip.is_loopback() || self.addresses().contains(&ip)
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn interface_addresses() -> Vec<IpAddr> {
    match nix::ifaddrs::getifaddrs() {
        Ok(interfaces) => interfaces
            .filter_map(|i| i.address)
            .filter_map(|a| {
                a.as_sockaddr_in()
                    .map(|v4| IpAddr::V4(v4.ip()))
                    .or_else(|| a.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip())))
            })
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list this machine's addresses; only loopback counts as local");
            Vec::new()
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn interface_addresses() -> Vec<IpAddr> {
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_interface_addresses_are_local_and_others_are_not() {
        let here = Interfaces::new();
        assert!(here.is_local("127.0.0.1".parse().unwrap()));
        assert!(here.is_local("::1".parse().unwrap()));
        assert!(here.is_local("::ffff:127.0.0.1".parse().unwrap()));
        // Documentation ranges are on no machine's interfaces.
        assert!(!here.is_local("192.0.2.1".parse().unwrap()));
        assert!(!here.is_local("2001:db8::1".parse().unwrap()));
    }

    /// A connection made straight to a listener (no NAT entry) has no original
    /// destination other than the listener itself, or none at all.
    #[tokio::test]
    async fn an_unredirected_connection_names_no_other_destination() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        if let Ok(found) = Netfilter.original_destination(&stream) {
            assert_eq!(found, addr);
        }
    }
}
