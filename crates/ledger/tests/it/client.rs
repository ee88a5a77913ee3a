//! The client's promises: every call bounded by its deadline, errors typed, reconnection after a
//! Redis restart without restarting the process, no panic on a peer that speaks nonsense.
// Tests: a failed unwrap is a failed assertion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::RedisServer;
use ledger::{LedgerError, RedisConfig, RedisLedger};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use units::{Limits, Nanos, Timestamp};

fn ledger(addr: String, timeout: Duration) -> RedisLedger {
    RedisLedger::new(RedisConfig {
        addr,
        timeout,
        ..RedisConfig::default()
    })
}

/// On tokio's paused clock: with the server silent the runtime idles, the clock jumps to the
/// timeout, and the call ends exactly then; a loaded machine cannot stretch it.
#[tokio::test(start_paused = true)]
async fn a_silent_server_costs_exactly_the_timeout() {
    // Accepts connections and reads requests, never answers (a hung or partitioned Redis).
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    let l = ledger(addr, Duration::from_millis(100));
    for _ in 0..3 {
        let started = tokio::time::Instant::now();
        let err = l
            .reserve("r", "c", Nanos(1), Timestamp(1), Timestamp(0))
            .await
            .unwrap_err();
        let took = started.elapsed();
        assert_eq!(
            (err.clone(), err.label()),
            (LedgerError::Timeout, "timeout")
        );
        assert!(
            took >= Duration::from_millis(100) && took <= Duration::from_millis(101),
            "{took:?}"
        );
    }
}

#[tokio::test]
async fn a_closed_port_is_unavailable_at_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let l = ledger(format!("127.0.0.1:{port}"), Duration::from_secs(2));
    // Unavailable, not Timeout: the refusal ended the call, not the 2 s timeout.
    let err = l.ping().await.unwrap_err();
    assert!(matches!(err, LedgerError::Unavailable(_)), "{err:?}");
    assert_eq!(err.label(), "unavailable");
}

#[tokio::test]
async fn nonsense_from_the_peer_is_a_protocol_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        }
    });
    let l = ledger(addr, Duration::from_secs(1));
    let err = l.ping().await.unwrap_err();
    assert!(matches!(err, LedgerError::Protocol(_)), "{err:?}");
}

#[tokio::test]
async fn the_client_reconnects_after_a_restart() {
    let mut server = RedisServer::start().await;
    let port = server.port;
    let l = ledger(server.addr(), Duration::from_millis(500));
    l.ping().await.unwrap();
    // Killed and restarted between two calls: the idle pooled connection is dead; the next call
    // must notice before using it and dial the new server.
    server.kill();
    let mut server = RedisServer::start_on(port).await.unwrap();
    l.ping().await.unwrap();
    // Killed during use: calls fail fast while it is down, then work again, no restart needed.
    server.kill();
    // Unavailable (refused), not Timeout: neither call waited out its 500 ms.
    let refused = |e: LedgerError| matches!(e, LedgerError::Unavailable(_));
    assert!(l.ping().await.is_err_and(refused));
    assert!(
        l.set_limits(
            "c",
            Limits {
                total: Nanos(5),
                daily: None
            },
            Timestamp(0)
        )
        .await
        .is_err_and(refused)
    );
    let _server = RedisServer::start_on(port).await.unwrap();
    l.set_limits(
        "c",
        Limits {
            total: Nanos(5),
            daily: None,
        },
        Timestamp(0),
    )
    .await
    .unwrap();
    assert_eq!(
        l.balance("c", Timestamp(0))
            .await
            .unwrap()
            .map(|b| b.budget),
        Some(Nanos(5))
    );
}

/// A peer that is not Redis (or an attacker on a plain-TCP path) announcing replies far larger
/// than any ledger answer: the call ends within its deadline with an error, memory bounded,
/// no panic. The announced bytes never come; nothing may be reserved for them up front.
#[tokio::test]
async fn a_reply_announcing_huge_lengths_costs_the_deadline_not_memory() {
    for announced in [
        &b"$9223372036854775807\r\n"[..],
        b"*9223372036854775807\r\n",
        b"*2147483647\r\n*2147483647\r\n",
        b"$-7\r\n",
    ] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(announced).await;
                // Hold the connection open: the rest never arrives.
                tokio::spawn(async move {
                    let mut sink = [0u8; 4096];
                    while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
                });
            }
        });
        let l = ledger(addr, Duration::from_millis(300));
        let err = l
            .reserve("r", "c", Nanos(1), Timestamp(1), Timestamp(0))
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                LedgerError::Timeout | LedgerError::Protocol(_) | LedgerError::Unavailable(_)
            ),
            "{:?}: {err:?}",
            String::from_utf8_lossy(announced)
        );
    }
}
