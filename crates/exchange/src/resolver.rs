//! Bidder hosts looked up again while serving. Cloud load balancers change addresses; a host
//! resolved once at start would be called at a dead address forever. Every
//! `upstream.dns_refresh_ms` each bidder whose endpoint is a name is looked up (off the runtime's
//! threads); when its first address changed, its pool moves there (idle connections to the old
//! one closed, calls in flight finish). A bidder whose host never resolved is skipped
//! (`skips_total{reason="unresolved"}`) until it does. A lookup that fails keeps the address in
//! use: a resolver's hiccup must not take a working bidder away. Nor may a bidder's DNS move it
//! into the exchange's own network: an address notices are never sent to (loopback, private,
//! link-local and the cloud metadata service, ...) is followed only with
//! `notices.allow_private_addresses`, or when the bidder was already there.

use std::net::SocketAddr;
use std::sync::Weak;
use std::time::Duration;

use crate::state::{Exchange, State};

/// How a host is looked up: [`crate::config::resolve`] in production (blocking).
pub type Lookup = fn(&str, u16) -> Result<SocketAddr, upstream::endpoint::ResolveError>;

impl Exchange {
    /// Looks every bidder host given by name up now with `lookup` and moves each pool to what
    /// it finds: one round of what the exchange does every `upstream.dns_refresh_ms` with the
    /// system's resolver ([`crate::config::resolve`]).
    pub async fn refresh_bidder_hosts(&self, lookup: Lookup) {
        refresh(&self.state, lookup).await;
    }
}

/// Looks every named bidder host up each `every`, until the exchange is dropped.
pub(crate) async fn follow(state: Weak<State>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is now: the load just resolved them
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        refresh(&state, crate::config::resolve).await;
    }
}

/// One round: every named host of the roster now, looked up once with `lookup`.
async fn refresh(state: &State, lookup: Lookup) {
    let roster = state.roster.load_full();
    let named: Vec<(String, String, u16)> = roster
        .iter()
        .map(|(_, b)| b)
        .filter(|b| !b.pool.endpoint().is_literal())
        .map(|b| {
            let e = b.pool.endpoint();
            (b.name.clone(), e.host.clone(), e.port)
        })
        .collect();
    if named.is_empty() {
        return;
    }
    let lookups = tokio::task::spawn_blocking(move || {
        named
            .into_iter()
            .map(|(name, host, port)| (name, lookup(&host, port)))
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let allow = state.config.config.notices.allow_private_addresses;
    for (name, found) in lookups {
        let Some(bidder) = roster.named(&name) else {
            continue;
        };
        match found {
            Ok(addr) => {
                let before = bidder.pool.addr();
                let was_internal =
                    before.is_some_and(|a| !upstream::outbound::address_allowed(a.ip(), false));
                if !upstream::outbound::address_allowed(addr.ip(), allow) && !was_internal {
                    http_front::log_limit::warn(
                        "bidder lookup",
                        &format!(
                            "bidder {name}: its host now resolves to {addr}, an internal address; \
                             not followed (notices.allow_private_addresses = false)"
                        ),
                    );
                    continue;
                }
                if bidder.pool.set_addr(addr) {
                    match before {
                        None => {
                            tracing::warn!(bidder = %name, %addr, "bidder host resolved: calling it from now on")
                        }
                        Some(old) => {
                            tracing::info!(bidder = %name, %old, new = %addr, "bidder host moved to a new address")
                        }
                    }
                }
            }
            Err(e) => {
                state.metrics.dns_failures.inc();
                let still = bidder
                    .pool
                    .addr()
                    .map_or("none".to_owned(), |a| a.to_string());
                http_front::log_limit::warn(
                    "bidder lookup",
                    &format!("bidder {name}: {e}; keeping the address in use ({still})"),
                );
            }
        }
    }
}
