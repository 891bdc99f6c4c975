//! The firewall rules that send a crawler's connections to the transparent
//! listener, written for iptables or nftables from the running config, so
//! operators don't type them by hand (`robots-proxy transparent-rules`). Pure:
//! it returns text.
//!
//! What the rules do, in order: the proxy's own upstream connections (its mark)
//! pass; connections to this machine's loopback pass (local services); with a
//! crawler user named, only that user's connections are caught; the chosen ports
//! (`[ports]`: Gemini's, Gopher's, Spartan's and Nex's, or every TCP port but
//! DNS) go to the listener. IPv6 is
//! redirected when the listener takes IPv6, and refused with a reset otherwise,
//! so it never goes around the proxy.

use std::fmt::Write;
use std::net::SocketAddr;

use thiserror::Error;

/// Which connections are sent to the proxy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ports {
    /// These destination ports; others go out as they are.
    These(Vec<u16>),
    /// Every TCP port but DNS (53): what is none of the small web's
    /// protocols then fails closed at the proxy.
    AllButDns,
}

/// How the rules are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    Iptables,
    Nftables,
}

/// Everything the rules depend on.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The transparent listener.
    pub listen: SocketAddr,
    /// `limits.upstream_mark`: the proxy's own connections carry it.
    pub mark: Option<u32>,
    /// Only this user's connections are caught (a name or a uid); `None`: every
    /// connection in the network namespace (the sidecar pattern).
    pub crawler_user: Option<String>,
    pub ports: Ports,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("the transparent listener is off: set listen.transparent or --transparent-listen")]
    NoListener,
    #[error(
        "nothing would exempt the proxy's own upstream connections, so they would be sent back into it: \
         set limits.upstream_mark (--upstream-mark N), or name the crawler's user (--crawler-user) and run the proxy as another"
    )]
    NoExemption,
    #[error("the transparent listener must be on a loopback address ({0}) for REDIRECT from this machine, or on all addresses")]
    NotLoopback(SocketAddr),
    #[error("no port to catch")]
    NoPorts,
    #[error("{0:?} is not a user name or uid")]
    BadUser(String),
    #[error("--ports: {0:?} is not a port list (1965,70) or \"all\"")]
    BadPorts(String),
}

impl Ports {
    /// `1965,70`, or `all`.
    pub fn parse(text: &str) -> Result<Ports, RulesError> {
        if text.trim() == "all" {
            return Ok(Ports::AllButDns);
        }
        let mut list = Vec::new();
        for item in text.split(',') {
            match item.trim().parse::<u16>() {
                Ok(p) if p > 0 => {
                    if !list.contains(&p) {
                        list.push(p)
                    }
                }
                _ => return Err(RulesError::BadPorts(text.to_string())),
            }
        }
        Ok(Ports::These(list))
    }
}

impl Plan {
    /// The plan for a config: its transparent listener and upstream mark.
    pub fn for_config(
        config: &crate::config::Config,
        crawler_user: Option<String>,
        ports: Ports,
    ) -> Result<Plan, RulesError> {
        Ok(Plan {
            listen: config
                .listen
                .get(crate::listener::Listener::Transparent)
                .ok_or(RulesError::NoListener)?,
            mark: config.limits.upstream_mark,
            crawler_user,
            ports,
        })
    }

    fn check(&self) -> Result<(), RulesError> {
        let ip = self.listen.ip();
        if !(ip.is_loopback() || ip.is_unspecified()) {
            return Err(RulesError::NotLoopback(self.listen));
        }
        if self.mark.is_none() && self.crawler_user.is_none() {
            return Err(RulesError::NoExemption);
        }
        if let Some(user) = &self.crawler_user {
            let ok = !user.is_empty()
                && user
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
            if !ok {
                return Err(RulesError::BadUser(user.clone()));
            }
        }
        if self.ports == Ports::These(Vec::new()) {
            return Err(RulesError::NoPorts);
        }
        Ok(())
    }

    /// Does the listener take IPv4, IPv6 connections? (`[::]` takes both.)
    fn families(&self) -> (bool, bool) {
        match self.listen {
            SocketAddr::V4(_) => (true, false),
            SocketAddr::V6(a) if a.ip().is_unspecified() => (true, true),
            SocketAddr::V6(_) => (false, true),
        }
    }

    /// The rules, as a shell script (iptables) or an `nft -f` file.
    pub fn render(&self, syntax: Syntax) -> Result<String, RulesError> {
        self.check()?;
        Ok(match syntax {
            Syntax::Iptables => self.iptables(),
            Syntax::Nftables => self.nftables(),
        })
    }

    fn header(&self, out: &mut String, comment: &str) {
        let who = match &self.crawler_user {
            Some(u) => format!("connections of user {u}"),
            None => "every connection in this network namespace".to_string(),
        };
        let _ = writeln!(
            out,
            "{comment} robots-proxy transparent mode catches {who} to {} and sends it to {}.",
            self.describe_ports(),
            self.listen
        );
        if let Some(mark) = self.mark {
            let _ = writeln!(
                out,
                "{comment} The proxy's own upstream connections carry mark {mark:#x} (limits.upstream_mark) and pass."
            );
        }
        if self.crawler_user.is_some() {
            let _ = writeln!(
                out,
                "{comment} Run the proxy as another user: its own connections are then not caught."
            );
        }
        let _ = writeln!(
            out,
            "{comment} Apply as root in the crawler's network namespace (generated by robots-proxy transparent-rules)."
        );
    }

    fn describe_ports(&self) -> String {
        match &self.ports {
            Ports::These(list) => format!(
                "TCP port{} {}",
                if list.len() == 1 { "" } else { "s" },
                join(list, ",")
            ),
            Ports::AllButDns => "every TCP port but 53 (DNS)".to_string(),
        }
    }

    fn iptables(&self) -> String {
        let mut out = String::from("#!/bin/sh\nset -e\n");
        self.header(&mut out, "#");
        let (v4, v6) = self.families();
        let port = self.listen.port();
        let owner = match &self.crawler_user {
            Some(u) => format!(" -m owner --uid-owner {u}"),
            None => String::new(),
        };
        for (tool, loopback, redirect) in [
            ("iptables", "127.0.0.0/8", v4),
            ("ip6tables", "::1/128", v6),
        ] {
            out.push('\n');
            if redirect {
                let _ = writeln!(out, "{tool} -t nat -N ROBOTS_PROXY");
                if let Some(mark) = self.mark {
                    let _ = writeln!(
                        out,
                        "{tool} -t nat -A ROBOTS_PROXY -m mark --mark {mark:#x} -j RETURN"
                    );
                }
                let _ = writeln!(out, "{tool} -t nat -A ROBOTS_PROXY -d {loopback} -j RETURN");
                for m in self.port_matches() {
                    let _ = writeln!(
                        out,
                        "{tool} -t nat -A ROBOTS_PROXY -p tcp{m} -j REDIRECT --to-ports {port}"
                    );
                }
                let _ = writeln!(out, "{tool} -t nat -A OUTPUT -p tcp{owner} -j ROBOTS_PROXY");
            } else {
                // The listener does not take this family: refused, never around the proxy.
                let mark = match self.mark {
                    Some(mark) => format!(" -m mark ! --mark {mark:#x}"),
                    None => String::new(),
                };
                for m in self.port_matches() {
                    let _ = writeln!(
                        out,
                        "{tool} -A OUTPUT -p tcp{owner}{mark} ! -d {loopback}{m} -j REJECT --reject-with tcp-reset"
                    );
                }
            }
        }
        out
    }

    /// One iptables match per rule: `--dport N`, or all but DNS.
    fn port_matches(&self) -> Vec<String> {
        match &self.ports {
            Ports::These(list) => list.iter().map(|p| format!(" --dport {p}")).collect(),
            Ports::AllButDns => vec![" ! --dport 53".to_string()],
        }
    }

    fn nftables(&self) -> String {
        let mut out = String::new();
        self.header(&mut out, "#");
        let (v4, v6) = self.families();
        let ports = match &self.ports {
            Ports::These(list) => format!("tcp dport {{ {} }}", join(list, ", ")),
            Ports::AllButDns => "tcp dport != 53".to_string(),
        };
        let mark = self.mark.map(|m| format!("{m:#x}"));
        let pass = |out: &mut String| {
            if let Some(mark) = &mark {
                let _ = writeln!(out, "    meta mark {mark} return");
            }
            let _ = writeln!(out, "    ip daddr 127.0.0.0/8 return");
            let _ = writeln!(out, "    ip6 daddr ::1 return");
            if let Some(user) = &self.crawler_user {
                let user = match user.parse::<u32>() {
                    Ok(uid) => uid.to_string(),
                    Err(_) => format!("\"{user}\""),
                };
                let _ = writeln!(out, "    meta skuid != {user} return");
            }
        };
        let _ = writeln!(out, "table inet robots_proxy");
        let _ = writeln!(out, "delete table inet robots_proxy");
        let _ = writeln!(out, "table inet robots_proxy {{");
        let _ = writeln!(out, "  chain to_proxy {{");
        let _ = writeln!(
            out,
            "    type nat hook output priority -100; policy accept;"
        );
        pass(&mut out);
        let port = self.listen.port();
        for (family, on) in [("ipv4", v4), ("ipv6", v6)] {
            if on {
                let _ = writeln!(out, "    meta nfproto {family} {ports} redirect to :{port}");
            }
        }
        let _ = writeln!(out, "  }}");
        if !(v4 && v6) {
            // The family the listener does not take: refused, never around the proxy.
            let family = if v4 { "ipv6" } else { "ipv4" };
            let _ = writeln!(out, "  chain no_bypass {{");
            let _ = writeln!(
                out,
                "    type filter hook output priority 0; policy accept;"
            );
            pass(&mut out);
            let _ = writeln!(
                out,
                "    meta nfproto {family} {ports} reject with tcp reset"
            );
            let _ = writeln!(out, "  }}");
        }
        let _ = writeln!(out, "}}");
        out
    }
}

fn join(list: &[u16], sep: &str) -> String {
    list.iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(sep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(listen: &str) -> Plan {
        Plan {
            listen: listen.parse().unwrap(),
            mark: Some(42),
            crawler_user: None,
            ports: Ports::These(vec![1965, 70]),
        }
    }

    #[test]
    fn the_sidecar_rules_exempt_the_mark_and_loopback_and_redirect_both_ports() {
        let text = plan("127.0.0.1:8965").render(Syntax::Iptables).unwrap();
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("ip")).collect();
        assert_eq!(
            lines,
            [
                "iptables -t nat -N ROBOTS_PROXY",
                "iptables -t nat -A ROBOTS_PROXY -m mark --mark 0x2a -j RETURN",
                "iptables -t nat -A ROBOTS_PROXY -d 127.0.0.0/8 -j RETURN",
                "iptables -t nat -A ROBOTS_PROXY -p tcp --dport 1965 -j REDIRECT --to-ports 8965",
                "iptables -t nat -A ROBOTS_PROXY -p tcp --dport 70 -j REDIRECT --to-ports 8965",
                "iptables -t nat -A OUTPUT -p tcp -j ROBOTS_PROXY",
                // IPv6 has no listener: refused, not let through.
                "ip6tables -A OUTPUT -p tcp -m mark ! --mark 0x2a ! -d ::1/128 --dport 1965 -j REJECT --reject-with tcp-reset",
                "ip6tables -A OUTPUT -p tcp -m mark ! --mark 0x2a ! -d ::1/128 --dport 70 -j REJECT --reject-with tcp-reset",
            ]
        );
    }

    #[test]
    fn a_crawler_user_narrows_the_rules_and_all_ports_keep_dns_out() {
        let mut p = plan("[::]:8965");
        p.mark = None;
        p.crawler_user = Some("crawler".into());
        p.ports = Ports::AllButDns;
        let text = p.render(Syntax::Iptables).unwrap();
        assert!(text.contains(
            "iptables -t nat -A ROBOTS_PROXY -p tcp ! --dport 53 -j REDIRECT --to-ports 8965"
        ));
        assert!(text.contains("ip6tables -t nat -A ROBOTS_PROXY -d ::1/128 -j RETURN"));
        assert!(text.contains(
            "iptables -t nat -A OUTPUT -p tcp -m owner --uid-owner crawler -j ROBOTS_PROXY"
        ));
        assert!(!text.contains("REJECT"), "[::] takes both families");
        let nft = p.render(Syntax::Nftables).unwrap();
        assert!(nft.contains("meta skuid != \"crawler\" return"));
        assert!(nft.contains("meta nfproto ipv4 tcp dport != 53 redirect to :8965"));
        assert!(nft.contains("meta nfproto ipv6 tcp dport != 53 redirect to :8965"));
        assert!(!nft.contains("chain no_bypass"));
    }

    #[test]
    fn nftables_refuses_the_family_the_listener_does_not_take() {
        let nft = plan("127.0.0.1:8965").render(Syntax::Nftables).unwrap();
        assert!(nft.contains("meta mark 0x2a return"));
        assert!(nft.contains("meta nfproto ipv4 tcp dport { 1965, 70 } redirect to :8965"));
        assert!(nft.contains("meta nfproto ipv6 tcp dport { 1965, 70 } reject with tcp reset"));
        assert!(!nft.contains("meta nfproto ipv6 tcp dport { 1965, 70 } redirect"));
    }

    #[test]
    fn port_lists_parse_and_nonsense_does_not() {
        assert_eq!(Ports::parse("all"), Ok(Ports::AllButDns));
        assert_eq!(
            Ports::parse("1965, 70,1965"),
            Ok(Ports::These(vec![1965, 70]))
        );
        for bad in ["", "0", "70,", "65536", "1965;70", "-1"] {
            assert!(Ports::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// A silly config gets an error, not rules that loop or leak.
    #[test]
    fn rules_that_would_loop_or_miss_are_refused() {
        let mut p = plan("127.0.0.1:8965");
        p.mark = None;
        assert_eq!(p.render(Syntax::Iptables), Err(RulesError::NoExemption));
        let mut p = plan("192.0.2.1:8965");
        assert!(matches!(
            p.render(Syntax::Nftables),
            Err(RulesError::NotLoopback(_))
        ));
        p.listen = "127.0.0.1:8965".parse().unwrap();
        p.crawler_user = Some("x; rm -rf /".into());
        assert!(matches!(
            p.render(Syntax::Iptables),
            Err(RulesError::BadUser(_))
        ));
        p.crawler_user = None;
        p.ports = Ports::These(vec![]);
        assert_eq!(p.render(Syntax::Iptables), Err(RulesError::NoPorts));
    }
}
