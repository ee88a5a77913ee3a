#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The requests Gavel generates for load tests and benches are valid OpenRTB: every one passes
//! `openrtb::validate`, the check the exchange and the bidder run before anything else. A
//! refusal here means either the generator is off-spec or a validation rule refuses valid
//! traffic; the spec decides which to fix.

use openrtb::BidRequest;
use openrtb::validate::{auction_currency, validate};

fn assert_valid(what: &str, request: &BidRequest) {
    let currency = auction_currency(request, "USD");
    if let Err(e) = validate(request, currency) {
        let json = String::from_utf8(request.to_vec().unwrap()).unwrap();
        panic!("{what} was refused: {e}\n{json}");
    }
}

#[test]
fn generated_corpus_requests_are_valid() {
    let mut natives = 0;
    for seed in [1, 7, 42, 2024, 0xdead_beef] {
        let corpus = loadgen::Corpus::generated(seed, 2000, 100);
        assert_eq!(corpus.len(), 2000);
        for (i, body) in corpus.bodies().iter().enumerate() {
            let what = format!("seed {seed}, request {i}");
            let request = BidRequest::from_slice(body).unwrap_or_else(|e| panic!("{what}: {e}"));
            natives += request
                .imp
                .iter()
                .filter(|imp| imp.native.is_some())
                .count();
            assert_valid(&what, &request);
        }
    }
    // The corpus does exercise the native request rules (about 10 % of imps are native).
    assert!(natives > 500, "only {natives} native imps");
}

#[test]
fn the_fixed_realistic_request_is_valid() {
    let body = loadgen::generate::realistic_2_5k();
    let request = BidRequest::from_slice(&body).unwrap();
    assert_valid("realistic_2_5k", &request);
}

/// Every profile of `testkit::synth`, the requests the suite's other tests use.
#[test]
fn testkit_synthetic_requests_are_valid() {
    let mut checked = 0;
    for seed in [1, 7, 42] {
        let realistic = testkit::synth::synthetic_requests(500, seed);
        let broad = testkit::synth::synthetic_requests_broad(500, seed);
        for (i, request) in realistic.iter().chain(&broad).enumerate() {
            checked += 1;
            assert_valid(&format!("synthetic seed {seed}, request {i}"), request);
        }
    }
    assert_eq!(checked, 3_000);
}
