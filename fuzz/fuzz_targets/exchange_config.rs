//! Any UTF-8 text as an exchange configuration file: `exchange::Config::from_toml` never panics;
//! a refusal is a `ConfigError` with a non-empty message (naming a non-empty key when a value
//! is at fault); an accepted configuration holds what validation promises (ranges, unique
//! bidder names, one resolved endpoint per bidder).
//!
//! Validation resolves each bidder's host, a blocking lookup the fuzzer must not make (it would
//! be slow, and it would send fuzzed names to the resolver). Hosts that are IP literals, and
//! endpoints refused before resolution, go through `from_toml` unchanged; when any endpoint
//! would need a lookup, the harness parses the same text itself and swaps those endpoints for
//! an IP literal before calling `Config::validate`, so the rest is still checked.
#![no_main]

use std::collections::HashSet;
use std::net::IpAddr;

use exchange::{Config, ConfigError, Validated};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The same deserialization `from_toml` does, before its validation.
    let outcome = match settings::parse_text::<Config>(text, &settings::EnvOverlay::default()) {
        Err(_) => {
            let outcome = Config::from_toml(text);
            assert!(
                matches!(
                    outcome,
                    Err(ConfigError::Parse { .. }
                        | ConfigError::TooLarge { .. }
                        | ConfigError::MovedTwice { .. })
                ),
                "the text does not deserialize, yet: {outcome:?}"
            );
            outcome
        }
        Ok(config) if config.live.bidders.iter().all(|b| !needs_lookup(&b.endpoint)) => {
            Config::from_toml(text)
        }
        Ok(mut config) => {
            for b in &mut config.live.bidders {
                if needs_lookup(&b.endpoint) {
                    b.endpoint = "http://192.0.2.1/openrtb2".to_owned();
                }
            }
            config.validate()
        }
    };
    match outcome {
        Ok(v) => check(&v),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            if let ConfigError::Invalid(settings::Invalid { key, problem }) = &e {
                assert!(!key.is_empty() && !problem.is_empty(), "{e:?}");
            }
        }
    }
});

/// Whether `exchange::config::parse_endpoint` would get as far as a name lookup: the URL parses,
/// its scheme is http, it has a non-empty host and that host is not an IP literal.
fn needs_lookup(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return false;
    };
    if uri.scheme_str() != Some("http") {
        return false;
    }
    let Some(authority) = uri.authority() else {
        return false;
    };
    let host = authority.host();
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    !host.is_empty() && literal.parse::<IpAddr>().is_err()
}

fn check(v: &Validated) {
    let c = &v.config;
    assert!(rtb_config::valid_node(c.node()), "node {:?}", c.node());
    let d = c.rtb.deadline.policy();
    assert!(d.default_tmax > std::time::Duration::ZERO);
    assert!(d.default_tmax <= d.max_tmax);
    assert!(d.answer_margin < d.default_tmax);
    assert!(v.read_timeout() > std::time::Duration::ZERO);
    assert!(v.second_price_increment.micros() >= 0);
    assert!(
        c.auction.default_currency.len() == 3
            && c.auction
                .default_currency
                .bytes()
                .all(|b| b.is_ascii_uppercase())
    );
    assert!(c.notices.queue > 0 && c.notices.workers > 0);
    assert_eq!(v.bidders.len(), c.live.bidders.len());
    let mut names = HashSet::new();
    for (b, e) in v.bidders.iter().map(|r| (&r.config, &r.endpoint)) {
        assert!(
            names.insert(b.name.as_str()),
            "duplicate bidder {:?}",
            b.name
        );
        assert!(!b.name.is_empty() && b.name.len() <= 64);
        assert!(b.max_connections > 0);
        // Sent as the request line's target, so it must be in origin form (an endpoint with a
        // query but no path once stored `?q`: fuzz/regressions/exchange_config).
        assert!(e.path.starts_with('/'), "{e:?}");
        assert!(
            http::Request::post(e.path.as_str()).body(()).is_ok(),
            "{e:?}"
        );
        assert!(!e.authority.is_empty(), "{e:?}");
    }
}
