//! Any bytes: `from_slice` (the direct decoder, with serde behind it for what it leaves) gives
//! exactly what the serde decoder alone gives, for requests and responses: the same value, with
//! the same encoding (which tells `-0.0` from `0.0`), or an error both ways.
#![no_main]

use std::fmt::Debug;

use libfuzzer_sys::fuzz_target;
use openrtb::{BidRequest, BidResponse, DecodeError};
use serde::Serialize;

fn same<T: PartialEq + Debug + Serialize>(
    data: &[u8],
    fast: Result<T, DecodeError>,
    reference: Result<T, DecodeError>,
) {
    match (fast, reference) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b);
            assert_eq!(serde_json::to_vec(&a).ok(), serde_json::to_vec(&b).ok());
        }
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
        (a, b) => panic!(
            "from_slice {:?}, serde {:?} on {}",
            a.is_ok(),
            b.is_ok(),
            String::from_utf8_lossy(data)
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    same(
        data,
        BidRequest::from_slice(data),
        openrtb::decode::<BidRequest>(data),
    );
    same(
        data,
        BidResponse::from_slice(data),
        openrtb::decode::<BidResponse>(data),
    );
});
