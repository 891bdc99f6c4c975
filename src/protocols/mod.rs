//! The protocols served to crawlers, each one folder: its wire format, its
//! listener's or drop-in's serve, its answers, its robots.txt fetcher. None
//! imports another (tests/suite/docs.rs checks it); what they share lives below
//! them (`protocol` for the line reader, the ports table and sniffing;
//! `proxy` for the exchange every request runs through, the pump and the
//! tally; `refusal` for the answer
//! families). Adding one is a folder here plus the registration rows listed
//! in docs/architecture.md.

pub mod gemini;
pub mod gopher;
pub mod http;
pub mod nex;
pub mod spartan;

use crate::protocol::Protocol;
use crate::proxy::Served;

/// Every protocol served, in [`Protocol::ALL`]'s order: the table the
/// robots.txt fetcher by scheme and the drop-in dispatch are derived from.
pub static ALL: [&dyn Served; Protocol::ALL.len()] = [
    &gemini::Gemini,
    &gopher::Gopher,
    &spartan::Spartan,
    &nex::Nex,
    &http::Http,
    &http::Https,
];

/// `protocol`'s row.
pub fn served(protocol: Protocol) -> &'static dyn Served {
    ALL[protocol.index()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_each_protocol_once_in_order() {
        let rows: Vec<Protocol> = ALL.iter().map(|row| row.protocol()).collect();
        assert_eq!(rows, Protocol::ALL);
        for &p in Protocol::ALL {
            assert_eq!(served(p).protocol(), p);
        }
    }
}
