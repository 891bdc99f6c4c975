//! The listeners, in one table: what each is called (its `[listen]` key, its
//! flag, its `listener` label, its name on the status page and in messages),
//! where it binds when the config names no address, and whether it serves
//! crawlers. Binding, the proxy's own addresses, the open-proxy check, the
//! metrics labels, reload, `--check-config` and the status page all read it:
//! a new listener is one more row (docs/architecture.md, "Adding a protocol").
//! Pure.

use std::net::{Ipv4Addr, SocketAddr};

label_set! {
    /// A listener (and its `listener` label).
    pub enum Listener {
        Gemini => "gemini",
        Gopher => "gopher",
        Socks5 => "socks5",
        Transparent => "transparent",
        /// The web's forward proxy (HTTP/1.1, `CONNECT`).
        Http => "http",
        /// `/metrics`, `/healthz`, the status page and its actions.
        Admin => "metrics",
        /// The bots' Web Bot Auth key directory, to publish behind an HTTPS origin.
        KeyDirectory => "key-directory",
    }
}

/// One row of the table.
pub struct Spec {
    /// Its config key, `listen.NAME`.
    pub key: &'static str,
    /// The `run` flag that overrides the key.
    pub flag: &'static str,
    /// "the … listener", in messages.
    pub title: &'static str,
    /// Its name on the status page.
    pub page: &'static str,
    /// Bound on `127.0.0.1:port` when the config names no address; `None`:
    /// off unless configured (an empty key is off too).
    pub default_port: Option<u16>,
    /// Whether crawlers use it (`access.allow_from` must cover it); the admin
    /// listener has its own `[admin] allow_from`.
    pub serves_crawlers: bool,
    /// Whether it ends a client's TLS for any host (with the drop-in CA).
    pub drop_in: bool,
    /// Why it needs Linux, where it does.
    pub needs_linux: Option<&'static str>,
}

impl Listener {
    /// Its row of the table.
    pub fn spec(self) -> &'static Spec {
        match self {
            Listener::Gemini => &Spec {
                key: "listen.gemini",
                flag: "--gemini-listen",
                title: "Gemini",
                page: "gemini",
                default_port: Some(1965),
                serves_crawlers: true,
                drop_in: false,
                needs_linux: None,
            },
            Listener::Gopher => &Spec {
                key: "listen.gopher",
                flag: "--gopher-listen",
                title: "Gopher",
                page: "gopher",
                default_port: Some(7070),
                serves_crawlers: true,
                drop_in: false,
                needs_linux: None,
            },
            Listener::Socks5 => &Spec {
                key: "listen.socks5",
                flag: "--socks5-listen",
                title: "SOCKS5",
                page: "socks5",
                default_port: None,
                serves_crawlers: true,
                drop_in: true,
                needs_linux: None,
            },
            Listener::Transparent => &Spec {
                key: "listen.transparent",
                flag: "--transparent-listen",
                title: "transparent",
                page: "transparent",
                default_port: None,
                serves_crawlers: true,
                drop_in: true,
                needs_linux: Some(
                    "transparent mode needs Linux (netfilter's original destination)",
                ),
            },
            Listener::Http => &Spec {
                key: "listen.http",
                flag: "--http-listen",
                title: "HTTP",
                page: "http",
                // Off unless configured: it can end TLS for any host.
                default_port: None,
                serves_crawlers: true,
                drop_in: true,
                needs_linux: None,
            },
            Listener::Admin => &Spec {
                key: "listen.metrics",
                flag: "--metrics-listen",
                title: "metrics",
                page: "admin",
                default_port: Some(9770),
                serves_crawlers: false,
                drop_in: false,
                needs_linux: None,
            },
            Listener::KeyDirectory => &Spec {
                key: "listen.key_directory",
                flag: "--key-directory-listen",
                title: "key directory",
                page: "key directory",
                // Off unless configured: only bots that sign need it.
                default_port: None,
                serves_crawlers: false,
                drop_in: false,
                needs_linux: None,
            },
        }
    }

    /// Where it binds when the config names no address.
    pub fn default_addr(self) -> Option<SocketAddr> {
        self.spec()
            .default_port
            .map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
    }
}

/// Where each listener is bound (or is to be bound), `None` where it is off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Listens([Option<SocketAddr>; Listener::ALL.len()]);

impl Listens {
    pub fn get(&self, listener: Listener) -> Option<SocketAddr> {
        self.0[listener.index()]
    }

    pub fn set(&mut self, listener: Listener, addr: Option<SocketAddr>) {
        self.0[listener.index()] = addr;
    }

    /// The listeners that are on, in the table's order.
    pub fn iter(&self) -> impl Iterator<Item = (Listener, SocketAddr)> + '_ {
        Listener::ALL
            .iter()
            .filter_map(|&l| self.get(l).map(|addr| (l, addr)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listener_has_its_own_key_flag_and_label() {
        let mut seen = std::collections::HashSet::new();
        for &l in Listener::ALL {
            let s = l.spec();
            let name = s.key.strip_prefix("listen.").unwrap();
            assert_eq!(s.flag, format!("--{}-listen", name.replace('_', "-")));
            for name in [l.as_str(), s.page, s.key] {
                assert!(!name.is_empty());
            }
            assert!(seen.insert(s.key), "{} twice", s.key);
        }
    }

    #[test]
    fn off_listeners_are_skipped() {
        let mut listens = Listens::default();
        listens.set(Listener::Gopher, Listener::Gopher.default_addr());
        listens.set(Listener::Socks5, Some("127.0.0.1:1080".parse().unwrap()));
        let on: Vec<_> = listens.iter().map(|(l, a)| (l, a.to_string())).collect();
        assert_eq!(
            on,
            [
                (Listener::Gopher, "127.0.0.1:7070".to_string()),
                (Listener::Socks5, "127.0.0.1:1080".to_string())
            ]
        );
    }
}
