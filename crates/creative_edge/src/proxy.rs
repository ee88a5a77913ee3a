//! The asset proxy, `GET|HEAD /assets/{origin}/{path}`: memory first, then one fill per herd
//! of clients that missed (which reads the disk tier, then the origin), with failures
//! remembered briefly and stale copies standing in for a failing origin.

use std::borrow::Cow;
use std::sync::Arc;

use http::{HeaderValue, Method, Request, Response, StatusCode};

use crate::answer::{self, Ask};
use crate::assets::Assets;
use crate::body::EdgeBody;
use crate::fill::Fill;
use crate::flight::{Failure, Source, Start};
use crate::metrics::Served;

/// Longest accepted asset path with its query, in bytes.
pub const MAX_PATH_BYTES: usize = 2_048;

/// Answers one asset request.
pub async fn serve<B>(assets: &Arc<Assets>, request: Request<B>) -> Response<EdgeBody> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut r = answer::refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed; use GET or HEAD",
        );
        r.headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    // The key, `{origin}/{path}`, is the target after `/assets/`: borrowed from the request,
    // so a hit allocates nothing for it.
    let (key, origin_name, path) = match parse_target(request.uri()) {
        Ok(parts) => parts,
        Err(why) => return answer::refuse(StatusCode::BAD_REQUEST, why),
    };
    let key: &str = &key;
    let Some(origin) = assets.origins.get(origin_name) else {
        return answer::refuse(StatusCode::NOT_FOUND, "no origin of that name");
    };
    let ask = Ask::of(request.method(), request.headers());
    let now = assets.clock.now_ms();
    let stale = match assets.memory.get(key) {
        Some(o) if o.is_fresh(now) => {
            return answer::object(&o, &ask, Served::HitMemory, now, &assets.common);
        }
        other => other,
    };
    if let Some(failure @ Failure::Missing(_)) = assets.negative.get(key, now) {
        return answer::failure(failure, Served::Negative, &assets.common);
    }
    let joined = assets
        .flights
        .join_or_lead(key, || assets.memory.get(key).filter(|o| o.is_fresh(now)));
    let flight = match joined {
        Err(fresh) => {
            return answer::object(&fresh, &ask, Served::HitMemory, now, &assets.common);
        }
        Ok((flight, true)) => {
            let fill = Fill {
                assets: assets.clone(),
                key: key.to_owned(),
                origin: origin.clone(),
                path: path.into_owned(),
                stale,
                flight: flight.clone(),
            };
            tokio::spawn(fill.run());
            flight
        }
        Ok((flight, false)) => flight,
    };
    drop(request);
    match flight.started().await {
        Start::Streaming(head) => answer::stream(flight, &head, &ask, &assets.common),
        Start::Ready(object, source) => {
            let served = match source {
                Source::Disk => Served::HitDisk,
                Source::Revalidated => Served::Revalidated,
                Source::StaleMemory => Served::StaleMemory,
                Source::StaleDisk => Served::StaleDisk,
            };
            answer::object(&object, &ask, served, assets.clock.now_ms(), &assets.common)
        }
        Start::Failed {
            failure,
            remembered,
        } => {
            let served = match failure {
                _ if remembered => Served::Negative,
                Failure::TooLarge => Served::TooLarge,
                _ => Served::OriginError,
            };
            answer::failure(failure, served, &assets.common)
        }
    }
}

/// The key (`{origin}/{path}`, query included), the origin name and the path of
/// `/assets/{origin}/{path}`, the path in its one canonical spelling (`asset_path`): borrowed
/// from the request when it already is, so a hit allocates nothing for it.
fn parse_target(uri: &http::Uri) -> Result<(Cow<'_, str>, &str, Cow<'_, str>), &'static str> {
    let path_and_query = uri.path_and_query().map_or("", |pq| pq.as_str());
    let Some(rest) = path_and_query.strip_prefix("/assets/") else {
        return Err("asset paths are /assets/{origin}/{path}");
    };
    if rest.len() > MAX_PATH_BYTES {
        return Err("asset path longer than 2048 bytes");
    }
    let Some((origin, path)) = rest.split_once('/') else {
        return Err("asset paths are /assets/{origin}/{path}");
    };
    let (path_only, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    if origin.is_empty() || path_only.is_empty() {
        return Err("asset paths are /assets/{origin}/{path}");
    }
    match crate::asset_path::canonical(path_only)? {
        Cow::Borrowed(_) => Ok((Cow::Borrowed(rest), origin, Cow::Borrowed(path))),
        Cow::Owned(canonical) => {
            let path = match query {
                Some(q) => format!("{canonical}?{q}"),
                None => canonical,
            };
            Ok((
                Cow::Owned(format!("{origin}/{path}")),
                origin,
                Cow::Owned(path),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(t: &str) -> Result<(&'static str, String), &'static str> {
        let uri: &'static http::Uri = Box::leak(Box::new(t.parse().expect("uri")));
        parse_target(uri).map(|(key, origin, path)| {
            assert_eq!(key, format!("{origin}/{path}"));
            (origin, path.into_owned())
        })
    }

    #[test]
    fn asset_targets_split_into_origin_and_path_with_query() {
        let ok = |origin, path: &str| Ok((origin, path.to_owned()));
        assert_eq!(target("/assets/cdn/a/b.png"), ok("cdn", "a/b.png"));
        assert_eq!(target("/assets/cdn/a.png?v=2"), ok("cdn", "a.png?v=2"));
        assert_eq!(target("/assets/cdn/..a/b..png"), ok("cdn", "..a/b..png"));
        // One spelling: the origin and the cache see the canonical one.
        assert_eq!(
            target("/assets/cdn/%61/b%2epng?v=%41"),
            ok("cdn", "a/b.png?v=%41")
        );
    }

    #[test]
    fn targets_that_climb_or_are_empty_are_refused() {
        for t in [
            "/assets/cdn/../secret",
            "/assets/cdn/a/%2e%2E/secret",
            "/assets/cdn/a/./b",
            "/assets/cdn/a%2Fb",
            "/assets/cdn/a%5cb",
            "/assets/cdn/a/..;/b",
            "/assets/cdn/%c0%ae%c0%ae/secret",
            "/assets/cdn/",
            "/assets/cdn",
            "/assets//x",
            "/other/cdn/x",
        ] {
            assert!(target(t).is_err(), "{t}");
        }
        let long = format!("/assets/cdn/{}", "a".repeat(MAX_PATH_BYTES));
        assert!(target(&long).is_err());
    }
}
