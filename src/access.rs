//! Who may use the proxy (docs/architecture.md, "Access"): client addresses
//! (`access.allow_from`, loopback only by default, checked when a connection
//! is accepted, before anything is read), then, per request, a client
//! certificate when `access.require_client_cert` is set, and a bot that the
//! connection is (see [`crate::bots`]). Pure: no I/O.

use std::fmt;
use std::net::IpAddr;

use subtle::ConstantTimeEq;

use crate::addr::{unmapped, Prefix};
use crate::bots::{BotId, Bots, Client, Presented};

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
    /// A web request without a user and password `[socks5] users` lists
    /// (`Proxy-Authorization: Basic`), where users are configured: `407`.
    ProxyAuth,
}

/// The user of `users` whose name and password these are, every pair
/// compared in constant time without stopping at a match (SOCKS5's login,
/// the web's `Proxy-Authorization`).
pub fn user_of<'u>(users: &'u [(String, String)], name: &[u8], pass: &[u8]) -> Option<&'u String> {
    users.iter().fold(None, |found, (u, p)| {
        let same = u.as_bytes().ct_eq(name) & p.as_bytes().ct_eq(pass);
        found.or(bool::from(same).then_some(u))
    })
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
            Denied::ProxyAuth => f.write_str(
                "this proxy needs a user and password of [socks5] users (Proxy-Authorization: Basic)",
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

/// Who may use the admin listener (`[admin]`; docs/architecture.md, "The
/// admin listener"). Pure.
///
/// - A connection is served when its client is in `allow_from`; unset, that
///   is loopback, or anyone when a `token` is set (who then needs it).
/// - Reading (`/metrics`, the status page, `/api`) is open to loopback and to
///   `allow_from`'s clients; a client let in only by the token presents it.
///   `/healthz` is open to every client served.
/// - Acting (`POST`) takes the token when one is set, else a loopback client.
/// - Every request names a `Host` this listener answers to (an IP literal,
///   `localhost`, this machine's name or one in `hosts`): a page that rebound
///   its own name to this address (DNS rebinding) reaches nothing.
#[derive(Clone, Debug, Default)]
pub struct AdminAccess {
    pub token: Option<String>,
    /// `[admin] allow_from`, when given.
    pub allow_from: Option<Vec<Prefix>>,
    /// `[admin] hosts`: further names clients use for the listener, lower-case.
    pub hosts: Vec<String>,
}

/// What a request to the admin listener asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminUse {
    Health,
    Read,
    Act,
}

/// Why the admin listener refuses a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminDenied {
    /// `Host` names something else (status 421).
    Host(String),
    /// The token is needed and was not given (status 401).
    Token,
    /// Acting needs a loopback client when no token is set (status 403).
    NotLoopback,
}

impl fmt::Display for AdminDenied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdminDenied::Host(h) => write!(
                f,
                "Host {h:?} is not a name of this listener (an IP address, localhost, this machine's name, or one listed in [admin] hosts)"
            ),
            AdminDenied::Token => {
                f.write_str("this needs [admin] token: Authorization: Bearer TOKEN")
            }
            AdminDenied::NotLoopback => {
                f.write_str("without [admin] token, only loopback clients may act")
            }
        }
    }
}

impl AdminAccess {
    /// Whether a connection from `ip` is served at all.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = unmapped(ip);
        match &self.allow_from {
            Some(ranges) => ip.is_loopback() || ranges.iter().any(|p| p.contains(ip)),
            None => ip.is_loopback() || self.token.is_some(),
        }
    }

    /// Whether the listener at `addr` may start with these rules: one other
    /// machines can reach needs `allow_from` or a token, said on purpose.
    pub fn covers(&self, addr: std::net::SocketAddr) -> bool {
        addr.ip().is_loopback() || self.allow_from.is_some() || self.token.is_some()
    }

    /// Whether `host` (a `Host` header's name, without its port) is one this
    /// listener answers to; `machine` is this machine's own name.
    pub fn names(&self, host: &str, machine: Option<&str>) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let literal = host.parse::<IpAddr>().is_ok()
            || host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .is_some_and(|h| h.parse::<IpAddr>().is_ok());
        literal
            || host == "localhost"
            || machine.is_some_and(|m| m.eq_ignore_ascii_case(&host))
            || self.hosts.contains(&host)
    }

    /// Whether a request for `what` from `ip` with `host` (the `Host`
    /// header's value, if any) and `token` (as presented) is served.
    pub fn allows(
        &self,
        (what, ip): (AdminUse, IpAddr),
        host: Option<&str>,
        token: Option<&str>,
        machine: Option<&str>,
    ) -> Result<(), AdminDenied> {
        if let Some(host) = host {
            if !self.names(host_name(host), machine) {
                return Err(AdminDenied::Host(host.to_string()));
            }
        }
        let ip = unmapped(ip);
        let token_ok = || match (&self.token, token) {
            // Compared in constant time (the length still shows).
            (Some(t), Some(given)) => bool::from(t.as_bytes().ct_eq(given.as_bytes())),
            _ => false,
        };
        let listed = ip.is_loopback()
            || self
                .allow_from
                .as_ref()
                .is_some_and(|r| r.iter().any(|p| p.contains(ip)));
        match what {
            AdminUse::Health => Ok(()),
            AdminUse::Read if listed || token_ok() => Ok(()),
            AdminUse::Read => Err(AdminDenied::Token),
            AdminUse::Act if self.token.is_some() => match token_ok() {
                true => Ok(()),
                false => Err(AdminDenied::Token),
            },
            AdminUse::Act if ip.is_loopback() => Ok(()),
            AdminUse::Act => Err(AdminDenied::NotLoopback),
        }
    }
}

/// A `Host` header's name: without its port, an IPv6 literal with brackets.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
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

    fn admin(token: Option<&str>, allow_from: Option<&[&str]>, hosts: &[&str]) -> AdminAccess {
        AdminAccess {
            token: token.map(str::to_string),
            allow_from: allow_from.map(|r| r.iter().map(|p| Prefix::parse(p).unwrap()).collect()),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
        }
    }

    /// DNS rebinding: a page on evil.example whose name now points at the
    /// listener sends `Host: evil.example:9770`; every use is refused, from
    /// any client, with or without a token. The listener's own names pass.
    #[test]
    fn admin_host_names() {
        let a = admin(None, None, &["status.lan"]);
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        for what in [AdminUse::Health, AdminUse::Read, AdminUse::Act] {
            for host in [
                "evil.example:9770",
                "evil.example",
                "127.0.0.1.evil.example",
                "localhost.evil.example:1",
                "status.lan.evil:9770",
                "",
            ] {
                assert_eq!(
                    a.allows((what, lo), Some(host), None, Some("box")),
                    Err(AdminDenied::Host(host.to_string())),
                    "{what:?} {host}"
                );
            }
            for host in [
                "127.0.0.1:9770",
                "127.0.0.1",
                "[::1]:9770",
                "[::1]",
                "LOCALHOST:9770",
                "localhost.",
                "box:9770",
                "Status.LAN",
                "10.1.2.3:80",
            ] {
                assert_eq!(
                    a.allows((what, lo), Some(host), None, Some("box")),
                    Ok(()),
                    "{what:?} {host}"
                );
            }
        }
        // No Host at all (HTTP/1.0): no browser sends that.
        assert_eq!(a.allows((AdminUse::Read, lo), None, None, None), Ok(()));
    }

    #[test]
    fn admin_clients() {
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        let lan: IpAddr = "10.1.2.3".parse().unwrap();
        let far: IpAddr = "203.0.113.9".parse().unwrap();
        let token = "0123456789abcdef";
        let read = |a: &AdminAccess, ip, t| a.allows((AdminUse::Read, ip), None, t, None);
        let act = |a: &AdminAccess, ip, t| a.allows((AdminUse::Act, ip), None, t, None);
        // Nothing set: loopback only.
        let a = admin(None, None, &[]);
        assert!(a.admits(lo) && !a.admits(lan));
        assert_eq!(act(&a, lo, None), Ok(()));
        // allow_from: those read; acting still wants loopback without a token.
        let a = admin(None, Some(&["10.0.0.0/8"]), &[]);
        assert!(a.admits(lan) && a.admits(lo) && !a.admits(far));
        assert_eq!(read(&a, lan, None), Ok(()));
        assert_eq!(act(&a, lan, None), Err(AdminDenied::NotLoopback));
        // A token alone: anyone connects, and must present it to read or act.
        let a = admin(Some(token), None, &[]);
        assert!(a.admits(far));
        assert_eq!(read(&a, far, None), Err(AdminDenied::Token));
        assert_eq!(
            read(&a, far, Some("0123456789abcdeX")),
            Err(AdminDenied::Token)
        );
        assert_eq!(read(&a, far, Some(token)), Ok(()));
        assert_eq!(a.allows((AdminUse::Health, far), None, None, None), Ok(()));
        assert_eq!(read(&a, lo, None), Ok(()));
        assert_eq!(act(&a, lo, None), Err(AdminDenied::Token));
        assert_eq!(act(&a, far, Some(token)), Ok(()));
        // Where the listener may start.
        let any: std::net::SocketAddr = "0.0.0.0:9770".parse().unwrap();
        assert!(!admin(None, None, &[]).covers(any));
        assert!(admin(None, None, &[]).covers("127.0.0.1:9770".parse().unwrap()));
        assert!(admin(Some(token), None, &[]).covers(any));
        assert!(admin(None, Some(&["10.0.0.0/8"]), &[]).covers(any));
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
