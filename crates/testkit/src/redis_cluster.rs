//! [`RedisCluster`]: a real Redis Cluster on loopback, for the ledger's cluster tests and the
//! fleet's fault tests: `masters` primaries with `replicas` replicas each, every node a
//! `redis-server --cluster-enabled yes` on a free port with its files in a temporary directory,
//! joined by `redis-cli --cluster create`. Killed and removed on drop.
//!
//! The nodes run with a short `cluster-node-timeout` ([`NODE_TIMEOUT_MS`]), so that a killed
//! primary's replica is promoted within a few seconds without `CLUSTER FAILOVER`, and with
//! `cluster-require-full-coverage no`, so that the other primaries keep serving while one is
//! down. No persistence: a node restarted with [`RedisCluster::restart_empty`] comes back as
//! the primary of its slots with no data (the loss the ledger's markers detect).
//!
//! Fault helpers name nodes by port (a failover changes which node is a primary):
//! [`RedisCluster::masters`] lists the primaries' ports in slot order, [`RedisCluster::master_of`]
//! the primary serving a slot.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::TempDir;
use crate::redis::free_port;

/// The nodes' `cluster-node-timeout`: how long a node may be unreachable before the others
/// fail it (and its replica takes over).
pub const NODE_TIMEOUT_MS: u64 = 1_000;

/// How long the helpers wait for the cluster to settle (start, failover, restart).
const SETTLE: Duration = Duration::from_secs(20);

#[derive(Debug)]
struct Node {
    port: u16,
    /// With TLS: the node's TLS port (the plain one stays open for these helpers).
    tls_port: Option<u16>,
    child: Option<Child>,
}

/// A running Redis Cluster; every node is killed (SIGKILL) and its directory removed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: TempDir,
    tls: Option<crate::tls::TlsFiles>,
}

impl RedisCluster {
    /// Starts `masters` primaries with `replicas` replicas each and waits until every node says
    /// `cluster_state:ok` and agrees on the slot map.
    ///
    /// # Panics
    /// When `redis-server` or `redis-cli` is missing, or the cluster does not form within 20 s.
    pub async fn start(masters: usize, replicas: usize) -> RedisCluster {
        RedisCluster::start_with(masters, replicas, None).await
    }

    /// [`RedisCluster::start`] with TLS: every node also listens on a TLS port with `tls`'s
    /// certificate (clients are not asked for one), and the cluster bus and replication use TLS;
    /// clients that connect with TLS learn the TLS ports ([`RedisCluster::tls_seed_addrs`]).
    ///
    /// # Panics
    /// As [`RedisCluster::start`].
    pub async fn start_with(
        masters: usize,
        replicas: usize,
        tls: Option<crate::tls::TlsFiles>,
    ) -> RedisCluster {
        assert!(
            masters >= 3,
            "redis-cli --cluster create needs 3 primaries or more"
        );
        let dir = TempDir::new("redis-cluster");
        let mut cluster = RedisCluster {
            nodes: Vec::new(),
            dir,
            tls,
        };
        for _ in 0..masters * (1 + replicas) {
            let port = free_node_port();
            let tls_port = cluster.tls.as_ref().map(|_| free_node_port());
            let child = cluster.launch(port, tls_port);
            cluster.nodes.push(Node {
                port,
                tls_port,
                child: Some(child),
            });
        }
        for i in 0..cluster.nodes.len() {
            cluster.wait_started(i).await;
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        create.args(
            cluster
                .nodes
                .iter()
                .map(|n| format!("127.0.0.1:{}", n.port)),
        );
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = match create.stdin(Stdio::null()).output() {
            Ok(out) => out,
            Err(e) => panic!("cannot run redis-cli (apt-get install -y redis-tools): {e}"),
        };
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        cluster.settle().await;
        // A replica that never synced is too stale to be promoted: wait for every link.
        for node in &cluster.nodes {
            wait_for(&format!("node {} synced or primary", node.port), || async {
                let info = raw(node.port, &["INFO", "replication"]).await;
                info.contains("role:master") || info.contains("master_link_status:up")
            })
            .await;
        }
        cluster
    }

    /// Waits until node `i` answers PING. A node that exited at start (another process took
    /// its port or its bus port between our probe and its bind) is started again on new ports,
    /// up to five times.
    ///
    /// # Panics
    /// When it does not answer within [`SETTLE`], or exits five times.
    async fn wait_started(&mut self, i: usize) {
        for _ in 0..5 {
            let Some(node) = self.nodes.get_mut(i) else {
                return;
            };
            let port = node.port;
            let deadline = Instant::now() + SETTLE;
            loop {
                if raw(port, &["PING"]).await.starts_with("+PONG") {
                    return;
                }
                let exited = node
                    .child
                    .as_mut()
                    .is_none_or(|c| c.try_wait().ok().flatten().is_some());
                if exited {
                    if let Some(mut child) = node.child.take() {
                        let _ = child.wait();
                    }
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "node {port} answers PING: not within {SETTLE:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let port = free_node_port();
            let tls_port = self.tls.as_ref().map(|_| free_node_port());
            let child = Some(self.launch(port, tls_port));
            if let Some(node) = self.nodes.get_mut(i) {
                *node = Node {
                    port,
                    tls_port,
                    child,
                };
            }
        }
        panic!("node {i} of the cluster exited at start five times");
    }

    fn launch(&self, port: u16, tls_port: Option<u16>) -> Child {
        let conf = self.dir.join(&format!("nodes-{port}.conf"));
        let mut tls_args: Vec<String> = Vec::new();
        if let (Some(tls), Some(tls_port)) = (&self.tls, tls_port) {
            tls_args.extend(crate::redis::tls_args(tls, tls_port));
            tls_args.extend([
                "--tls-cluster".into(),
                "yes".into(),
                "--tls-replication".into(),
                "yes".into(),
            ]);
        }
        let spawned = Command::new("redis-server")
            .args(&tls_args)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes", "--cluster-config-file"])
            .arg(&conf)
            .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
            .args(["--cluster-require-full-coverage", "no"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(self.dir.path())
            .args(["--loglevel", "warning", "--protected-mode", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => child,
            Err(e) => panic!("cannot run redis-server (apt-get install -y redis-server): {e}"),
        }
    }

    /// Waits until every live node says `cluster_state:ok` and they all name the same primary
    /// for every slot.
    async fn settle(&self) {
        wait_for("the cluster settles", || async {
            let mut maps = Vec::new();
            for node in self.nodes.iter().filter(|n| n.child.is_some()) {
                if !raw(node.port, &["CLUSTER", "INFO"])
                    .await
                    .contains("cluster_state:ok")
                {
                    return false;
                }
                maps.push(slot_owners(&raw(node.port, &["CLUSTER", "NODES"]).await));
            }
            maps.windows(2).all(|w| w.first() == w.get(1))
                && maps.first().is_some_and(|m| m.len() == 16_384)
        })
        .await;
    }

    /// `host:port` of every node (the ledger's `cluster_nodes`).
    pub fn seed_addrs(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect()
    }

    /// `host:tls port` of every node, when started with TLS.
    pub fn tls_seed_addrs(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter_map(|n| n.tls_port.map(|p| format!("127.0.0.1:{p}")))
            .collect()
    }

    /// `redis://host:port` of every node (the bidder's `redis_cluster_nodes`).
    pub fn seed_urls(&self) -> Vec<String> {
        self.seed_addrs()
            .into_iter()
            .map(|a| format!("redis://{a}"))
            .collect()
    }

    /// The ports of the primaries serving slots now, in the order of their first slot.
    pub async fn masters(&self) -> Vec<u16> {
        let owners = self.slot_map().await;
        let mut out: Vec<u16> = Vec::new();
        for port in owners {
            if !out.contains(&port) {
                out.push(port);
            }
        }
        out
    }

    /// The port of the primary serving `slot` now.
    pub async fn master_of(&self, slot: u16) -> u16 {
        let owners = self.slot_map().await;
        match owners.get(usize::from(slot)) {
            Some(port) => *port,
            None => panic!("no primary serves slot {slot}"),
        }
    }

    /// The port serving each slot, as a live node sees it.
    async fn slot_map(&self) -> Vec<u16> {
        for node in self.nodes.iter().filter(|n| n.child.is_some()) {
            let owners = slot_owners(&raw(node.port, &["CLUSTER", "NODES"]).await);
            if owners.len() == 16_384 {
                let mut map = vec![0; 16_384];
                for (slot, port) in owners {
                    if let Some(s) = map.get_mut(usize::from(slot)) {
                        *s = port;
                    }
                }
                return map;
            }
        }
        panic!("no live node knows the whole slot map");
    }

    /// One command on the node at `port` (arguments as given, no quoting); the raw RESP reply,
    /// or an empty string when it does not answer within 2 s.
    pub async fn raw(&self, port: u16, args: &[&str]) -> String {
        raw(port, args).await
    }

    /// Waits until every replica of the primary on `port` has acknowledged everything the
    /// primary had written when this was called (its `master_repl_offset`, against each
    /// replica's acknowledged `offset` in `INFO replication`; replicas acknowledge every
    /// second). `WAIT` cannot do this from a fresh connection: it waits only for that
    /// connection's own writes, and a connection that wrote nothing returns at once.
    ///
    /// # Panics
    /// When the primary has no replica or they do not catch up within 20 s.
    pub async fn wait_replicated(&self, port: u16) {
        let field = |info: &str, key: &str| -> Option<u64> {
            info.lines()
                .find_map(|l| l.trim().strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
        };
        let info = raw(port, &["INFO", "replication"]).await;
        let Some(target) = field(&info, "master_repl_offset:") else {
            panic!("no master_repl_offset from {port}: {info}");
        };
        let deadline = Instant::now() + SETTLE;
        loop {
            let info = raw(port, &["INFO", "replication"]).await;
            // slave0:ip=127.0.0.1,port=7001,state=online,offset=1234,lag=0
            let acked: Vec<u64> = info
                .lines()
                .filter(|l| l.starts_with("slave"))
                .filter_map(|l| {
                    l.split(',')
                        .find_map(|kv| kv.strip_prefix("offset="))
                        .and_then(|v| v.trim().parse().ok())
                })
                .collect();
            if !acked.is_empty() && acked.iter().all(|&o| o >= target) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replicas of {port} did not acknowledge offset {target} within {SETTLE:?}: {info}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A command on every live primary.
    pub async fn on_masters(&self, args: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for port in self.masters().await {
            out.push(raw(port, args).await);
        }
        out
    }

    fn node_mut(&mut self, port: u16) -> &mut Node {
        match self.nodes.iter_mut().find(|n| n.port == port) {
            Some(node) => node,
            None => panic!("no node on port {port}"),
        }
    }

    fn pid(&self, port: u16) -> u32 {
        match self.nodes.iter().find(|n| n.port == port) {
            Some(Node {
                child: Some(child), ..
            }) => child.id(),
            _ => panic!("no live node on port {port}"),
        }
    }

    /// Kills (SIGKILL) the primary on `port` and waits until one of its replicas is promoted
    /// (by the cluster itself, after [`NODE_TIMEOUT_MS`]) and the survivors settle. Returns the
    /// promoted replica's port.
    ///
    /// # Panics
    /// When the node is not a primary with a replica, or no replica is promoted within 20 s.
    pub async fn kill_master(&mut self, port: u16) -> u16 {
        let nodes = raw(port, &["CLUSTER", "NODES"]).await;
        let id = node_id(&nodes, port);
        let replicas: Vec<u16> = nodes
            .lines()
            .filter(|l| l.split(' ').nth(3) == Some(id.as_str()))
            .filter_map(|l| port_of(l.split(' ').nth(1)?))
            .collect();
        assert!(!replicas.is_empty(), "the primary on {port} has no replica");
        if let Some(mut child) = self.node_mut(port).child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + SETTLE;
        let promoted = 'wait: loop {
            for &r in &replicas {
                if raw(r, &["ROLE"]).await.contains("master") {
                    break 'wait r;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no replica of {port} promoted within {SETTLE:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        self.settle().await;
        promoted
    }

    /// Moves `slot` from the primary on `from` to the one on `to`, as `redis-cli --cluster
    /// reshard` does: `IMPORTING` on the target, `MIGRATING` on the source, every key moved with
    /// `MIGRATE`, then `SETSLOT NODE` on every primary.
    pub async fn migrate_slot(&self, slot: u16, from: u16, to: u16) {
        self.begin_migration(slot, from, to).await;
        self.move_keys(slot, from, to).await;
        self.finish_migration(slot, to).await;
    }

    /// The first step of [`RedisCluster::migrate_slot`]: from now on the source answers `ASK`
    /// for the slot's keys it no longer holds.
    pub async fn begin_migration(&self, slot: u16, from: u16, to: u16) {
        let slot = slot.to_string();
        let from_id = node_id(&raw(from, &["CLUSTER", "NODES"]).await, from);
        let to_id = node_id(&raw(to, &["CLUSTER", "NODES"]).await, to);
        let importing = raw(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]).await;
        assert!(importing.starts_with("+OK"), "{importing}");
        let migrating = raw(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]).await;
        assert!(migrating.starts_with("+OK"), "{migrating}");
    }

    /// Moves every key of `slot` now on `from` to `to` (`MIGRATE`, 100 keys at a time).
    pub async fn move_keys(&self, slot: u16, from: u16, to: u16) {
        let slot = slot.to_string();
        let to_port = to.to_string();
        loop {
            let reply = raw(from, &["CLUSTER", "GETKEYSINSLOT", &slot, "100"]).await;
            let keys = bulk_strings(&reply);
            if keys.is_empty() {
                return;
            }
            let mut args = vec!["MIGRATE", "127.0.0.1", &to_port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().map(String::as_str));
            let moved = raw(from, &args).await;
            assert!(moved.starts_with("+OK"), "MIGRATE: {moved}");
        }
    }

    /// The last step of [`RedisCluster::migrate_slot`]: every primary learns that `to` serves
    /// `slot` (clients that did not follow yet get `MOVED`).
    pub async fn finish_migration(&self, slot: u16, to: u16) {
        let slot_text = slot.to_string();
        let to_id = node_id(&raw(to, &["CLUSTER", "NODES"]).await, to);
        let mut ports = vec![to];
        ports.extend(self.masters().await.into_iter().filter(|p| *p != to));
        for port in ports {
            let set = raw(port, &["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id]).await;
            assert!(set.starts_with("+OK"), "SETSLOT NODE on {port}: {set}");
        }
        wait_for("the migration is known everywhere", || async {
            self.master_of(slot).await == to
        })
        .await;
    }

    /// Stops the node on `port` (SIGSTOP): it holds its connections and answers nothing.
    pub fn pause(&self, port: u16) {
        signal(self.pid(port), "-STOP");
    }

    /// Lets a paused node run again (SIGCONT).
    pub fn resume(&self, port: u16) {
        signal(self.pid(port), "-CONT");
    }

    /// Kills the node on `port` and starts it again at once on the same port with its cluster
    /// configuration but no data: it serves its slots again, empty (before the others could
    /// fail it over). Waits until the cluster settles.
    pub async fn restart_empty(&mut self, port: u16) {
        if let Some(mut child) = self.node_mut(port).child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let tls_port = self.node_mut(port).tls_port;
        let child = self.launch(port, tls_port);
        self.node_mut(port).child = Some(child);
        wait_for("the restarted node answers", || async {
            raw(port, &["PING"]).await.starts_with("+PONG")
        })
        .await;
        self.settle().await;
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                // A paused node must be able to die.
                signal(child.id(), "-CONT");
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill").args([sig, &pid.to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "kill {sig} {pid} failed");
}

/// A free port for a cluster node. Its cluster bus listens 10,000 above the port it serves
/// the bus on, so that one must be free too and must exist: redis-server refuses to start on a
/// port above 55,535, and Linux hands out ephemeral ports up to 60,999.
fn free_node_port() -> u16 {
    for _ in 0..1_000 {
        let port = free_port();
        if port <= 55_535 && std::net::TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
    panic!("no loopback port below 55,536 with its cluster bus port free");
}

/// Polls `check` every 20 ms until it holds.
///
/// # Panics
/// When it does not hold within [`SETTLE`].
async fn wait_for<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + SETTLE;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {SETTLE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `(slot, port)` for every slot a primary serves, from `CLUSTER NODES`.
fn slot_owners(nodes: &str) -> Vec<(u16, u16)> {
    let mut out = Vec::new();
    for line in nodes.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
            continue;
        };
        if !flags.contains("master") || flags.contains("fail") {
            continue;
        }
        let Some(port) = port_of(addr) else { continue };
        for range in fields.iter().skip(8) {
            if range.starts_with('[') {
                continue;
            }
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                out.extend((a..=b).map(|s| (s, port)));
            }
        }
    }
    out.sort_unstable();
    out
}

/// The port in `127.0.0.1:7000@17000`.
fn port_of(addr: &str) -> Option<u16> {
    addr.split('@').next()?.rsplit(':').next()?.parse().ok()
}

/// The node id of the node on `port`, from `CLUSTER NODES`.
fn node_id(nodes: &str, port: u16) -> String {
    nodes
        .lines()
        .find(|l| l.split(' ').nth(1).and_then(port_of) == Some(port))
        .and_then(|l| l.split(' ').next())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no node on {port} in {nodes}"))
}

/// The bulk strings of a RESP array reply (the keys `GETKEYSINSLOT` answers).
fn bulk_strings(reply: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = reply.split("\r\n");
    while let Some(line) = lines.next() {
        if line.starts_with('$')
            && let Some(s) = lines.next()
        {
            out.push(s.to_owned());
        }
    }
    out
}

/// One command over a fresh connection; the raw reply, read until a complete one arrived (or
/// an empty string after 2 s). `CLUSTER NODES` of a small cluster fits well in one read, but a
/// reply may come in several.
async fn raw(port: u16, args: &[&str]) -> String {
    let io = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let mut cmd = format!("*{}\r\n", args.len());
        for a in args {
            cmd.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        s.write_all(cmd.as_bytes()).await.ok()?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = s.read(&mut buf).await.ok()?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(buf.get(..n)?);
            if complete(&out) {
                break;
            }
        }
        Some(String::from_utf8_lossy(&out).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(2), io)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Whether `bytes` hold one complete RESP reply (the kinds these helpers read).
fn complete(bytes: &[u8]) -> bool {
    fn one(b: &[u8]) -> Option<usize> {
        let end = b.windows(2).position(|w| w == b"\r\n")?;
        let head = std::str::from_utf8(b.get(1..end)?).ok()?;
        match b.first()? {
            b'+' | b'-' | b':' => Some(end + 2),
            b'$' => {
                let n: i64 = head.parse().ok()?;
                if n < 0 {
                    return Some(end + 2);
                }
                let total = end + 2 + usize::try_from(n).ok()? + 2;
                (b.len() >= total).then_some(total)
            }
            b'*' => {
                let n: i64 = head.parse().ok()?;
                let mut at = end + 2;
                for _ in 0..n.max(0) {
                    at += one(b.get(at..)?)?;
                }
                Some(at)
            }
            _ => None,
        }
    }
    one(bytes).is_some()
}
