//! Any bytes: decoding never panics; whatever decodes re-encodes to bytes that decode to an
//! equal request, and encoding is stable from then on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openrtb::BidRequest;

fuzz_target!(|data: &[u8]| {
    let Ok(first) = BidRequest::from_slice(data) else {
        return;
    };
    let encoded = first.to_vec().expect("a decoded request encodes");
    let second = match BidRequest::from_slice(&encoded) {
        Ok(second) => second,
        Err(e) => panic!(
            "re-decode failed: {e}\n{}",
            String::from_utf8_lossy(&encoded)
        ),
    };
    assert_eq!(first, second);
    assert_eq!(second.to_vec().expect("encodes"), encoded);
});
