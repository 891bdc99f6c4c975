//! Unit tests of [`super`].

use super::*;
use std::net::Ipv6Addr;

fn verdict(ip: &str) -> Option<Verdict> {
    special_purpose(ip.parse().unwrap())
}

/// One address inside and one just outside every entry of the table.
#[test]
fn every_table_entry_is_refused_and_its_neighbours_are_not_by_it() {
    for range in SPECIAL_PURPOSE {
        let first = range.prefix.first;
        let inside = match first {
            IpAddr::V4(v4) => IpAddr::V4(Ipv4Addr::from(u32::from(v4) | 1)),
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) | 1)),
        };
        let v = special_purpose(inside);
        match range.action {
            Refuse => {
                let v = v.unwrap_or_else(|| panic!("{inside} is in {}", range.prefix));
                assert!(
                    v.range.contains(&range.prefix.to_string()) || first.is_ipv6(),
                    "{inside}: {v:?}"
                );
            }
            // 0.0.0.1 embedded: "this network".
            EmbedsLow32 | Embeds6to4 => assert!(v.is_some(), "{inside}"),
        }
        // The address right after the range.
        let after = match first {
            IpAddr::V4(v4) => {
                let size = 1u64 << (32 - u32::from(range.prefix.len));
                let next = u64::from(u32::from(v4)) + size;
                if next > u64::from(u32::MAX) {
                    continue;
                }
                IpAddr::V4(Ipv4Addr::from(next as u32))
            }
            IpAddr::V6(v6) => {
                let size = 1u128
                    .checked_shl(128 - u32::from(range.prefix.len))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6).wrapping_add(size)))
            }
        };
        assert!(
            !range.prefix.contains(after),
            "{after} after {}",
            range.prefix
        );
    }
}

#[test]
fn embedded_ipv4_is_judged() {
    for (ip, refused) in [
        ("::ffff:127.0.0.1", true),
        ("::ffff:10.0.0.1", true),
        ("::ffff:8.8.8.8", false),
        ("::127.0.0.1", true),
        ("::8.8.8.8", true),
        ("64:ff9b::10.0.0.1", true),
        ("64:ff9b::127.0.0.1", true),
        ("64:ff9b::169.254.169.254", true),
        ("64:ff9b::8.8.8.8", false),
        ("64:ff9b:1::8.8.8.8", true),
        ("2002:7f00:1::", true),
        ("2002:a9fe:a9fe::1", true),
        ("2002:0808:0808::1", false),
        ("2001::1", true),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", true),
        ("2001:2::1", true),
        ("2001:db8::1", true),
        ("3fff::1", true),
        ("5f00::1", true),
        ("100::1", true),
        ("fec0::1", true),
        ("4000::1", true),
        ("198.18.0.1", true),
        ("198.19.255.255", true),
        ("198.20.0.1", false),
        ("192.0.0.170", true),
        ("1.1.1.1", false),
        ("2606:4700::1111", false),
        ("2a00:1450::1", false),
    ] {
        assert_eq!(verdict(ip).is_some(), refused, "{ip}: {:?}", verdict(ip));
    }
}

#[test]
fn only_private_ranges_are_private() {
    for ip in [
        "127.0.0.1",
        "10.1.1.1",
        "192.168.0.1",
        "fd00::1",
        "fe80::1",
        "::1",
        "::ffff:10.0.0.1",
        "100.64.0.1",
    ] {
        assert!(verdict(ip).unwrap().private, "{ip}");
    }
    for ip in [
        "0.0.0.0",
        "::",
        "224.0.0.1",
        "198.18.0.1",
        "64:ff9b::10.0.0.1",
        "2002:7f00:1::",
        "2001::1",
        "::127.0.0.1",
    ] {
        assert!(!verdict(ip).unwrap().private, "{ip}");
    }
}

#[test]
fn port_sets() {
    let d = PortSet::default_set();
    for ok in [70, 80, 443, 1965, 7070, 1024, 65535, 8080, 8443] {
        assert!(d.contains(ok), "{ok}");
    }
    for no in [
        22, 25, 53, 110, 143, 587, 6379, 11211, 5432, 3306, 2375, 9100, 1,
    ] {
        assert!(!d.contains(no), "{no}");
    }
    assert_eq!(PortSet::parse(&d.items()).unwrap(), d);
    let custom = PortSet::parse(&["70", "1965", "7000-7999", "!7777"]).unwrap();
    assert!(custom.contains(7000) && !custom.contains(7777) && !custom.contains(8000));
    for bad in [&["0"][..], &["70000"], &["x"], &["5-3"], &["!"], &["1-"]] {
        assert!(PortSet::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn every_protocol_s_default_port_is_an_upstream_port_by_default() {
    let d = PortSet::default_set();
    for &p in crate::protocol::Protocol::ALL {
        let port = p.scheme().default_port();
        assert!(d.contains(port), "{} on {port}", p.as_str());
    }
}
