//! Admin endpoints, on `admin_listen` only, behind the admin door (token, audit):
//!
//! | endpoint | does |
//! | --- | --- |
//! | `GET /admin/bidders` | the roster: each bidder's endpoint, whether the file enables it, whether an operator paused it, its breaker state and trips; and `config`, the version serving (`source` file or nats, `revision`, `applied_at`) |
//! | `POST /admin/bidders/{name}/disable` | stop calling it (kept across reloads until enabled); audited |
//! | `POST /admin/bidders/{name}/enable` | call it again; audited |
//! | `POST /admin/reload` | reload the configuration file now (as SIGHUP); audited |
//! | `GET /metrics` | Prometheus text (the token only with `security.metrics_need_token`) |
//! | `GET /healthz` | `ok`, without a token |
//! | `GET /readyz` | `ready`, or 503 `not ready: draining`, without a token |

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use http_front::{AdminDoor, AdminError, Caller, json, json_error, method_not_allowed};
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use crate::state::{Exchange, State};

/// The exchange's admin server: open it at start (it reads the token), then serve it on the
/// admin listener.
#[derive(Debug, Clone)]
pub struct ExchangeAdmin {
    exchange: Exchange,
    door: Arc<AdminDoor>,
}

impl Exchange {
    /// Opens the admin door: reads the token (`security.admin_token_file` or
    /// `GAVEL_ADMIN_TOKEN`) and the audit log. Without a token, mutations are refused.
    pub fn admin(&self) -> Result<ExchangeAdmin, AdminError> {
        let door = AdminDoor::open(&self.state.config.config.front.security)?;
        if !door.has_token() {
            tracing::warn!(
                "no admin token (security.admin_token_file or GAVEL_ADMIN_TOKEN): admin mutations are refused"
            );
        }
        Ok(ExchangeAdmin {
            exchange: self.clone(),
            door: Arc::new(door),
        })
    }
}

impl ExchangeAdmin {
    /// Serves the admin endpoints until `shutdown` completes.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) {
        let limits = http_front::admin::admin_limits(self.exchange.state.config.limits());
        let admin = self.clone();
        let connections = Arc::new(http_front::ConnStats::default());
        http_front::serve(listener, shutdown, limits, connections, move |req, peer| {
            let admin = admin.clone();
            async move { admin.handle(req, peer).await }
        })
        .await;
    }

    async fn handle(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let state = &self.exchange.state;
        match req.uri().path() {
            "/metrics" => {
                return http_front::metrics_answer(&self.door, &req, peer, || {
                    crate::server::render_metrics(state)
                });
            }
            "/healthz" => return http_front::plain(StatusCode::OK, "text/plain", "ok\n"),
            "/readyz" => {
                return http_front::readyz_answer(
                    req.method(),
                    crate::server::not_ready(&self.exchange.state).as_deref(),
                );
            }
            _ => {}
        }
        let caller = match self.door.check(&req, peer) {
            Ok(c) => c,
            Err(denied) => return denied.response(),
        };
        let path = req.uri().path();
        if let Some(rest) = path.strip_prefix("/admin/bidders/") {
            let (name, action) = rest.rsplit_once('/').unwrap_or((rest, ""));
            let pause = match action {
                "disable" => true,
                "enable" => false,
                _ => return not_found(),
            };
            if req.method() != Method::POST {
                return method_not_allowed("POST");
            }
            return self.set_paused(state, &caller, name, pause);
        }
        match (req.method(), path) {
            (&Method::GET, "/admin/bidders") => json(
                StatusCode::OK,
                json!({ "bidders": roster(state), "config": state.metrics.served.version() })
                    .to_string(),
            ),
            (_, "/admin/bidders") => method_not_allowed("GET"),
            (&Method::POST, "/admin/reload") => self.reload(&caller).await,
            (_, "/admin/reload") => method_not_allowed("POST"),
            _ => not_found(),
        }
    }

    fn set_paused(
        &self,
        state: &State,
        caller: &Caller,
        name: &str,
        pause: bool,
    ) -> Response<Full<Bytes>> {
        let roster = state.roster.load();
        let Some(bidder) = roster.named(name) else {
            return json_error(
                StatusCode::NOT_FOUND,
                "no bidder of that name in the roster",
            );
        };
        let was = bidder.paused.swap(pause, Relaxed);
        // Once per change: a second `disable` of a paused bidder is audited but changes nothing.
        match (was, pause) {
            (false, true) => tracing::warn!(
                bidder = %name,
                who = %caller.who,
                "bidder paused by an operator: not called until enabled"
            ),
            (true, false) => tracing::info!(
                bidder = %name,
                who = %caller.who,
                "bidder enabled by an operator: called again"
            ),
            _ => {}
        }
        let what = format!(
            "POST /admin/bidders/{name}/{}",
            if pause { "disable" } else { "enable" }
        );
        self.door.audit(
            caller,
            &what,
            &json!({ "bidder": name, "paused": was }),
            &json!({ "bidder": name, "paused": pause }),
        );
        json(
            StatusCode::OK,
            json!({ "bidder": name, "paused": pause, "was_paused": was }).to_string(),
        )
    }

    async fn reload(&self, caller: &Caller) -> Response<Full<Bytes>> {
        let names = |state: &State| -> Value {
            let roster = state.roster.load();
            json!(
                roster
                    .iter()
                    .map(|(_, b)| b)
                    .map(|b| b.name.clone())
                    .collect::<Vec<_>>()
            )
        };
        let state = &self.exchange.state;
        let before = json!({ "bidders": names(state) });
        let result = self.exchange.reload().await;
        let after = match &result {
            Ok(report) => json!({
                "bidders": names(state),
                "restart_needed": report.restart_needed,
            }),
            Err(e) => json!({ "refused": e.to_string() }),
        };
        self.door
            .audit(caller, "POST /admin/reload", &before, &after);
        match result {
            Ok(report) => json(
                StatusCode::OK,
                json!({
                    "reloaded": true,
                    "added": report.bidders.added,
                    "removed": report.bidders.removed,
                    "changed": report.bidders.changed,
                    "restart_needed": report.restart_needed,
                })
                .to_string(),
            ),
            Err(e) => json_error(StatusCode::UNPROCESSABLE_ENTITY, &e.to_string()),
        }
    }
}

/// Every bidder of the roster, as `GET /admin/bidders` shows it.
fn roster(state: &State) -> Vec<Value> {
    let roster = state.roster.load();
    roster
        .iter()
        .map(|(_, b)| b)
        .map(|b| {
            let (breaker, trips) = {
                let guard = telemetry::locks::lock(&b.breaker);
                (guard.state().label(), guard.trips())
            };
            let endpoint = b.pool.endpoint();
            json!({
                "name": b.name,
                "endpoint": format!("http://{}{}", endpoint.authority, endpoint.path),
                "enabled": b.enabled,
                "paused": b.paused.load(Relaxed),
                "serving": b.serving(),
                "breaker": { "state": breaker, "trips": trips },
                "max_connections": b.max_connections,
                "max_qps": b.max_qps,
            })
        })
        .collect()
}

fn not_found() -> Response<Full<Bytes>> {
    json_error(
        StatusCode::NOT_FOUND,
        "no such admin path; see GET /admin/bidders, POST /admin/bidders/{name}/disable|enable, POST /admin/reload",
    )
}
