//! What a robots.txt fetch can end in, whatever the protocol, and what a
//! fetcher is.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::metrics::FetchKind;
use crate::target::Server;

/// How a fetch ended (docs/architecture.md, "Fetching robots.txt").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// A robots.txt body (at most the parse limit plus one byte).
    Found(Vec<u8>),
    /// A robots.txt body its server says to keep at most this long (an
    /// HTTP `Cache-Control: max-age`): kept for the shorter of it and
    /// `robots.ttl`, never less than [`MIN_FRESH`]; with what the server
    /// names its version by, to ask next time whether it changed.
    FoundFor(Vec<u8>, Duration, Validators),
    /// The server says the copy asked about ([`RobotsFetcher::fetch_since`])
    /// is still its robots.txt (HTTP `304 Not Modified`): kept again, for at
    /// most this long, as [`FetchOutcome::FoundFor`] is.
    NotModified(Duration),
    /// There is no robots.txt: everything is allowed (RFC 9309 §2.3.1.3).
    Missing(String),
    /// A redirect loop or more than five redirects: treated as no robots.txt
    /// (RFC 9309 §2.3.1.2), counted apart.
    TooManyRedirects(String),
    /// The host could not be asked: connect, TLS, timeout, a temporary failure.
    Unreachable {
        why: String,
        /// When the host said to try again (a Gemini `44 N`).
        retry_after: Option<Duration>,
    },
}

impl FetchOutcome {
    /// The host could not be asked, with no hint of when to try again.
    pub fn unreachable(why: impl Into<String>) -> FetchOutcome {
        FetchOutcome::Unreachable {
            why: why.into(),
            retry_after: None,
        }
    }
}

/// The least a robots.txt is kept, whatever its server says: a minute.
pub const MIN_FRESH: Duration = Duration::from_secs(60);

impl FetchOutcome {
    /// How long this outcome's robots.txt is kept when `ttl` is the most.
    pub fn fresh_for(&self, ttl: Duration) -> Duration {
        match self {
            FetchOutcome::FoundFor(_, max_age, _) | FetchOutcome::NotModified(max_age) => {
                ttl.min(*max_age).max(MIN_FRESH)
            }
            _ => ttl,
        }
    }

    /// A body that holds no robots.txt field line and is no text either
    /// (binary junk, a NUL, control bytes) is not "an empty robots.txt": it
    /// is no answer to the question asked, so the host counts as unreachable
    /// and its rules fail closed, never as "allow all".
    pub fn judged(self) -> FetchOutcome {
        match self {
            FetchOutcome::Found(body) | FetchOutcome::FoundFor(body, ..)
                if !is_text(&body) && crate::robots::RobotsTxt::parse(&body).field_lines() == 0 =>
            {
                FetchOutcome::unreachable(format!(
                    "the answer to robots.txt is {} bytes of binary data, not a robots.txt",
                    body.len()
                ))
            }
            outcome => outcome,
        }
    }
}

/// Whether `bytes` read as a text page: UTF-8 with no control character
/// but tab, CR, LF and form feed. Servers say a file is missing in text (an
/// error page, an error menu); what is not text says nothing of the kind.
pub fn is_text(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(text) => !text
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n' | '\x0c')),
        Err(_) => false,
    }
}

/// `fetch`'s outcome, or unreachable if it has not ended within `timeout`
/// (the whole fetch: every request and redirect of it).
pub async fn within(timeout: Duration, fetch: impl Future<Output = FetchOutcome>) -> FetchOutcome {
    tokio::time::timeout(timeout, fetch)
        .await
        .unwrap_or_else(|_| {
            FetchOutcome::unreachable(format!("robots.txt not fetched within {timeout:?}"))
        })
}

/// A robots.txt body read to its end (at most the parse limit and a byte:
/// reading further would only cost memory). A server that closes without TLS
/// `close_notify` still sent its body; another error makes it unreachable.
pub async fn read_body<R: tokio::io::AsyncRead + Unpin>(reader: &mut R) -> FetchOutcome {
    use tokio::io::AsyncReadExt;
    let mut body = Vec::new();
    match reader
        .take(crate::robots::PARSE_LIMIT as u64 + 1)
        .read_to_end(&mut body)
        .await
    {
        Ok(_) => FetchOutcome::Found(body),
        Err(e) if !body.is_empty() && e.kind() == std::io::ErrorKind::UnexpectedEof => {
            FetchOutcome::Found(body)
        }
        Err(e) => FetchOutcome::unreachable(format!("reading the body: {e}")),
    }
}

/// A success answer to a robots.txt request with a MIME type (Gemini `20`,
/// Spartan `2`): its body when the type is text, else no robots.txt.
pub async fn text_body<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut R,
    mime: &str,
) -> FetchOutcome {
    if mime.trim_start().to_ascii_lowercase().starts_with("text/") {
        read_body(reader).await
    } else {
        FetchOutcome::Missing(format!("robots.txt is {mime:?}, not text"))
    }
}

/// A boxed future, so fetchers can be chosen at run time and faked in tests.
pub type FetchFuture<'a> = Pin<Box<dyn Future<Output = FetchOutcome> + Send + 'a>>;

/// Something that fetches robots.txt for a host, from the addresses it was
/// resolved to. `bot`: the token to name in the request where the protocol
/// can carry it (`robots.name_bot_in_request`): the bot whose request caused
/// the fetch.
pub trait RobotsFetcher: Send + Sync {
    fn fetch<'a>(&'a self, server: &'a Server, bot: Option<&'a str>) -> FetchFuture<'a>;

    /// Fetches again a robots.txt whose last copy its server named by
    /// `since`: a server that can say "not changed" answers
    /// [`FetchOutcome::NotModified`]. Fetchers of protocols that cannot ask
    /// so fetch it whole.
    fn fetch_since<'a>(
        &'a self,
        server: &'a Server,
        bot: Option<&'a str>,
        since: &'a Validators,
    ) -> FetchFuture<'a> {
        let _ = since;
        self.fetch(server, bot)
    }
}

/// What a server names a version of its robots.txt by (HTTP `ETag` and
/// `Last-Modified`), sent back to ask whether it changed (`If-None-Match`,
/// `If-Modified-Since`). Each at most [`Validators::MAX_LEN`] bytes of
/// visible ASCII, else not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Validators {
    pub etag: Option<Box<str>>,
    pub last_modified: Option<Box<str>>,
}

impl Validators {
    /// The longest validator kept: longer ones are not worth a conditional request.
    pub const MAX_LEN: usize = 256;

    /// Validators from the values a server sent; unusable ones are dropped.
    pub fn new(etag: Option<&str>, last_modified: Option<&str>) -> Validators {
        let usable = |v: Option<&str>| {
            v.map(str::trim)
                .filter(|v| {
                    !v.is_empty()
                        && v.len() <= Validators::MAX_LEN
                        && v.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
                })
                .map(Box::from)
        };
        Validators {
            etag: usable(etag),
            last_modified: usable(last_modified),
        }
    }

    /// Whether there is anything to ask with.
    pub fn is_empty(&self) -> bool {
        self.etag.is_none() && self.last_modified.is_none()
    }

    /// The bytes they hold, for the cache's weight.
    pub fn heap_size(&self) -> usize {
        self.etag.as_ref().map_or(0, |e| e.len() + 16)
            + self.last_modified.as_ref().map_or(0, |l| l.len() + 16)
    }
}

impl FetchOutcome {
    /// The outcome as the metrics count it.
    pub fn kind(&self) -> FetchKind {
        match self {
            FetchOutcome::Found(_) | FetchOutcome::FoundFor(..) => FetchKind::Found,
            FetchOutcome::NotModified(_) => FetchKind::NotModified,
            FetchOutcome::Missing(_) => FetchKind::Missing,
            FetchOutcome::Unreachable { .. } => FetchKind::Unreachable,
            FetchOutcome::TooManyRedirects(_) => FetchKind::RedirectLimit,
        }
    }
}
