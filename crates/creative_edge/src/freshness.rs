//! How long an origin's answer may be served from cache, from its `Cache-Control`, `Expires`
//! and `Date` headers, within the configured default and maximum. Pure.
//!
//! The rules are a shared cache's (RFC 9111), in the order nginx applies them: `no-store`,
//! `no-cache` and `private` forbid storing; `s-maxage` wins over `max-age`, which wins over
//! `Expires`; an answer that says nothing gets the default. A lifetime of zero is not stored.

use std::time::{Duration, SystemTime};

/// The configured bounds on a lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtlBounds {
    /// Lifetime of an answer that states none.
    pub default: Duration,
    /// Longest lifetime kept, whatever the origin says.
    pub max: Duration,
}

/// Whether and for how long an answer may be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// Store it; it is fresh for this long from now.
    Store(Duration),
    /// Do not store it (forbidden by the origin, or a lifetime of zero).
    NoStore,
}

/// The freshness of an answer with these header values, received at `now`.
pub fn freshness(
    cache_control: Option<&str>,
    expires: Option<&str>,
    date: Option<&str>,
    now: SystemTime,
    bounds: TtlBounds,
) -> Freshness {
    let mut max_age = None;
    let mut s_maxage = None;
    for directive in cache_control.unwrap_or("").split(',') {
        let (name, value) = match directive.split_once('=') {
            Some((n, v)) => (n.trim(), Some(v.trim().trim_matches('"'))),
            None => (directive.trim(), None),
        };
        if ["no-store", "no-cache", "private"]
            .iter()
            .any(|forbidden| name.eq_ignore_ascii_case(forbidden))
        {
            return Freshness::NoStore;
        }
        let seconds = value.and_then(|v| v.parse::<u64>().ok());
        if name.eq_ignore_ascii_case("s-maxage") {
            s_maxage = seconds.or(Some(0));
        } else if name.eq_ignore_ascii_case("max-age") {
            max_age = seconds.or(Some(0));
        }
    }
    let lifetime = match s_maxage.or(max_age) {
        Some(seconds) => Duration::from_secs(seconds),
        None => match expires {
            // An Expires that cannot be read means "already expired" (RFC 9111 section 5.3).
            Some(text) => match httpdate::parse_http_date(text.trim()) {
                Ok(at) => {
                    // Measured against the origin's own clock when it sends one, so a skewed
                    // origin clock does not stretch or cut the lifetime.
                    let origin_now = date
                        .and_then(|d| httpdate::parse_http_date(d.trim()).ok())
                        .unwrap_or(now);
                    at.duration_since(origin_now).unwrap_or(Duration::ZERO)
                }
                Err(_) => Duration::ZERO,
            },
            None => bounds.default,
        },
    };
    let lifetime = lifetime.min(bounds.max);
    if lifetime.is_zero() {
        Freshness::NoStore
    } else {
        Freshness::Store(lifetime)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: TtlBounds = TtlBounds {
        default: Duration::from_secs(300),
        max: Duration::from_secs(3_600),
    };

    fn at(text: &str) -> SystemTime {
        httpdate::parse_http_date(text).expect("test date")
    }

    fn of(cc: Option<&str>, expires: Option<&str>, date: Option<&str>) -> Freshness {
        freshness(
            cc,
            expires,
            date,
            at("Wed, 25 Nov 2026 10:00:00 GMT"),
            BOUNDS,
        )
    }

    fn secs(n: u64) -> Freshness {
        Freshness::Store(Duration::from_secs(n))
    }

    #[test]
    fn silence_gets_the_default() {
        assert_eq!(of(None, None, None), secs(300));
        assert_eq!(of(Some("public"), None, None), secs(300));
    }

    #[test]
    fn forbidding_directives_are_not_stored_in_any_case_or_position() {
        for cc in [
            "no-store",
            "max-age=60, No-Cache",
            "private, max-age=60",
            "PRIVATE",
        ] {
            assert_eq!(of(Some(cc), None, None), Freshness::NoStore, "{cc}");
        }
    }

    #[test]
    fn s_maxage_beats_max_age_beats_expires() {
        let expires = Some("Wed, 25 Nov 2026 10:00:10 GMT");
        assert_eq!(
            of(Some("max-age=60, s-maxage=120"), expires, None),
            secs(120)
        );
        assert_eq!(of(Some("max-age=60"), expires, None), secs(60));
        assert_eq!(of(Some("max-age=\"90\""), None, None), secs(90));
        assert_eq!(of(None, expires, None), secs(10));
    }

    #[test]
    fn lifetimes_are_capped_and_zero_is_not_stored() {
        assert_eq!(of(Some("max-age=999999"), None, None), secs(3_600));
        assert_eq!(of(Some("max-age=0"), None, None), Freshness::NoStore);
        assert_eq!(of(Some("max-age=junk"), None, None), Freshness::NoStore);
    }

    #[test]
    fn expires_is_read_against_the_origins_date_and_garbage_means_expired() {
        let expires = Some("Wed, 25 Nov 2026 12:00:30 GMT");
        let origin_date = Some("Wed, 25 Nov 2026 12:00:00 GMT");
        assert_eq!(of(None, expires, origin_date), secs(30));
        assert_eq!(of(None, Some("0"), None), Freshness::NoStore);
        assert_eq!(
            of(None, Some("Tue, 24 Nov 2026 10:00:00 GMT"), None),
            Freshness::NoStore
        );
    }
}
