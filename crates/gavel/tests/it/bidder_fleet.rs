//! Four `gavel bidder` processes sharing one campaign through one real `redis-server` (started
//! by the test on a free port), driven concurrently, with a win notice for every bid (some
//! delivered twice, each followed by its billing notice), the notices spread over the instances
//! as a load balancer would, mostly not to the one that bid. Shared spend never exceeds the budget
//! and reaches it when demand is ample; with `even` pacing over a short flight, spend at
//! half-time is near half the budget.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::BidderProcess;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use testkit::RedisServer;
use testkit::TempDir;
use testkit::http::{call, call_retrying, notice};
use testkit::secrets::ADMIN_TOKEN;

fn now_ms() -> u64 {
    units::Timestamp::now().millis()
}

/// Writes the campaign file and one config per instance; starts the instances.
fn start_fleet(
    dir: &Path,
    redis: &RedisServer,
    campaigns: &str,
    extra: &str,
) -> Vec<BidderProcess> {
    std::fs::write(dir.join("campaigns.json"), campaigns).unwrap();
    let security = testkit::secrets::security_toml(dir);
    (0..4)
        .map(|i| {
            let config = dir.join(format!("b{i}.toml"));
            std::fs::write(
                &config,
                format!(
                    "campaigns = \"campaigns.json\"\nnode = \"b{i}\"\n{security}\
                     [ledger]\nbackend = \"redis\"\nredis_url = \"redis://{}\"\nredis_timeout_ms = 200\n\
                     lease_chunk = 0.02\nlease_report_ms = 50\nlease_ttl_ms = 2000\n{extra}",
                    redis.addr()
                ),
            )
            .unwrap();
            if i == 0 {
                common::create_ledger(&config);
            }
            BidderProcess::start(&config)
        })
        .collect()
}

fn request(id: u64) -> String {
    format!(
        r#"{{"id": "q{id}", "at": 1, "tmax": 200, "imp": [{{"id": "1", "banner": {{"w": 300, "h": 250}}, "bidfloor": 0.1}}],
  "site": {{"id": "s", "domain": "news.example"}}, "device": {{"devicetype": 2, "geo": {{"country": "USA"}}}}}}"#
    )
}

/// The campaign as one instance's admin endpoint reports it.
async fn campaign(addr: SocketAddr, id: &str) -> Value {
    let (status, body) =
        call_retrying(addr, "GET", "/admin/campaigns", Some(ADMIN_TOKEN), "").await;
    assert_eq!(status, 200, "{body}");
    let all: Value = serde_json::from_str(&body).unwrap();
    all["campaigns"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["id"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("no {id} in {all}"))
}

fn nanos(c: &Value, key: &str) -> i64 {
    c["nanos"][key]
        .as_i64()
        .unwrap_or_else(|| panic!("{key} in {c}"))
}

/// Counters shared by the load tasks.
#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    bids: AtomicU64,
    /// Win notices answered 204 the first time: each charged its price.
    wins: AtomicU64,
    /// Sum of the clearing prices of those wins, in CPM micros (= nanos charged).
    charged: AtomicU64,
    per_instance_bids: [AtomicU64; 4],
    /// 1 + the index of an instance killed by the test (0: none): nothing more is sent to it.
    dead: AtomicU64,
}

impl Tally {
    fn alive(&self, i: usize) -> bool {
        self.dead.load(Relaxed) != i as u64 + 1
    }
}

/// One load task: bid requests round-robin over the instances; every bid is won at its own
/// price (first price), its win notice sent (twice for one bid in five) and its billing notice.
/// The notices go round-robin too, as behind a load balancer (see below): most reach another
/// instance than the one that made the bid.
async fn drive(
    addrs: Arc<Vec<SocketAddr>>,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    seed: u64,
    pause: Duration,
) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut n = seed;
    while !stop.load(Relaxed) {
        let i = (n % 4) as usize;
        n += 1;
        if !tally.alive(i) {
            continue;
        }
        tally.requests.fetch_add(1, Relaxed);
        let (status, body) = call(addrs[i], "POST", "/openrtb2/bid", &request(n)).await;
        if status == 0 && !tally.alive(i) {
            // Killed under this request.
            continue;
        }
        if status == 200 {
            tally.bids.fetch_add(1, Relaxed);
            tally.per_instance_bids[i].fetch_add(1, Relaxed);
            let resp: Value = serde_json::from_str(&body).unwrap();
            let bid = &resp["seatbid"][0]["bid"][0];
            let price = bid["price"].as_f64().unwrap();
            let text = format!("{price}");
            let win = bid["nurl"]
                .as_str()
                .unwrap()
                .replace("${AUCTION_PRICE}", &text);
            let bill = bid["burl"]
                .as_str()
                .unwrap()
                .replace("${AUCTION_PRICE}", &text);
            // Tasks of even seed send the win to the bidder, the others to the next instance;
            // the repeat and the billing notice go further round.
            let first = (seed % 2) as usize;
            let (status, body) = notify(&addrs, &tally, i + first, &win).await;
            assert_eq!(status, 204, "win notice refused: {body}");
            tally.wins.fetch_add(1, Relaxed);
            tally
                .charged
                .fetch_add((price * 1e6).round() as u64, Relaxed);
            if rng.random_bool(0.2) {
                assert_eq!(notify(&addrs, &tally, i + first + 1, &win).await.0, 204);
            }
            assert_eq!(notify(&addrs, &tally, i + first + 2, &bill).await.0, 204);
        } else {
            assert_eq!(status, 204, "{body}");
        }
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
}

/// `n` load tasks without pauses (seeds 0..n).
fn drivers(
    addrs: &Arc<Vec<SocketAddr>>,
    tally: &Arc<Tally>,
    stop: &Arc<AtomicBool>,
    n: u64,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|t| {
            tokio::spawn(drive(
                addrs.clone(),
                tally.clone(),
                stop.clone(),
                t,
                Duration::ZERO,
            ))
        })
        .collect()
}

/// Sends a notice to instance `to % 4`, or the next live one; if that one is killed under the
/// call, to the next. A 503 (Redis slower than `redis_timeout_ms`) is sent again, as the
/// exchange would.
async fn notify(addrs: &[SocketAddr], tally: &Tally, to: usize, url: &str) -> (u16, String) {
    for d in 0..4 {
        let j = (to + d) % 4;
        if !tally.alive(j) {
            continue;
        }
        let answer = notice(addrs[j], url).await;
        if answer.0 != 0 || tally.alive(j) {
            return answer;
        }
    }
    (0, String::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_never_overspend_a_shared_budget_with_leases() {
    shared_budget("lease").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_never_overspend_a_shared_budget_reserving_per_bid() {
    shared_budget("per-bid").await;
}

async fn shared_budget(mode: &str) {
    let redis = RedisServer::start().await;
    let dir = TempDir::new(mode);
    // 0.50 at CPM 2.00: exactly 250 impressions; leases of 0.02 are 10 impressions each.
    let campaigns = r#"[{"id": "shared", "budget": {"total": 0.50}, "bid": {"cpm": 2.00}, "pacing": "asap",
      "creatives": [{"id": "cr1", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["shop.example"]}],
      "targeting": {}}]"#;
    let mut fleet = start_fleet(
        &dir,
        &redis,
        campaigns,
        &format!("redis_mode = \"{mode}\"\n"),
    );
    let addrs = Arc::new(fleet.iter().map(|b| b.addr).collect::<Vec<_>>());
    let admins: Vec<SocketAddr> = fleet.iter().map(|b| b.admin).collect();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = drivers(&addrs, &tally, &stop, 16);

    // Watch the shared figures while the load runs: never over budget, until the budget is
    // gone (or a generous bound on time).
    let budget = 500_000_000;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut checks = 0;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let c = campaign(admins[checks % 4], "shared").await;
        checks += 1;
        let (spent, reserved) = (nanos(&c, "spent"), nanos(&c, "reserved"));
        assert!(spent + reserved <= budget, "over budget: {c}");
        assert_eq!(nanos(&c, "budget"), budget);
        if spent == budget || Instant::now() > deadline {
            break;
        }
    }
    // Demand keeps coming for a while after the budget is gone: nothing more may be spent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Relaxed);
    for t in tasks {
        t.await.unwrap();
    }

    // Every instance reports the same shared numbers.
    let mut seen = Vec::new();
    for a in &admins {
        let c = campaign(*a, "shared").await;
        seen.push((
            nanos(&c, "spent"),
            nanos(&c, "reserved"),
            nanos(&c, "available"),
        ));
    }
    assert!(
        seen.windows(2).all(|w| w[0] == w[1]),
        "instances disagree: {seen:?}"
    );
    let (spent, _, _) = seen[0];
    let wins = tally.wins.load(Relaxed);
    let charged = tally.charged.load(Relaxed) as i64;
    eprintln!(
        "{mode}: {} requests, {} bids, {wins} wins charged {charged} nanos, spent {spent} of {budget}; bids per instance {:?}",
        tally.requests.load(Relaxed),
        tally.bids.load(Relaxed),
        tally
            .per_instance_bids
            .iter()
            .map(|b| b.load(Relaxed))
            .collect::<Vec<_>>(),
    );
    assert!(spent <= budget, "spent {spent} > budget {budget}");
    // Ample demand: the budget is reached to within one impression's price (2,000,000 nanos).
    assert!(budget - spent < 2_000_000, "spent only {spent} of {budget}");
    // What the notices charged is what the ledger spent: duplicates and billing notices after
    // a win charged nothing more.
    assert_eq!(charged, spent);
    assert!(
        tally.per_instance_bids.iter().all(|b| b.load(Relaxed) > 0),
        "every instance should have spent part of the budget"
    );

    // After SIGTERM every instance hands its leases back (and exits 0): nothing stays reserved.
    for b in &mut fleet {
        b.stop();
    }
    let ledger = ledger::RedisLedger::new(ledger::RedisConfig {
        addr: redis.addr(),
        // The test's own reads: generous, the machine may be busy.
        timeout: testkit::http::RETRY_FOR,
        ..ledger::RedisConfig::default()
    });
    let balance = ledger
        .balance("shared", units::Timestamp::now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(balance.spent.get(), spent);
    assert_eq!(balance.reserved.get(), 0, "{balance:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn even_pacing_spends_half_the_budget_by_half_time() {
    let redis = RedisServer::start().await;
    let dir = TempDir::new("even");
    // 0.40 at CPM 2.00 = 200 impressions over a 16 s flight (12.5/s); demand is several times
    // that (8 tasks, each about 25 requests/s).
    let start = now_ms().div_ceil(1000) * 1000 + 2000;
    let end = start + 16_000;
    let campaigns = format!(
        r#"[{{"id": "even", "budget": {{"total": 0.40}}, "bid": {{"cpm": 2.00}}, "pacing": "even",
      "flight": {{"start": "{}", "end": "{}"}},
      "creatives": [{{"id": "cr1", "w": 300, "h": 250, "adm": "<div>ad</div>"}}], "targeting": {{}}}}]"#,
        units::Timestamp(start).to_rfc3339(),
        units::Timestamp(end).to_rfc3339()
    );
    let mut fleet = start_fleet(
        &dir,
        &redis,
        &campaigns,
        "[pacing]\ncontrol_interval_ms = 100\n",
    );
    let addrs = Arc::new(fleet.iter().map(|b| b.addr).collect::<Vec<_>>());
    let admins: Vec<SocketAddr> = fleet.iter().map(|b| b.admin).collect();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            tokio::spawn(drive(
                addrs.clone(),
                tally.clone(),
                stop.clone(),
                100 + t,
                Duration::from_millis(40),
            ))
        })
        .collect();
    let budget = 400_000_000i64;
    let wait_until = |ms: u64| async move {
        let now = now_ms();
        if ms > now {
            tokio::time::sleep(Duration::from_millis(ms - now)).await;
        }
    };
    wait_until(start + 8_000).await;
    let half = nanos(&campaign(admins[0], "even").await, "spent");
    wait_until(end + 500).await;
    let at_end = nanos(&campaign(admins[1], "even").await, "spent");
    stop.store(true, Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    eprintln!(
        "even: {} requests, {} bids; spent {half} at half-time ({:.1}% of budget), {at_end} at the end ({:.1}%)",
        tally.requests.load(Relaxed),
        tally.bids.load(Relaxed),
        100.0 * half as f64 / budget as f64,
        100.0 * at_end as f64 / budget as f64,
    );
    // Tolerance: half-time spend within 10% of the budget of the half-way target (the
    // controller's gate lets spend run ahead by up to 5% of a short flight's budget; lease
    // reports lag by up to 50 ms; each win is 0.5% of the budget). Measured: 50.5% in three
    // runs out of three, 98.5-99.5% at the end.
    assert!(
        (half - budget / 2).abs() <= budget / 10,
        "half-time spend {half}, target {}",
        budget / 2
    );
    assert!(at_end <= budget);
    assert!(
        at_end >= budget * 80 / 100,
        "spent only {at_end} by the end of the flight"
    );
    for b in &mut fleet {
        b.stop();
    }
}

/// The crash bound, measured: instance `b0` is SIGKILLed under traffic once a quarter of the
/// budget is spent; the other three spend the rest. What the fleet really charged (every win
/// notice answered the first time) against the books in Redis:
/// - lease mode: the books miss what `b0` charged and had not reported, at most its lease's
///   outstanding amount (about 1.5 `lease_chunk`), and its lease returns to the pool within
///   `lease_ttl_ms` plus one sweep round;
/// - per-bid mode (the strict option): nothing is missed.
async fn crash(mode: &str) -> (i64, i64, Duration) {
    let redis = RedisServer::start().await;
    let dir = TempDir::new(&format!("crash-{mode}"));
    // 2.00 at CPM 2.00: 1,000 impressions; leases of 0.02 are 10 impressions each.
    let campaigns = r#"[{"id": "shared", "budget": {"total": 2.00}, "bid": {"cpm": 2.00}, "pacing": "asap",
      "creatives": [{"id": "cr1", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["shop.example"]}],
      "targeting": {}}]"#;
    let extra = format!(
        "redis_mode = \"{mode}\"\nreservation_ttl_ms = 2000\nreservation_grace_ms = 1000\n"
    );
    let mut fleet = start_fleet(&dir, &redis, campaigns, &extra);
    let addrs = Arc::new(fleet.iter().map(|b| b.addr).collect::<Vec<_>>());
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = drivers(&addrs, &tally, &stop, 16);
    let books = ledger::RedisLedger::new(ledger::RedisConfig {
        addr: redis.addr(),
        // The test's own reads: generous, the machine may be busy.
        timeout: testkit::http::RETRY_FOR,
        ..ledger::RedisConfig::default()
    });
    let balance = || async {
        books
            .balance("shared", units::Timestamp::now())
            .await
            .unwrap()
            .unwrap()
    };
    let budget = 2_000_000_000;
    testkit::time::eventually(Duration::from_secs(60), "a quarter spent", || async {
        balance().await.spent.get() >= budget / 4
    })
    .await;
    tally.dead.store(1, Relaxed);
    fleet[0].crash();
    let killed = Instant::now();
    let mut returned = Duration::ZERO;
    if mode == "lease" {
        // The dead instance's lease of the campaign is reclaimed by the others' sweep.
        testkit::time::eventually(Duration::from_secs(20), "b0's lease reclaimed", || async {
            redis
                .raw("EXISTS gavel:{shared}own:b0:shared")
                .await
                .starts_with(":0")
        })
        .await;
        returned = killed.elapsed();
    }
    // The survivors spend what is left (the dead one's parked money comes back).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let b = balance().await;
        if b.spent.get() + 2_000_000 > budget || Instant::now() > deadline {
            break;
        }
    }
    stop.store(true, Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    // The survivors exit cleanly; the killed one was reaped by `crash`.
    for b in &mut fleet[1..] {
        b.stop();
    }
    let real = tally.charged.load(Relaxed) as i64;
    let books = balance().await.spent.get();
    eprintln!(
        "{mode}: budget {budget}, charged by notices {real}, in the books {books}, missing {}, over budget {}; lease back after {returned:?}",
        real - books,
        (real - budget).max(0)
    );
    (real, books, returned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_lease_instance_costs_at_most_its_outstanding_lease() {
    let (real, books, returned) = crash("lease").await;
    let budget = 2_000_000_000;
    let bound = 30_000_000; // 1.5 x lease_chunk (0.02)
    assert!(books <= budget, "books {books} over budget");
    assert!(
        real >= books,
        "the books hold charges nobody made: {real} < {books}"
    );
    assert!(
        real - books <= bound,
        "lost {} > bound {bound}",
        real - books
    );
    assert!(real <= budget + bound);
    // lease_ttl_ms (2 s) after the last report, plus one sweep round (50 ms); wide enough for a
    // loaded machine, and far below the reservation TTL the per-bid mode waits for.
    assert!(returned < Duration::from_secs(5), "{returned:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_per_bid_instance_costs_nothing() {
    let (real, books, _) = crash("per-bid").await;
    assert_eq!(real, books, "every charge is in the books");
    assert!(books <= 2_000_000_000);
}
