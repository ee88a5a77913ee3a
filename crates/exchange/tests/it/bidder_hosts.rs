//! Bidder hosts given by name, as cloud load balancers are: a host that does not resolve does
//! not stop the exchange's start (its bidder is skipped and counted until it resolves), and a
//! host that moves is followed. The lookups here are a stand-in resolver handed to the
//! exchange's own refresh round (`Exchange::refresh_bidder_hosts`), because a test cannot
//! change what the system's DNS answers; the start's lookup is the system's, of a `.invalid`
//! name that never resolves (RFC 6761).

use crate::support;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU16, Ordering::SeqCst};

use exchange::metrics::SkipReason;
use serde_json::json;
use support::*;
use upstream::endpoint::ResolveError;

/// Where the stand-in resolver says `bidder.gavel-test.invalid` is (0: nowhere).
static BIDDER_PORT: AtomicU16 = AtomicU16::new(0);

fn stand_in_resolver(host: &str, _port: u16) -> Result<SocketAddr, ResolveError> {
    match BIDDER_PORT.load(SeqCst) {
        0 => Err(ResolveError::NoAddress {
            host: host.to_owned(),
        }),
        port => Ok(SocketAddr::from(([127, 0, 0, 1], port))),
    }
}

async fn bidder(seat: &'static str) -> ScriptedBidder {
    ScriptedBidder::start(move |r| {
        bids(
            r,
            seat,
            |imp| json!({"id": seat, "impid": imp, "price": 1.0, "adm": "<div/>"}),
        )
    })
    .await
}

#[tokio::test]
async fn an_unresolved_bidder_is_skipped_until_it_resolves_and_a_moved_one_is_followed() {
    let (first, second, other) = (
        bidder("named").await,
        bidder("named").await,
        bidder("other").await,
    );
    let ex = exchange(
        "",
        &[
            (
                "named",
                format!("http://bidder.gavel-test.invalid:{}/bid", first.addr.port()),
            ),
            ("other", other.endpoint()),
        ],
    )
    .await;
    let named = ex.metrics.bidder_named("named").expect("configured");

    // Started without it: the auction runs on the other bidder, and the skip is counted.
    let (status, _) = auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(status, 200);
    assert_eq!(named.skip_count(SkipReason::Unresolved), 1);
    assert_eq!(other.requests.lock().map(|r| r.len()).unwrap_or(0), 1);

    // A lookup that fails again changes nothing.
    ex.exchange.refresh_bidder_hosts(stand_in_resolver).await;
    auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(named.skip_count(SkipReason::Unresolved), 2);

    // It resolves: called from the next auction on.
    BIDDER_PORT.store(first.addr.port(), SeqCst);
    ex.exchange.refresh_bidder_hosts(stand_in_resolver).await;
    auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(first.requests.lock().map(|r| r.len()).unwrap_or(0), 1);

    // It moves: the pool follows, the old address hears nothing more.
    BIDDER_PORT.store(second.addr.port(), SeqCst);
    ex.exchange.refresh_bidder_hosts(stand_in_resolver).await;
    auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(second.requests.lock().map(|r| r.len()).unwrap_or(0), 1);
    assert_eq!(first.requests.lock().map(|r| r.len()).unwrap_or(0), 1);

    // A resolver that fails later keeps the address in use.
    BIDDER_PORT.store(0, SeqCst);
    ex.exchange.refresh_bidder_hosts(stand_in_resolver).await;
    auction(ex.addr, &banner_request(0.1)).await;
    assert_eq!(second.requests.lock().map(|r| r.len()).unwrap_or(0), 2);
    assert_eq!(named.skip_count(SkipReason::Unresolved), 2);
    assert_eq!(ex.metrics.dns_failures.get(), 2);

    // A bidder's DNS cannot move it into the exchange's own network: without
    // allow_private_addresses, a name that starts unresolved and then points at loopback is
    // not followed.
    let guarded = exchange(
        "[notices]\nallow_private_addresses = false\n",
        &[(
            "named",
            format!("http://bidder.gavel-test.invalid:{}/bid", first.addr.port()),
        )],
    )
    .await;
    BIDDER_PORT.store(first.addr.port(), SeqCst);
    guarded
        .exchange
        .refresh_bidder_hosts(stand_in_resolver)
        .await;
    auction(guarded.addr, &banner_request(0.1)).await;
    let named = guarded.metrics.bidder_named("named").expect("configured");
    assert_eq!(named.skip_count(SkipReason::Unresolved), 1);
    assert_eq!(first.requests.lock().map(|r| r.len()).unwrap_or(0), 1);
}
