//! Several bots on one proxy, and which bot a connection is (docs/architecture.md,
//! "Several bots"). A bot is a robots.txt identity (its product token and
//! virtual agents) plus what picks it for a connection: a SOCKS5 user, a Gemini
//! client certificate's fingerprint, or the client's address. Pure: no I/O.

pub mod limits;

use std::fmt;
use std::net::IpAddr;

use crate::addr::{unmapped, Prefix};
use crate::robots::BotProfile;
use limits::BotLimits;

/// The SHA-256 of a client certificate (its DER bytes), as Gemini clients and
/// capsules show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The fingerprint of a DER-encoded certificate.
    pub fn of(der: &[u8]) -> Fingerprint {
        let digest = ring::digest::digest(&ring::digest::SHA256, der);
        let mut bytes = [0u8; 32];
        bytes.copy_from_slice(digest.as_ref());
        Fingerprint(bytes)
    }

    /// `sha256:HEX` (the prefix may be left out), 64 hex digits in either case,
    /// colons between bytes allowed: `openssl x509 -fingerprint -sha256` prints
    /// `AB:CD:…`, Gemini clients print `abcd…`.
    pub fn parse(text: &str) -> Result<Fingerprint, String> {
        let hex = text
            .get(..7)
            .filter(|p| p.eq_ignore_ascii_case("sha256:"))
            .map_or(text, |_| &text[7..]);
        let digits: Vec<u8> = hex.bytes().filter(|&b| b != b':').collect();
        let bad = || {
            format!(
                "{text:?} is not a SHA-256 fingerprint (sha256: and 64 hex digits, colons allowed)"
            )
        };
        if digits.len() != 64 {
            return Err(bad());
        }
        let mut bytes = [0u8; 32];
        for (byte, pair) in bytes.iter_mut().zip(digits.chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Fingerprint(bytes))
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

/// A bot: who it is to robots.txt, and what picks it for a connection.
#[derive(Clone, Debug)]
pub struct Bot {
    /// Its name in logs, metrics (`bot` label) and `--check-config`.
    pub name: String,
    pub profile: BotProfile,
    /// Names of `[socks5] users` entries.
    pub socks5_users: Vec<String>,
    pub client_certs: Vec<Fingerprint>,
    /// Client address ranges.
    pub clients: Vec<Prefix>,
    /// What the operator allows it beyond robots.txt.
    pub limits: BotLimits,
}

impl Bot {
    /// A bot that nothing but being the default picks.
    pub fn named(name: &str, profile: BotProfile) -> Bot {
        Bot {
            name: name.to_string(),
            profile,
            socks5_users: Vec::new(),
            client_certs: Vec::new(),
            clients: Vec::new(),
            limits: BotLimits::default(),
        }
    }
}

/// Which bot: an index into [`Bots`].
pub type BotId = usize;

/// What is known of a client when its bot is picked.
#[derive(Clone, Copy, Debug)]
pub struct Client<'a> {
    pub addr: IpAddr,
    /// The user it authenticated as (SOCKS5).
    pub socks5_user: Option<&'a str>,
    pub cert: Presented,
}

/// A client certificate, where the connection could carry one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presented {
    /// Not a TLS connection (Gopher): certificates do not apply.
    NotTls,
    /// TLS without a client certificate.
    Nothing,
    Cert(Fingerprint),
}

/// The configured bots. `default` is the `[bot]` section, for connections
/// that nothing else picks.
#[derive(Clone, Debug)]
pub struct Bots {
    bots: Vec<Bot>,
    default: Option<BotId>,
}

impl Bots {
    /// `bots` and which of them is the default. The config resolver has checked
    /// that names, users, fingerprints and ranges are each claimed once.
    pub fn new(bots: Vec<Bot>, default: Option<BotId>) -> Bots {
        let default = default.filter(|&d| d < bots.len());
        Bots { bots, default }
    }

    /// One default bot called `default`: the proxy as it was before `[[bots]]`.
    pub fn single(profile: BotProfile) -> Bots {
        Bots::new(vec![Bot::named("default", profile)], Some(0))
    }

    pub fn get(&self, id: BotId) -> &Bot {
        &self.bots[id]
    }

    pub fn all(&self) -> &[Bot] {
        &self.bots
    }

    /// Every bot's name, in order (the status page's colours, the reload's log line).
    pub fn names(&self) -> Vec<&str> {
        self.bots.iter().map(|b| b.name.as_str()).collect()
    }

    /// The names of the bots in report mode (`mode = "report"`): robots.txt
    /// and their limits are logged for them, not enforced.
    pub fn reporting(&self) -> Vec<&str> {
        self.bots
            .iter()
            .filter(|b| b.limits.mode == limits::Mode::Report)
            .map(|b| b.name.as_str())
            .collect()
    }

    /// Every bot's robots.txt profile, in order (what a cache entry is compiled for).
    pub fn profiles(&self) -> Vec<crate::robots::BotProfile> {
        self.bots.iter().map(|b| b.profile.clone()).collect()
    }

    pub fn default_bot(&self) -> Option<BotId> {
        self.default
    }

    /// True when some bot is picked by a client certificate.
    pub fn lists_certs(&self) -> bool {
        self.bots.iter().any(|b| !b.client_certs.is_empty())
    }

    /// The bot that lists this certificate.
    pub fn by_cert(&self, cert: &Fingerprint) -> Option<BotId> {
        self.bots.iter().position(|b| b.client_certs.contains(cert))
    }

    /// True when some bot may serve this client once its certificate (if any)
    /// is known: what SOCKS5 can tell at CONNECT, before the client's TLS.
    pub fn could_pick(&self, client: &Client) -> bool {
        let without_cert = Client {
            cert: Presented::Nothing,
            ..*client
        };
        self.pick(&without_cert).is_some() || self.lists_certs()
    }

    /// The bot for a client, strongest evidence first: its SOCKS5 user, then its
    /// certificate, then the narrowest `clients` range holding its address,
    /// then the default bot. `None`: nothing picks it and there is no default.
    pub fn pick(&self, client: &Client) -> Option<BotId> {
        if let Some(user) = client.socks5_user {
            let by_user = self
                .bots
                .iter()
                .position(|b| b.socks5_users.iter().any(|u| u == user));
            if by_user.is_some() {
                return by_user;
            }
        }
        if let Presented::Cert(cert) = &client.cert {
            if let Some(id) = self.by_cert(cert) {
                return Some(id);
            }
        }
        let addr = unmapped(client.addr);
        let by_address = self
            .bots
            .iter()
            .enumerate()
            .flat_map(|(id, b)| b.clients.iter().map(move |p| (id, p)))
            .filter(|(_, p)| p.contains(addr))
            .max_by_key(|(id, p)| (p.len, std::cmp::Reverse(*id)))
            .map(|(id, _)| id);
        by_address.or(self.default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(byte: u8) -> Fingerprint {
        Fingerprint([byte; 32])
    }

    fn bots() -> Bots {
        let mut alpha = Bot::named("alpha", BotProfile::new("alphabot"));
        alpha.socks5_users = vec!["alice".into()];
        alpha.client_certs = vec![fp(1)];
        alpha.clients = vec![Prefix::parse("10.0.0.0/8").unwrap()];
        let mut beta = Bot::named("beta", BotProfile::new("betabot"));
        beta.socks5_users = vec!["bob".into()];
        beta.client_certs = vec![fp(2)];
        beta.clients = vec![Prefix::parse("10.9.0.0/16").unwrap()];
        let default = Bot::named("default", BotProfile::new("anybot"));
        Bots::new(vec![alpha, beta, default], Some(2))
    }

    fn client(addr: &str, user: Option<&'static str>, cert: Presented) -> Client<'static> {
        Client {
            addr: addr.parse().unwrap(),
            socks5_user: user,
            cert,
        }
    }

    #[test]
    fn strongest_evidence_picks_the_bot() {
        let b = bots();
        let pick = |addr, user, cert| b.pick(&client(addr, user, cert));
        assert_eq!(pick("127.0.0.1", None, Presented::NotTls), Some(2));
        assert_eq!(pick("10.1.1.1", None, Presented::NotTls), Some(0));
        // The narrowest range wins, whatever the order in the file.
        assert_eq!(pick("10.9.1.1", None, Presented::NotTls), Some(1));
        assert_eq!(pick("::ffff:10.9.1.1", None, Presented::NotTls), Some(1));
        // A certificate is stronger than an address, a SOCKS5 user stronger still.
        assert_eq!(pick("10.9.1.1", None, Presented::Cert(fp(1))), Some(0));
        assert_eq!(
            pick("10.1.1.1", Some("bob"), Presented::Cert(fp(1))),
            Some(1)
        );
        // An unknown user or certificate is no evidence: the address decides.
        assert_eq!(
            pick("10.1.1.1", Some("eve"), Presented::Cert(fp(9))),
            Some(0)
        );
        let no_default = Bots::new(b.all()[..2].to_vec(), None);
        assert_eq!(
            no_default.pick(&client("127.0.0.1", None, Presented::Nothing)),
            None
        );
        // Before its TLS, a client may still show a certificate that picks a bot.
        assert!(no_default.could_pick(&client("127.0.0.1", None, Presented::NotTls)));
        let by_user_only = Bots::new(
            vec![Bot {
                client_certs: Vec::new(),
                ..b.get(0).clone()
            }],
            None,
        );
        assert!(by_user_only.could_pick(&client("127.0.0.1", Some("alice"), Presented::NotTls)));
        assert!(!by_user_only.could_pick(&client("127.0.0.1", Some("eve"), Presented::NotTls)));
    }

    #[test]
    fn fingerprints_as_tools_print_them() {
        let hex = "ab".repeat(32);
        let want = Fingerprint([0xab; 32]);
        let colons = vec!["AB"; 32].join(":");
        for text in [
            format!("sha256:{hex}"),
            format!("SHA256:{}", hex.to_uppercase()),
            hex.clone(),
            colons,
        ] {
            assert_eq!(Fingerprint::parse(&text), Ok(want), "{text}");
        }
        assert_eq!(want.to_string(), format!("sha256:{hex}"));
        assert_eq!(Fingerprint::parse(&want.to_string()), Ok(want));
        for bad in [
            String::new(),
            "sha256:".into(),
            "ab".repeat(31),
            "ab".repeat(33),
            "zz".repeat(32),
            format!("md5:{hex}"),
            "é".repeat(32),
        ] {
            assert!(Fingerprint::parse(&bad).is_err(), "{bad:?}");
        }
    }
}
