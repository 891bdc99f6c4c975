//! `[listen]` and the `--*-listen` flags: where each listener of the table
//! ([`crate::listener`]) is bound.

use std::net::SocketAddr;

use super::values::{address, flag_or_key};
use super::{invalid, ConfigError, RawConfig};
use crate::cli::RunArgs;
use crate::listener::{Listener, Listens};

/// `[listen]` and the `--*-listen` flags: a flag over its key, the table's
/// default address where neither names one. `"off"` (or an empty value, or
/// `false` in the file) turns any listener off.
pub(super) fn listen(raw: &RawConfig, flags: &RunArgs) -> Result<Listens, ConfigError> {
    let mut listens = Listens::default();
    let mut named: Vec<(&'static str, SocketAddr)> = Vec::new();
    for &listener in Listener::ALL {
        let spec = listener.spec();
        let key = raw.listen.get(listener).clone();
        let addr = match flag_or_key((spec.flag, flags.listen(listener)), (spec.key, &key)) {
            (_, Some(text)) if is_off(text) => None,
            (name, Some(text)) => {
                if let Some(why) = spec.needs_linux {
                    if !cfg!(any(target_os = "linux", target_os = "android")) {
                        return Err(invalid(name, why));
                    }
                }
                Some((name, address(name, text)?))
            }
            (_, None) => listener.default_addr().map(|a| (spec.key, a)),
        };
        if let Some((name, addr)) = addr {
            if let Some((other, taken)) = named.iter().find(|(_, a)| clash(*a, addr)) {
                return Err(invalid(
                    name,
                    format!(
                        "{addr} is where {other} listens ({taken}): two listeners cannot share \
                         an address; give each its own port"
                    ),
                ));
            }
            named.push((name, addr));
        }
        listens.set(listener, addr.map(|(_, a)| a));
    }
    Ok(listens)
}

/// A listener's value that turns it off.
pub(crate) fn is_off(text: &str) -> bool {
    text.is_empty() || text.eq_ignore_ascii_case(super::raw::OFF)
}

/// Two listen addresses one machine cannot bind both: the same port (not 0,
/// which picks a free one) on the same address, or on all addresses and one.
fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}
