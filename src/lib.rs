//! robots-proxy: a forward proxy for Gemini and Gopher crawlers that enforces
//! robots.txt and Crawl-delay.
//!
//! The module map (one line per module: its concept and what it depends on),
//! the data path, and recipes for adding a limit or a refusal cause are in
//! `docs/architecture.md`, "Modules". The policy engine ([`robots`]) is pure:
//! no I/O, no async, usable on its own.

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
pub mod bot_limits;
pub mod bots;
pub mod cache;
pub mod check;
pub mod cli;
pub mod config;
pub mod context;
pub mod dropin;
pub mod egress;
pub mod fate;
pub mod fetch;
pub mod gateway;
pub mod guesses;
pub mod hosts;
pub mod identity;
pub mod kept;
pub mod listener;
pub mod manual;
pub mod metrics;
pub mod names;
pub mod pins;
pub mod politeness;
pub mod preflight;
pub mod protocol;
pub mod protocols;
/// The protocols at the crate's root too, as the tests, benches and fuzz
/// targets name them.
pub use protocols::{gemini, gopher, http, nex, spartan};
pub mod proxy;
pub mod recent;
pub mod refusal;
pub mod report;
pub mod robots;
pub mod server;
pub mod slots;
pub mod socks5;
pub mod spelling;
pub mod state;
pub mod store;
pub mod target;
pub mod tls;
pub mod transparent;
pub mod upstream;
pub mod waiters;
