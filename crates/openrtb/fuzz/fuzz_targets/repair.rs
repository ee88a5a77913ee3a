//! Any bytes, two ways: decoded as a bid request, and (read as UTF-8, invalid sequences
//! replaced) as `imp[0].native.request` of a request otherwise valid. `validate::repair::repair`
//! never panics; a request `validate` accepted is left equal, encoding to the same bytes, with
//! nothing reported; a second repair reports nothing and changes nothing; each report's field is
//! its path without indices (and without the Native 1.0 wrapper); a native request that repair
//! changed is accepted by `validate`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openrtb::validate::repair::repair;
use openrtb::validate::{auction_currency, validate};
use openrtb::{BidRequest, Imp, Native};

/// `imp[0].native.request.native.assets[2].id` -> `imp.native.request.assets.id`.
fn label_of(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => in_index = true,
            ']' => in_index = false,
            _ if !in_index => out.push(c),
            _ => {}
        }
    }
    out.replacen("native.request.native.", "native.request.", 1)
}

/// Repairs `request` in place, checking the properties; whether it reported anything.
fn check(request: &mut BidRequest) -> bool {
    let currency = auction_currency(request, "USD").to_owned();
    let accepted = validate(request, &currency).is_ok();
    let original = request.clone();
    let done = repair(request);
    if accepted {
        assert!(done.is_empty(), "a valid request was repaired: {done:?}");
        assert_eq!(*request, original);
        assert_eq!(
            request.to_vec().expect("encodes"),
            original.to_vec().expect("encodes")
        );
    }
    for r in &done {
        assert_eq!(r.field, label_of(&r.path), "{r:?}");
    }
    let once = request.clone();
    let again = repair(request);
    assert!(again.is_empty(), "not idempotent: {done:?} then {again:?}");
    assert_eq!(*request, once);
    !done.is_empty()
}

fuzz_target!(|data: &[u8]| {
    if let Ok(mut request) = BidRequest::from_slice(data) {
        check(&mut request);
    }
    let mut request = BidRequest {
        id: "fuzz".to_owned(),
        imp: vec![Imp {
            id: "1".to_owned(),
            native: Some(Native {
                request: Some(String::from_utf8_lossy(data).into_owned()),
                ver: Some("1.2".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    if check(&mut request) {
        assert_eq!(
            validate(&request, "USD"),
            Ok(()),
            "a repaired native request is refused"
        );
    }
});
