//! The label sets: each a small closed enum, so every series can be resolved
//! once and no label takes a value from outside.

use crate::access::Denied;
pub use crate::listener::Listener;
pub use crate::protocol::Protocol;

label_set! {
    /// robots.txt fetch outcomes (the `outcome` label).
    pub enum FetchKind {
        Found => "found",
        /// A conditional fetch the server answered `304 Not Modified`: the kept copy stands.
        NotModified => "not-modified",
        Missing => "missing",
        Unreachable => "unreachable",
        RedirectLimit => "redirect-limit",
    }
}

label_set! {
    /// Why a connection was closed without a request being served.
    pub enum Rejection {
        /// SOCKS5 `CONNECT`, or a redirected connection's original destination,
        /// to a port or address the proxy does not connect to (the proxy itself included).
        Destination => "destination",
        /// A connection on the transparent listener with no original destination
        /// (it was not redirected there by the kernel).
        NotRedirected => "not-redirected",
        /// An HTTP request line to a port that is not the web's.
        Http => "http",
        /// The client address already holds `limits.max_connections_per_client`.
        ClientCap => "client-cap",
        /// The admin listener's 32 places were busy, or this connection was
        /// cut to make room for a newer one (it was idle or still sending).
        Full => "full",
        /// The client address is outside `access.allow_from` (`[admin]
        /// allow_from` on the admin listener).
        Access => "access",
        /// An admin request naming a `Host` that is not this listener's (DNS rebinding).
        Host => "host",
    }
}

label_set! {
    /// What the proxy saw of the fleet store besides failed calls.
    pub enum StoreEvent {
        /// A value in the proxy's keys that is no number in bounds (`nan`,
        /// `inf`, negative): the request got "slow down", the gate was reset
        /// to "a start just now".
        Junk => "junk",
        /// A master of the store came back as another server at the same
        /// address (its run id changed): a restart, its data possibly lost.
        Restart => "restart",
        /// Another master answers for the store (a Cluster or Sentinel
        /// failover): writes the old one had not passed on may be lost.
        Failover => "failover",
        /// A reserved start the store no longer held when its time came (it
        /// restarted meanwhile): asked again, not started.
        LeaseLost => "lease-lost",
        /// A reservation this proxy gave up on (its call passed the
        /// deadline) was taken back, so no lease is left behind.
        Cancelled => "cancelled",
    }
}

label_set! {
    /// What the proxy asked the fleet store (`[store]`) for.
    pub enum StoreOp {
        /// A request's turn at the shared gate, its lease renewed or released.
        Gate => "gate",
        /// An upstream's "slow down" told to the fleet.
        SlowDown => "slow-down",
        /// A robots.txt outcome read, locked or written.
        Robots => "robots",
        /// A certificate pin read or written.
        Pin => "pin",
        /// The once-a-second health check.
        Ping => "ping",
        /// A bot's limit counted across the fleet (taken, started, renewed
        /// or given back).
        Limit => "limit",
    }
}

label_set! {
    /// Why a client was not let use the proxy (`robots_proxy_access_refusals_total{reason}`).
    pub enum AccessRefusal {
        Address => "address",
        NoCertificate => "no-certificate",
        UnknownCertificate => "unknown-certificate",
        NoBot => "no-bot",
        ProxyAuth => "proxy-auth",
    }
}

impl AccessRefusal {
    pub fn of(denied: &Denied) -> AccessRefusal {
        match denied {
            Denied::Address(_) => AccessRefusal::Address,
            Denied::NoCertificate => AccessRefusal::NoCertificate,
            Denied::UnknownCertificate(_) => AccessRefusal::UnknownCertificate,
            Denied::NoBot => AccessRefusal::NoBot,
            Denied::ProxyAuth => AccessRefusal::ProxyAuth,
        }
    }
}

label_set! {
    /// Why a SOCKS5 client failed to authenticate.
    pub enum SocksAuthFailure {
        /// A username or password that `[socks5] users` does not list.
        BadCredentials => "bad-credentials",
        /// No method the proxy accepts (no password offered where one is needed).
        NoMethod => "no-method",
        /// The client had spent its failed logins: its password was not checked.
        Throttled => "throttled",
    }
}

label_set! {
    /// Which end of a TLS handshake the proxy was (`robots_proxy_tls_handshakes_total{side}`).
    pub enum TlsSide {
        /// A crawler's handshake with the proxy (Gemini listener, drop-in CA).
        Listener => "listener",
        /// The proxy's handshake with a capsule (requests and robots.txt fetches).
        Upstream => "upstream",
    }
}

label_set! {
    /// Whether a TLS handshake resumed an earlier session.
    pub enum HandshakeKind {
        Full => "full",
        Resumed => "resumed",
    }
}

impl HandshakeKind {
    /// The kind of a finished handshake (rustls' `handshake_kind`).
    pub fn of(kind: Option<rustls::HandshakeKind>) -> HandshakeKind {
        match kind {
            Some(rustls::HandshakeKind::Resumed) => HandshakeKind::Resumed,
            _ => HandshakeKind::Full,
        }
    }
}
