//! Where the proxy may connect: which addresses (IANA's special-purpose
//! registries, in one table), which ports (`limits.upstream_ports`), and never
//! itself. Pure rules, no I/O except [`is_local_address`], which asks the
//! kernel whether an address belongs to this machine.
//!
//! A crawler proxy reached by untrusted clients must not be a way into the
//! network it runs in (SSRF): an address is refused when any of its readings is
//! special-purpose, including the IPv4 address that an IPv4-mapped,
//! IPv4-compatible, NAT64 or 6to4 IPv6 address carries. And because Gopher,
//! SOCKS5 and Gemini all send one line of the client's choosing, a port of a
//! well-known line-based service (mail, Redis, memcached…) is refused too.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::RangeInclusive;

use crate::addr::{ip_literal, unmapped, Prefix};

mod deny;
pub use deny::{DenyHosts, MAX_ENTRIES as MAX_DENY_ENTRIES};

/// What to do with an address inside a special-purpose range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// Never connect (with `allow_private_upstreams`, only loopback, private,
    /// link-local and unique-local ranges are opened: see [`Range::private`]).
    Refuse,
    /// The range carries an IPv4 address in its low 32 bits (IPv4-mapped,
    /// NAT64 well-known prefix): judge that address.
    EmbedsLow32,
    /// 6to4: the IPv4 address is in bits 16..48.
    Embeds6to4,
}

/// One entry of the table.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub prefix: Prefix,
    pub name: &'static str,
    pub action: Special,
    /// Loopback, private, shared (CGNAT), link-local or unique-local: the
    /// addresses a lab or an intranet crawl uses, opened by
    /// `allow_private_upstreams`. Every other entry stays refused.
    pub private: bool,
}

const fn entry(prefix: Prefix, name: &'static str, action: Special, private: bool) -> Range {
    Range {
        prefix,
        name,
        action,
        private,
    }
}

use Special::{Embeds6to4, EmbedsLow32, Refuse};

/// IANA's IPv4 and IPv6 Special-Purpose Address Registries (as of 2025), the
/// multicast and reserved blocks, and for IPv6 everything outside global
/// unicast `2000::/3`. The first matching entry decides, so the embedding
/// entries come before the blocks that contain them.
pub const SPECIAL_PURPOSE: &[Range] = &[
    // IPv4 (RFC 6890 and updates).
    entry(Prefix::v4(0, 0, 0, 0, 8), "this network", Refuse, false),
    entry(Prefix::v4(10, 0, 0, 0, 8), "private-use", Refuse, true),
    entry(
        Prefix::v4(100, 64, 0, 0, 10),
        "shared address space (CGNAT)",
        Refuse,
        true,
    ),
    entry(Prefix::v4(127, 0, 0, 0, 8), "loopback", Refuse, true),
    entry(Prefix::v4(169, 254, 0, 0, 16), "link-local", Refuse, true),
    entry(Prefix::v4(172, 16, 0, 0, 12), "private-use", Refuse, true),
    entry(
        Prefix::v4(192, 0, 0, 0, 24),
        "IETF protocol assignments",
        Refuse,
        false,
    ),
    entry(
        Prefix::v4(192, 0, 2, 0, 24),
        "documentation (TEST-NET-1)",
        Refuse,
        false,
    ),
    entry(Prefix::v4(192, 31, 196, 0, 24), "AS112-v4", Refuse, false),
    entry(Prefix::v4(192, 52, 193, 0, 24), "AMT", Refuse, false),
    entry(
        Prefix::v4(192, 88, 99, 0, 24),
        "deprecated 6to4 relay anycast",
        Refuse,
        false,
    ),
    entry(Prefix::v4(192, 168, 0, 0, 16), "private-use", Refuse, true),
    entry(
        Prefix::v4(192, 175, 48, 0, 24),
        "direct delegation AS112",
        Refuse,
        false,
    ),
    entry(Prefix::v4(198, 18, 0, 0, 15), "benchmarking", Refuse, false),
    entry(
        Prefix::v4(198, 51, 100, 0, 24),
        "documentation (TEST-NET-2)",
        Refuse,
        false,
    ),
    entry(
        Prefix::v4(203, 0, 113, 0, 24),
        "documentation (TEST-NET-3)",
        Refuse,
        false,
    ),
    entry(Prefix::v4(224, 0, 0, 0, 4), "multicast", Refuse, false),
    entry(Prefix::v4(240, 0, 0, 0, 4), "reserved", Refuse, false),
    // IPv6 that carries IPv4: judged by the IPv4 address inside.
    entry(
        Prefix::v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96),
        "IPv4-mapped",
        EmbedsLow32,
        false,
    ),
    entry(
        Prefix::v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96),
        "NAT64 well-known prefix",
        EmbedsLow32,
        false,
    ),
    entry(
        Prefix::v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16),
        "6to4",
        Embeds6to4,
        false,
    ),
    // IPv6 (RFC 6890 and updates).
    entry(Prefix::v6([0; 8], 128), "unspecified", Refuse, false),
    entry(
        Prefix::v6([0, 0, 0, 0, 0, 0, 0, 1], 128),
        "loopback",
        Refuse,
        true,
    ),
    entry(
        Prefix::v6([0; 8], 96),
        "IPv4-compatible (deprecated)",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48),
        "NAT64 local-use",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64),
        "discard-only",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64),
        "dummy IPv6 prefix",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32),
        "Teredo",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23),
        "IETF protocol assignments",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32),
        "documentation",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48),
        "direct delegation AS112",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20),
        "documentation",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16),
        "segment routing (SRv6) SIDs",
        Refuse,
        false,
    ),
    entry(
        Prefix::v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7),
        "unique-local",
        Refuse,
        true,
    ),
    entry(
        Prefix::v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10),
        "link-local",
        Refuse,
        true,
    ),
    entry(
        Prefix::v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10),
        "site-local (deprecated)",
        Refuse,
        true,
    ),
    entry(
        Prefix::v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8),
        "multicast",
        Refuse,
        false,
    ),
];

/// Global unicast IPv6: anything outside it (and not matched above) is refused.
const GLOBAL_UNICAST: Prefix = Prefix::v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3);

/// Why an address is refused: the range it (or the IPv4 address it carries)
/// falls in, and whether `allow_private_upstreams` opens it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub range: String,
    pub private: bool,
}

/// The special-purpose range `ip` falls in, following embedded IPv4 addresses;
/// `None` for an ordinary global unicast address.
pub fn special_purpose(ip: IpAddr) -> Option<Verdict> {
    for range in SPECIAL_PURPOSE {
        if !range.prefix.contains(ip) {
            continue;
        }
        let IpAddr::V6(v6) = ip else {
            return Some(Verdict {
                range: format!("{} {}", range.prefix, range.name),
                private: range.private,
            });
        };
        let bits = u128::from(v6);
        let inner = match range.action {
            Refuse => {
                return Some(Verdict {
                    range: format!("{} {}", range.prefix, range.name),
                    private: range.private,
                })
            }
            EmbedsLow32 => Ipv4Addr::from(bits as u32),
            Embeds6to4 => Ipv4Addr::from((bits >> 80) as u32),
        };
        return special_purpose(IpAddr::V4(inner)).map(|v| Verdict {
            range: format!(
                "{} {} carrying {inner} in {}",
                range.prefix, range.name, v.range
            ),
            // An IPv4-mapped address reaches that IPv4 address itself (as a
            // private one, when private is allowed); NAT64 and 6to4 go through
            // a translator, which is never "private".
            private: v.private && range.name == "IPv4-mapped",
        });
    }
    if !GLOBAL_UNICAST.contains(ip) && ip.is_ipv6() {
        return Some(Verdict {
            range: format!("outside global unicast {GLOBAL_UNICAST}"),
            private: false,
        });
    }
    None
}

/// Does this machine own `ip`? Loopback and unspecified addresses always
/// reach it; for any other, the kernel is asked by binding a UDP socket to it
/// (which succeeds only for an address of one of this machine's interfaces).
pub fn is_local_address(ip: IpAddr) -> bool {
    let ip = unmapped(ip);
    ip.is_loopback()
        || ip.is_unspecified()
        || std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// A set of TCP ports, written as a list of `N`, `N-M`, and exclusions `!N`,
/// `!N-M` that apply after every inclusion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortSet {
    allow: Vec<RangeInclusive<u16>>,
    deny: Vec<RangeInclusive<u16>>,
}

/// The default `limits.upstream_ports`: Gopher's 70, the web's 80 and 443,
/// Spartan's 300 and every unprivileged port (Gemini's 1965, Nex's 1900, Gopher servers on 7070 and
/// the like), except the
/// well-known line-based and internal services one line could harm.
pub const DEFAULT_UPSTREAM_PORTS: &[&str] = &[
    "70",
    "80",  // HTTP
    "300", // Spartan
    "443", // HTTPS
    "1024-65535",
    "!1080",        // SOCKS
    "!1433-1434",   // Microsoft SQL Server
    "!1521",        // Oracle
    "!2049",        // NFS
    "!2181",        // ZooKeeper
    "!2375-2380",   // Docker API, etcd
    "!3306",        // MySQL
    "!3389",        // RDP
    "!4369",        // Erlang port mapper
    "!5000-5001",   // Docker registry
    "!5222-5223",   // XMPP
    "!5432",        // PostgreSQL
    "!5672",        // AMQP
    "!5900-5903",   // VNC
    "!5984",        // CouchDB
    "!6000-6010",   // X11
    "!6379-6380",   // Redis
    "!6443",        // Kubernetes API
    "!6660-6669",   // IRC
    "!6697",        // IRC over TLS
    "!8086",        // InfluxDB
    "!8500",        // Consul
    "!9042",        // Cassandra
    "!9092",        // Kafka
    "!9100",        // raw printing (JetDirect)
    "!9200-9300",   // Elasticsearch
    "!10250-10256", // kubelet, kube-proxy
    "!11211",       // memcached
    "!15672",       // RabbitMQ management
    "!26379",       // Redis Sentinel
    "!27017-27019", // MongoDB
];

impl PortSet {
    /// Parses the config list; an error says which item is wrong.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<PortSet, String> {
        let mut set = PortSet {
            allow: Vec::new(),
            deny: Vec::new(),
        };
        for item in items {
            let item = item.as_ref().trim();
            let (deny, range) = match item.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, item),
            };
            let port = |s: &str| s.trim().parse::<u16>().ok().filter(|p| *p > 0);
            let parsed = match range.split_once('-') {
                Some((a, b)) => port(a).zip(port(b)).filter(|(a, b)| a <= b),
                None => port(range).map(|p| (p, p)),
            };
            let Some((a, b)) = parsed else {
                return Err(format!(
                    "{item:?} is not a port (1-65535), a range N-M, or either after '!'"
                ));
            };
            match deny {
                true => set.deny.push(a..=b),
                false => set.allow.push(a..=b),
            }
        }
        Ok(set)
    }

    pub fn default_set() -> PortSet {
        PortSet::parse(DEFAULT_UPSTREAM_PORTS).expect("the default parses")
    }

    /// The set with `ports` allowed too (a port it denies stays denied).
    pub fn allowing(mut self, ports: &[u16]) -> PortSet {
        for &port in ports {
            if !self.allow.iter().any(|r| r.contains(&port)) {
                self.allow.push(port..=port);
            }
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
    }

    pub fn contains(&self, port: u16) -> bool {
        self.allow.iter().any(|r| r.contains(&port)) && !self.deny.iter().any(|r| r.contains(&port))
    }

    /// The list as the config file writes it.
    pub fn items(&self) -> Vec<String> {
        let show = |r: &RangeInclusive<u16>| match r.start() == r.end() {
            true => r.start().to_string(),
            false => format!("{}-{}", r.start(), r.end()),
        };
        self.allow
            .iter()
            .map(show)
            .chain(self.deny.iter().map(|r| format!("!{}", show(r))))
            .collect()
    }
}

impl Default for PortSet {
    fn default() -> PortSet {
        PortSet::default_set()
    }
}

/// The proxy's rules for one upstream socket address: the port, the range,
/// and never one of the proxy's own listeners.
#[derive(Clone, Debug)]
pub struct Reach {
    /// `limits.allow_private_upstreams`: open the ranges marked private.
    pub allow_private: bool,
    /// `limits.upstream_ports`.
    pub ports: PortSet,
    /// Where the proxy listens (a listener on `0.0.0.0` or `[::]` is reached
    /// through every address of this machine).
    pub own: Vec<SocketAddr>,
    /// `limits.deny_hosts`: never contacted.
    pub deny: std::sync::Arc<DenyHosts>,
}

impl Reach {
    /// `Err(why)` when the proxy must not connect to `port` on any address.
    pub fn check_port(&self, port: u16) -> Result<(), String> {
        match self.ports.contains(port) {
            true => Ok(()),
            false => Err(format!(
                "port {port} is not among limits.upstream_ports (well-known services other than the web's and the small web's are refused)"
            )),
        }
    }

    /// `Err(why)` when the proxy must not connect to `addr`.
    pub fn check(&self, addr: SocketAddr) -> Result<(), String> {
        self.check_port(addr.port())?;
        self.check_address(addr)
    }

    /// What can be told of `host:port` before any lookup: the port always,
    /// the address when `host` is an IP literal.
    pub fn check_host(&self, host: &str, port: u16) -> Result<(), String> {
        if let Some(entry) = self.deny.name(host) {
            return Err(format!("{host} is in limits.deny_hosts ({entry})"));
        }
        match ip_literal(host) {
            Some(ip) => self.check(SocketAddr::new(ip, port)),
            None => self.check_port(port),
        }
    }

    /// [`Reach::check`] for a port already checked.
    pub fn check_address(&self, addr: SocketAddr) -> Result<(), String> {
        let ip = unmapped(addr.ip());
        if self.is_own(SocketAddr::new(ip, addr.port())) {
            return Err(format!("{addr} is this proxy"));
        }
        match special_purpose(ip) {
            Some(v) if !(v.private && self.allow_private) => Err(match v.private {
                true => format!("{ip} is in {} (see --allow-private-upstreams)", v.range),
                false => format!("{ip} is in {}", v.range),
            }),
            _ => Ok(()),
        }
    }

    /// Is `addr` one of the proxy's own listeners?
    pub fn is_own(&self, addr: SocketAddr) -> bool {
        self.own.iter().any(|own| {
            own.port() == addr.port()
                && (unmapped(own.ip()) == addr.ip()
                    || (own.ip().is_unspecified() && is_local_address(addr.ip())))
        })
    }
}

#[cfg(test)]
mod tests;
