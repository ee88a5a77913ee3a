//! Any bytes: decoding never panics; whatever decodes re-encodes to bytes that decode to an
//! equal response, and encoding is stable from then on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openrtb::BidResponse;

fuzz_target!(|data: &[u8]| {
    let Ok(first) = BidResponse::from_slice(data) else {
        return;
    };
    let encoded = first.to_vec().expect("a decoded response encodes");
    let second = match BidResponse::from_slice(&encoded) {
        Ok(second) => second,
        Err(e) => panic!(
            "re-decode failed: {e}\n{}",
            String::from_utf8_lossy(&encoded)
        ),
    };
    assert_eq!(first, second);
    assert_eq!(second.to_vec().expect("encodes"), encoded);
});
