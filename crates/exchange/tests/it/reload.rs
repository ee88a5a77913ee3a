//! Reloading the bidder list while auctions run, over real sockets: truncated, garbage and
//! semantically invalid files are refused (the last good list keeps serving, the reason is
//! counted by kind), good files are applied by the watcher and by an explicit reload (what
//! SIGHUP calls), and not one auction fails or runs late meanwhile. Figures are printed
//! (`cargo test -p exchange --test it reload:: -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use exchange::metrics::{BidderOutcome, ReloadOutcome};
use exchange::reload::ReloadError;
use serde_json::json;
use support::*;
use testkit::TempDir;

fn priced_bidder(seat: &'static str, price: f64) -> impl Fn(&openrtb::BidRequest) -> Script {
    move |r| {
        bids(
            r,
            seat,
            |imp| json!({"id": "b", "impid": imp, "price": price}),
        )
    }
}

/// A bidder's section. Its connection cap is far above what the tests' 250 auctions/s need
/// (a call takes about a millisecond), so that a CPU stall of the test machine (the bidders,
/// the exchange and the load share its cores) cannot fill a pool and turn auctions into 204s:
/// with a cap of 32, a 130 ms stall did, 2 runs in 10 under parallel builds.
fn bidder_block(name: &str, endpoint: &str) -> String {
    format!("[[bidders]]\nname = \"{name}\"\nendpoint = \"{endpoint}\"\nmax_connections = 512\n")
}

/// One auction's result as the seller saw it.
struct Answer {
    status: u16,
    seat: Option<String>,
    took: Duration,
}

/// Auctions sent and answered so far by [`drive`].
#[derive(Default)]
struct Progress {
    sent: AtomicUsize,
    answered: AtomicUsize,
}

/// Sends an auction every `every` (each on its own task, so a slow one delays none of the
/// others) until `stop` is set; returns what each got. The requests carry a 1 s `tmax`, so
/// "every auction got a bid" holds on a machine busy with the whole suite: the bidders answer
/// at once, and the claim is about reloads, not speed.
fn drive(
    addr: SocketAddr,
    every: Duration,
    stop: Arc<AtomicBool>,
    progress: Arc<Progress>,
) -> tokio::task::JoinHandle<Vec<Answer>> {
    tokio::spawn(async move {
        let answers = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = tokio::task::JoinSet::new();
        let mut tick = tokio::time::interval(every);
        let mut request = banner_request(0.1);
        request["tmax"] = json!(1000);
        let request = Arc::new(request);
        while !stop.load(Relaxed) {
            tick.tick().await;
            let (answers, progress, request) = (answers.clone(), progress.clone(), request.clone());
            progress.sent.fetch_add(1, Relaxed);
            tasks.spawn(async move {
                let started = Instant::now();
                let (status, body) = auction(addr, &request).await;
                let seat = body.and_then(|b| b["seatbid"][0]["seat"].as_str().map(str::to_owned));
                answers.lock().unwrap().push(Answer {
                    status: status.as_u16(),
                    seat,
                    took: started.elapsed(),
                });
                progress.answered.fetch_add(1, Relaxed);
            });
        }
        while tasks.join_next().await.is_some() {}
        Arc::try_unwrap(answers)
            .ok()
            .map(|m| m.into_inner().unwrap())
            .unwrap_or_default()
    })
}

/// Waits (10 s at most) until every auction [`drive`] had sent by now has been answered.
async fn wait_answered(progress: &Progress) {
    let sent = progress.sent.load(Relaxed);
    testkit::time::wait_until(
        Duration::from_secs(10),
        "the auctions in flight to be answered",
        || progress.answered.load(Relaxed) >= sent,
    )
    .await;
}

/// Waits (up to 5 s) until the exchange has counted `n` reloads with `outcome`.
async fn wait_reloads(ex: &RunningExchange, outcome: ReloadOutcome, n: u64) {
    let what = format!("{n} reloads {:?} counted", outcome.label());
    testkit::time::wait_until(Duration::from_secs(5), &what, || {
        ex.metrics.config_reload_count(outcome) >= n
    })
    .await;
}

/// Writes a configuration, as [`support::loopback_test_config`] completes it when it is text.
fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    let bytes = bytes.as_ref();
    match std::str::from_utf8(bytes) {
        Ok(text) => std::fs::write(path, support::loopback_test_config(text)).unwrap(),
        Err(_) => std::fs::write(path, bytes).unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_files_keep_the_last_good_bidder_list_and_no_auction_fails() {
    let a = ScriptedBidder::start(priced_bidder("a", 1.0)).await;
    let b = ScriptedBidder::start(priced_bidder("b", 2.0)).await;
    let dir = TempDir::new("watch");
    let path = dir.join("exchange.toml");
    let good = bidder_block("a", &a.endpoint());
    write(&path, &good);
    let ex = exchange_from_file(&path).await;
    ex.exchange.watch();

    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(Progress::default());
    let load = drive(
        ex.addr,
        Duration::from_millis(4),
        stop.clone(),
        progress.clone(),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;

    let with_b = format!("{good}{}", bidder_block("b", &b.endpoint()));
    // (file content, outcome it is refused with)
    let bad: Vec<(&str, Vec<u8>, ReloadOutcome)> = vec![
        (
            "truncated",
            with_b.as_bytes()[..with_b.len() - 20].to_vec(),
            ReloadOutcome::Invalid,
        ),
        (
            "garbage",
            vec![0xff, 0xfe, 0x00, 0x9c, 0x80],
            ReloadOutcome::Unreadable,
        ),
        (
            "bad URL",
            format!("{good}{}", bidder_block("b", "ftp://127.0.0.1/bid")).into_bytes(),
            ReloadOutcome::Invalid,
        ),
        (
            "duplicate bidder",
            format!("{good}{}", bidder_block("a", &b.endpoint())).into_bytes(),
            ReloadOutcome::Invalid,
        ),
        (
            "unknown key in a bidder",
            format!(
                "{good}[[bidders]]\nnmae = \"b\"\nendpoint = \"{}\"\n",
                b.endpoint()
            )
            .into_bytes(),
            ReloadOutcome::Invalid,
        ),
        (
            "negative connection cap",
            format!(
                "{good}[[bidders]]\nname = \"b\"\nendpoint = \"{}\"\nmax_connections = -1\n",
                b.endpoint()
            )
            .into_bytes(),
            ReloadOutcome::Invalid,
        ),
        (
            "out-of-range tmax",
            format!("[deadline]\ndefault_tmax_ms = 0\n{with_b}").into_bytes(),
            ReloadOutcome::Invalid,
        ),
    ];
    let mut refused = [0u64; ReloadOutcome::COUNT];
    for (what, bytes, outcome) in &bad {
        write(&path, bytes);
        refused[*outcome as usize] += 1;
        wait_reloads(&ex, *outcome, refused[*outcome as usize]).await;
        println!("refused as {}: {what}", outcome.label());
    }
    // Every auction started under the bad files has ended: none of them reached b.
    wait_answered(&progress).await;
    assert_eq!(
        b.requests.lock().unwrap().len(),
        0,
        "a refused file reached bidder b"
    );
    assert_eq!(ex.metrics.config_reload_count(ReloadOutcome::Applied), 0);

    // A good file: the watcher applies it; b outbids a from then on.
    write(&path, &with_b);
    wait_reloads(&ex, ReloadOutcome::Applied, 1).await;
    b.wait_requests(1).await;

    // An explicit reload (what SIGHUP does) of a file that drops a.
    write(&path, bidder_block("b", &b.endpoint()));
    let report = ex.exchange.reload().await.unwrap();
    assert_eq!(report.bidders.removed, ["a"]);
    assert!(report.bidders.added.is_empty() && report.bidders.changed.is_empty());
    // An auction that started before the swap may still call a: once those have all been
    // answered, a gets nothing more.
    wait_answered(&progress).await;
    let a_calls = a.requests.lock().unwrap().len();
    let b_calls = b.requests.lock().unwrap().len();
    testkit::time::wait_until(Duration::from_secs(10), "50 more auctions at b", || {
        b.requests.lock().unwrap().len() >= b_calls + 50
    })
    .await;
    stop.store(true, Relaxed);
    let answers = load.await.unwrap();
    assert_eq!(
        a.requests.lock().unwrap().len(),
        a_calls,
        "a called after its removal"
    );

    let total = answers.len();
    let failed: Vec<u16> = answers
        .iter()
        .map(|a| a.status)
        .filter(|&s| s != 200)
        .collect();
    let slowest = answers.iter().map(|a| a.took).max().unwrap_or_default();
    let by_seat = |seat: &str| {
        answers
            .iter()
            .filter(|a| a.seat.as_deref() == Some(seat))
            .count()
    };
    println!(
        "{total} auctions during {} reload attempts: {} failed, {} late (exchange), slowest {:?} at the client; won by a {}, by b {}",
        bad.len() + 2,
        failed.len(),
        ex.metrics.late_answers.get(),
        slowest,
        by_seat("a"),
        by_seat("b"),
    );
    assert!(total > 100, "only {total} auctions ran");
    assert!(failed.is_empty(), "failed auctions: {failed:?}");
    assert!(by_seat("a") > 0 && by_seat("b") > 0);
    // Since the last reload only b is configured, and its metrics carried over.
    let table = ex.metrics.bidders();
    assert_eq!(table.names(), ["b"]);
    let b_metrics = ex.metrics.bidder_named("b").unwrap();
    assert_eq!(
        b_metrics.outcome_count(BidderOutcome::Bid) as usize,
        b.requests.lock().unwrap().len()
    );
    let text = send(ex.admin, "GET", "/metrics", "").await.2;
    let text = String::from_utf8_lossy(&text);
    // Applied by the watcher, by the explicit call, and perhaps again by the watcher seeing
    // the explicit reload's file.
    let applied = ex.metrics.config_reload_count(ReloadOutcome::Applied);
    assert!((2..=3).contains(&applied), "{applied} applied");
    for line in [
        format!("gavel_exchange_config_reloads_total{{outcome=\"applied\"}} {applied}"),
        "gavel_exchange_config_reloads_total{outcome=\"unreadable\"} 1".to_owned(),
        "gavel_exchange_config_reloads_total{outcome=\"invalid\"} 6".to_owned(),
    ] {
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
    assert!(
        !text.contains("bidder=\"a\""),
        "a removed bidder is still exported"
    );
}

#[tokio::test]
async fn a_refused_reload_says_why_and_a_kept_bidder_keeps_its_pool() {
    let a = ScriptedBidder::start(priced_bidder("a", 1.0)).await;
    let dir = TempDir::new("explicit");
    let path = dir.join("exchange.toml");
    let good = bidder_block("a", &a.endpoint());
    let ex = exchange_from_toml(&good).await;

    // Configured from text: no file to read again.
    let none = ex.exchange.reload().await.unwrap_err();
    assert!(matches!(none, ReloadError::NoFile), "{none}");
    let missing = ex
        .exchange
        .reload_from(&dir.join("nope.toml"))
        .await
        .unwrap_err();
    assert!(matches!(missing, ReloadError::Unreadable(_)), "{missing}");
    write(
        &path,
        format!(
            "{good}[[bidders]]\nname = \"x\"\nendpoint = \"http://127.0.0.1:9/?\"\nmax_connections = 0\n"
        ),
    );
    let e = ex
        .exchange
        .reload_from(&path)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bidders[1].max_connections"), "{e}");

    // Warm a's pool with one auction; a reload that keeps a unchanged keeps that connection.
    assert_eq!(auction(ex.addr, &banner_request(0.1)).await.0, 200);
    let connections = a.connections.load(Relaxed);
    write(&path, format!("[http]\nmax_body_bytes = 1000\n{good}"));
    let report = ex.exchange.reload_from(&path).await.unwrap();
    assert_eq!(report.bidders.unchanged, 1);
    assert_eq!(report.restart_needed, ["[http]"]);
    assert_eq!(auction(ex.addr, &banner_request(0.1)).await.0, 200);
    assert_eq!(
        a.connections.load(Relaxed),
        connections,
        "the pool was rebuilt"
    );
}
