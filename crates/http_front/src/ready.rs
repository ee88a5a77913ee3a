//! Readiness, apart from liveness: `/healthz` answers 200 for as long as the process serves,
//! `/readyz` only while the server should be sent traffic. A server is not ready until what it
//! needs is in place (its own check: the bidder's ledger, say), and not ready again from the
//! moment it starts draining, so that a load balancer stops sending before the listener closes.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use http::{Method, Response, StatusCode};

use crate::Body;

/// Whether one server is draining: set once on its stop signal, never cleared.
#[derive(Debug, Default)]
pub struct Readiness {
    draining: AtomicBool,
}

/// The reason a draining server gives on `/readyz`.
pub const DRAINING: &str = "draining";

impl Readiness {
    pub fn new() -> Readiness {
        Readiness::default()
    }

    /// From now on `/readyz` answers 503. Returns whether this call started the drain.
    pub fn start_draining(&self) -> bool {
        !self.draining.swap(true, Relaxed)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Relaxed)
    }

    /// Why the server is not ready: draining first, else the server's own reason (`own`,
    /// asked only when not draining), else `None`: ready.
    pub fn not_ready<R: Into<String>>(&self, own: impl FnOnce() -> Option<R>) -> Option<String> {
        if self.is_draining() {
            return Some(DRAINING.to_owned());
        }
        own().map(Into::into)
    }
}

/// The `/readyz` answer: 200 `ready`, or 503 `not ready: {reason}` (one line, plain text);
/// 405 for a method other than GET or HEAD.
pub fn readyz_answer(method: &Method, not_ready: Option<&str>) -> Response<Body> {
    if method != Method::GET && method != Method::HEAD {
        return crate::method_not_allowed("GET");
    }
    match not_ready {
        None => crate::plain(StatusCode::OK, "text/plain", "ready\n"),
        Some(why) => crate::plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            format!("not ready: {why}\n"),
        ),
    }
}

/// Appends `{prefix}_ready`: 1 when ready, 0 otherwise.
pub fn render_ready(prefix: &str, ready: bool, out: &mut String) {
    telemetry::single(
        out,
        &format!("{prefix}_ready"),
        "gauge",
        "1 when /readyz answers 200 (configuration and dependencies in place, not draining), else 0.",
        u64::from(ready),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    async fn text(r: Response<Body>) -> (u16, String) {
        let status = r.status().as_u16();
        let body = r.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn draining_wins_over_the_servers_own_reason_and_stays() {
        let r = Readiness::new();
        assert_eq!(r.not_ready(|| None::<String>), None);
        assert_eq!(
            r.not_ready(|| Some("ledger missing")).as_deref(),
            Some("ledger missing")
        );
        assert!(r.start_draining());
        assert!(
            !r.start_draining(),
            "a second signal does not start it again"
        );
        assert_eq!(r.not_ready(|| None::<String>).as_deref(), Some(DRAINING));
        assert_eq!(
            text(readyz_answer(&Method::GET, None)).await,
            (200, "ready\n".to_owned())
        );
        assert_eq!(
            text(readyz_answer(&Method::GET, Some("ledger missing"))).await,
            (503, "not ready: ledger missing\n".to_owned())
        );
        assert_eq!(text(readyz_answer(&Method::POST, None)).await.0, 405);
        let mut page = String::new();
        render_ready("gavel_x", false, &mut page);
        assert!(page.contains("\ngavel_x_ready 0\n"), "{page}");
    }
}
