//! The accept loop's stop, over loopback: once `shutdown` completes the listener closes, an
//! idle kept-alive connection is closed, a request in flight is answered with
//! `Connection: close`, and `serve` returns; a request that outlives `drain_timeout` is cut
//! and `serve` returns anyway.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Response, StatusCode};
use http_front::{ConnStats, Limits, plain};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// Serves `GET /slow?ms=N` (answers after N ms) until the returned sender fires.
async fn server(
    drain_timeout: Duration,
) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let limits = Limits {
        drain_timeout,
        ..Limits::default()
    };
    let serving = tokio::spawn(http_front::serve(
        listener,
        async {
            let _ = stopped.await;
        },
        limits,
        Arc::new(ConnStats::default()),
        |req, _peer| async move {
            let ms: u64 = req
                .uri()
                .query()
                .and_then(|q| q.strip_prefix("ms="))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let r: Response<http_front::Body> = plain(StatusCode::OK, "text/plain", "done\n");
            r
        },
    ));
    (addr, stop, serving)
}

fn get(ms: u64) -> Vec<u8> {
    format!("GET /slow?ms={ms} HTTP/1.1\r\nHost: t\r\n\r\n").into_bytes()
}

/// Reads until the server closes the connection; panics when it has not within 10 s.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the server did not close the connection");
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_answers_the_request_in_flight_with_close_and_closes_idle_connections() {
    let (addr, stop, serving) = server(Duration::from_secs(10)).await;
    // An idle kept-alive connection: one answered request, then nothing.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(&get(0)).await.unwrap();
    let mut first = [0u8; 256];
    let n = idle.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    // A request in flight when the stop comes.
    let mut busy = TcpStream::connect(addr).await.unwrap();
    busy.write_all(&get(400)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    stop.send(()).unwrap();
    let answer = read_to_close(&mut busy).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(answer.ends_with("done\n"), "{answer}");
    assert_eq!(
        read_to_close(&mut idle).await,
        "",
        "the idle connection is closed"
    );
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("serve returns once every connection closed")
        .unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_longer_than_the_drain_timeout_does_not_hold_the_stop() {
    let (addr, stop, serving) = server(Duration::from_millis(200)).await;
    let mut stuck = TcpStream::connect(addr).await.unwrap();
    stuck.write_all(&get(60_000)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(()).unwrap();
    // Well under the request's minute: the drain timeout, not the request, ends `serve`.
    tokio::time::timeout(Duration::from_secs(10), serving)
        .await
        .expect("serve returns after the drain timeout")
        .unwrap();
}
