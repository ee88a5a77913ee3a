//! Admin endpoints, on `admin_listen` only, behind the admin door (token, audit), with
//! `/metrics` (the token only with `security.metrics_need_token`), `/healthz` and `/readyz`
//! (without a token; [`not_ready`] says when the bidder should get no traffic):
//! `GET /admin/campaigns` (budget, spend and pacing of every campaign, from the ledger of
//! record, with the version and writer of its limits and any conflict with the local file,
//! and `config`: the set serving, from the file or which fleet revision), `PUT
//! /admin/campaigns/<id>/limits` (the admin API as the writer of a campaign's limits: a
//! compare-and-set on the version the caller saw; audited), `POST /admin/reload` (reload the
//! campaign file now; audited) and
//! `POST /admin/ledger/open` (create and open the ledger in a Redis that holds none: a first
//! start, or the operator's decision after Redis lost its data; audited).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use ledger::Balance;
use pacing::PacingState;
use serde::Serialize;
use serde_json::json;
use units::{Nanos, Timestamp};

use http_front::{json as json_response, json_error, method_not_allowed};

use crate::state::{Bidder, State};
use ledger::Unavailable;

/// One campaign as `/admin/campaigns` reports it.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignReport {
    pub id: String,
    /// The ledger's figures; `None` when the ledger does not know the campaign yet.
    pub balance: Option<Balance>,
    pub pacing: PacingState,
    /// Bids this instance made.
    pub bids: u64,
    /// Impressions this instance charged (win or billing notice, whichever came first).
    pub wins: u64,
    /// What this instance's notices charged.
    pub charged_here: Nanos,
}

/// Routes one admin request: the door first (401 without the token), then the endpoint.
pub(crate) async fn handle(
    state: &State,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/metrics" => {
            return http_front::metrics_answer(&state.admin, &req, peer, || render_metrics(state));
        }
        "/healthz" => return http_front::plain(StatusCode::OK, "text/plain", "ok\n"),
        "/readyz" => {
            return http_front::readyz_answer(req.method(), not_ready(state).as_deref());
        }
        _ => {}
    }
    let caller = match state.admin.check(&req, peer) {
        Ok(c) => c,
        Err(denied) => return denied.response(),
    };
    if let Some(id) = limits_path(req.uri().path()) {
        return match req.method() {
            &Method::PUT => {
                let id = id.to_owned();
                put_limits(state, &caller, &id, req).await
            }
            _ => method_not_allowed("PUT"),
        };
    }
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/admin/campaigns") => campaigns(state).await,
        (_, "/admin/campaigns") => method_not_allowed("GET"),
        (&Method::POST, "/admin/reload") => reload(state, &caller).await,
        (_, "/admin/reload") => method_not_allowed("POST"),
        (&Method::POST, "/admin/ledger/open") => {
            let flag = |name: &str| {
                req.uri().query().is_some_and(|q| {
                    openrtb::query::query_pairs(q)
                        .iter()
                        .any(|(k, v)| k == name && v == "true")
                })
            };
            let rule = if flag("no_marker") {
                crate::ledger_open::MarkerRule::Waived
            } else {
                crate::ledger_open::MarkerRule::Required
            };
            open_ledger(state, &caller, flag("after_loss"), rule).await
        }
        (_, "/admin/ledger/open") => method_not_allowed("POST"),
        _ => json_error(
            StatusCode::NOT_FOUND,
            "no such admin path; see GET /admin/campaigns, PUT /admin/campaigns/<id>/limits, POST /admin/reload, POST /admin/ledger/open",
        ),
    }
}

/// The Prometheus page, served on the admin listener.
/// Why the bidder should get no traffic now, or `None`: draining; or a Redis ledger it cannot
/// spend from (never opened, its marker gone, or lost since: `ledger_missing`), or that has not
/// yet been told the campaigns' limits once; or, for a limits writer, campaigns whose record
/// the open ledger lost (deleted or evicted), named: the ledger is there, their budgets are
/// not. The in-memory ledger is always usable.
pub(crate) fn not_ready(state: &State) -> Option<String> {
    state.readiness.not_ready(|| {
        if state.ledger.ledger_missing() {
            return Some("ledger missing".to_owned());
        }
        if !state.limits_written_once.load(Relaxed) {
            return Some("campaign limits not yet written to the ledger".to_owned());
        }
        let view = state.limits.load();
        // A writer wrote every campaign of its file: one the ledger does not hold now lost its
        // record (a follower's missing campaigns only wait for their writer).
        let writes = state.ledger.limits_role().writer().is_some() && state.ledger.redis().is_some();
        (writes && !view.missing.is_empty()).then(|| {
            format!(
                "campaign {} not in the ledger (its record was deleted or evicted; the ledger is open): docs/bidder.md, \"A campaign's record lost\"",
                crate::limits_check::LimitsView::named(&view.missing)
            )
        })
    })
}

fn render_metrics(state: &State) -> String {
    let mut text = state.metrics.render();
    http_front::render_ready("gavel_bidder", not_ready(state).is_none(), &mut text);
    crate::metrics::render_leases(&mut text, state.ledger.lease_status());
    crate::metrics::render_ledger_missing(&mut text, state.ledger.ledger_missing());
    crate::metrics::render_notices_in_flight(&mut text, state.notices_in_flight.load(Relaxed));
    state.door.admission().render("gavel_bidder", &mut text);
    state.connections.render("gavel_bidder", &mut text);
    state.journal.render(&mut text);
    crate::campaign_metrics::render(
        &mut text,
        &state.snapshot.load(),
        Timestamp::now(),
        state.config.metrics.max_labelled_campaigns,
    );
    text
}

impl Bidder {
    /// Every campaign serving now, with its balance from the ledger of record.
    pub async fn campaign_report(&self) -> Result<Vec<CampaignReport>, Unavailable> {
        report(&self.state).await
    }
}

async fn report(state: &State) -> Result<Vec<CampaignReport>, Unavailable> {
    let snapshot = state.snapshot.load_full();
    let balances = state.ledger.balances(&snapshot.ids()).await?;
    let mut by_id: HashMap<String, Balance> = balances
        .into_iter()
        .map(|b| (b.campaign.clone(), b))
        .collect();
    let now = Timestamp::now();
    Ok(snapshot
        .states
        .iter()
        .map(|s| {
            let balance = by_id.remove(&s.id);
            let mut pacing = s.pacing_state(now);
            // The pacer of an `asap` campaign is not fed spend (it needs none); the ledger's
            // figure is the actual one either way.
            if let Some(b) = &balance {
                pacing.actual = b.spent;
                pacing.deviation = (b.spent.get() as f64 - pacing.target.get() as f64)
                    / pacing.target.get().max(1) as f64;
            }
            (s, balance, pacing)
        })
        .map(|(s, balance, pacing)| CampaignReport {
            id: s.id.clone(),
            balance,
            pacing,
            bids: s.bids.load(Relaxed),
            wins: s.wins.load(Relaxed),
            charged_here: Nanos(s.charged.load(Relaxed)),
        })
        .collect())
}

/// `GET /admin/campaigns`. In Redis mode the balances are the shared ones, so every instance
/// reports the same numbers; `bids`, `wins` and `charged_here` are this instance's.
async fn campaigns(state: &State) -> Response<Full<Bytes>> {
    let reports = match report(state).await {
        Ok(r) => r,
        Err(e) => return json_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    let units = |n: Nanos| n.as_units_f64();
    let limits = state.limits.load();
    let list: Vec<serde_json::Value> = reports
        .iter()
        .map(|r| {
            let status = limits.by_campaign.get(&r.id);
            let stored = status.and_then(|s| s.ledger.as_ref());
            let b = r.balance.as_ref();
            // Currency units for people, exact nanos for programs; null before the ledger
            // knows the campaign.
            let field = |f: fn(&Balance) -> Nanos| b.map(|b| units(f(b)));
            let exact = |f: fn(&Balance) -> Nanos| b.map(|b| f(b).get());
            json!({
                "id": r.id,
                "budget": field(|b| b.budget),
                "spent": field(|b| b.spent),
                "reserved": field(|b| b.reserved),
                "available": field(|b| b.available),
                "nanos": {
                    "budget": exact(|b| b.budget),
                    "spent": exact(|b| b.spent),
                    "reserved": exact(|b| b.reserved),
                    "available": exact(|b| b.available),
                    "charged_here": r.charged_here.get(),
                },
                "daily": b.and_then(|b| b.daily.as_ref()).map(|d| json!({
                    "day": d.day,
                    "budget": units(d.budget),
                    "spent": units(d.spent),
                    "reserved": units(d.reserved),
                    "available": units(d.available),
                })),
                "pacing": {
                    "mode": r.pacing.mode,
                    "target": units(r.pacing.target),
                    "actual": units(r.pacing.actual),
                    "deviation": r.pacing.deviation,
                    "bid_share": r.pacing.bid_share,
                },
                "bids": r.bids,
                "wins": r.wins,
                "charged_here": units(r.charged_here),
                // The limits of record: their version and writer; a local file that differs.
                "limits_version": stored.map(|s| s.version),
                "limits_writer": stored.map(|s| s.writer.as_str()),
                "in_ledger": status.map(|s| !s.missing()),
                "conflict": status.filter(|s| s.conflict()).map(|s| json!({
                    "local": limits_json(&s.local),
                    "ledger": stored.map(|l| limits_json(&l.limits)),
                })),
            })
        })
        .collect();
    let snapshot = state.snapshot.load();
    let body = json!({
        "ledger": state.ledger.kind(),
        "limits_writer": state.ledger.limits_role().writer(),
        "limit_conflicts": limits.conflicts.len(),
        "limits_missing": limits.missing.len(),
        "node": state.node,
        "loaded_at_ms": snapshot.loaded_at.millis(),
        "config": state.metrics.served.version(),
        "campaigns": list,
    });
    json_response(StatusCode::OK, body.to_string())
}

/// Limits for people and programs: currency units and exact nanos.
fn limits_json(l: &units::Limits) -> serde_json::Value {
    json!({
        "total": l.total.as_units_f64(),
        "daily": l.daily.map(Nanos::as_units_f64),
        "nanos": { "total": l.total.get(), "daily": l.daily.map(Nanos::get) },
    })
}

/// The campaign id of `/admin/campaigns/<id>/limits` (one path segment, not empty).
fn limits_path(path: &str) -> Option<&str> {
    let id = path
        .strip_prefix("/admin/campaigns/")?
        .strip_suffix("/limits")?;
    (!id.is_empty() && !id.contains('/')).then_some(id)
}

/// `PUT /admin/campaigns/<id>/limits` with `{"total", "daily", "base_version"}`: the admin API
/// writes a campaign's limits (as `admin:<node>`), a compare-and-set on `base_version`. 200
/// with the new version; 409 with what is stored when the base is stale (nothing written);
/// 400 naming the field; 404 for a campaign not in this instance's file. Audited.
async fn put_limits(
    state: &State,
    caller: &http_front::Caller,
    id: &str,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let what = format!("PUT /admin/campaigns/{id}/limits");
    if state.ledger.redis().is_none() {
        return json_error(
            StatusCode::CONFLICT,
            "ledger.backend is memory: the campaign file is the only source of limits",
        );
    }
    if !state.snapshot.load().ids().iter().any(|c| c == id) {
        return json_error(
            StatusCode::NOT_FOUND,
            "no such campaign in this instance's campaign file",
        );
    }
    let body = match http_front::read_body(
        req,
        crate::limits_body::MAX_BODY_BYTES,
        state.config.read_timeout(),
    )
    .await
    {
        Ok(b) => b,
        Err(e) => return e.response(),
    };
    let request = match crate::limits_body::parse(&body) {
        Ok(r) => r,
        Err(e) => {
            let refused = json!({ "refused": e.to_string() });
            state.admin.audit(caller, &what, &json!({}), &refused);
            return json_error(StatusCode::BAD_REQUEST, &e.to_string());
        }
    };
    let change = ledger::LimitsChange {
        campaign: id.to_owned(),
        limits: request.limits,
        writer: format!("admin:{}", state.node),
        base: ledger::LimitsBase::Version(request.base_version),
    };
    let before = json!({ "base_version": request.base_version });
    let result = state.ledger.change_limits(&change).await;
    let (status, after) = match &result {
        Ok(Ok(w)) => (
            StatusCode::OK,
            json!({
                "campaign": id,
                "version": w.version,
                "changed": w.changed,
                "writer": change.writer,
                "limits": limits_json(&change.limits),
            }),
        ),
        Ok(Err(conflict)) => (
            StatusCode::CONFLICT,
            json!({
                "error": conflict.to_string(),
                "campaign": id,
                "version": conflict.version,
                "writer": conflict.stored.as_ref().map(|s| s.writer.as_str()),
                "limits": conflict.stored.as_ref().map(|s| limits_json(&s.limits)),
            }),
        ),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({ "error": e.to_string() }),
        ),
    };
    state.admin.audit(caller, &what, &before, &after);
    if matches!(result, Ok(Ok(_))) {
        // The admin page and the gauges show the new version now, not at the next check.
        crate::reload::check_limits(state).await;
    }
    json_response(status, after.to_string())
}

/// `POST /admin/reload`: reloads the campaign file and the price keys now; 200 with the count
/// and the ids of the price keys in force, or 422 naming the problem (what failed keeps its
/// last good version). Audited either way.
async fn reload(state: &State, caller: &http_front::Caller) -> Response<Full<Bytes>> {
    let loaded = |state: &State| {
        let s = state.snapshot.load();
        json!({ "campaigns": s.states.len(), "loaded_at_ms": s.loaded_at.millis() })
    };
    let before = loaded(state);
    let result = crate::reload::reload(state).await;
    // The price keys are read again too (a rotation without waiting for the file watcher).
    let prices = crate::reload::reload_price_keys(state).await;
    // Each part says what happened to it: a refused key file does not hide applied campaigns.
    let result = result.map_err(|e| e.to_string());
    let prices = prices.map_err(|e| e.to_string());
    let mut after = match &result {
        Ok(_) => loaded(state),
        Err(e) => json!({ "refused": e }),
    };
    after["price_keys"] = match &prices {
        Ok(ids) => json!(ids),
        Err(e) => json!({ "refused": e }),
    };
    state
        .admin
        .audit(caller, "POST /admin/reload", &before, &after);
    let status = if result.is_ok() && prices.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let mut body = after;
    body["reloaded"] = json!(status == StatusCode::OK);
    if let Err(e) = result.as_ref().and(prices.as_ref()) {
        body["error"] = json!(e);
    }
    json_response(status, body.to_string())
}

/// `POST /admin/ledger/open[?after_loss=true][&no_marker=true]`: opens the ledger in Redis,
/// creating it if Redis holds none and nothing says one lived there, or the operator says its
/// data was lost (`ledger_open`); creating needs this host's marker writable unless
/// `no_marker`. Every instance sharing the Redis adopts it (lease mode within one report
/// interval, per-bid mode at its next control tick) and writes its campaigns' limits again,
/// from zero spend unless their figures were restored first. Audited, refusals included.
async fn open_ledger(
    state: &State,
    caller: &http_front::Caller,
    after_loss: bool,
    rule: crate::ledger_open::MarkerRule,
) -> Response<Full<Bytes>> {
    let Some(redis) = state.ledger.redis() else {
        return json_error(
            StatusCode::CONFLICT,
            "ledger.backend is memory: there is no shared ledger to open",
        );
    };
    let before = json!({
        "ledger_missing": state.ledger.ledger_missing(),
        "after_loss": after_loss,
        "no_marker": rule == crate::ledger_open::MarkerRule::Waived,
    });
    let result =
        crate::ledger_open::open_or_create(&redis, state.marker.as_ref(), after_loss, rule).await;
    if matches!(
        result,
        Ok(_) | Err(crate::ledger_open::OpenRefused::MarkerNotWritten { .. })
    ) {
        // A ledger is open (even one whose marker was not written): per-bid mode writes its
        // limits on the next control tick.
        state.limits_pending.store(true, Relaxed);
    }
    let after = match &result {
        Ok(opened) => serde_json::to_value(opened).unwrap_or_default(),
        Err(e) => json!({ "refused": e.to_string() }),
    };
    state
        .admin
        .audit(caller, "POST /admin/ledger/open", &before, &after);
    match result {
        Ok(_) => json_response(StatusCode::OK, after.to_string()),
        Err(
            e @ (crate::ledger_open::OpenRefused::Evidence(_)
            | crate::ledger_open::OpenRefused::NoMarker(_)),
        ) => json_error(StatusCode::CONFLICT, &e.to_string()),
        Err(e) => json_error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}
