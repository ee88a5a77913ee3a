//! Any bytes as `imp[0].native.request` (read as UTF-8, invalid sequences replaced) of a request
//! that is valid apart from it: `validate` never panics, and when it refuses, the message names
//! the native request of that imp. Whatever it accepts is a JSON object (the Native 1.2 request,
//! or Native 1.0's `{"native": ...}` wrapper).
#![no_main]

use libfuzzer_sys::fuzz_target;
use openrtb::validate::validate;
use openrtb::{BidRequest, Imp, Native};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data).into_owned();
    let request = BidRequest {
        id: "fuzz".to_owned(),
        imp: vec![Imp {
            id: "1".to_owned(),
            native: Some(Native {
                request: Some(text.clone()),
                ver: Some("1.2".to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    match validate(&request, "USD") {
        Ok(()) => assert!(
            text.trim_ascii_start().starts_with('{'),
            "accepted a non-object: {text:?}"
        ),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.starts_with("imp[0].native.request"),
                "{text:?} -> {message}"
            );
        }
    }
});
