//! Any UTF-8 text as a bidder configuration file: `BidderConfig::from_toml` never panics; a
//! refusal is a `ConfigError` with a non-empty message (naming the key when a value is at
//! fault); an accepted configuration holds what validation promises: the derived values the
//! server reads at start (Redis address, lease chunk, deadlines) exist and are in range, and in
//! Redis lease mode the ledger accepts the lease settings the bidder derives from it.
#![no_main]

use std::time::Duration;

use bidder::BidderConfig;
use bidder::config::ConfigError;
use libfuzzer_sys::fuzz_target;
use units::Nanos;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match BidderConfig::from_toml(text) {
        Ok(c) => check(&c),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            match &e {
                ConfigError::Invalid(settings::Invalid { key, problem }) => {
                    assert!(!key.is_empty() && !problem.is_empty(), "{e:?}");
                }
                ConfigError::Parse { .. }
                | ConfigError::TooLarge { .. }
                | ConfigError::MovedTwice { .. } => {}
                ConfigError::Read(_) => panic!("from_toml reads no file: {e:?}"),
                ConfigError::Env { .. } => panic!("from_toml reads no variable: {e:?}"),
            }
        }
    }
});

fn check(c: &BidderConfig) {
    if let Some(node) = &c.rtb.node {
        assert!(
            (1..=64).contains(&node.len())
                && node
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')),
            "node {node:?}"
        );
    }
    if let Some(url) = &c.public_url {
        assert!(
            url.starts_with("http://") || url.starts_with("https://"),
            "{url:?}"
        );
    }
    assert!((1..=64).contains(&c.seat.len()));
    assert!(c.read_timeout() > Duration::ZERO);
    let d = c.rtb.deadline.policy();
    assert!(Duration::ZERO < d.default_tmax && d.default_tmax <= d.max_tmax);
    assert!(d.answer_margin < d.default_tmax);
    assert!(c.max_body_bytes() > 0);
    let url = c
        .redis_url()
        .unwrap_or_else(|e| panic!("validated, yet the Redis URL is refused: {e}"));
    // The password never shows in the URL's text.
    if let Some(p) = url.password.as_deref() {
        assert!(!url.to_string().contains(&format!(":{p}@")), "{url}");
    }
    let address = url.addr;
    assert!(
        address
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()),
        "{address:?}"
    );
    let l = &c.ledger;
    assert!(l.lease_ttl_ms >= 4 * l.lease_report_ms && l.lease_report_ms > 0);
    assert!(l.reservation_ttl_ms >= 1_000);
    assert!(c.pacing.control_interval_ms >= 10);
    // `lease_chunk = 1e-10` once passed as a float and became zero nanos.
    assert!(
        c.lease_chunk() > Nanos::ZERO,
        "lease_chunk {:?}",
        l.lease_chunk
    );
    // `LeaseConfig::validate` exists so that loaders refuse what the ledger would otherwise
    // repair at start (a 40 s report interval once loaded with a 30 s idle close).
    let lease = c.lease_config("fuzz");
    if let Err(why) = lease.validate() {
        panic!("accepted, but the ledger refuses its lease settings: {why}\n{lease:?}");
    }
}
