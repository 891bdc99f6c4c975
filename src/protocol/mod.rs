//! The protocols the proxy serves to crawlers, each a unit of its own
//! ([`crate::protocols::gemini`], [`crate::protocols::gopher`], [`crate::protocols::spartan`], [`crate::protocols::nex`]:
//! wire format, serving, robots.txt), named here once: the `protocol` label
//! and the URL scheme. What is shared below them: the line reader ([`line`]),
//! which protocol a port speaks ([`ports`]) and what first bytes say
//! ([`sniff`]). Pure, but for the line reader.

use crate::target::Scheme;

pub mod line;
pub mod ports;
pub mod rules;
pub mod sniff;

pub use line::{read_line, LineError};
pub use ports::PortTable;

/// The most data an upload (a Spartan request with data, a `titan://` URL)
/// may announce: a larger one is refused before anything is read or sent (a
/// guestbook post or a small file fits; a crawler has no reason to send more).
pub const MAX_UPLOAD: u64 = 16 << 20;

label_set! {
    /// A protocol the proxy serves (and its `protocol` label).
    pub enum Protocol {
        Gemini => "gemini",
        Gopher => "gopher",
        Spartan => "spartan",
        Nex => "nex",
        /// The web in plain text (`http://` URLs).
        Http => "http",
        /// The web over TLS (`https://` URLs).
        Https => "https",
    }
}

/// A line of text the proxy writes into an answer (a status line's meta, a
/// refusal's first line): control characters made spaces, so it cannot end
/// early or mislead a terminal, and cut at `max` bytes on a character boundary.
pub fn one_line(text: &str, max: usize) -> String {
    let mut clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.len() > max {
        let mut cut = max;
        while !clean.is_char_boundary(cut) {
            cut -= 1;
        }
        clean.truncate(cut);
    }
    clean
}

/// A status line the proxy writes: `status SP meta CRLF`, the meta one line
/// of at most 1024 bytes (Spartan's shape, and Gemini's for its two-digit
/// statuses).
pub fn status_line(status: u8, meta: &str) -> Vec<u8> {
    format!("{status} {}\r\n", one_line(meta, 1024)).into_bytes()
}

/// What follows a status line's status (Gemini, Spartan): nothing, or a
/// space and the meta. A meta that is not UTF-8, or holds a CR, a NUL, an
/// escape sequence… is no header a client should be handed (it could end the
/// line early or mislead a terminal): the answer is malformed.
pub fn status_meta(rest: &[u8]) -> Result<&str, &'static str> {
    match rest {
        [] => Ok(""),
        [b' ', meta @ ..] => {
            let meta = std::str::from_utf8(meta).map_err(|_| "meta is not UTF-8")?;
            match meta.chars().any(char::is_control) {
                true => Err("control character in meta"),
                false => Ok(meta),
            }
        }
        _ => Err("no space after the status"),
    }
}

impl Protocol {
    /// The URL scheme that names it.
    pub fn scheme(self) -> Scheme {
        match self {
            Protocol::Gemini => Scheme::Gemini,
            Protocol::Gopher => Scheme::Gopher,
            Protocol::Spartan => Scheme::Spartan,
            Protocol::Nex => Scheme::Nex,
            Protocol::Http => Scheme::Http,
            Protocol::Https => Scheme::Https,
        }
    }

    /// The ports `[ports]` gives it unless set: its scheme's, and for
    /// HTTPS the usual alternative, 8443, too.
    pub fn default_ports(self) -> &'static [u16] {
        match self {
            Protocol::Gemini => &[1965],
            Protocol::Gopher => &[70],
            Protocol::Spartan => &[300],
            Protocol::Nex => &[1900],
            Protocol::Http => &[80],
            Protocol::Https => &[443, 8443],
        }
    }

    /// The protocol called `name` (its label, as `[ports]` keys write it).
    pub fn named(name: &str) -> Option<Protocol> {
        Protocol::ALL.iter().copied().find(|p| p.as_str() == name)
    }

    /// The protocol a scheme names, if the proxy serves it (Titan's uploads
    /// are Gemini's, and have no protocol of their own).
    pub fn of(scheme: Scheme) -> Option<Protocol> {
        Protocol::ALL.iter().copied().find(|p| p.scheme() == scheme)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_protocol_is_its_scheme() {
        for &p in Protocol::ALL {
            assert_eq!(Protocol::of(p.scheme()), Some(p));
            assert_eq!(p.as_str(), p.scheme().as_str());
        }
        assert_eq!(Protocol::of(Scheme::Titan), None);
        for &p in Protocol::ALL {
            assert!(p.default_ports().contains(&p.scheme().default_port()));
        }
    }
}
