//! robots-proxy: a forward proxy for Gemini and Gopher crawlers that enforces
//! robots.txt and Crawl-delay. `docs/architecture.md` describes the data path,
//! where state lives and why.
//!
//! Module map:
//! - [`robots`]: the policy engine (parse, match, group selection). Pure.
//! - [`target`]: targets in canonical form (URLs, hosts, paths, Gopher selectors). Pure.
//! - [`spelling`]: the spellings a server reads as one resource; deciding over all. Pure.
//! - [`fate`]: what became of a request, who caused it, how it is counted. Pure.
//! - [`access`]: who may use the proxy (client ranges, client certificates) and its admin
//!   listener. Pure. [`guesses`]: failed SOCKS5 logins per client, a budget.
//! - [`bots`]: several bots, and which one a connection is. Pure.
//! - [`check`]: the `robots-proxy check` command over the engine and targets.
//! - [`cli`]: the command line as the user typed it (clap); [`config`]: what it resolves to.
//! - [`server`]: listeners, accept loops, shutdown; [`slots`]: connection caps (in all, per
//!   client) and the fd budget.
//! - [`proxy`]: one request, parse → admit → relay or refuse → log.
//! - [`protocol`]: wire formats (Gemini, Gopher, SOCKS5).
//! - [`upstream`]: connecting out (resolve, TLS, TOFU); [`egress`]: where the proxy may
//!   connect (special-purpose ranges, ports, itself); [`tls`]: certificates and verifiers.
//! - [`fetch`]: fetching robots.txt per protocol; [`cache`]: the robots.txt cache.
//! - [`politeness`]: per-server spacing, concurrency, queues and slow-downs.
//! - [`transparent`]: transparent mode: original destinations, local addresses, firewall rules.
//! - [`pins`]: certificate pins (trust on first use), kept in the state directory;
//!   [`state`]: reading and writing that directory's files safely.
//! - [`recent`]: the hosts seen lately, for the status page.
//! - [`metrics`]: the Prometheus registry; [`admin`]: the admin listener (`/metrics`,
//!   `/healthz`, the status page, `/api`, actions).

/// A closed set of label values: the enum, `ALL` in declaration order,
/// `as_str` (the text a metric label or a log line shows) and `index` (its
/// place in `ALL`, for arrays of series resolved once).
macro_rules! label_set {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            pub fn index(self) -> usize {
                self as usize
            }
        }
    };
}

pub mod accept;
pub mod access;
pub mod addr;
pub mod admin;
pub mod admission;
pub mod bots;
pub mod cache;
pub mod check;
pub mod cli;
pub mod config;
pub mod egress;
pub mod fate;
pub mod fetch;
pub mod guesses;
pub mod metrics;
pub mod pins;
pub mod politeness;
pub mod protocol;
pub mod proxy;
pub mod recent;
pub mod refusal;
pub mod robots;
pub mod server;
pub mod slots;
pub mod spelling;
pub mod state;
pub mod store;
pub mod target;
pub mod tls;
pub mod transparent;
pub mod upstream;
