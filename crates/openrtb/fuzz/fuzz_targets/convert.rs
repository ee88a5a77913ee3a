//! Any bytes: if they decode as a bid request, `down_to_2_5` and `up_from_2_5` never panic;
//! what either produces re-encodes to bytes that decode to an equal request; a second pass of
//! the same conversion finds nothing left to do (both are idempotent); and up after a successful
//! down brings back every field down moved.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openrtb::BidRequest;
use openrtb::convert::{ConvertError, Converted, Field, down_to_2_5, up_from_2_5};

/// Runs `convert` on a copy of `request`; on success checks the re-encoding and that a second
/// run is a no-op.
fn check(
    request: &BidRequest,
    convert: fn(&mut BidRequest) -> Result<Converted, ConvertError>,
    what: &str,
) -> Option<(BidRequest, Converted)> {
    let mut converted = request.clone();
    let done = convert(&mut converted).ok()?;
    let encoded = converted.to_vec().expect("a converted request encodes");
    let decoded = match BidRequest::from_slice(&encoded) {
        Ok(decoded) => decoded,
        Err(e) => panic!("{what}: re-decode failed: {e}\n{}", String::from_utf8_lossy(&encoded)),
    };
    assert_eq!(decoded, converted, "{what}: re-decode differs");
    let mut again = converted.clone();
    let second = convert(&mut again).expect("a second pass of a conversion that succeeded");
    assert!(second.is_empty(), "{what}: second pass did {second}");
    assert_eq!(again, converted, "{what}: second pass changed the request");
    Some((converted, done))
}

fuzz_target!(|data: &[u8]| {
    let Ok(request) = BidRequest::from_slice(data) else {
        return;
    };
    let _ = check(&request, up_from_2_5, "up");
    let Some((down, moved)) = check(&request, down_to_2_5, "down") else {
        return;
    };
    // Up may refuse a 2.5 ext value down never looked at; when it does not, every field down
    // moved comes back with its value.
    let Some((up, done)) = check(&down, up_from_2_5, "up after down") else {
        return;
    };
    assert!(
        moved.moved.iter().all(|f| done.moved.contains(f)),
        "down {moved}, up {done}"
    );
    if moved.moved.contains(Field::SourceSchain) {
        let schain = |r: &BidRequest| r.source.as_ref().and_then(|s| s.schain.clone());
        assert_eq!(schain(&up), schain(&request), "schain");
    }
    if moved.moved.contains(Field::RegsGdpr) {
        let gdpr = |r: &BidRequest| r.regs.as_ref().and_then(|g| g.gdpr);
        assert_eq!(gdpr(&up), gdpr(&request), "gdpr");
    }
    if moved.moved.contains(Field::RegsUsPrivacy) {
        let usp = |r: &BidRequest| r.regs.as_ref().and_then(|g| g.us_privacy.clone());
        assert_eq!(usp(&up), usp(&request), "us_privacy");
    }
    if moved.moved.contains(Field::UserConsent) {
        let consent = |r: &BidRequest| r.user.as_ref().and_then(|u| u.consent.clone());
        assert_eq!(consent(&up), consent(&request), "consent");
    }
    if moved.moved.contains(Field::UserEids) {
        let eids = |r: &BidRequest| r.user.as_ref().and_then(|u| u.eids.clone());
        assert_eq!(eids(&up), eids(&request), "eids");
    }
    for (before, after) in request.imp.iter().zip(&up.imp) {
        if before.rwdd.is_some() {
            assert_eq!(after.rwdd, before.rwdd, "rwdd of imp {}", before.id);
        }
    }
});
