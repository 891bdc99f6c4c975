//! The proxy's own answers on the web, and the body of every answer: a
//! refusal's status, `Proxy-Status`, `Retry-After` and text; the upstream's
//! body, relayed.

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use hyper::body::{Body as HttpBody, Bytes, Frame, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::wire;
use crate::access::Denied;
use crate::refusal::{ProxyRule, Refusal};

/// The answer to a refusal: its status, `Proxy-Status`, `Retry-After`
/// where it says when, and its text; `Connection: close` when the request's
/// body is left unread.
pub fn refused(refusal: &Refusal, close: bool) -> Response<Body> {
    let answer = wire::answer_for(refusal);
    let text = refusal.detail();
    let mut response = Response::new(Body::full(format!("{text}\n")));
    *response.status_mut() = answer.status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Ok(v) =
        HeaderValue::from_str(&wire::proxy_status(wire::pseudonym(), answer.error, &text))
    {
        headers.insert("proxy-status", v);
    }
    if let Refusal::Denied(Denied::ProxyAuth) = refusal {
        headers.insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"robots-proxy\""),
        );
    }
    if let Refusal::ProxyRule(ProxyRule::Method { allowed, .. }) = refusal {
        if let Ok(v) = HeaderValue::from_str(&allowed.join(", ")) {
            headers.insert(header::ALLOW, v);
        }
    }
    if let Some(secs) = answer.retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if close || answer.status == StatusCode::BAD_REQUEST {
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// An answer's body: the proxy's own text, or the upstream's, relayed.
pub enum Body {
    Full(Option<Bytes>),
    /// The upstream's body, as the relay streams it (its type is the
    /// relay's: erased, so answers need not know how relaying is done).
    Relayed(Pin<Box<dyn HttpBody<Data = Bytes, Error = std::io::Error> + Send>>),
}

impl Body {
    pub fn full(text: impl Into<Bytes>) -> Body {
        Body::Full(Some(text.into()))
    }
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Body::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Body::Relayed(relayed) => relayed.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(data) => data.is_none(),
            Body::Relayed(relayed) => relayed.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(data)) => SizeHint::with_exact(data.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            Body::Relayed(relayed) => relayed.size_hint(),
        }
    }
}
