//! `[listen]` and the `--*-listen` flags: where each listener is bound.

use std::net::SocketAddr;

use super::values::{address, flag_or_key, listen_addr};
use super::{invalid, ConfigError, RawConfig};
use crate::cli::RunArgs;

/// The listen addresses.
pub(super) struct Listens {
    pub gemini: SocketAddr,
    pub gopher: SocketAddr,
    pub metrics: SocketAddr,
    pub socks5: Option<SocketAddr>,
    pub transparent: Option<SocketAddr>,
}

/// `[listen]` and the `--*-listen` flags.
pub(super) fn listen(raw: &RawConfig, flags: &RunArgs) -> Result<Listens, ConfigError> {
    let l = &raw.listen;
    let loopback = [127, 0, 0, 1];
    let gemini_listen = listen_addr(
        flag_or_key(
            ("--gemini-listen", &flags.gemini_listen),
            ("listen.gemini", &l.gemini),
        ),
        (loopback, 1965),
    )?;
    let gopher_listen = listen_addr(
        flag_or_key(
            ("--gopher-listen", &flags.gopher_listen),
            ("listen.gopher", &l.gopher),
        ),
        (loopback, 7070),
    )?;
    let metrics_listen = listen_addr(
        flag_or_key(
            ("--metrics-listen", &flags.metrics_listen),
            ("listen.metrics", &l.metrics),
        ),
        (loopback, 9770),
    )?;
    // Off unless set; an empty key is off too.
    let socks5_key = l.socks5.clone().filter(|k| !k.is_empty());
    let socks5_listen = match flag_or_key(
        ("--socks5-listen", &flags.socks5_listen),
        ("listen.socks5", &socks5_key),
    ) {
        (name, Some(text)) => Some(address(name, text)?),
        (_, None) => None,
    };
    let transparent_key = l.transparent.clone().filter(|k| !k.is_empty());
    let transparent_listen = match flag_or_key(
        ("--transparent-listen", &flags.transparent_listen),
        ("listen.transparent", &transparent_key),
    ) {
        (name, Some(text)) => {
            if !cfg!(any(target_os = "linux", target_os = "android")) {
                return Err(invalid(
                    name,
                    "transparent mode needs Linux (netfilter's original destination)",
                ));
            }
            Some(address(name, text)?)
        }
        (_, None) => None,
    };
    Ok(Listens {
        gemini: gemini_listen,
        gopher: gopher_listen,
        metrics: metrics_listen,
        socks5: socks5_listen,
        transparent: transparent_listen,
    })
}
