//! Batched calls on a real Redis: limits written many per round trip with answers per campaign,
//! balances read in bounded chunks, pipelines that survive a script cache flush.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{LedgerOn, RedisServer};
use ledger::{BALANCES_CHUNK, LedgerError, MAX_AMOUNT, PIPELINE_MAX};
use units::{Limits, Nanos, Timestamp};

const NOW: Timestamp = Timestamp(10 * Timestamp::MS_PER_DAY + 1_000);

fn limits(total: i64) -> Limits {
    Limits {
        total: Nanos(total),
        daily: None,
    }
}

/// Calls of `command` Redis counted since the last `CONFIG RESETSTAT`.
async fn calls_of(server: &RedisServer, command: &str) -> u64 {
    let info = server.raw("INFO commandstats").await;
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

#[tokio::test]
async fn limits_are_written_in_pipelines_and_balances_read_in_chunks() {
    let server = RedisServer::start().await;
    let l = server.ledger("gavel:");
    let n = 2 * BALANCES_CHUNK + 234;
    let mut campaigns: Vec<(String, Limits)> = (0..n)
        .map(|i| (format!("c{i:05}"), limits(1_000 + i as i64)))
        .collect();
    // One limit beyond the exact range: refused alone, the others are written.
    campaigns[700].1 = limits(MAX_AMOUNT + 1);
    let answers = l.set_limits_many(&campaigns, NOW).await.unwrap();
    assert_eq!(answers.len(), n);
    for (i, a) in answers.iter().enumerate() {
        if i == 700 {
            assert_eq!(a, &Err(LedgerError::OutOfRange("total budget")));
        } else {
            assert_eq!(a, &Ok(()), "{i}");
        }
    }
    assert!(n > PIPELINE_MAX);

    // Balances: in the order asked, unknown campaigns left out, one `HMGET` per campaign (a
    // campaign's keys are in its own slot) and no script.
    let mut names: Vec<String> = campaigns.iter().map(|(c, _)| c.clone()).collect();
    names.insert(3, "unknown".into());
    let _ = server.raw("CONFIG RESETSTAT").await;
    let got = l.balances(&names, NOW).await.unwrap();
    assert_eq!(calls_of(&server, "hmget").await, names.len() as u64);
    assert_eq!(calls_of(&server, "evalsha").await, 0);
    let want: Vec<String> = names
        .iter()
        .filter(|c| *c != "unknown" && *c != "c00700")
        .cloned()
        .collect();
    assert_eq!(
        got.iter().map(|b| b.campaign.clone()).collect::<Vec<_>>(),
        want
    );
    let b = got.iter().find(|b| b.campaign == "c01000").unwrap();
    assert_eq!((b.budget, b.available), (Nanos(2_000), Nanos(2_000)));
    assert_eq!(l.balances::<&str>(&[], NOW).await.unwrap(), Vec::new());
    assert_eq!(l.check_invariants().await.unwrap(), Ok(()));
}

#[tokio::test]
async fn a_pipeline_survives_a_script_cache_flush() {
    let server = RedisServer::start().await;
    let l = server.ledger("gavel:");
    let first: Vec<(String, Limits)> = (0..10).map(|i| (format!("a{i}"), limits(5))).collect();
    assert!(
        l.set_limits_many(&first, NOW)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    assert!(server.raw("SCRIPT FLUSH").await.starts_with("+OK"));
    let again: Vec<(String, Limits)> = (0..10).map(|i| (format!("a{i}"), limits(7))).collect();
    assert!(
        l.set_limits_many(&again, NOW)
            .await
            .unwrap()
            .iter()
            .all(Result::is_ok)
    );
    let got = l.balances(&["a0", "a9"], NOW).await.unwrap();
    assert_eq!(
        got.iter().map(|b| b.budget).collect::<Vec<_>>(),
        [Nanos(7), Nanos(7)]
    );
}
