//! `errand-fetch URL...`: fetch each URL with the `errand` crate and print one
//! line per URL: the URL, the protocol's status (`-` for Nex, which has none),
//! the meta field and the body, tab-separated, the body escaped onto one line.
//! `submit:URL DATA` sends DATA as a Spartan upload (`errand::spartan_submit`).

use std::io::Write;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut out = std::io::stdout().lock();
    for arg in std::env::args().skip(1) {
        let result = match arg.strip_prefix("submit:") {
            Some(rest) => {
                let (url, data) = rest.split_once(' ').unwrap_or((rest, ""));
                match errand::Url::parse(url) {
                    Ok(url) => errand::spartan_submit(&url, data.as_bytes()).await,
                    Err(e) => Err(errand::Error::BadUrl(e.to_string())),
                }
            }
            None => errand::fetch(&arg).await,
        };
        let line = match result {
            Ok(r) => {
                let status = r.raw_status.map_or("-".to_string(), |s| s.to_string());
                let body = String::from_utf8_lossy(&r.body);
                format!("{arg}\t{status}\t{}\t{}", r.meta, body.escape_debug())
            }
            Err(e) => format!("{arg}\terror\t{e}\t"),
        };
        if writeln!(out, "{line}").is_err() {
            return;
        }
    }
}
