//! Real Redis high availability on loopback, from Debian's `redis-server`:
//! a Cluster of three masters and three replicas (made with
//! `redis-cli --cluster create`), and a master with one replica watched by
//! three Sentinels. A Cluster needs TCP ports (its nodes tell each other
//! where they are): each is a port the kernel handed out free just before.
//! Every process is killed when its owner is dropped.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may not answer before it is failed over: longer than
/// the proxy's health check period (1 s) plus its store deadline in these
/// tests, as the gate's safety needs (src/store/gate.rs).
pub const FAILOVER_AFTER_MS: u64 = 2000;

/// A port free on 127.0.0.1 a moment ago, below the kernel's ephemeral range
/// (32768 and up by default): one from bind(0) could be handed out again to
/// another test's connection before redis-server binds it. Each test process
/// walks its own stretch of 10000-32767, from its pid, checking each port.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(2_654_435_761) % 22_000;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 10_000 + ((start + n * 7) % 22_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// Asynchronous replication losing acknowledged writes, on purpose: the
/// packets from the master on `master` to its replica are dropped (an
/// iptables rule on loopback for that one connection, so this needs root,
/// as CI is), as in a network partition between them. What the master
/// acknowledges from now on, the replica never sees. The rule goes when
/// this is dropped.
pub struct Cut(Vec<String>);

fn cut_off(master: u16) -> Cut {
    let replicas = cli(master, &["client", "list", "type", "replica"]);
    let port = replicas
        .split_whitespace()
        .find_map(|f| f.strip_prefix("addr=127.0.0.1:"))
        .unwrap_or_else(|| panic!("the master's replica link: {replicas:?}"))
        .to_string();
    let rule: Vec<String> = [
        "OUTPUT",
        "-o",
        "lo",
        "-p",
        "tcp",
        "-s",
        "127.0.0.1",
        "--sport",
        &master.to_string(),
        "-d",
        "127.0.0.1",
        "--dport",
        &port,
        "-j",
        "DROP",
    ]
    .map(String::from)
    .to_vec();
    let added = Command::new("iptables")
        .args(["-w", "-I"])
        .args(&rule)
        .status()
        .expect("iptables is installed (root is needed to cut a replica off)");
    assert!(added.success(), "iptables -I {rule:?} (needs root)");
    Cut(rule)
}

impl Drop for Cut {
    fn drop(&mut self) {
        let _ = Command::new("iptables")
            .args(["-w", "-D"])
            .args(&self.0)
            .status();
    }
}

/// One redis-server process.
struct Node {
    port: u16,
    child: Option<Child>,
}

impl Node {
    fn start(args: &[String], dir: &std::path::Path, port: u16) -> Node {
        let mut all = vec!["--port".to_string(), port.to_string()];
        all.extend(["--bind", "127.0.0.1"].map(String::from));
        all.extend_from_slice(args);
        Node {
            port,
            child: Some(super::spawn_redis(&all, dir)),
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `redis-cli -p PORT args…`, its output.
fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stderr(Stdio::null())
        .output()
        .expect("redis-cli is installed (with redis-server)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A plain connection to the node on `port`.
fn connection(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// Asks `check` every 50 ms until it says yes; panics after `within`.
fn wait_for(what: &str, within: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < deadline, "waited {within:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
}

/// A line of `CLUSTER NODES`.
struct Seen {
    id: String,
    port: u16,
    master: bool,
    failed: bool,
    of: String,
    slots: Vec<(u16, u16)>,
}

impl RedisCluster {
    /// Three masters and three replicas, every slot served, every node
    /// knowing the six.
    pub fn start() -> RedisCluster {
        RedisCluster::start_on(RedisCluster::free_ports())
    }

    /// Six nodes' ports and cluster bus ports, free a moment ago: where a
    /// Cluster will be, for a proxy started before it.
    pub fn free_ports() -> [(u16, u16); 6] {
        std::array::from_fn(|_| (free_port(), free_port()))
    }

    /// `redis+cluster://` with the first three of `ports` as seeds.
    pub fn url_of(ports: &[(u16, u16); 6]) -> String {
        let seeds: Vec<String> = ports[..3]
            .iter()
            .map(|(port, _)| format!("127.0.0.1:{port}"))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    /// The Cluster on the given ports (`free_ports`).
    pub fn start_on(ports: [(u16, u16); 6]) -> RedisCluster {
        let dir = crate::common::state_dir();
        let mut nodes = Vec::new();
        for (i, (port, bus)) in ports.into_iter().enumerate() {
            let d = dir.join(format!("n{i}"));
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-port",
                &bus.to_string(),
                "--cluster-config-file",
                &d.join("nodes.conf").display().to_string(),
                "--cluster-node-timeout",
                &FAILOVER_AFTER_MS.to_string(),
                // A replica cut off from its master for a while (stopped,
                // in these tests) may still stand in for it.
                "--cluster-replica-validity-factor",
                "0",
            ]
            .map(String::from);
            nodes.push(Node::start(&args, &d, port));
        }
        let mut create: Vec<String> = vec!["--cluster".into(), "create".into()];
        create.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.extend(["--cluster-replicas", "1", "--cluster-yes"].map(String::from));
        let out = Command::new("redis-cli")
            .args(&create)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("All 16384 slots covered"),
            "redis-cli --cluster create:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes, dir };
        for n in &cluster.nodes {
            wait_for(
                "every node to see the cluster whole",
                Duration::from_secs(30),
                || {
                    let info = cli(n.port, &["cluster", "info"]);
                    info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:6")
                },
            );
        }
        wait_for("three replicas in sync", Duration::from_secs(30), || {
            cluster
                .nodes
                .iter()
                .filter(|n| cli(n.port, &["info", "replication"]).contains("master_link_status:up"))
                .count()
                == 3
        });
        cluster
    }

    /// `redis+cluster://` with three of the nodes as seeds.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self.nodes[..3]
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+cluster://{}", seeds.join(","))
    }

    fn alive(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.child.is_some())
    }

    /// `CLUSTER NODES` as a live node sees it.
    fn seen(&self) -> Vec<Seen> {
        let port = self.alive().next().expect("a node alive").port;
        cli(port, &["cluster", "nodes"])
            .lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let port = f
                    .get(1)?
                    .split('@')
                    .next()?
                    .rsplit(':')
                    .next()?
                    .parse()
                    .ok()?;
                let flags = f.get(2)?;
                Some(Seen {
                    id: f[0].to_string(),
                    port,
                    master: flags.contains("master"),
                    failed: flags.contains("fail"),
                    of: f.get(3)?.to_string(),
                    slots: f[8.min(f.len())..]
                        .iter()
                        .filter_map(|r| {
                            let (a, b) = r.split_once('-').unwrap_or((r, r));
                            Some((a.parse().ok()?, b.parse().ok()?))
                        })
                        .collect(),
                })
            })
            .collect()
    }

    /// The port of the master serving `key` now.
    pub fn master_of(&self, key: &str) -> u16 {
        self.serving(key).expect("a master serves the key")
    }

    /// The master serving `key`, if one not marked failed does.
    fn serving(&self, key: &str) -> Option<u16> {
        let port = self.alive().next().expect("a node alive").port;
        let slot: u16 = cli(port, &["cluster", "keyslot", key])
            .trim()
            .parse()
            .ok()?;
        self.seen()
            .into_iter()
            .find(|s| s.master && !s.failed && s.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            .map(|s| s.port)
    }

    /// The port of a replica of the master on `port`.
    pub fn replica_of(&self, port: u16) -> u16 {
        let seen = self.seen();
        let id = &seen.iter().find(|s| s.port == port).expect("the master").id;
        seen.iter().find(|s| &s.of == id).expect("its replica").port
    }

    fn node(&mut self, port: u16) -> &mut Node {
        self.nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this cluster")
    }

    /// SIGKILL: a master crashing.
    pub fn kill(&mut self, port: u16) {
        self.node(port).kill();
    }

    /// The replica of the master on `master` gets none of the master's
    /// next writes ([`Cut`]); the master still acknowledges them.
    pub fn cut_off_replica(&self, master: u16) -> Cut {
        cut_off(master)
    }

    /// Waits until a master other than `old` serves `key`, and the cluster
    /// says it is whole again; that master's port.
    pub fn failed_over(&self, key: &str, old: u16) -> u16 {
        let mut now = old;
        wait_for("a replica promoted", Duration::from_secs(30), || {
            now = self.serving(key).unwrap_or(old);
            now != old
                && self
                    .alive()
                    .all(|n| cli(n.port, &["cluster", "info"]).contains("cluster_state:ok"))
        });
        now
    }

    /// A connection to the node on `port`, to look at keys.
    pub fn node_connection(&self, port: u16) -> redis::Connection {
        connection(port)
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            n.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A master and its replica, watched by three Sentinels (quorum two) that
/// call the master down after `FAILOVER_AFTER_MS`.
pub struct RedisSentinel {
    master: Node,
    replica: Node,
    sentinels: Vec<Node>,
    dir: PathBuf,
}

pub const MASTER_NAME: &str = "crawl";

impl RedisSentinel {
    pub fn start() -> RedisSentinel {
        let dir = crate::common::state_dir();
        let mport = free_port();
        let master = Node::start(&[], &dir.join("master"), mport);
        let replica = Node::start(
            &["--replicaof", "127.0.0.1", &mport.to_string()].map(String::from),
            &dir.join("replica"),
            free_port(),
        );
        wait_for("the replica in sync", Duration::from_secs(30), || {
            cli(replica.port, &["info", "replication"]).contains("master_link_status:up")
        });
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let d = dir.join(format!("s{i}"));
            std::fs::create_dir_all(&d).unwrap();
            let conf = d.join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "sentinel monitor {MASTER_NAME} 127.0.0.1 {mport} 2\n\
                     sentinel down-after-milliseconds {MASTER_NAME} {FAILOVER_AFTER_MS}\n\
                     sentinel failover-timeout {MASTER_NAME} 10000\n"
                ),
            )
            .unwrap();
            let port = free_port();
            let mut all = vec![conf.display().to_string(), "--sentinel".into()];
            all.extend([
                "--port".into(),
                port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
            ]);
            let child = Command::new("redis-server")
                .args(&all)
                .arg("--dir")
                .arg(&d)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server is installed");
            sentinels.push(Node {
                port,
                child: Some(child),
            });
        }
        let setup = RedisSentinel {
            master,
            replica,
            sentinels,
            dir,
        };
        for s in &setup.sentinels {
            wait_for(
                "each Sentinel to know the replica and the other two",
                Duration::from_secs(30),
                || {
                    let replicas = cli(s.port, &["sentinel", "replicas", MASTER_NAME]);
                    let others = cli(s.port, &["sentinel", "sentinels", MASTER_NAME]);
                    replicas.contains(&setup.replica.port.to_string())
                        && setup
                            .sentinels
                            .iter()
                            .filter(|o| o.port != s.port)
                            .all(|o| others.contains(&o.port.to_string()))
                },
            );
        }
        setup
    }

    /// `redis+sentinel://` with the three Sentinels and the master's name.
    pub fn url(&self) -> String {
        let s: Vec<String> = self
            .sentinels
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        format!("redis+sentinel://{}/{MASTER_NAME}", s.join(","))
    }

    pub fn master_port(&self) -> u16 {
        self.master.port
    }

    pub fn replica_port(&self) -> u16 {
        self.replica.port
    }

    /// The master's port as the first Sentinel names it.
    pub fn named(&self) -> Option<u16> {
        cli(
            self.sentinels[0].port,
            &["sentinel", "get-master-addr-by-name", MASTER_NAME],
        )
        .lines()
        .nth(1)?
        .trim()
        .parse()
        .ok()
    }

    /// SIGKILL the master.
    pub fn kill_master(&mut self) {
        self.master.kill();
    }

    /// The replica gets none of the master's next writes ([`Cut`]).
    pub fn cut_off_replica(&self) -> Cut {
        cut_off(self.master.port)
    }

    /// Waits until the Sentinels name the replica master and it says so.
    pub fn failed_over(&self) {
        wait_for(
            "the Sentinels to promote the replica",
            Duration::from_secs(30),
            || {
                self.named() == Some(self.replica.port)
                    && cli(self.replica.port, &["role"]).starts_with("master")
            },
        );
    }

    /// A connection to the master or the replica, on `port`.
    pub fn connection(&self, port: u16) -> redis::Connection {
        connection(port)
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        for s in &mut self.sentinels {
            s.kill();
        }
        self.master.kill();
        self.replica.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
