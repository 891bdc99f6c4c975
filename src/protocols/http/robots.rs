//! robots.txt over HTTP(S), as RFC 9309 §2.3.1 says:
//!
//! | answer | outcome |
//! | --- | --- |
//! | `2xx` | the body is parsed (at most 500 KiB read; an HTML page reads as no rules); its `ETag` and `Last-Modified` kept |
//! | `304` to a conditional request | the kept copy stands, fresh again (to an unconditional one: unreachable) |
//! | `3xx` | followed, at most 5 hops, other hosts too (each through the proxy's address rules); a loop or a 6th hop: no robots.txt |
//! | `4xx` but `429` | no robots.txt ("unavailable": everything allowed) |
//! | `429`, `5xx` | unreachable (everything disallowed); `Retry-After` says when to try again |
//! | connect, TLS or header errors, timeout | unreachable |
//!
//! Asked with `[http] robots_user_agent` and `Accept-Encoding: identity`,
//! one connection per hop, closed after it. A copy kept with validators is
//! asked for again with `If-None-Match` / `If-Modified-Since` (RFC 9110
//! §13.1), on every hop.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::header::{self, HeaderValue};
use hyper::{Request, StatusCode};
use tokio::io::{AsyncRead, AsyncWrite};

use super::wire;
use crate::fetch::outcome::{within, FetchFuture, FetchOutcome, RobotsFetcher, Validators};
use crate::fetch::{Hops, MAX_REDIRECTS};
use crate::robots::PARSE_LIMIT;
use crate::target::{Scheme, Server, Target};
use crate::upstream::{Trust, Upstream};

pub struct HttpRobots {
    upstream: Arc<Upstream>,
    /// The whole fetch, redirects included, must end within this.
    timeout: Duration,
    /// `[http] robots_user_agent`.
    user_agent: HeaderValue,
}

impl HttpRobots {
    pub fn new(upstream: Arc<Upstream>, timeout: Duration, user_agent: &str) -> HttpRobots {
        let user_agent = HeaderValue::from_str(user_agent)
            .unwrap_or_else(|_| HeaderValue::from_static("robots-proxy"));
        HttpRobots {
            upstream,
            timeout,
            user_agent,
        }
    }

    async fn fetch_url(&self, server: &Server, since: Option<&Validators>) -> FetchOutcome {
        let key = &server.name;
        let mut url = format!(
            "{}://{}:{}/robots.txt",
            key.scheme.as_str(),
            key.host,
            key.port
        );
        let mut hops = Hops::default();
        for _hop in 0..=MAX_REDIRECTS {
            let target = match hops.next(&url, |s| matches!(s, Scheme::Http | Scheme::Https)) {
                Ok(target) => target,
                Err(ended) => return ended,
            };
            // The host's own robots.txt goes to the addresses it was resolved
            // to for this request; a redirect elsewhere is resolved afresh,
            // through the same address rules.
            let addrs = if target.host == key.host && target.port == key.port {
                server.addrs.clone()
            } else {
                match self.upstream.resolve(&target.host, target.port).await {
                    Ok(addrs) => addrs,
                    Err(e) => return FetchOutcome::unreachable(e.to_string()),
                }
            };
            let answer = match target.scheme {
                Scheme::Https => match self
                    .upstream
                    .connect_tls(&target.host, target.port, &addrs, Trust::Roots)
                    .await
                {
                    Ok(tls) => self.ask(tls, &target, since).await,
                    Err(e) => return FetchOutcome::unreachable(e.to_string()),
                },
                _ => match self.upstream.connect_tcp(&target.host, &addrs).await {
                    Ok(tcp) => self.ask(tcp, &target, since).await,
                    Err(e) => return FetchOutcome::unreachable(e.to_string()),
                },
            };
            match answer {
                Asked::Done(outcome) => return outcome,
                Asked::Redirect(location) => url = resolve_redirect(&target, &location),
            }
        }
        FetchOutcome::TooManyRedirects(format!(
            "robots.txt redirects more than {MAX_REDIRECTS} times"
        ))
    }

    /// One `GET` over `stream` (conditional when `since` names a kept
    /// copy), and what its answer means.
    async fn ask<S>(&self, stream: S, target: &Target, since: Option<&Validators>) -> Asked
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (mut sender, _connection) = match super::client::open(stream).await {
            Ok(pair) => pair,
            Err(e) => return Asked::Done(FetchOutcome::unreachable(e.to_string())),
        };
        let path = match &target.resource {
            crate::target::Resource::Path(p) => p.as_str(),
            _ => "/robots.txt",
        };
        let mut request = Request::get(path)
            .header(header::HOST, wire::host_header(target))
            .header(header::USER_AGENT, self.user_agent.clone())
            .header(header::ACCEPT_ENCODING, "identity")
            .header(header::CONNECTION, "close");
        if let Some(since) = since {
            if let Some(etag) = &since.etag {
                request = request.header(header::IF_NONE_MATCH, &**etag);
            }
            if let Some(date) = &since.last_modified {
                request = request.header(header::IF_MODIFIED_SINCE, &**date);
            }
        }
        let request = request.body(http_body_util::Empty::<hyper::body::Bytes>::new());
        let Ok(request) = request else {
            return Asked::Done(FetchOutcome::unreachable("the request could not be built"));
        };
        let response = match sender.send_request(request).await {
            Ok(r) => r,
            Err(e) => {
                return Asked::Done(FetchOutcome::unreachable(format!("asking: {e}")));
            }
        };
        let status = response.status();
        if status == StatusCode::NOT_MODIFIED {
            return Asked::Done(match since {
                Some(_) => FetchOutcome::NotModified(kept_for(response.headers())),
                None => {
                    FetchOutcome::unreachable("robots.txt answered 304 to an unconditional request")
                }
            });
        }
        if status.is_redirection() {
            return match response
                .headers()
                .get(header::LOCATION)
                .and_then(|l| l.to_str().ok())
            {
                Some(location) => Asked::Redirect(location.trim().to_string()),
                None => Asked::Done(FetchOutcome::Missing(format!(
                    "robots.txt answered {status} without a Location"
                ))),
            };
        }
        if status.is_success() {
            let max_age = kept_for(response.headers());
            let text = |name| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v: &HeaderValue| v.to_str().ok())
            };
            let validators = Validators::new(text(header::ETAG), text(header::LAST_MODIFIED));
            return Asked::Done(match read_capped(response.into_body()).await {
                FetchOutcome::Found(body) => {
                    FetchOutcome::FoundFor(body, max_age, validators).judged()
                }
                other => other,
            });
        }
        if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
            let retry_after = wire::retry_after(response.headers());
            return Asked::Done(FetchOutcome::Unreachable {
                why: format!("robots.txt answered {status}"),
                retry_after,
            });
        }
        // 4xx (and anything else): "unavailable", everything allowed.
        Asked::Done(FetchOutcome::Missing(format!(
            "robots.txt answered {status}"
        )))
    }
}

/// RFC 9309 §2.4: kept at most 24 hours, less when the server says so by
/// `Cache-Control: max-age`.
fn kept_for(headers: &hyper::HeaderMap) -> Duration {
    max_age(headers).unwrap_or(MAX_AGE).min(MAX_AGE)
}

/// The longest a web robots.txt is kept (RFC 9309 §2.4), whatever
/// `robots.ttl` says.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// `Cache-Control: max-age=N` (`no-store`, `no-cache` and `max-age=0` are 0
/// s: kept the least the cache keeps anything, a minute).
fn max_age(headers: &hyper::HeaderMap) -> Option<Duration> {
    let mut found = None;
    for value in headers.get_all(header::CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',').map(str::trim) {
            let (name, arg) = directive.split_once('=').unwrap_or((directive, ""));
            let seconds = match name.to_ascii_lowercase().as_str() {
                "no-store" | "no-cache" => Some(0),
                "max-age" => arg.trim_matches('"').parse::<u64>().ok(),
                _ => None,
            };
            if let Some(s) = seconds {
                found = Some(found.map_or(s, |f: u64| f.min(s)));
            }
        }
    }
    found.map(Duration::from_secs)
}

/// What one hop's answer says.
enum Asked {
    Done(FetchOutcome),
    Redirect(String),
}

/// The body, up to the parse limit and a byte (more would only cost
/// memory; the parser reads the first 500 KiB). A body cut short by an error
/// before anything arrived is unreachable.
async fn read_capped(mut body: hyper::body::Incoming) -> FetchOutcome {
    let mut got = Vec::new();
    while got.len() <= PARSE_LIMIT {
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let room = PARSE_LIMIT + 1 - got.len();
                    got.extend_from_slice(&data[..data.len().min(room)]);
                }
            }
            Some(Err(e)) if got.is_empty() => {
                return FetchOutcome::unreachable(format!("reading robots.txt: {e}"))
            }
            Some(Err(_)) | None => break,
        }
    }
    FetchOutcome::Found(got)
}

/// A `Location` against the URL that answered it (absolute, `//host/…`,
/// `/path` or relative).
fn resolve_redirect(base: &Target, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let scheme = base.scheme.as_str();
    if let Some(rest) = location.strip_prefix("//") {
        return format!("{scheme}://{rest}");
    }
    let origin = format!("{scheme}://{}:{}", base.host, base.port);
    if location.starts_with('/') {
        return format!("{origin}{location}");
    }
    format!("{origin}/{location}")
}

impl RobotsFetcher for HttpRobots {
    fn fetch<'a>(&'a self, server: &'a Server, _bot: Option<&'a str>) -> FetchFuture<'a> {
        Box::pin(within(self.timeout, self.fetch_url(server, None)))
    }

    fn fetch_since<'a>(
        &'a self,
        server: &'a Server,
        _bot: Option<&'a str>,
        since: &'a Validators,
    ) -> FetchFuture<'a> {
        Box::pin(within(self.timeout, self.fetch_url(server, Some(since))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_resolve_against_the_answering_url() {
        let base = Target::parse("https://example.org/robots.txt").unwrap();
        let cases = [
            ("http://other.example/r.txt", "http://other.example/r.txt"),
            ("//other.example/r.txt", "https://other.example/r.txt"),
            ("/r.txt", "https://example.org:443/r.txt"),
            ("r.txt", "https://example.org:443/r.txt"),
        ];
        for (location, want) in cases {
            assert_eq!(resolve_redirect(&base, location), want, "{location}");
        }
    }
}
