//! The connection to the store, whatever its shape (`address`):
//! - one server: the `redis` crate's connection manager, which reconnects;
//! - a Cluster: the crate's cluster connection, which learns the slots from
//!   the seed nodes and follows `MOVED` and a replica promoted in a master's
//!   place;
//! - Sentinel: the master the Sentinels name, asked again at every health
//!   check (`look`); when they name another one (a failover), calls go to
//!   it from then on, through a new connection manager.
//!
//! Every call goes through `Conn`, one type for the three, so the scripts
//! and their deadlines (`Store::run`) are the same whatever the shape.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{Cmd, IntoConnectionInfo, RedisError, RedisFuture, RedisResult, Value};

use super::address::Address;

/// One node the store is made of, as last seen by the health check.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Node {
    /// `host:port` (or the socket's path).
    pub addr: String,
    /// Its `run_id`: another one at the same address is a restart.
    pub run_id: String,
}

/// The store's shape with its connections.
pub(super) enum Link {
    Single {
        client: redis::Client,
        conn: ConnectionManager,
    },
    Cluster(Box<Nodes>),
    Sentinel(Box<Follow>),
}

/// A Cluster: its seeds, and the crate's connection, made again when its
/// map of the slots is older than the Cluster's own (`look`).
pub(super) struct Nodes {
    seeds: Vec<redis::Client>,
    client: redis::cluster::ClusterClient,
    timeout: Duration,
    conn: Mutex<ClusterConnection>,
}

impl Nodes {
    /// A new connection: it learns the slots from the nodes when first used.
    fn connect(client: &redis::cluster::ClusterClient, timeout: Duration) -> ClusterConnection {
        client.get_pending_async_connection_with_config(
            redis::cluster::ClusterConfig::new()
                .set_connection_timeout(timeout)
                .set_response_timeout(timeout),
        )
    }

    fn current(&self) -> ClusterConnection {
        self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The master the Sentinels name, followed.
pub(super) struct Follow {
    sentinels: tokio::sync::Mutex<SentinelClient>,
    master: Mutex<Option<Master>>,
    manager: ConnectionManagerConfig,
}

#[derive(Clone)]
struct Master {
    addr: String,
    client: redis::Client,
    conn: ConnectionManager,
}

/// A connection for one call.
#[derive(Clone)]
pub(super) enum Conn {
    One(ConnectionManager),
    Cluster(ClusterConnection),
    /// The Sentinels have named no master yet: every call fails at once.
    NoMaster,
}

fn no_master() -> RedisError {
    RedisError::from((
        redis::ErrorKind::Io,
        "the Sentinels have named no master yet",
    ))
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::NoMaster => Box::pin(async { Err(no_master()) }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::NoMaster => Box::pin(async { Err(no_master()) }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::NoMaster => 0,
        }
    }
}

/// The connection manager's settings: the deadline on connecting and on
/// each answer, one retry, reconnecting at most a second apart.
fn manager(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_secs(1))
}

fn err(e: impl std::fmt::Display) -> RedisError {
    RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "store",
        e.to_string(),
    ))
}

impl Link {
    /// Connects lazily: nothing here waits for the store, which may be down.
    pub(super) fn open(address: &Address, timeout: Duration) -> RedisResult<Link> {
        match address {
            Address::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                let conn =
                    ConnectionManager::new_lazy_with_config(client.clone(), manager(timeout))?;
                Ok(Link::Single { client, conn })
            }
            Address::Cluster { seeds } => {
                let client = redis::cluster::ClusterClient::builder(seeds.clone())
                    .retries(1)
                    .min_retry_wait(10)
                    .max_retry_wait(200)
                    .build()?;
                let seeds = seeds
                    .iter()
                    .map(|s| redis::Client::open(s.as_str()))
                    .collect::<RedisResult<_>>()?;
                let conn = Mutex::new(Nodes::connect(&client, timeout));
                Ok(Link::Cluster(Box::new(Nodes {
                    seeds,
                    client,
                    timeout,
                    conn,
                })))
            }
            Address::Sentinel {
                sentinels,
                master,
                auth,
            } => {
                // The master's user and password, read the way one server's are.
                let redis = format!("redis://{auth}127.0.0.1:6379")
                    .into_connection_info()
                    .map_err(err)?
                    .redis_settings()
                    .clone();
                let client = SentinelClient::build(
                    sentinels.clone(),
                    master.clone(),
                    Some(SentinelNodeConnectionInfo::default().set_redis_connection_info(redis)),
                    SentinelServerType::Master,
                )?;
                Ok(Link::Sentinel(Box::new(Follow {
                    sentinels: tokio::sync::Mutex::new(client),
                    master: Mutex::new(None),
                    manager: manager(timeout),
                })))
            }
        }
    }

    /// A connection for one call.
    pub(super) fn conn(&self) -> Conn {
        match self {
            Link::Single { conn, .. } => Conn::One(conn.clone()),
            Link::Cluster(nodes) => Conn::Cluster(nodes.current()),
            Link::Sentinel(follow) => follow
                .master
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map_or(Conn::NoMaster, |m| Conn::One(m.conn.clone())),
        }
    }

    /// Where the wake-up channel is subscribed: one server, the master
    /// the Sentinels name, or the `attempt`th seed of a Cluster (a
    /// message published on any node of a Cluster reaches every node).
    pub(super) fn pubsub_client(&self, attempt: usize) -> Option<redis::Client> {
        match self {
            Link::Single { client, .. } => Some(client.clone()),
            Link::Cluster(nodes) => nodes.seeds.get(attempt % nodes.seeds.len().max(1)).cloned(),
            Link::Sentinel(follow) => follow
                .master
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .map(|m| m.client.clone()),
        }
    }

    /// The masters now, each with its run id (one for a single server or
    /// Sentinel, each master of a Cluster). For Sentinel, asks the
    /// Sentinels which master first, and follows it if it changed.
    pub(super) async fn look(&self, shown: &str) -> RedisResult<Vec<Node>> {
        match self {
            Link::Single { conn, .. } => Ok(vec![one(conn, shown.to_string()).await?]),
            Link::Cluster(nodes) => {
                let conn = nodes.current();
                let seen = masters(&conn).await?;
                let owners = slot_owners(&conn).await?;
                if owners.iter().all(|o| seen.iter().any(|n| &n.addr == o)) {
                    return Ok(seen);
                }
                // The connection's map of the slots is older than the
                // Cluster's (made while the Cluster was forming, or before
                // a master was added): masters it does not know would go
                // unwatched. A new connection learns the slots afresh.
                tracing::info!(
                    known = %seen.iter().map(|n| n.addr.as_str()).collect::<Vec<_>>().join(", "),
                    cluster = %owners.join(", "),
                    "the fleet store's map of the Cluster is out of date: learning it again"
                );
                let fresh = Nodes::connect(&nodes.client, nodes.timeout);
                *nodes.conn.lock().unwrap_or_else(|e| e.into_inner()) = fresh.clone();
                masters(&fresh).await
            }
            Link::Sentinel(follow) => {
                let client = follow.sentinels.lock().await.async_get_client().await?;
                let addr = client.get_connection_info().addr().to_string();
                let conn = {
                    let mut master = follow.master.lock().unwrap_or_else(|e| e.into_inner());
                    match master.as_ref() {
                        Some(m) if m.addr == addr => m.conn.clone(),
                        _ => {
                            let conn = ConnectionManager::new_lazy_with_config(
                                client.clone(),
                                follow.manager.clone(),
                            )?;
                            *master = Some(Master {
                                addr: addr.clone(),
                                client,
                                conn: conn.clone(),
                            });
                            conn
                        }
                    }
                };
                Ok(vec![one(&conn, addr).await?])
            }
        }
    }
}

/// Every master a Cluster connection knows, each with its run id.
async fn masters(conn: &ClusterConnection) -> RedisResult<Vec<Node>> {
    let all: Value = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn.clone())
        .await?;
    let Value::Map(nodes) = all else {
        return Err(err("INFO from every master: an answer of another shape"));
    };
    let mut seen = Vec::new();
    for (addr, info) in nodes {
        let addr: String = redis::from_redis_value(addr)?;
        let info: String = match info {
            Value::ServerError(e) => return Err(RedisError::from(e)),
            v => redis::from_redis_value(v)?,
        };
        seen.push(Node {
            addr,
            run_id: run_id(&info),
        });
    }
    seen.sort();
    Ok(seen)
}

/// The masters that hold slots, as the Cluster itself sees them (`CLUSTER
/// SLOTS`, asked of one node): `host:port` each.
async fn slot_owners(conn: &ClusterConnection) -> RedisResult<Vec<String>> {
    let ranges: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(&mut conn.clone())
        .await?;
    let mut owners = Vec::new();
    for range in ranges {
        // [first slot, last slot, [host, port, id, …], replicas…]
        let Value::Array(fields) = range else {
            return Err(err("CLUSTER SLOTS: an answer of another shape"));
        };
        let Some(Value::Array(master)) = fields.get(2) else {
            return Err(err("CLUSTER SLOTS: a range without its master"));
        };
        let (Some(host), Some(port)) = (master.first(), master.get(1)) else {
            return Err(err("CLUSTER SLOTS: a master without its address"));
        };
        let host: String = redis::from_redis_value(host.clone())?;
        let port: u16 = redis::from_redis_value(port.clone())?;
        let addr = format!("{host}:{port}");
        if !owners.contains(&addr) {
            owners.push(addr);
        }
    }
    owners.sort();
    Ok(owners)
}

/// The one server behind `conn`, at `addr`, with its run id.
async fn one(conn: &ConnectionManager, addr: String) -> RedisResult<Node> {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn.clone())
        .await?;
    Ok(Node {
        addr,
        run_id: run_id(&info),
    })
}

/// The `run_id:` line of `INFO server` (empty if none).
fn run_id(info: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|id| id.trim().to_string())
        .unwrap_or_default()
}
