//! Campaign reloads while bid requests keep coming, over real loopback sockets: files written
//! in place (so the watcher may see them half-written), truncated, garbage, or invalid
//! (negative budget, unknown field, duplicate id) are refused with their reason counted, the
//! last good campaigns keep bidding, and not one request fails (a no-bid only when the machine
//! is too busy, as the bidder's own counters say); a good file then takes over.
//! Figures are printed (`cargo test -p bidder --test it reload_under_load:: -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use bidder::metrics::{ReloadFailure, ReloadOutcome};
use common::{Answers, TestBidder, campaign_json, steady_load};

async fn wait_for(what: &str, done: impl FnMut() -> bool) {
    testkit::time::wait_until(Duration::from_secs(5), what, done).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_campaign_files_keep_the_last_good_ones_bidding_under_load() {
    let good = format!("[{}]", campaign_json("c1", 1000.0, 2.0, "asap"));
    let b = TestBidder::start(&good, "").await;
    let metrics = b.bidder.metrics();
    let answers: Answers = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    // tmax 1 s: the bidder decides in microseconds, and "not one request fails" is then about
    // reloads, not about a machine busy with the whole suite.
    let load = steady_load(
        b.addr,
        Duration::from_millis(4),
        1000,
        stop.clone(),
        answers.clone(),
    );
    tokio::time::sleep(Duration::from_millis(200)).await;

    let path = b.dir.join("campaigns.json");
    let c2 = campaign_json("c2", 1000.0, 3.0, "asap");
    let bad: Vec<(&str, String, ReloadFailure)> = vec![
        (
            "truncated",
            good[..good.len() / 2].to_owned(),
            ReloadFailure::Parse,
        ),
        (
            "garbage",
            "\u{1}\u{2}garbage{{[".to_owned(),
            ReloadFailure::Parse,
        ),
        (
            "negative budget",
            format!("[{}]", campaign_json("c1", -5.0, 2.0, "asap")),
            ReloadFailure::Invalid,
        ),
        (
            "unknown field",
            good.replacen("\"pacing\"", "\"pacnig\"", 1),
            ReloadFailure::Parse,
        ),
        (
            "duplicate id",
            format!(
                "[{}, {}]",
                campaign_json("c1", 1.0, 2.0, "asap"),
                campaign_json("c1", 1.0, 3.0, "asap")
            ),
            ReloadFailure::Invalid,
        ),
    ];
    let mut expected = [0u64; ReloadFailure::COUNT];
    for (what, text, why) in &bad {
        // In place, not renamed: the watcher must cope with files caught mid-write.
        std::fs::write(&path, text).unwrap();
        expected[*why as usize] += 1;
        let want = expected[*why as usize];
        wait_for(what, || metrics.reload_failure_count(*why) >= want).await;
        println!("refused as {}: {what}", why.label());
    }
    assert_eq!(metrics.reload_count(ReloadOutcome::Applied), 0);

    // A good file: c2 outbids c1 from then on.
    let from = answers.lock().unwrap().len();
    std::fs::write(
        &path,
        format!("[{}, {c2}]", campaign_json("c1", 1000.0, 2.0, "asap")),
    )
    .unwrap();
    wait_for("the good file applied", || {
        metrics.reload_count(ReloadOutcome::Applied) >= 1
    })
    .await;
    // Run until c2 has bid on 20 requests sent after the swap.
    wait_for("c2 bidding", || {
        answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.price() == Some(3.0))
            .count()
            >= 20
    })
    .await;
    stop.store(true, Relaxed);
    load.await.unwrap();

    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let failed: Vec<u16> = answers
        .iter()
        .map(|a| a.status)
        .filter(|&s| s != 200 && s != 204)
        .collect();
    let no_bids = answers.iter().filter(|a| a.status == 204).count() as u64;
    // On a machine busy with other work a request may be shed, or find too little time left:
    // the bidder's correct answer is then a no-bid, counted as such. A no-bid for any other
    // reason (no campaign to bid with) is what a reload must never cause.
    let busy = common::metric(&b, "gavel_bidder_admission_total{outcome=\"shed\"}").await
        + common::metric(
            &b,
            "gavel_bidder_admission_total{outcome=\"too_little_time\"}",
        )
        .await
        + common::metric(
            &b,
            "gavel_bidder_candidate_skips_total{reason=\"deadline\"}",
        )
        .await;
    let slowest = answers.iter().map(|a| a.took).max().unwrap_or_default();
    let at = |p: f64| answers.iter().filter(|a| a.price() == Some(p)).count();
    println!(
        "{} bid requests during {} reloads: {} failed, {no_bids} no-bids ({busy} for a busy machine), slowest {slowest:?}; bids at 2.0: {}, at 3.0: {}",
        answers.len(),
        bad.len() + 1,
        failed.len(),
        at(2.0),
        at(3.0)
    );
    assert!(answers.len() > 100, "only {} requests ran", answers.len());
    assert!(failed.is_empty(), "failed requests: {failed:?}");
    assert!(
        no_bids <= busy,
        "{no_bids} no-bids, only {busy} shed or out of time"
    );
    assert_eq!(
        at(2.0) + at(3.0) + no_bids as usize,
        answers.len(),
        "a bid at another price"
    );
    assert!(
        answers[..from]
            .iter()
            .all(|a| a.status == 204 || a.price() == Some(2.0)),
        "a refused file changed the bids"
    );
    assert!(at(3.0) > 0, "the good file never took over");
    let text = b.metrics_page().await;
    for (why, n) in ReloadFailure::ALL.iter().zip(expected) {
        let line = format!(
            "gavel_bidder_campaign_reload_failures_total{{reason=\"{}\"}} {n}",
            why.label()
        );
        assert!(text.contains(&line), "{line} missing");
    }
}
