//! Certificate pins shared by the fleet (trust on first use): the first proxy
//! to meet a capsule pins what it showed, and every proxy holds the capsule to
//! it. A pin lives `PIN_TTL` past its last use.

use std::time::Duration;

use redis::Script;

use super::{Store, StoreError};
use crate::metrics::StoreOp;

/// How long a pin outlives its last use.
pub const PIN_TTL: Duration = Duration::from_secs(90 * 86_400);

/// Pins `seen` if nothing is pinned; either way answers the pin and renews it.
const PIN: &str = r#"
local pinned = redis.call('GET', KEYS[1])
if not pinned then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ARGV[1]
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return pinned
"#;

impl Store {
    /// The fingerprint the fleet holds `host:port` to: `seen` when this is the
    /// first time anyone met it.
    pub async fn pin(&self, host: &str, port: u16, seen: &str) -> Result<String, StoreError> {
        static SCRIPT: std::sync::OnceLock<Script> = std::sync::OnceLock::new();
        let script = SCRIPT.get_or_init(|| Script::new(PIN));
        let key = self.key(&format!("{host}:{port}"), "pin");
        let mut conn = self.connection();
        let mut call = script.key(&key);
        call.arg(seen).arg(PIN_TTL.as_millis() as u64);
        self.run(StoreOp::Pin, async move {
            call.invoke_async::<String>(&mut conn).await
        })
        .await
    }

    /// Forgets `host:port`'s pin (an operator's action: the capsule renewed
    /// its certificate): the next proxy to meet it pins what it shows.
    pub async fn forget_pin(&self, host: &str, port: u16) -> Result<(), StoreError> {
        let key = self.key(&format!("{host}:{port}"), "pin");
        self.delete(StoreOp::Pin, key).await
    }
}
