//! The tests that start real servers: redis-server (fleet mode, one
//! server, a Cluster, Sentinel) and iptables (a failover that loses a
//! write, as root). Marked `#[ignore = "needs …"]`: `cargo test -- --include-ignored`
//! runs them (CI does).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/redis.rs"]
mod redis_server;

mod backends;
mod fleet;
mod fleet_ha;
mod fleet_holds;
