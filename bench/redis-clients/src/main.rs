//! Gavel's hand-written Redis client (`ledger::RedisLedger`) against the `redis` crate, in one
//! run, on the ledger's per-bid path: one reservation then its commit, each one `EVALSHA` of the
//! ledger's own Lua scripts, against one local redis-server.
//!
//! Clients, measured in interleaved rounds so that drift on a shared machine (another build, a
//! noisy neighbour) hits them all alike:
//! - `gavel`: `ledger::RedisLedger`, its public `reserve`/`commit` (a pool of up to 16 plain
//!   connections, one request in flight on each);
//! - `redis mux`: one `redis::aio::MultiplexedConnection` shared by every task (requests
//!   pipelined on one socket) and `redis::Script::invoke_async`;
//! - `redis manager`: the same through `redis::aio::ConnectionManager`, which redials by itself.
//!
//! Workloads: one task (latency-bound) and 16 concurrent tasks. Run it as
//! `taskset -c 0 redis-clients`: it pins redis-server to core 1 itself.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use ledger::{CommitOutcome, MAX_AMOUNT, RedisConfig, RedisLedger};
use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::{AsyncConnectionConfig, Script, Value};
use testkit::RedisServer;
use units::{Limits, Nanos, Timestamp};

/// The exact bodies `ledger::redis::scripts` builds (`concat!` of the prelude and the body, no
/// separator), so both clients run byte-identical Lua and share one SHA-1 in Redis's cache.
const RESERVE_LUA: &str = concat!(
    include_str!("../../../crates/ledger/src/redis/lua/common.lua"),
    include_str!("../../../crates/ledger/src/redis/lua/reserve.lua"),
);
const COMMIT_LUA: &str = concat!(
    include_str!("../../../crates/ledger/src/redis/lua/common.lua"),
    include_str!("../../../crates/ledger/src/redis/lua/commit.lua"),
);

/// Interleaved rounds; the table reports the median round of each client and workload.
const ROUNDS: usize = 7;
/// One client's measurement in one round of one workload.
const SLOT: Duration = Duration::from_secs(2);
/// Before the rounds, per client and workload: opens connections, loads the scripts, warms the
/// allocator; not counted.
const WARMUP: Duration = Duration::from_millis(300);
/// No slot starts past this, so that the run ends well within 3 minutes even if slots overrun
/// (the planned run is about 90 s).
const BUDGET: Duration = Duration::from_secs(150);
/// The deadline of every call, for every client: generous, so a loaded machine shows up as
/// latency, not as errors.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
const CONCURRENT_TASKS: usize = 16;
/// The campaign every client spends from (created once through the ledger).
const CAMPAIGN: &str = "c";
const RESERVE_AMOUNT: i64 = 5_000;
const PRICE: i64 = 4_000;
/// Reservations expire a minute after they are made (the per-bid path's order of magnitude).
const EXPIRY_MS: u64 = 60_000;
/// The baseline the table's ratios are taken against.
const GAVEL: &str = "gavel RedisLedger";

type Failure = String;

/// The redis crate's side: the two scripts and the ARGV the ledger sends besides the ids.
#[derive(Debug)]
struct Scripts {
    reserve: Script,
    commit: Script,
    prefix: String,
    tombstone_ms: u64,
}

/// One client under test. Cloning is how each task gets its handle: all three are cheap
/// clones sharing their connections.
#[derive(Clone)]
enum Client {
    Gavel(RedisLedger),
    Mux(MultiplexedConnection, Arc<Scripts>),
    Manager(ConnectionManager, Arc<Scripts>),
}

impl Client {
    /// One reserve+commit with a fresh id; `Err` describes what went wrong.
    async fn pair(&mut self, id: &str) -> Result<(), Failure> {
        let now = Timestamp::now();
        match self {
            Client::Gavel(l) => gavel_pair(l, id, now).await,
            Client::Mux(conn, s) => redis_pair(conn, s, id, now).await,
            Client::Manager(conn, s) => redis_pair(conn, s, id, now).await,
        }
    }
}

async fn gavel_pair(l: &RedisLedger, id: &str, now: Timestamp) -> Result<(), Failure> {
    let expires = Timestamp(now.millis() + EXPIRY_MS);
    match l
        .reserve(id, CAMPAIGN, Nanos(RESERVE_AMOUNT), expires, now)
        .await
    {
        Ok(Ok(())) => {}
        other => return Err(format!("gavel reserve: {other:?}")),
    }
    match l.commit(id, Nanos(PRICE), now).await {
        Ok(Ok(CommitOutcome::Charged(_))) => Ok(()),
        other => Err(format!("gavel commit: {other:?}")),
    }
}

/// The same two calls with the redis crate: ARGV exactly as `RedisLedger::reserve`/`commit`
/// send them (prefix first; an empty ledger id, as a ledger that never opened one sends;
/// integers in decimal, which is how the crate writes them).
async fn redis_pair<C: ConnectionLike>(
    conn: &mut C,
    s: &Scripts,
    id: &str,
    now: Timestamp,
) -> Result<(), Failure> {
    let (now_ms, day) = (now.millis(), now.day());
    let mut reserve = s.reserve.prepare_invoke();
    reserve
        .arg(&s.prefix)
        .arg(id)
        .arg(CAMPAIGN)
        .arg(RESERVE_AMOUNT)
        .arg(now_ms + EXPIRY_MS)
        .arg(day)
        .arg("");
    let reply = tokio::time::timeout(CALL_TIMEOUT, reserve.invoke_async::<Value>(conn)).await;
    expect_status(reply, b"ok", "reserve")?;
    let mut commit = s.commit.prepare_invoke();
    commit
        .arg(&s.prefix)
        .arg(id)
        .arg(PRICE)
        .arg(now_ms)
        .arg(day)
        .arg(s.tombstone_ms);
    let reply = tokio::time::timeout(CALL_TIMEOUT, commit.invoke_async::<Value>(conn)).await;
    expect_status(reply, b"Charged", "commit")
}

/// The scripts answer an array whose first item is a status word.
fn expect_status(
    reply: Result<redis::RedisResult<Value>, tokio::time::error::Elapsed>,
    want: &[u8],
    op: &str,
) -> Result<(), Failure> {
    let value = match reply {
        Err(_) => return Err(format!("redis {op}: timed out")),
        Ok(Err(e)) => return Err(format!("redis {op}: {e}")),
        Ok(Ok(v)) => v,
    };
    match &value {
        Value::Array(items) => match items.first() {
            Some(Value::BulkString(s)) if s.as_slice() == want => Ok(()),
            _ => Err(format!("redis {op}: answered {value:?}")),
        },
        _ => Err(format!("redis {op}: answered {value:?}")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    Serial,
    Concurrent,
}

impl Workload {
    const ALL: [Workload; 2] = [Workload::Serial, Workload::Concurrent];

    fn tasks(self) -> usize {
        match self {
            Workload::Serial => 1,
            Workload::Concurrent => CONCURRENT_TASKS,
        }
    }

    fn label(self) -> String {
        match self {
            Workload::Serial => "serial (1 task)".to_owned(),
            Workload::Concurrent => format!("{CONCURRENT_TASKS} tasks"),
        }
    }
}

/// What one client did in one workload, over all its rounds.
struct Tally {
    name: &'static str,
    workload: Workload,
    /// Pairs per second, one per round.
    rates: Vec<f64>,
    /// Latency of a pair (reserve sent to commit answered), microseconds, every round.
    latency: Histogram<u64>,
    pairs: u64,
    errors: u64,
}

/// What one slot measured.
struct Slot {
    pairs: u64,
    errors: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
    first_error: Option<Failure>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 60 s at 3 significant digits: covers a timed-out pair (2 × 1 s) with room.
    match Histogram::new_with_bounds(1, 60_000_000, 3) {
        Ok(h) => h,
        Err(e) => panic!("histogram bounds: {e}"),
    }
}

/// Runs `tasks` tasks doing pairs back to back until `length` has passed; every started pair is
/// finished (each call is bounded by its timeout), and the rate is over the time until the last
/// task stops.
async fn run_slot(client: &Client, tag: &'static str, tasks: usize, length: Duration) -> Slot {
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    let started = Instant::now();
    let deadline = started + length;
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let mut client = client.clone();
            tokio::spawn(async move {
                let mut slot = Slot {
                    pairs: 0,
                    errors: 0,
                    elapsed: Duration::ZERO,
                    latency: histogram(),
                    first_error: None,
                };
                while Instant::now() < deadline {
                    // Ids are never reused: a reused id would be a DuplicateId refusal.
                    let id = format!("{tag}{}", NEXT_ID.fetch_add(1, Ordering::Relaxed));
                    let t0 = Instant::now();
                    match client.pair(&id).await {
                        Ok(()) => {
                            let us = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
                            slot.latency.saturating_record(us.max(1));
                            slot.pairs += 1;
                        }
                        Err(e) => {
                            slot.errors += 1;
                            slot.first_error.get_or_insert(e);
                        }
                    }
                }
                slot
            })
        })
        .collect();
    let mut total = Slot {
        pairs: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram(),
        first_error: None,
    };
    for handle in handles {
        match handle.await {
            Ok(slot) => {
                total.pairs += slot.pairs;
                total.errors += slot.errors;
                // Same bounds on both sides: the add cannot fail.
                let _ = total.latency.add(&slot.latency);
                if total.first_error.is_none() {
                    total.first_error = slot.first_error;
                }
            }
            Err(e) => {
                total.errors += 1;
                total.first_error.get_or_insert(format!("task died: {e}"));
            }
        }
    }
    total.elapsed = started.elapsed();
    total
}

/// Pins redis-server (all its threads: `-a`) to core 1, away from the bench on core 0, so the
/// two do not take turns on one core. Answers what happened, for the header.
async fn pin_redis(server: &RedisServer) -> String {
    let info = server.raw("INFO server").await;
    let Some(pid) = info
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .map(str::trim)
    else {
        return "redis-server not pinned (no process_id in INFO)".to_owned();
    };
    match Command::new("taskset")
        .args(["-a", "-pc", "1", pid])
        .output()
    {
        Ok(out) if out.status.success() => format!("redis-server pid {pid} pinned to core 1"),
        Ok(out) => format!(
            "redis-server pid {pid} NOT pinned: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("redis-server pid {pid} NOT pinned: taskset: {e}"),
    }
}

/// This process's CPU affinity as the kernel reports it (`taskset -c 0` makes it "0").
fn own_affinity() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

fn redis_field(info: &str, field: &str) -> String {
    info.lines()
        .find_map(|l| l.strip_prefix(field).and_then(|v| v.strip_prefix(':')))
        .map_or_else(|| "?".to_owned(), |v| v.trim().to_owned())
}

fn main() {
    // One worker: the bench is pinned to one core, so more workers would only take turns on
    // it. A multi-thread runtime (not current_thread) because that is what Gavel's servers
    // run; all measured work is spawned, so it runs on the worker, with the connection
    // drivers (the redis crate spawns one per multiplexed connection) on the same thread.
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    };
    runtime.block_on(run());
}

async fn run() {
    let run_started = Instant::now();
    let server = RedisServer::start().await;
    let pinning = pin_redis(&server).await;
    let server_info = server.raw("INFO server").await;

    // (a) Gavel's client: default configuration but the address and the deadline.
    let config = RedisConfig {
        addr: server.addr(),
        timeout: CALL_TIMEOUT,
        ..RedisConfig::default()
    };
    let scripts = Arc::new(Scripts {
        reserve: Script::new(RESERVE_LUA),
        commit: Script::new(COMMIT_LUA),
        prefix: config.prefix.clone(),
        tombstone_ms: u64::try_from(config.tombstone_ttl.as_millis()).unwrap_or(u64::MAX),
    });
    let gavel = RedisLedger::new(config);
    let limits = Limits {
        total: Nanos(MAX_AMOUNT),
        daily: None,
    };
    if let Err(e) = gavel.set_limits(CAMPAIGN, limits, Timestamp::now()).await {
        panic!("set_limits: {e}");
    }

    // (b), (c): the redis crate. Its built-in 500 ms response timeout is turned off so that the
    // per-call `tokio::time::timeout` is the one deadline, as in Gavel's client.
    let url = format!("redis://{}/", server.addr());
    let client = match redis::Client::open(url.as_str()) {
        Ok(c) => c,
        Err(e) => panic!("redis::Client::open({url}): {e}"),
    };
    let mux_config = AsyncConnectionConfig::new().set_response_timeout(None);
    let mux = match client
        .get_multiplexed_async_connection_with_config(&mux_config)
        .await
    {
        Ok(c) => c,
        Err(e) => panic!("multiplexed connection: {e}"),
    };
    let manager_config = ConnectionManagerConfig::new().set_response_timeout(None);
    let manager = match ConnectionManager::new_with_config(client, manager_config).await {
        Ok(c) => c,
        Err(e) => panic!("connection manager: {e}"),
    };

    let clients: [(&'static str, &'static str, Client); 3] = [
        (GAVEL, "g", Client::Gavel(gavel.clone())),
        ("redis mux", "m", Client::Mux(mux, Arc::clone(&scripts))),
        (
            "redis manager",
            "cm",
            Client::Manager(manager, Arc::clone(&scripts)),
        ),
    ];

    let mut tallies: Vec<Tally> = Vec::new();
    for workload in Workload::ALL {
        for (name, _, _) in &clients {
            tallies.push(Tally {
                name,
                workload,
                rates: Vec::new(),
                latency: histogram(),
                pairs: 0,
                errors: 0,
            });
        }
    }
    let mut committed = 0u64;
    let mut first_errors: Vec<String> = Vec::new();

    for workload in Workload::ALL {
        for (name, tag, client) in &clients {
            let slot = run_slot(client, tag, workload.tasks(), WARMUP).await;
            committed += slot.pairs;
            if let Some(e) = slot.first_error {
                first_errors.push(format!("warm-up {name} {}: {e}", workload.label()));
            }
        }
    }

    let mut rounds_done = 0;
    'rounds: for round in 0..ROUNDS {
        for workload in Workload::ALL {
            // The order rotates each round, so no client always runs first after a switch of
            // workload, or always right after the same other client.
            for k in 0..clients.len() {
                let i = (k + round) % clients.len();
                let (name, tag, client) = &clients[i];
                if run_started.elapsed() + SLOT > BUDGET {
                    eprintln!("time budget reached: stopping after {rounds_done} full rounds");
                    break 'rounds;
                }
                let slot = run_slot(client, tag, workload.tasks(), SLOT).await;
                committed += slot.pairs;
                let Some(t) = tallies
                    .iter_mut()
                    .find(|t| t.name == *name && t.workload == workload)
                else {
                    continue;
                };
                t.rates.push(slot.pairs as f64 / slot.elapsed.as_secs_f64());
                let _ = t.latency.add(&slot.latency);
                t.pairs += slot.pairs;
                t.errors += slot.errors;
                if let Some(e) = slot.first_error {
                    first_errors.push(format!("round {round} {name} {}: {e}", workload.label()));
                }
            }
        }
        rounds_done = round + 1;
        eprintln!(
            "round {rounds_done}/{ROUNDS} done at {:.0} s",
            run_started.elapsed().as_secs_f64()
        );
    }

    // The books must agree with what the clients were told: every answered commit charged
    // PRICE, so the campaign's spent is PRICE times the pairs counted (a timed-out call may
    // have been applied anyway, which would show here as a difference).
    let books = match gavel.balance(CAMPAIGN, Timestamp::now()).await {
        Ok(Some(b)) if b.spent == Nanos(PRICE * committed as i64) && b.reserved == Nanos(0) => {
            format!("ok ({committed} pairs charged, nothing left reserved)")
        }
        Ok(Some(b)) => format!(
            "MISMATCH: {committed} pairs counted, spent {} (= {} pairs), reserved {}",
            b.spent.get(),
            b.spent.get() / PRICE,
            b.reserved.get()
        ),
        other => format!("could not read the balance: {other:?}"),
    };
    let memory = server.raw("INFO memory").await;

    println!("## Redis clients on Gavel's per-bid path (reserve + commit, EVALSHA each)\n");
    println!(
        "- redis-server {} on 127.0.0.1:{}; {pinning}; bench affinity: cores {}",
        redis_field(&server_info, "redis_version"),
        server.port,
        own_affinity()
    );
    println!(
        "- redis crate (version: Cargo.lock) with tokio-comp, script, connection-manager; tokio \
         multi-thread runtime, 1 worker; call timeout {} ms for every client",
        CALL_TIMEOUT.as_millis()
    );
    println!(
        "- {rounds_done} interleaved rounds of {} s per client and workload (order rotated each \
         round), after {} ms warm-up each",
        SLOT.as_secs(),
        WARMUP.as_millis()
    );
    println!("- books check: {books}");
    println!(
        "- redis used_memory after the run: {}",
        redis_field(&memory, "used_memory_human")
    );
    println!();
    println!(
        "| client | workload | pairs/s (median) | min–max over rounds | vs gavel | p50 µs | p99 µs | pairs | errors |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for t in &mut tallies {
        t.rates.sort_by(f64::total_cmp);
    }
    for t in &tallies {
        let med = median(&t.rates);
        let base = tallies
            .iter()
            .find(|b| b.workload == t.workload && b.name == GAVEL)
            .map_or(0.0, |b| median(&b.rates));
        let ratio = if base > 0.0 { med / base } else { 0.0 };
        let (lo, hi) = (
            t.rates.first().copied().unwrap_or(0.0),
            t.rates.last().copied().unwrap_or(0.0),
        );
        println!(
            "| {} | {} | {:.0} | {:.0}–{:.0} | {:.2}× | {} | {} | {} | {} |",
            t.name,
            t.workload.label(),
            med,
            lo,
            hi,
            ratio,
            t.latency.value_at_quantile(0.50),
            t.latency.value_at_quantile(0.99),
            t.pairs,
            t.errors
        );
    }
    if !first_errors.is_empty() {
        println!("\nFirst error of each slot that had any:");
        for e in first_errors.iter().take(20) {
            println!("- {e}");
        }
    }
    println!(
        "\nTotal run time: {:.0} s",
        run_started.elapsed().as_secs_f64()
    );
    drop(server);
}
