//! Any UTF-8 template: substitution never panics and borrows when there is no `${`. With
//! non-empty values that cannot spell a macro name, no known macro is left behind. (With empty
//! values, `${AUCT${AUCTION_PRICE}ION_ID}` legitimately becomes `${AUCTION_ID}`: substitution
//! is a single pass and never re-expands its own output.)
#![no_main]

use std::borrow::Cow;

use libfuzzer_sys::fuzz_target;
use openrtb::{LossReason, MacroValues, Price, substitute};

fuzz_target!(|data: &[u8]| {
    let Ok(template) = std::str::from_utf8(data) else {
        return;
    };
    let full = MacroValues {
        auction_id: "a-1",
        bid_id: "b-2",
        imp_id: "i-3",
        seat_id: "s-4",
        ad_id: "d-5",
        price: Some(Price::from_micros(1_234_567)),
        price_token: None,
        currency: "USD",
        mbr: Some(0.75),
        loss: Some(LossReason::LOST_TO_HIGHER_BID),
        min_to_win: Some(Price::from_micros(1_000_001)),
        imp_ts_ms: Some(1_700_000_000_000),
    };
    for values in [full, MacroValues::default()] {
        let out = substitute(template, &values);
        if !template.contains("${") {
            assert!(matches!(out, Cow::Borrowed(_)));
        }
        if values == full {
            for name in ["${AUCTION_PRICE}", "${AUCTION_ID}", "${AUCTION_IMP_TS:B64}"] {
                assert!(!out.contains(name), "{template:?} -> {out:?}");
            }
        }
    }
});
