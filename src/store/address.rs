//! Where the store is: `[store] url` read into one server, a Redis (or
//! Valkey) Cluster given by seed nodes, or a master found through Sentinel.
//!
//! - `redis://[user:password@]host:port[/db]`, `unix:///path/redis.sock`:
//!   one server;
//! - `redis+cluster://[user:password@]host:port,host:port,…`: a Cluster, the
//!   nodes listed being where the client first learns the slots (any node
//!   will do; more than one survives one being down);
//! - `redis+sentinel://[user:password@]host:port,host:port,…/MASTER_NAME`:
//!   the Sentinels watching the master named `MASTER_NAME`.
//!
//! A user and password are the data nodes' (as for one server): the proxy
//! asks the Sentinels without one.

/// The store's shape and its nodes, each as a `redis://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Single(String),
    Cluster {
        seeds: Vec<String>,
    },
    Sentinel {
        sentinels: Vec<String>,
        master: String,
        /// `user:password@` for the master (empty when none).
        auth: String,
    },
}

/// The most nodes one URL may list.
const MAX_NODES: usize = 64;

impl Address {
    /// Reads a store URL; `Err` says what is wrong, in words.
    pub fn parse(url: &str) -> Result<Address, String> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err("no scheme".into());
        };
        match scheme {
            "redis" | "unix" | "redis+unix" => Ok(Address::Single(url.to_string())),
            "redis+cluster" | "redis+sentinel" => {
                let (auth, rest) = match rest.rfind('@') {
                    Some(at) => (&rest[..=at], &rest[at + 1..]),
                    None => ("", rest),
                };
                let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
                let nodes = nodes(hosts)?;
                if scheme == "redis+cluster" {
                    if !path.is_empty() {
                        return Err(format!(
                            "a Cluster has no database or name after its nodes, not {path:?}"
                        ));
                    }
                    let seeds = nodes.iter().map(|n| format!("redis://{auth}{n}")).collect();
                    return Ok(Address::Cluster { seeds });
                }
                let master = path.trim_end_matches('/');
                if master.is_empty() {
                    return Err("no master name after the Sentinels (…/MASTER_NAME)".into());
                }
                if master.len() > 128
                    || !master
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                {
                    return Err(format!(
                        "the master name is letters, digits, '.', '_' or '-', at most 128, not {master:?}"
                    ));
                }
                Ok(Address::Sentinel {
                    sentinels: nodes.iter().map(|n| format!("redis://{n}")).collect(),
                    master: master.to_string(),
                    auth: auth.to_string(),
                })
            }
            other => Err(format!("no store scheme {other:?}")),
        }
    }

    /// `single`, `cluster` or `sentinel`: for the status page and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Address::Single(_) => "single",
            Address::Cluster { .. } => "cluster",
            Address::Sentinel { .. } => "sentinel",
        }
    }
}

/// `host:port,host:port`: each with a port, checked by the URL parser.
fn nodes(hosts: &str) -> Result<Vec<&str>, String> {
    let nodes: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if nodes.iter().all(|n| n.is_empty()) {
        return Err("no nodes (host:port,host:port,…)".into());
    }
    if nodes.len() > MAX_NODES {
        return Err(format!("{} nodes: at most {MAX_NODES}", nodes.len()));
    }
    for node in &nodes {
        let parsed = url::Url::parse(&format!("redis://{node}"))
            .map_err(|e| format!("{node:?} is no host:port: {e}"))?;
        if parsed.host_str().is_none_or(str::is_empty)
            || parsed.port().is_none()
            || !matches!(parsed.path(), "" | "/")
            || node.contains(['@', '?', '#'])
        {
            return Err(format!("{node:?} is no host:port"));
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_is_its_seed_nodes_with_the_password_on_each() {
        assert_eq!(
            Address::parse("redis+cluster://:pw@127.0.0.1:7000,[::1]:7001").unwrap(),
            Address::Cluster {
                seeds: vec![
                    "redis://:pw@127.0.0.1:7000".into(),
                    "redis://:pw@[::1]:7001".into()
                ]
            }
        );
    }

    #[test]
    fn sentinels_name_their_master_and_keep_the_password_for_it() {
        assert_eq!(
            Address::parse("redis+sentinel://u:p@127.0.0.1:26379,127.0.0.1:26380/crawl").unwrap(),
            Address::Sentinel {
                sentinels: vec![
                    "redis://127.0.0.1:26379".into(),
                    "redis://127.0.0.1:26380".into()
                ],
                master: "crawl".into(),
                auth: "u:p@".into(),
            }
        );
    }

    #[test]
    fn what_is_wrong_is_said() {
        for (url, says) in [
            ("redis+cluster://", "no nodes"),
            ("redis+cluster://127.0.0.1", "no host:port"),
            ("redis+cluster://127.0.0.1:7000/0", "no database"),
            (
                "redis+cluster://127.0.0.1:7000,,127.0.0.1:7001",
                "no host:port",
            ),
            ("redis+sentinel://127.0.0.1:26379", "no master name"),
            ("redis+sentinel://127.0.0.1:26379/", "no master name"),
            ("redis+sentinel://127.0.0.1:26379/a b", "master name"),
            ("redis+sentinel://127.0.0.1:26379/x/y", "master name"),
            ("redis+cluster://h:99999", "no host:port"),
            ("rediss+cluster://127.0.0.1:7000", "no store scheme"),
        ] {
            let e = Address::parse(url).unwrap_err();
            assert!(e.contains(says), "{url}: {e}");
        }
        let many = vec!["127.0.0.1:7000"; MAX_NODES + 1].join(",");
        assert!(Address::parse(&format!("redis+cluster://{many}")).is_err());
    }
}
