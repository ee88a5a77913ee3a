//! Any bytes as a JSON campaign file: `CampaignSet::from_json_bytes` never panics; a refusal is
//! a parse or validation error with a message; a loaded set satisfies every invariant
//! `gavel_fuzz::check_set` knows (lookup by id, order, ranges, index equals scan).
#![no_main]

use campaigns::CampaignSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    gavel_fuzz::check_outcome(CampaignSet::from_json_bytes(data));
});
