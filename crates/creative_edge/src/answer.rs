//! The asset route's answers: a stored object (200, 206, 304, 416, with or without a body for
//! HEAD), a streamed fill, or a failure. What the client asked is read once into [`Ask`].

use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, header};

use crate::body::EdgeBody;
use crate::conditional::{self, RangeAnswer};
use crate::flight::{Failure, Flight, StreamHead};
use crate::metrics::{Fetch, Metrics, Served};
use crate::object::Object;

/// What the client asked besides the object: read from the request before any waiting. The
/// values share the request's buffer (cloning a header value copies nothing).
#[derive(Debug, Default, Clone)]
pub struct Ask {
    pub head_only: bool,
    if_none_match: Option<HeaderValue>,
    range: Option<HeaderValue>,
    if_range: Option<HeaderValue>,
}

impl Ask {
    /// Reads the request's method and conditional headers.
    pub fn of(method: &Method, headers: &HeaderMap) -> Ask {
        Ask {
            head_only: method == Method::HEAD,
            if_none_match: headers.get(header::IF_NONE_MATCH).cloned(),
            range: headers.get(header::RANGE).cloned(),
            if_range: headers.get(header::IF_RANGE).cloned(),
        }
    }

    /// Whether `If-None-Match` names `etag`, so the answer is 304.
    fn not_modified(&self, etag: &str) -> bool {
        text(&self.if_none_match).is_some_and(|inm| conditional::none_match(inm, etag))
    }
}

fn text(value: &Option<HeaderValue>) -> Option<&str> {
    value.as_ref().and_then(|v| v.to_str().ok())
}

const X_CACHE: HeaderName = HeaderName::from_static("x-cache");

/// Headers every asset answer carries.
#[derive(Debug, Clone)]
pub struct Common {
    pub cors: Option<HeaderValue>,
    pub metrics: Arc<Metrics>,
}

impl Common {
    fn builder(&self, status: StatusCode, served: Served) -> http::response::Builder {
        let mut b = Response::builder()
            .status(status)
            .header(X_CACHE, HeaderValue::from_static(served.label()));
        if let Some(cors) = &self.cors {
            b = b.header(header::ACCESS_CONTROL_ALLOW_ORIGIN, cors.clone());
        }
        b
    }
}

fn finish(builder: http::response::Builder, body: EdgeBody) -> Response<EdgeBody> {
    // Every value set here is a checked `HeaderValue` or made from digits; a builder error
    // still gives an empty 500 rather than a panic.
    builder.body(body).unwrap_or_else(|_| {
        let mut r = Response::new(EdgeBody::empty());
        *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
        r
    })
}

/// The answer for a stored object at `now_ms`.
pub fn object(
    object: &Object,
    ask: &Ask,
    served: Served,
    now_ms: u64,
    common: &Common,
) -> Response<EdgeBody> {
    common.metrics.served(served);
    let meta = &object.meta;
    let values = object.values();
    let len = object.body.len() as u64;
    let mut b = common
        .builder(StatusCode::OK, served)
        .header(header::AGE, object.age_s(now_ms))
        .header(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Some(etag) = &values.etag {
        b = b.header(header::ETAG, etag.clone());
    }
    b = match &values.cache_control {
        Some(cc) => b.header(header::CACHE_CONTROL, cc.clone()),
        None => {
            let left = meta.fresh_until_ms.saturating_sub(now_ms) / 1_000;
            b.header(header::CACHE_CONTROL, format!("max-age={left}"))
        }
    };
    if let Some(lm) = &values.last_modified {
        b = b.header(header::LAST_MODIFIED, lm.clone());
    }
    if ask.not_modified(&meta.etag) {
        return finish(b.status(StatusCode::NOT_MODIFIED), EdgeBody::empty());
    }
    b = b.header(header::CONTENT_TYPE, values.content_type.clone());
    let range = match text(&ask.range) {
        None => RangeAnswer::Full,
        // An If-Range that no longer holds asks for the whole, newer object.
        Some(_)
            if text(&ask.if_range).is_some_and(|ir| {
                !conditional::if_range_holds(ir, &meta.etag, meta.last_modified.as_deref())
            }) =>
        {
            RangeAnswer::Full
        }
        Some(r) => conditional::range(r, len),
    };
    let (status, body) = match range {
        RangeAnswer::Full => (StatusCode::OK, object.body.clone()),
        RangeAnswer::Partial { first, last } => {
            b = b.header(header::CONTENT_RANGE, format!("bytes {first}-{last}/{len}"));
            let body = object.body.slice(first as usize..=last as usize);
            (StatusCode::PARTIAL_CONTENT, body)
        }
        RangeAnswer::Unsatisfiable => {
            let b = b
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{len}"));
            return finish(b, EdgeBody::empty());
        }
    };
    let b = b.status(status).header(header::CONTENT_LENGTH, body.len());
    if ask.head_only {
        return finish(b, EdgeBody::empty());
    }
    finish(b, EdgeBody::whole(body).metered(common.metrics.clone()))
}

/// The answer that streams a fill to this client. Ranges are not cut from a stream: the
/// client gets the whole object (200), which RFC 9110 allows.
pub fn stream(
    flight: Arc<Flight>,
    head: &StreamHead,
    ask: &Ask,
    common: &Common,
) -> Response<EdgeBody> {
    common.metrics.served(Served::Miss);
    let mut b = common
        .builder(StatusCode::OK, Served::Miss)
        .header(header::CONTENT_TYPE, head.content_type.clone());
    if let Some(etag) = &head.etag {
        b = b.header(header::ETAG, etag.clone());
        if etag.to_str().is_ok_and(|etag| ask.not_modified(etag)) {
            return finish(b.status(StatusCode::NOT_MODIFIED), EdgeBody::empty());
        }
    }
    if let Some(lm) = &head.last_modified {
        b = b.header(header::LAST_MODIFIED, lm.clone());
    }
    if let Some(cc) = &head.cache_control {
        b = b.header(header::CACHE_CONTROL, cc.clone());
    }
    if let Some(n) = head.content_length {
        b = b.header(header::CONTENT_LENGTH, n);
    }
    if ask.head_only {
        return finish(b, EdgeBody::empty());
    }
    finish(
        b,
        EdgeBody::flight(flight, head.content_length).metered(common.metrics.clone()),
    )
}

/// The answer for a fill that produced no object.
pub fn failure(failure: Failure, served: Served, common: &Common) -> Response<EdgeBody> {
    common.metrics.served(served);
    let (status, message) = match failure {
        Failure::Missing(status) => (status, "the origin has no such object"),
        Failure::Origin(Fetch::Timeout | Fetch::PoolFull) => (
            StatusCode::GATEWAY_TIMEOUT,
            "the origin did not answer in time",
        ),
        Failure::Origin(_) => (StatusCode::BAD_GATEWAY, "the origin failed"),
        Failure::TooLarge => (
            StatusCode::BAD_GATEWAY,
            "the object is larger than this edge's max_object_bytes",
        ),
    };
    let body = serde_json::json!({ "error": message }).to_string();
    let b = common
        .builder(status, served)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CACHE_CONTROL, "no-store")
        .header(header::CONTENT_LENGTH, body.len());
    finish(b, EdgeBody::whole(body))
}

/// A client error on the asset route (bad path, unknown origin, method).
pub fn refuse(status: StatusCode, message: &str) -> Response<EdgeBody> {
    let body = serde_json::json!({ "error": message }).to_string();
    let b = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len());
    finish(b, EdgeBody::whole(body))
}
