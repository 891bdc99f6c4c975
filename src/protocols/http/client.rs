//! The proxy as a client of a web server (a relayed request, a robots.txt
//! fetch): one connection, HTTP/1.1 or (for a relayed request, when the
//! server chose it by ALPN) HTTP/2, driven by a task of its own that ends
//! when the caller is done with it.

use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper::client::conn::{http2, TrySendError};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};

use super::wire::MAX_HEADERS;

/// The longest answer head read from a web server.
pub const MAX_ANSWER_HEAD: usize = 64 * 1024;

/// The task driving one upstream connection: aborted when dropped, so the
/// connection closes with its last use.
pub struct Connection(tokio::task::JoinHandle<()>);

impl Connection {
    /// Closes the connection now, for every request sharing it (HTTP/2): it
    /// failed one of them (no answer in time, a broken stream, a `GOAWAY`
    /// mid-answer), and is not to be asked again.
    pub fn close(&self) {
        self.0.abort();
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// HTTP/1.1 over `stream`: what sends the request, and the connection.
pub async fn open<S, B>(stream: S) -> hyper::Result<(SendRequest<B>, Connection)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = Builder::new();
    builder
        .max_buf_size(MAX_ANSWER_HEAD)
        .max_headers(MAX_HEADERS);
    let (sender, connection) = builder.handshake(TokioIo::new(stream)).await?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((sender, Connection(task)))
}

/// The longest HTTP/2 header list read from a web server (as
/// [`MAX_ANSWER_HEAD`] for HTTP/1.1).
const MAX_HEADER_LIST: u32 = MAX_ANSWER_HEAD as u32;

/// HTTP/2 over `stream` (the server chose `h2` by ALPN): what sends requests,
/// any number at once as the server allows, and the connection.
pub async fn open_h2<S, B>(stream: S) -> hyper::Result<(http2::SendRequest<B>, Connection)>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    B: Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder.max_header_list_size(MAX_HEADER_LIST);
    let (sender, connection) = builder.handshake(TokioIo::new(stream)).await?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok((sender, Connection(task)))
}

/// What sends requests on one upstream connection, whichever HTTP it speaks.
pub enum Sender<B> {
    /// HTTP/1.1: one request at a time.
    H1(SendRequest<B>),
    /// HTTP/2: requests share the connection (a clone sends on it too).
    H2(http2::SendRequest<B>),
}

impl<B> Sender<B>
where
    B: Body + 'static,
{
    /// Ready for a request: HTTP/1.1's last answer read, or the HTTP/2
    /// connection still open.
    pub async fn ready(&mut self) -> hyper::Result<()> {
        match self {
            Sender::H1(s) => s.ready().await,
            Sender::H2(s) => s.ready().await,
        }
    }

    /// Sends `request`; one the connection could not take (closed
    /// meanwhile) comes back in the error, unsent.
    pub async fn try_send(
        &mut self,
        request: Request<B>,
    ) -> Result<Response<Incoming>, TrySendError<Request<B>>> {
        match self {
            Sender::H1(s) => s.try_send_request(request).await,
            Sender::H2(s) => s.try_send_request(request).await,
        }
    }

    pub fn is_closed(&self) -> bool {
        match self {
            Sender::H1(s) => s.is_closed(),
            Sender::H2(s) => s.is_closed(),
        }
    }

    /// Whether its connection is shared by requests at once (HTTP/2).
    pub fn is_shared(&self) -> bool {
        matches!(self, Sender::H2(_))
    }

    /// A second sender on the same connection, if it can share one (HTTP/2).
    pub fn shared(&self) -> Option<Sender<B>> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
        }
    }
}
