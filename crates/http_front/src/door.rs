//! [`Door`]: the one shape of a working route in both servers (the exchange's auctions, the
//! bidder's bid requests): read the body within its limits, take a place at the admission gate,
//! run, and record the time from the read to the answer. What a request does is the server's;
//! how it comes in, is refused and is timed is written here once, so the two servers cannot
//! drift apart on it.
//!
//! The body is read before the gate: a slow sender must not hold a place meant for work, and a
//! refused request's connection stays usable. The clock for the request's deadline starts when
//! the body has been read (`read_at`), the origin of `tmax` in `admission::deadline`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admission::Admission;
use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use telemetry::Histogram;

use crate::{Body, BodyError, read_body, shed_answer};

/// Why the door answered a request itself, for the server's request counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The body, or its gzip inflated, is larger than the limit (413).
    TooLarge,
    /// The body could not be read: broken framing, not gzip, a coding other than gzip, or not
    /// in time (400, 415 or 408).
    BadBody,
    /// The admission gate refused it (an immediate no-bid).
    Shed,
}

/// A server's door: its body limits and its admission gate.
#[derive(Debug)]
pub struct Door {
    max_body_bytes: usize,
    read_timeout: Duration,
    admission: Arc<Admission>,
}

impl Door {
    /// A door over `admission`; bodies up to `max_body_bytes`, read within `read_timeout`.
    pub fn new(max_body_bytes: usize, read_timeout: Duration, admission: Arc<Admission>) -> Door {
        Door {
            max_body_bytes,
            read_timeout,
            admission,
        }
    }

    /// The gate, for the work that bypasses the door (the bidder's notices enter first) and
    /// for reports.
    pub fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }

    /// Reads the body, admits the request and runs `run(body, read_at)`, observing the time
    /// from `read_at` to the answer in `latency`; a request refused on the way is answered here
    /// and reported to `refused` (and not observed: it did no work).
    pub async fn take_in<F, Fut>(
        &self,
        req: Request<Incoming>,
        latency: &Histogram,
        refused: impl FnOnce(Refused),
        run: F,
    ) -> Response<Body>
    where
        F: FnOnce(Bytes, Instant) -> Fut,
        Fut: Future<Output = Response<Body>>,
    {
        let body = match read_body(req, self.max_body_bytes, self.read_timeout).await {
            Ok(body) => body,
            Err(e) => {
                refused(match e {
                    BodyError::TooLarge { .. } | BodyError::InflatesTooLarge { .. } => {
                        Refused::TooLarge
                    }
                    BodyError::Read(_) | BodyError::Timeout | BodyError::UnsupportedEncoding(_) => {
                        Refused::BadBody
                    }
                });
                return e.response();
            }
        };
        let read_at = Instant::now();
        let Some(_ticket) = self.admission.try_enter() else {
            refused(Refused::Shed);
            return shed_answer(&self.admission, &body);
        };
        let response = run(body, read_at).await;
        latency.observe(read_at.elapsed());
        response
    }
}
