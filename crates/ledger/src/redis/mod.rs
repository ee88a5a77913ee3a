//! The budget of record on Redis: the same two-phase reservations as [`crate::Book`],
//! made atomic across bidder instances by Lua scripts, plus **leases** so that the request path
//! does not wait for Redis.
//!
//! Two modes:
//! - **Per bid** ([`RedisLedger`]): every `reserve`/`commit`/`release` is one Redis round trip
//!   running one script. Same answers as [`crate::Book`] (its types are reused), same invariants,
//!   shared by every instance. Simple, exact, and as slow as the network.
//! - **Leases** ([`LeasedLedger`](crate::LeasedLedger)): each instance keeps a local [`crate::Book`] whose budget is
//!   what Redis has leased to it, answers bids from it synchronously, and a background task takes
//!   a lease for each campaign that tries to spend, tops it up, reports spend, extends it, and
//!   hands it back when the campaign stops spending (the RTBkit banker's "float"). Its cost per
//!   round follows the campaigns spending, not the campaigns configured (see [lease mode on one
//!   instance](#lease-mode-on-one-instance)).
//!
//! # Wiring lease mode
//! ```no_run
//! use std::time::Duration;
//!
//! use ledger::{LeaseConfig, LeasedLedger, RedisConfig, RedisLedger};
//! use units::{Limits, Nanos, Timestamp};
//!
//! # async fn wire() -> Result<(), ledger::LedgerError> {
//! let redis = RedisLedger::new(RedisConfig {
//!     addr: "10.0.0.5:6379".into(),
//!     timeout: Duration::from_millis(50),
//!     ..RedisConfig::default()
//! });
//! let config = LeaseConfig {
//!     instance_id: "bidder-7".into(),
//!     // About 20 impressions at a CPM of 2.50.
//!     lease_chunk: Nanos(50_000_000),
//!     ..LeaseConfig::default()
//! };
//! let summer = Limits { total: Nanos(5_000 * Nanos::PER_UNIT), daily: Some(Nanos(500 * Nanos::PER_UNIT)) };
//! let ledger = LeasedLedger::start(redis, config, vec![("summer".to_owned(), summer)]).await;
//!
//! // Request path: synchronous, no Redis. A campaign's first bids on this instance are refused
//! // (insufficient budget) until its lease arrives, typically one Redis round trip later.
//! let now = Timestamp::now();
//! let expires = now.saturating_add(Duration::from_secs(30));
//! if ledger.reserve("auction-1/imp-1", "summer", Nanos(2_500_000), expires, now).is_ok() {
//!     // ... bid; on the win or billing notice (duplicates are answered, not charged):
//!     let _ = ledger.commit("auction-1/imp-1", Nanos(2_100_000), Timestamp::now());
//! }
//! // Configuration reload: ledger.set_campaigns(new_list);
//! // Admin and metrics: the shared figures, and this instance's lease counters.
//! let _shared = ledger.balances(Timestamp::now()).await?;
//! let _stats = ledger.stats();
//! // Shutdown, after draining requests: unspent leases go back to the shared budget.
//! ledger.shutdown().await?;
//! # Ok(())
//! # }
//! ```
//! Per-bid mode is the same calls on [`RedisLedger`], awaited, plus a timer that calls
//! [`RedisLedger::expire`] (lease mode runs that sweep itself, every report interval).
//!
//! # Key layout (prefix `P`, default `gavel:`)
//! One layout on one Redis and on Redis Cluster, every name built by [`Keys`] (`keys.rs`). A
//! campaign's keys share its **hash tag** `{t}` (the name itself, or `#` and its hex when it is
//! empty or holds a brace), so they are in one hash slot, and each script touches one slot:
//!
//! | key | type | content |
//! |---|---|---|
//! | `P{t}c:<campaign>` | hash | `total`, `daily` (configured limits; `daily` absent if none), `version` (of the limits: incremented by every change, absent = 0 for a campaign written before versions), `writer` (of that version: `file:<node>`, `admin:<node>`, `operator`), `spent`, `reserved`, `day`, `day_spent`, `day_reserved` |
//! | `P{t}r:<reservation id>` | hash | `campaign`, `amount`, `day`, `expires_at`, `state` (`open`/`committed`/`released`/`expired`), `charged` |
//! | `P{t}l:<lease id>` | hash | `campaign`, `amount` (granted in total), `reported` (charged), `seen` (highest cumulative report), `lost` (reported but uncharged), `day`, `day_open` (part counted in that day), `expires_at`, `state` (`open`/`closed`/`reclaimed`), `remote`, `node` |
//! | `P{t}exp` | zset | `r:<id>` and `l:<id>` of the tag's open reservations and leases, scored by expiry (ms): the sweep index |
//! | `P{t}d:<reservation id>` | hash | lease mode: the claimed outcome of a notice (`state`, `charged`) |
//! | `P{t}own:<node>:<campaign>` | string | lease mode: the id of the lease `node` holds for the campaign |
//! | `P{t}in:<node>` | list | lease mode: settlements other instances made for `node`'s reservations of the tag's campaigns |
//! | `P{s}ledger` | hash | the ledger marker (`id`) of hash slot `s`: one per slot, 16,384 |
//! | `P{s}campaigns` | hash | the slot's campaigns: name to key base `P{t}` |
//!
//! `{s}` is [`keys::slot_tag`]: a short tag whose slot is `s`, so that the marker and the
//! campaign list a script checks are in the script's own slot. Reservation and lease ids are
//! therefore found through their campaign: notices carry it ([`RedisLedger::commit`] without
//! one answers [`LedgerError::NoCampaign`]), and an id is unique per campaign tag, not per
//! ledger (the bidder's are random anyway). The prefix holds no brace (the settings refuse
//! one). A resolved reservation or lease stays as a tombstone with a `PEXPIRE` of
//! [`RedisConfig::tombstone_ttl`], so duplicate notices and late lease reports get the recorded
//! answer. Each script declares in `KEYS` the keys it names; those it finds inside (ids read
//! from the sweep index, the lease an owner key names) carry the same tag.
//!
//! # The scripts (`lua/`, one typed module each in `script/`)
//! `common.lua` (prelude: loading a campaign with the lazy day rollover, the invariant guard,
//! tombstones) is prepended to each of `set_limits` (a compare-and-set on the limits' `version`:
//! a change based on another version than the stored one is refused with the stored version,
//! writer and limits, writing nothing; equal limits are a no-op that keeps the version; see
//! [`LimitsBase`]), `reserve`, `commit`, `release`, `expire`
//! (sweep of one campaign tag's `exp` index, at most [`RedisConfig::sweep_batch`] items per
//! call; see `sweep.rs` for how the sweep walks the campaigns and its reclaim bound),
//! `take_lease`,
//! `report_lease`, `close_lease`, `settle`, `drain`, `open_ledger` and `check` (an O(n) audit of
//! one slot). Balances are not a script: one `HMGET` per campaign ([`BALANCES_CHUNK`] per round
//! trip), the day's rollover applied in Rust as the scripts apply it.
//! Each has a module in `script/`: a type whose fields are its arguments, which encodes them in
//! the order the Lua reads them (refusing locally what the script would refuse) and decodes the
//! reply into a typed answer; a reply of another shape is [`LedgerError::Protocol`]. A
//! pipeline mixes them through `lease::Call`. They run with `EVALSHA`, falling back to `EVAL`
//! on `NOSCRIPT` (after a restart or a `SCRIPT FLUSH`).
//!
//! | file | what |
//! |---|---|
//! | `handle.rs` | [`RedisLedger`], its settings, the ledger marker, sending one call or a pipeline |
//! | `per_bid.rs` | reserve, commit, release, sweep, balances, limits, audit |
//! | `lease.rs` | take, report and close leases, settle notices anywhere, the pipelined `Call` |
//! | `script/` | one module per Lua script |
//! | `client.rs`, `conn.rs`, `resp.rs`, `transport.rs` | the connections (below) |
//! Each script validates, computes in Lua locals, checks the result and only then writes:
//! Redis does not roll a script back, so a script that fails has written nothing. `now` is the
//! caller's clock; the day is `now`'s UTC day. Tombstone expiry runs on Redis's clock.
//!
//! # Exactness: the Lua number limit
//! Lua (5.1, in Redis) has only doubles, exact for integers up to 2^53. Every amount that enters
//! a script is therefore bounded by [`MAX_AMOUNT`] = 2^53 - 1 nanos, about 9,007,199 currency
//! units per campaign: `set_limits` beyond it fails with [`LedgerError::OutOfRange`]; a larger
//! reservation or price is sent as 2^53 (held exactly), which is above any budget and any
//! reservation, so it is refused as Book refuses it. Scripts compare `amount > total - spent -
//! reserved`, whose terms are all exact, and write numbers with `%.0f` (Lua's `tostring` would
//! switch to exponent notation). Timestamps (ms) are far below 2^53.
//!
//! # The lease protocol
//! - `take_lease(id, campaign, want)` grants `min(want, available, today's available)` (maybe 0),
//!   counted as `reserved` (and in today's `day_reserved`), creating or growing lease `id`.
//! - `report_lease(id, cumulative_spent, new_expiry)` charges `cumulative - highest earlier
//!   report`, capped at the lease's unreported amount (moved from reserved to spent), and
//!   extends the expiry. Cumulative, so duplicates and reordering are harmless.
//! - `close_lease(id, cumulative_spent)` reports and returns the unreported remainder.
//! - The sweep (`expire`) reclaims an open lease once its expiry has passed: its remainder goes
//!   back to the campaign. A report after that (or after a close) charges at most what the
//!   campaign still has available, and says what it could not charge
//!   ([`LeaseReport::uncharged`]). So Redis never shows spent + reserved above the budget: the
//!   overspend in the books is zero by construction.
//! - A lease belongs to the UTC day it was (last) grown on; [`LeasedLedger`](crate::LeasedLedger) takes a new lease
//!   when its clock enters a new day, so a day's spend is bounded by that day's grants.
//!
//! # Lease mode on one instance
//! [`LeasedLedger`](crate::LeasedLedger) is built for many configured campaigns (100,000) of which a minority spend
//! at any moment. Nothing it does per round scales with the campaigns configured:
//! - **Limits** are written once (by a [`LimitsRole::Writer`]; a follower
//!   writes none and gets no lease for a campaign Redis lacks): at start for every campaign (pipelined, [`PIPELINE_MAX`] per
//!   round trip: about 2 s for 100,000 on a small machine), then only when a reload changes them
//!   (at most 2,000 per round), or when Redis turns out to have lost them (a lease call answers
//!   "unknown campaign", or [`LeasedLedger::balances`](crate::LeasedLedger::balances) misses a campaign).
//! - **Leases on demand.** No campaign holds a lease until this instance tries to spend from it.
//!   A reservation without enough leased headroom is refused (insufficient budget, as when the
//!   lease runs dry), raises the campaign's demand flag and wakes the task; a reservation that
//!   leaves less than half a chunk does the same without being refused. Both are O(1) under the
//!   local lock, no Redis. The woken task asks Redis for a chunk at once (not at the next
//!   interval), so **a campaign's first bids on an instance are refused until its lease arrives,
//!   typically one Redis round trip later**; a burst of bids in that window asks once. A grant
//!   short of the ask (the campaign is nearly out) holds the campaign's next ask back for four
//!   report intervals.
//! - **Reports only when needed.** Every [`LeaseConfig::report_interval`](crate::LeaseConfig::report_interval) a full round looks at
//!   the leases it holds (in memory) and reports a lease only if its cumulative spend changed
//!   since the last acknowledged report, or if its expiry is within half the TTL (at least the
//!   safety margin plus two intervals): that report extends it. It closes the lease of a
//!   campaign that made no reservation for [`LeaseConfig::idle_close`](crate::LeaseConfig::idle_close) (default 30 s, three
//!   TTLs) once its open reservations are resolved, handing the unspent part back; of a
//!   campaign retired by a reload; and of the previous UTC day (renewed at once if the campaign
//!   is spending).
//! - **Pipelined.** A round is two pipelined exchanges (upkeep: reports, closes, the sweep of
//!   the campaigns it leases or tops up and of two more in turn, its inboxes, pending limits;
//!   then top-ups, each preceded by its limits if unwritten), up to [`PIPELINE_MAX`] script
//!   calls per round trip (on a cluster, concurrent calls to each slot's primary).
//!
//! So with `s` campaigns spending, a full round costs at most `4s + 2` script calls (per
//! spending campaign a report, a top-up, a sweep of its index and a drain of its inbox: each
//! campaign's keys are in its own slot; plus two campaigns swept in turn) in two pipelined
//! round trips (one more per further [`PIPELINE_MAX`] calls); idle campaigns cost nothing but
//! their turn in the sweep, an idle lease one extension per half TTL until it is closed. A
//! wake-up round only handles the campaigns that asked (no sweep).
//! [`LeaseStats`](crate::LeaseStats) counts rounds, calls, round trips and open leases.
//! [`LeasedLedger::balances`](crate::LeasedLedger::balances) (for pacing and admin pages) still
//! reads every configured campaign: one `HMGET` each, [`BALANCES_CHUNK`] per round trip, so
//! 100,000 campaigns read once a second by each instance is a large share of one Redis core
//! (spread over the primaries on a cluster).
//!
//! # Failure bounds
//! - **Redis unreachable or partitioned from an instance**: the instance spends only what is
//!   leased locally, and stops taking new bids once its clock passes the lease expiry minus
//!   [`LeaseConfig::safety_margin`](crate::LeaseConfig::safety_margin); the margin must cover clock skew between instances (the
//!   sweep may run on another instance's clock) plus the report interval. Win notices for bids
//!   already made still commit locally; if they are reported after the lease was reclaimed, they
//!   are charged while the campaign has money and counted as uncharged beyond it. Real-world
//!   spend can exceed the books by at most the unreported part of one lease per instance and
//!   campaign, i.e. one chunk (plus reservations in flight).
//! - **Instance crash**: its lease stays reserved until the expiry, then is reclaimed. Spend it
//!   made since its last report (at most one report interval's worth, and never more than its
//!   lease) is lost from the books; the rest of its lease comes back.
//! - **Redis restart without persistence**: everything is gone. [`LeasedLedger`](crate::LeasedLedger) re-creates its
//!   campaigns' limits when it finds them missing, with spent back at zero: the campaigns can
//!   spend their budget again. A lease it holds is found lost at its next report or top-up
//!   (a top-up only grows a lease Redis knows: it never re-creates one under its old id) and
//!   replaced on demand. In production run Redis with persistence (`appendonly yes`,
//!   `appendfsync everysec` loses at most one second of writes) and a replica; a failover to a
//!   replica that missed the last writes can likewise lose the last moments of reports and
//!   grants (Redis replication is asynchronous).
//! - **On Redis Cluster**, the same per primary, and only for the campaigns whose slots it
//!   serves: a primary that dies fails its campaigns' calls (closed) until its replica is
//!   promoted; replication being asynchronous, the promoted replica may miss the last writes
//!   the dead primary acknowledged (up to about a second at `appendfsync everysec`-like lag):
//!   reports, grants, commits and reservations of those moments are gone from the books. For
//!   budgets that means spend that happened but is not recorded (bounded by what those lost
//!   writes carried: in lease mode the reports of one interval, in per-bid mode the commits of
//!   those moments, whose notices then answer "unknown reservation"), and reservations or
//!   grants that vanish (their money comes back early); never a campaign with spent plus
//!   reserved above its budget as the cluster sees it. A primary that comes back empty (no
//!   persistence, restarted before a failover) has lost its slots' markers: its campaigns refuse
//!   ([`LedgerError::NoLedger`]), the others keep working, and only an operator's `ledger
//!   create` gives its slots a (new) marker. A primary that stops answering times its
//!   campaigns' calls out at their deadline, no one else's.
//!
//! # The client
//! The `redis` crate speaks RESP (codec, `AUTH`, `SELECT`, script hashes) over a stream we
//! open ourselves (`transport.rs`: TCP, or TLS trusting only the operator's CA); `client.rs`
//! owns the connection lifecycle, because the two properties that matter are ours to keep.
//! Every call is bounded by the caller's deadline end to end (waiting for a connection,
//! dialling, the round trip), and a connection is only returned to the pool (at most
//! [`RedisConfig::max_connections`]) after a complete exchange: one that failed, timed out or
//! was cancelled is dropped, closing its socket, and the next call dials a new one, which is how
//! the client reconnects after a Redis restart. Idle connections whose peer closed are not
//! reused. Batches of script calls are pipelined on one connection (one write, the replies in
//! order), the whole batch bounded by the deadline; scripts answered `NOSCRIPT` did not run and
//! are loaded once each (`SCRIPT LOAD`) and sent again (two round trips, not the crate's
//! three). The same-run comparison with the hand-written RESP client this replaced is in
//! BENCHMARKS.md ("Redis clients").
//!
//! On Redis Cluster ([`RedisConfig::cluster_nodes`]) the crate's cluster client is used
//! (`cluster.rs`): it follows `MOVED` and `ASK`, refreshes its slot map after a failover, and
//! multiplexes one connection per node. Each call still has the caller's deadline end to end
//! (a timed-out call is [`LedgerError::Timeout`]); `NOSCRIPT` is answered by `EVAL` with the
//! same keys; a batch is sent as concurrent calls, each to its slot's primary, with per-call
//! answers; `SCAN` and `SCRIPT LOAD` go to every primary. `backend.rs` hides which client is in
//! use from the per-bid, lease and sweep code. TLS to a cluster ([`RedisConfig::cluster_ca_file`])
//! trusts only the operator's CA file; a certificate it does not vouch for is
//! [`LedgerError::Refused`].

mod backend;
mod client;
mod cluster;
mod conn;
mod error;
mod handle;
pub mod keys;
mod lease;
mod per_bid;
mod resp;
pub(crate) mod script;
mod sweep;
mod sweep_list;
mod transport;

pub use cluster::ClusterSetupError;
pub use error::{LeaseError, LedgerError};
pub use handle::{
    CREATE_TIMEOUT, EVIDENCE_SCAN_ROUNDS, KeyScan, OPEN_BATCH, PIPELINE_MAX, RedisConfig,
    RedisLedger,
};
pub use keys::Keys;
pub use per_bid::BALANCES_CHUNK;
pub use script::{
    LeaseClose, LeaseGrant, LeaseReport, LeaseState, LimitsBase, LimitsChange, LimitsConflict,
    LimitsRole, LimitsStatus, LimitsWritten, MAX_WRITER_BYTES, StoredLimits, Swept,
};
pub use sweep::{SWEEP_CAMPAIGNS, SWEEP_ROTATION};
pub use transport::RedisTls;

/// The largest amount of nanos the scripts compute exactly: 2^53 - 1 (about 9,007,199 currency
/// units). See the module docs.
pub const MAX_AMOUNT: i64 = (1 << 53) - 1;

#[cfg(test)]
mod tests {
    use super::client::Script;

    #[test]
    fn script_shas_are_sha1_of_the_bodies() {
        // Checked against Redis's own SCRIPT LOAD in the integration tests; here, only shape.
        let s = Script::new("return 1");
        assert_eq!(s.sha(), "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
    }
}
