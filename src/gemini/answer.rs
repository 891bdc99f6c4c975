//! The Gemini listener's answer to a request it does not relay: the status
//! for each refusal (docs/guide/answers.md; Spartan and Nex derive theirs from
//! it) and the header that says it.

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::access::Denied;
use crate::fate::Fate;
use crate::gemini::wire::{header, status};
use crate::proxy::Outcome;
use crate::refusal::{ceil_secs, Refusal};

/// The Gemini status for a request that was not relayed (docs/guide/answers.md).
pub fn status_for(refusal: &Refusal) -> u8 {
    match refusal {
        Refusal::Denied(Denied::NoCertificate) => return status::CERTIFICATE_REQUIRED,
        Refusal::Denied(Denied::UnknownCertificate(_)) => {
            return status::CERTIFICATE_NOT_AUTHORISED
        }
        _ => {}
    }
    match refusal.fate() {
        Fate::Malformed => status::BAD_REQUEST,
        Fate::ProxyRule | Fate::Disallowed | Fate::Denied => status::PROXY_REQUEST_REFUSED,
        Fate::RobotsUnreachable | Fate::UpstreamFailed | Fate::Relayed | Fate::ClientLeft => {
            status::PROXY_ERROR
        }
        Fate::SlowDown => status::SLOW_DOWN,
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
    Outcome::new(refusal.fate(), Some(code), detail)
}
