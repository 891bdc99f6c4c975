//! Any bytes as what a web client sends the HTTP listener: its request
//! target (absolute-form, authority-form for `CONNECT`, origin-form on a
//! tunnel), a `Host`, a `Proxy-Authorization`, a `Retry-After` from an
//! upstream, and the text of a refusal in `Proxy-Status`. A target that is
//! accepted is canonical (it reads back as itself); nothing panics; the
//! header the proxy writes is one valid header value whatever the text.
#![no_main]

use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Uri};
use libfuzzer_sys::fuzz_target;
use robots_proxy::protocols::http::wire::{
    asked, basic_credentials, host_named, on_server, proxy_status, retry_after, Asked,
};
use robots_proxy::target::{Scheme, Target};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(uri) = text.parse::<Uri>() {
        for method in [Method::GET, Method::CONNECT] {
            match asked(&method, &uri) {
                Ok(Asked::Url(target)) => {
                    let again = Target::parse(&target.url()).expect("a canonical URL parses");
                    assert_eq!(again.url(), target.url());
                    assert!(matches!(target.scheme, Scheme::Http | Scheme::Https));
                    assert!(!target.host.bytes().any(|b| b.is_ascii_uppercase()));
                }
                Ok(Asked::Connect { host, port }) => {
                    assert!(port > 0 && !host.is_empty() && !host.contains('%'));
                }
                Err(_) => {}
            }
        }
        if let Ok(target) = on_server(Scheme::Https, ("example.org", 443), &uri) {
            assert_eq!(target.host, "example.org");
            assert_eq!(Target::parse(&target.url()).unwrap().url(), target.url());
        }
    }
    if let Ok(value) = HeaderValue::from_bytes(data) {
        let mut headers = HeaderMap::new();
        headers.insert("host", value.clone());
        headers.insert("proxy-authorization", value.clone());
        headers.insert("retry-after", value);
        let _ = host_named(Scheme::Http, &Uri::from_static("/"), &headers);
        let _ = basic_credentials(&headers);
        let _ = retry_after(&headers);
    }
    let status = proxy_status("robots-proxy-0", "http_request_denied", &text);
    HeaderValue::from_str(&status).expect("a valid header value");
});
