//! `[listen]` and the `--*-listen` flags: where each listener of the table
//! ([`crate::listener`]) is bound.

use super::values::{address, flag_or_key};
use super::{invalid, ConfigError, RawConfig};
use crate::cli::RunArgs;
use crate::listener::{Listener, Listens};

/// `[listen]` and the `--*-listen` flags: a flag over its key, the table's
/// default address where neither names one. A listener off by default stays
/// off for an empty key too.
pub(super) fn listen(raw: &RawConfig, flags: &RunArgs) -> Result<Listens, ConfigError> {
    let mut listens = Listens::default();
    for &listener in Listener::ALL {
        let spec = listener.spec();
        let key = match spec.default_port {
            Some(_) => raw.listen.get(listener).clone(),
            None => raw.listen.get(listener).clone().filter(|k| !k.is_empty()),
        };
        let addr = match flag_or_key((spec.flag, flags.listen(listener)), (spec.key, &key)) {
            (name, Some(text)) => {
                if let Some(why) = spec.needs_linux {
                    if !cfg!(any(target_os = "linux", target_os = "android")) {
                        return Err(invalid(name, why));
                    }
                }
                Some(address(name, text)?)
            }
            (_, None) => listener.default_addr(),
        };
        listens.set(listener, addr);
    }
    Ok(listens)
}
