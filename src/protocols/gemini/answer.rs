//! The Gemini listener's answer to a request it does not relay: the status
//! for each refusal (docs/guide/answers.md: its family's code, which is
//! Gemini's status) and the header that says it.

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::protocols::gemini::wire::{header, status};
use crate::proxy::Outcome;
use crate::refusal::{ceil_secs, Family, Refusal};

/// The Gemini status for a request that was not relayed (docs/guide/answers.md).
pub fn status_for(refusal: &Refusal) -> u8 {
    status_of(refusal.family())
}

/// Gemini's status for each family of answer.
fn status_of(family: Family) -> u8 {
    match family {
        Family::Malformed => status::BAD_REQUEST,
        Family::Refused => status::PROXY_REQUEST_REFUSED,
        Family::CertificateRequired => status::CERTIFICATE_REQUIRED,
        Family::CertificateNotAuthorised => status::CERTIFICATE_NOT_AUTHORISED,
        Family::Unavailable => status::PROXY_ERROR,
        Family::SlowDown => status::SLOW_DOWN,
    }
}

/// Writes the answer to a refusal.
pub async fn answer<W: AsyncWrite + Unpin>(client: &mut W, refusal: &Refusal) -> Outcome {
    let code = status_for(refusal);
    let detail = refusal.detail();
    // Our own `44` always carries a number: the seconds to wait.
    let meta = match refusal.retry_after() {
        Some(retry_after) => &ceil_secs(retry_after).to_string(),
        None => &detail,
    };
    let _ = client.write_all(&header(code, meta)).await;
    let _ = client.flush().await;
    Outcome::refused(refusal, Some(code.into()), detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The proxy's codes are Gemini's statuses: Nex documents name them.
    #[test]
    fn each_familys_code_is_geminis_status() {
        for family in [
            Family::Malformed,
            Family::Refused,
            Family::CertificateRequired,
            Family::CertificateNotAuthorised,
            Family::Unavailable,
            Family::SlowDown,
        ] {
            assert_eq!(status_of(family), family.code(), "{family:?}");
        }
    }
}
