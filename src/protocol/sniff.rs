//! What a connection's first bytes say it speaks, on the listeners that are not
//! told (SOCKS5 after `CONNECT`, the transparent listener): a TLS ClientHello is
//! Gemini, anything else a Gopher selector line (an HTTP request line is caught
//! when the line is parsed). TLS that is plainly the web is neither.

/// The port Gemini servers listen on: TLS there is Gemini, whatever else it offers.
pub const GEMINI_PORT: u16 = 1965;

/// `METHOD SP TARGET SP HTTP/x`: an HTTP/1 request line (or HTTP/2's preface
/// `PRI * HTTP/2.0`). No Gopher selector, Spartan or Nex request has this shape by
/// chance:
/// an upper-case word, one space, a word, one space, and `HTTP/`.
pub fn looks_like_http(line: &[u8]) -> bool {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    (1..=16).contains(&method.len())
        && method.iter().all(u8::is_ascii_uppercase)
        && !target.is_empty()
        && version.starts_with(b"HTTP/")
}

/// Does a connection that starts with `first` open with a TLS handshake record?
pub fn looks_like_tls(first: &[u8]) -> bool {
    first.first() == Some(&0x16)
}

/// Is a TLS connection to `port` plainly the web rather than Gemini? Its client
/// offered application protocols by ALPN and every one is HTTP, or the port is
/// a web port (`web_port`: one of `socks5.https_ports`). Never on Gemini's own
/// port: a TLS client there is answered in Gemini (`59` for an HTTP request).
pub fn plainly_web<'a>(
    alpn: Option<impl Iterator<Item = &'a [u8]>>,
    port: u16,
    web_port: bool,
) -> bool {
    if port == GEMINI_PORT {
        return false;
    }
    let web_alpn = alpn.is_some_and(|mut offered| {
        let mut any = false;
        let all_web = offered.all(|p| {
            any = true;
            matches!(p, b"h2" | b"h3" | b"http/1.1" | b"http/1.0" | b"spdy/3.1")
        });
        any && all_web
    });
    web_alpn || web_port
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alpn<'a>(list: &'a [&'a [u8]]) -> Option<impl Iterator<Item = &'a [u8]>> {
        Some(list.iter().copied())
    }
    const NONE: Option<std::iter::Empty<&[u8]>> = None;

    #[test]
    fn a_client_hello_is_tls_and_a_selector_is_not() {
        assert!(looks_like_tls(&[0x16, 0x03, 0x01, 0x02, 0x00]));
        assert!(!looks_like_tls(b"/selector\r\n"));
        assert!(!looks_like_tls(b"\r\n"));
        assert!(!looks_like_tls(b""));
    }

    #[test]
    fn web_tls_is_told_by_alpn_or_port_but_never_on_geminis_port() {
        // A browser or HTTP library: only HTTP offered.
        assert!(plainly_web(alpn(&[b"h2", b"http/1.1"]), 443, false));
        assert!(plainly_web(alpn(&[b"http/1.1"]), 8443, false));
        // Gemini clients offer nothing, or "gemini".
        assert!(!plainly_web(NONE, 7000, false));
        assert!(!plainly_web(alpn(&[b"gemini"]), 7000, false));
        assert!(!plainly_web(alpn(&[b"h2", b"gemini"]), 7000, false));
        // An empty ALPN list offers nothing: not the web.
        assert!(!plainly_web(alpn(&[]), 7000, false));
        // A web port, whatever is offered.
        assert!(plainly_web(NONE, 443, true));
        // Gemini's port stays Gemini.
        assert!(!plainly_web(alpn(&[b"h2"]), GEMINI_PORT, false));
        assert!(!plainly_web(NONE, GEMINI_PORT, true));
    }
}
