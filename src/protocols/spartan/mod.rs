//! Spartan, as one unit: its wire format ([`wire`]: the request line and its
//! data, status lines), serving a request that reached a Spartan port
//! through SOCKS5 or the transparent listener and answering each fate
//! ([`serve`]), and fetching a capsule's robots.txt over Spartan ([`robots`]).

pub mod robots;
pub mod serve;
pub mod wire;
