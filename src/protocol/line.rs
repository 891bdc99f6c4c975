//! Reading a request or header line, shared by every protocol.

use std::time::Duration;

use thiserror::Error;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Why a header line could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LineError {
    #[error("line longer than {0} bytes")]
    TooLong(usize),
    #[error("connection closed before the end of the line")]
    Closed,
    #[error("no complete line within {0:?}")]
    Timeout(Duration),
    #[error("read error: {0}")]
    Io(String),
}

/// Reads one line ending in CRLF (a bare LF is accepted too) of at most `max`
/// bytes before the line end, within `deadline`, and returns it without its end.
/// What follows the line stays in `reader`'s buffer (a response body, say).
pub async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    max: usize,
    deadline: Duration,
) -> Result<Vec<u8>, LineError> {
    let read = async {
        let mut line = Vec::with_capacity(128);
        loop {
            let available = reader
                .fill_buf()
                .await
                .map_err(|e| LineError::Io(e.to_string()))?;
            if available.is_empty() {
                return Err(LineError::Closed);
            }
            if let Some(lf) = memchr::memchr(b'\n', available) {
                line.extend_from_slice(&available[..lf]);
                reader.consume(lf + 1);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return if line.len() > max {
                    Err(LineError::TooLong(max))
                } else {
                    Ok(line)
                };
            }
            let n = available.len();
            line.extend_from_slice(available);
            reader.consume(n);
            // One byte of slack for the CR of a CRLF split across reads.
            if line.len() > max + 1 {
                return Err(LineError::TooLong(max));
            }
        }
    };
    tokio::time::timeout(deadline, read)
        .await
        .unwrap_or(Err(LineError::Timeout(deadline)))
}
