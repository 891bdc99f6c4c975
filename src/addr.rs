//! Addresses as the config and the clients write them: address ranges
//! (`10.0.0.0/8`), IPv6 literals in brackets, IPv4-mapped IPv6 addresses read
//! as the IPv4 address they are. Pure. Used on both sides: who may use the
//! proxy (access, bots, the per-client cap) and where it may connect (egress).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A range of IPv4 or IPv6 addresses: the first address and the prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub first: IpAddr,
    pub len: u8,
}

impl Prefix {
    pub(crate) const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Prefix {
        Prefix {
            first: IpAddr::V4(Ipv4Addr::new(a, b, c, d)),
            len,
        }
    }

    pub(crate) const fn v6(segments: [u16; 8], len: u8) -> Prefix {
        let [a, b, c, d, e, f, g, h] = segments;
        Prefix {
            first: IpAddr::V6(Ipv6Addr::new(a, b, c, d, e, f, g, h)),
            len,
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.first, ip) {
            (IpAddr::V4(first), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(first) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(first), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(first) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl Prefix {
    /// `ADDRESS/LEN` or a bare address (one address), as operators write ranges
    /// in a config. An address with bits set past the prefix (`10.1.2.3/8`) is
    /// an error: it is almost always a typo for a narrower range.
    pub fn parse(text: &str) -> Result<Prefix, String> {
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let first: IpAddr = addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .map_err(|_| format!("{text:?} is not an address range (ADDRESS/LENGTH)"))?;
        let max = if first.is_ipv4() { 32 } else { 128 };
        let len = match len {
            None => max,
            Some(l) => match l.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("{text:?}: the prefix length must be 0 to {max}")),
            },
        };
        let prefix = Prefix { first, len };
        let base = prefix.base();
        if base != first {
            return Err(format!(
                "{text:?} has address bits past its prefix length; did you mean {base}/{len}?"
            ));
        }
        Ok(prefix)
    }

    /// The first address of the range (the address with the bits past the prefix cleared).
    fn base(&self) -> IpAddr {
        match self.first {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask))
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask))
            }
        }
    }

    /// True when the two ranges share an address.
    pub fn overlaps(&self, other: &Prefix) -> bool {
        self.contains(other.first) || other.contains(self.first)
    }

    /// True when every address of `other` is in this range.
    pub fn covers(&self, other: &Prefix) -> bool {
        self.len <= other.len && self.contains(other.first)
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.first, self.len)
    }
}

/// A URL host without the brackets an IPv6 literal wears.
pub fn unbracketed(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// The address a host names literally (`127.0.0.1`, `[::1]`), if it does.
pub fn ip_literal(host: &str) -> Option<IpAddr> {
    unbracketed(host).parse().ok()
}

/// `ip` as IPv4 when it is an IPv4-mapped IPv6 address: the same socket.
pub fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_as_operators_write_them() {
        let p = |t: &str| Prefix::parse(t);
        assert_eq!(p("10.0.0.0/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(p("192.0.2.7").unwrap().to_string(), "192.0.2.7/32");
        assert_eq!(p("::1").unwrap().to_string(), "::1/128");
        assert_eq!(p("[2001:db8::]/32").unwrap().to_string(), "2001:db8::/32");
        assert_eq!(p("0.0.0.0/0").unwrap().len, 0);
        assert_eq!(p("::/0").unwrap().len, 0);
        let typo = p("10.1.2.3/8").unwrap_err();
        assert!(typo.contains("did you mean 10.0.0.0/8"), "{typo}");
        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "/8",
            "localhost",
            "10.0.0.0/-1",
            "10.0.0.0/8/8",
        ] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
        let ten = p("10.0.0.0/8").unwrap();
        let sub = p("10.9.0.0/16").unwrap();
        assert!(ten.covers(&sub) && !sub.covers(&ten));
        assert!(ten.overlaps(&sub) && sub.overlaps(&ten));
        assert!(!ten.overlaps(&p("11.0.0.0/8").unwrap()));
        assert!(
            !ten.overlaps(&p("::/0").unwrap()),
            "IPv4 and IPv6 never overlap"
        );
        assert!(p("0.0.0.0/0")
            .unwrap()
            .contains("203.0.113.9".parse().unwrap()));
    }
}
