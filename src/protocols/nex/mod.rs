//! Nex, as one unit: its wire format ([`wire`]: the path line, the refusal
//! document, directory listings), serving a request that reached a Nex port
//! through SOCKS5 or the transparent listener and answering each fate
//! ([`serve`]), and fetching robots.txt over Nex ([`robots`]).

pub mod robots;
pub mod serve;
pub mod wire;
