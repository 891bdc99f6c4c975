//! `[store]` and `--store`: fleet mode (docs/architecture.md, "Fleet mode").

use std::time::Duration;

use super::values::{bound, duration, flag_or_key};
use super::{invalid, ConfigError, RawConfig};
use crate::cli::RunArgs;
use crate::store::{OnUnavailable, StoreConfig};

/// The longest key prefix: keys stay short whatever the operator writes.
const MAX_PREFIX: usize = 64;

/// What is wrong with a store URL whose scheme is right, in words (the
/// redis crate only says "did not parse").
fn url_problem(text: &str) -> Option<String> {
    let url = match url::Url::parse(text) {
        Ok(url) => url,
        Err(e) => return Some(format!("not a URL: {e}")),
    };
    if url.scheme() == "redis" {
        if url.host_str().is_none_or(str::is_empty) {
            return Some("no host".to_string());
        }
        let db = url.path().trim_start_matches('/');
        if !db.is_empty() && db.parse::<u16>().is_err() {
            return Some(format!(
                "the database after the host is a number, not {db:?}"
            ));
        }
    } else if url.path().trim_start_matches('/').is_empty() {
        return Some("no socket path".to_string());
    }
    None
}

/// `[store]`: `None` unless a URL is set (by the key or `--store`).
pub(super) fn store(raw: &RawConfig, flags: &RunArgs) -> Result<Option<StoreConfig>, ConfigError> {
    let s = &raw.store;
    let url_key = s.url.clone().filter(|u| !u.is_empty());
    let (key, url) = match flag_or_key(("--store", &flags.store), ("store.url", &url_key)) {
        (key, Some(url)) => (key, url.to_string()),
        (_, None) => return Ok(None),
    };
    let scheme = url.split("://").next().unwrap_or_default();
    if ["redis+cluster", "redis+sentinel"].contains(&scheme) {
        if let Err(problem) = crate::store::Address::parse(&url) {
            return Err(invalid(
                key,
                format!(
                    "{:?}: {problem}; write {}",
                    crate::store::redacted(&url),
                    if scheme == "redis+cluster" {
                        "redis+cluster://host:port,host:port,…"
                    } else {
                        "redis+sentinel://host:port,host:port,…/MASTER_NAME"
                    }
                ),
            ));
        }
    } else if !["redis", "unix", "redis+unix"].contains(&scheme) || !url.contains("://") {
        return Err(invalid(
            key,
            format!(
                "{:?}: write redis://host:port[/db], unix:///path/redis.sock, redis+cluster://host:port,… or redis+sentinel://host:port,…/MASTER_NAME",
                crate::store::redacted(&url)
            ),
        ));
    } else if let Some(problem) = url_problem(&url) {
        return Err(invalid(
            key,
            format!(
                "{:?}: {problem}; write redis://host:port[/db] or unix:///path/redis.sock",
                crate::store::redacted(&url)
            ),
        ));
    } else if let Err(e) = redis::Client::open(url.as_str()) {
        return Err(invalid(
            key,
            format!("{:?}: {e}", crate::store::redacted(&url)),
        ));
    }
    let prefix = s
        .prefix
        .clone()
        .unwrap_or_else(|| "robots-proxy:".to_string());
    if prefix.len() > MAX_PREFIX
        || prefix
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '{' || c == '}')
    {
        return Err(invalid(
            "store.prefix",
            format!(
                "{prefix:?}: at most {MAX_PREFIX} bytes, no spaces, control characters or braces"
            ),
        ));
    }
    let on_unavailable = match s.on_unavailable.as_deref() {
        None | Some("refuse") => OnUnavailable::Refuse,
        Some("local") => OnUnavailable::Local,
        Some(other) => {
            return Err(invalid(
                "store.on_unavailable",
                format!("{other:?}: use \"refuse\" or \"local\""),
            ))
        }
    };
    Ok(Some(StoreConfig {
        url,
        prefix,
        on_unavailable,
        timeout: duration(
            "store.timeout",
            s.timeout.as_deref(),
            Duration::from_millis(500),
            bound::STORE_TIMEOUT,
        )?,
        lease: duration(
            "store.lease",
            s.lease.as_deref(),
            Duration::from_secs(30),
            bound::LEASE,
        )?,
    }))
}
