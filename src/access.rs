//! Who may use the proxy (docs/architecture.md, "Access"): client addresses
//! (`access.allow_from`, loopback only by default, checked when a connection
//! is accepted, before anything is read), then, per request, a client
//! certificate when `access.require_client_cert` is set, and a bot that the
//! connection is (see [`crate::bots`]). Pure: no I/O.

use std::fmt;
use std::net::IpAddr;

use crate::bots::{BotId, Bots, Client, Presented};
use crate::egress::{unmapped, Prefix};

#[derive(Clone, Debug)]
pub struct Access {
    /// Client address ranges the proxy listeners serve.
    pub allow_from: Vec<Prefix>,
    /// Gemini requests must carry a client certificate that some bot lists.
    pub require_client_cert: bool,
}

/// Why a client is turned away, and what it is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// Its address is outside `access.allow_from`.
    Address(IpAddr),
    /// A Gemini request without a certificate, where one is needed (Gemini `60`).
    NoCertificate,
    /// A certificate no bot lists, where one is needed (Gemini `61`).
    UnknownCertificate(String),
    /// Nothing picks a bot for it and there is no default bot.
    NoBot,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::Address(ip) => write!(f, "client {ip} is not in access.allow_from"),
            Denied::NoCertificate => f.write_str("this proxy requires a client certificate"),
            Denied::UnknownCertificate(fp) => {
                write!(f, "client certificate {fp} is not listed by any bot")
            }
            Denied::NoBot => f.write_str(
                "no bot is configured for this client (no default [bot], and no [[bots]] entry names its SOCKS5 user, certificate or address)",
            ),
        }
    }
}

impl Default for Access {
    /// Loopback only, no certificates required: never an open proxy by accident.
    fn default() -> Access {
        Access {
            allow_from: Access::loopback(),
            require_client_cert: false,
        }
    }
}

impl Access {
    /// `127.0.0.0/8` and `::1/128`.
    pub fn loopback() -> Vec<Prefix> {
        ["127.0.0.0/8", "::1/128"]
            .iter()
            .map(|p| Prefix::parse(p).expect("loopback ranges parse"))
            .collect()
    }

    /// May a client at `ip` use the proxy? (An IPv4-mapped address is its IPv4 address.)
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = unmapped(ip);
        self.allow_from.iter().any(|p| p.contains(ip))
    }

    /// May a client at `ip` use the transparent listener? A crawler on this
    /// machine comes from the address the kernel chose for its original
    /// destination, not from loopback: where loopback is admitted, so is
    /// every address `is_local` says is this machine's.
    pub fn admits_redirected(&self, ip: IpAddr, is_local: impl FnOnce(IpAddr) -> bool) -> bool {
        let ip = unmapped(ip);
        let loopback = match ip {
            IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        };
        self.admits(ip) || (self.admits(loopback) && is_local(ip))
    }

    /// True when only this machine may connect.
    pub fn loopback_only(&self) -> bool {
        let loopback = Access::loopback();
        self.allow_from
            .iter()
            .all(|p| loopback.iter().any(|l| l.covers(p)))
    }

    /// True when every IPv4 or every IPv6 address is admitted.
    pub fn open_to_all(&self) -> bool {
        self.allow_from.iter().any(|p| p.len == 0)
    }

    /// Which bot serves a request from an admitted client, or why it is refused:
    /// the certificate rule first (Gemini only), then the bot.
    pub fn identify(&self, bots: &Bots, client: &Client) -> Result<BotId, Denied> {
        if self.require_client_cert {
            match &client.cert {
                Presented::NotTls => {}
                Presented::Nothing => return Err(Denied::NoCertificate),
                Presented::Cert(fp) => {
                    if bots.by_cert(fp).is_none() {
                        return Err(Denied::UnknownCertificate(fp.to_string()));
                    }
                }
            }
        }
        bots.pick(client).ok_or(match client.cert {
            // Where a certificate could have picked a bot, say so in Gemini's terms.
            Presented::Nothing if bots.lists_certs() => Denied::NoCertificate,
            Presented::Cert(fp) if bots.lists_certs() => Denied::UnknownCertificate(fp.to_string()),
            _ => Denied::NoBot,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bots::{Bot, Fingerprint};
    use crate::robots::BotProfile;

    fn access(ranges: &[&str], require_client_cert: bool) -> Access {
        Access {
            allow_from: ranges.iter().map(|r| Prefix::parse(r).unwrap()).collect(),
            require_client_cert,
        }
    }

    #[test]
    fn addresses() {
        let a = Access::default();
        assert!(a.admits("127.0.0.1".parse().unwrap()));
        assert!(a.admits("127.200.0.9".parse().unwrap()));
        assert!(a.admits("::1".parse().unwrap()));
        assert!(a.admits("::ffff:127.0.0.1".parse().unwrap()));
        for outside in ["10.0.0.1", "::2", "0.0.0.0", "::ffff:10.0.0.1", "fe80::1"] {
            assert!(!a.admits(outside.parse().unwrap()), "{outside}");
        }
        assert!(a.loopback_only() && !a.open_to_all());
        assert!(access(&["127.0.0.1"], false).loopback_only());
        let lan = access(&["127.0.0.0/8", "192.168.0.0/16"], false);
        assert!(!lan.loopback_only() && !lan.open_to_all());
        assert!(lan.admits("192.168.4.4".parse().unwrap()));
        assert!(access(&["0.0.0.0/0", "::/0"], false).open_to_all());
        assert!(!access(&[], false).admits("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn certificates_and_bots() {
        let listed = Fingerprint([1; 32]);
        let unknown = Fingerprint([2; 32]);
        let mut alpha = Bot::named("alpha", BotProfile::new("alphabot"));
        alpha.client_certs = vec![listed];
        let default = Bot::named("default", BotProfile::new("anybot"));
        let with_default = Bots::new(vec![alpha.clone(), default], Some(1));
        let without = Bots::new(vec![alpha], None);
        let client = |cert| Client {
            addr: "127.0.0.1".parse().unwrap(),
            socks5_user: None,
            cert,
        };
        let open = access(&["127.0.0.0/8"], false);
        let strict = access(&["127.0.0.0/8"], true);
        let id = |a: &Access, b: &Bots, c| a.identify(b, &client(c));

        assert_eq!(id(&open, &with_default, Presented::Cert(listed)), Ok(0));
        assert_eq!(id(&open, &with_default, Presented::Cert(unknown)), Ok(1));
        assert_eq!(id(&open, &with_default, Presented::Nothing), Ok(1));
        assert_eq!(id(&open, &with_default, Presented::NotTls), Ok(1));
        assert_eq!(
            id(&open, &without, Presented::Nothing),
            Err(Denied::NoCertificate)
        );
        assert!(matches!(
            id(&open, &without, Presented::Cert(unknown)),
            Err(Denied::UnknownCertificate(_))
        ));
        assert_eq!(id(&open, &without, Presented::NotTls), Err(Denied::NoBot));

        assert_eq!(id(&strict, &with_default, Presented::Cert(listed)), Ok(0));
        assert_eq!(
            id(&strict, &with_default, Presented::Nothing),
            Err(Denied::NoCertificate)
        );
        assert!(matches!(
            id(&strict, &with_default, Presented::Cert(unknown)),
            Err(Denied::UnknownCertificate(fp)) if fp == unknown.to_string()
        ));
        // Gopher carries no certificate: the rule is Gemini's.
        assert_eq!(id(&strict, &with_default, Presented::NotTls), Ok(1));
    }

    /// A local crawler redirected from a machine address is admitted where
    /// loopback is; a stranger is not, nor a local address when loopback isn't.
    #[test]
    fn redirected_clients_on_this_machine_count_as_loopback() {
        let default = Access {
            allow_from: Access::loopback(),
            require_client_cert: false,
        };
        let here: IpAddr = "192.0.2.7".parse().unwrap();
        let stranger: IpAddr = "198.51.100.1".parse().unwrap();
        let is_here = |ip: IpAddr| ip == here;
        assert!(default.admits_redirected(here, is_here));
        assert!(default.admits_redirected("::ffff:192.0.2.7".parse().unwrap(), is_here));
        assert!(!default.admits_redirected(stranger, is_here));
        assert!(!default.admits(here), "the other listeners are unchanged");
        let lan_only = Access {
            allow_from: vec![Prefix::parse("10.0.0.0/8").unwrap()],
            require_client_cert: false,
        };
        assert!(!lan_only.admits_redirected(here, is_here));
        assert!(lan_only.admits_redirected("10.1.2.3".parse().unwrap(), |_| false));
    }
}
