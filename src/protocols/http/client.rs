//! The proxy as an HTTP/1.1 client of a web server (a relayed request, a
//! robots.txt fetch): one connection, driven by a task of its own that
//! ends when the caller is done with it.

use hyper::body::Body;
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::wire::MAX_HEADERS;

/// The longest answer head read from a web server.
pub const MAX_ANSWER_HEAD: usize = 64 * 1024;

/// The task driving one upstream connection: aborted when dropped, so the
/// connection closes with its last use.
pub struct Connection(tokio::task::JoinHandle<()>);

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
