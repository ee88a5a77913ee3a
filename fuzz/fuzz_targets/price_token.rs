//! Price tokens, as a bidder receives them in a notice's `price`:
//! - `price_token::open` never panics on any text; it accepts only the one spelling `seal`
//!   writes, and only for the key, binding and time it was sealed for;
//! - any token sealed from the input's own price, expiry and binding opens to that price, and
//!   changing any single byte of it makes it refused.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openrtb::Price;
use price_token::{Binding, PriceKey, TokenError, open};

fuzz_target!(|data: &[u8]| {
    let key = PriceKey::new(&[7; 32]);
    let bound = Binding {
        auction: "gavel-1-2a",
        imp: "1",
        bid: "n1-00ff",
        currency: "USD",
    };
    if let Ok(text) = std::str::from_utf8(data) {
        match open(std::slice::from_ref(&key), text, &bound, 0) {
            // Opening with the fixed key means the input is exactly what seal writes.
            Ok(price) => {
                let expiry = text.split('.').nth(2).and_then(|e| e.parse::<u64>().ok());
                let resealed = expiry.map(|e| key.seal(price, &bound, e));
                assert_eq!(resealed.as_deref(), Some(text));
            }
            Err(TokenError::Malformed | TokenError::Forged | TokenError::Expired) => {}
        }
    }
    // The input as a price, an expiry and a binding: sealed, it opens; one byte changed, not.
    if data.len() < 16 {
        return;
    }
    let (head, tail) = data.split_at(16);
    let micros = i64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8])).unsigned_abs() >> 1;
    let expires = u64::from_le_bytes(head[8..16].try_into().unwrap_or([0; 8])).max(1);
    let text = String::from_utf8_lossy(tail);
    let mine = Binding {
        auction: &text,
        ..bound
    };
    let price = Price::from_micros(i64::try_from(micros).unwrap_or(i64::MAX));
    let token = key.seal(price, &mine, expires);
    assert!(token.len() <= price_token::MAX_TOKEN_CHARS);
    assert_eq!(open(std::slice::from_ref(&key), &token, &mine, expires - 1), Ok(price));
    let i = usize::from(head[0]) % token.len();
    let mut changed = token.clone().into_bytes();
    changed[i] = if changed[i] == b'0' { b'1' } else { b'0' };
    if let Ok(changed) = String::from_utf8(changed) {
        assert!(open(std::slice::from_ref(&key), &changed, &mine, 0).is_err(), "{token} -> {changed}");
    }
});
