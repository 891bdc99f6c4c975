//! The four shapes of robots.txt outcome the cache benchmarks fill with,
//! chosen by the number in the host's name (`h<N>.…`): no robots.txt,
//! unreachable, a 3-line robots.txt, the 50-rule benchmark file. Included by
//! `benches/cache_memory.rs` and `benches/scale.rs` (`#[path]`).

use robots_proxy::fetch::{FetchFuture, FetchOutcome, RobotsFetcher};
use robots_proxy::target::Server;

/// Answers at once, in the shape `N % 4` names.
pub struct Shapes;

impl RobotsFetcher for Shapes {
    fn fetch<'a>(&'a self, server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        let n: usize = server.name.host[1..]
            .split('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Box::pin(async move {
            match n % 4 {
                0 => FetchOutcome::Missing("51 Not found".into()),
                1 => FetchOutcome::Unreachable {
                    why: "cannot connect to 192.0.2.1:1965: connection refused".into(),
                    retry_after: None,
                },
                2 => FetchOutcome::Found(
                    b"User-agent: *\nDisallow: /private\nCrawl-delay: 2\n".to_vec(),
                ),
                _ => FetchOutcome::Found(include_bytes!("../data/robots-50-rules.txt").to_vec()),
            }
        })
    }
}

/// Resident memory of this process, in bytes.
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
