//! The SOCKS5 drop-in listener: the handshake ([`wire`], RFC 1928 and
//! RFC 1929) and serving a connection ([`serve`]) up to the way in it shares
//! with the transparent listener ([`crate::dropin`]).

pub mod serve;
pub mod wire;
