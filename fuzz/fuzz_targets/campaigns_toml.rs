//! Any UTF-8 text as a TOML campaign file: `CampaignSet::from_toml_str` never panics; a refusal
//! is a parse or validation error with a message; a loaded set satisfies every invariant
//! `gavel_fuzz::check_set` knows (lookup by id, order, ranges, index equals scan).
//!
//! And the two syntaxes agree (docs/campaigns.md: "they load to equal campaigns"): a TOML file
//! that loads, transcoded value for value to JSON (`{"campaign": [...]}`), loads from JSON to
//! equal campaigns in the same order.
#![no_main]

use campaigns::CampaignSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(set) = gavel_fuzz::check_outcome(CampaignSet::from_toml_str(text)) else {
        return;
    };
    let table: toml::Table = toml::from_str(text).expect("a file that loaded is valid TOML");
    // TOML datetimes serialize as toml's private one-key map, which the campaign schema's
    // timestamp type reads from JSON too; every float that validation accepted is finite.
    let json = serde_json::to_vec(&table).expect("TOML values encode as JSON");
    match CampaignSet::from_json_bytes(&json) {
        Ok(from_json) => assert!(
            from_json.campaigns() == set.campaigns(),
            "TOML and JSON forms load differently:\n{}",
            String::from_utf8_lossy(&json)
        ),
        Err(e) => panic!(
            "loads as TOML, refused as JSON ({e}):\n{}",
            String::from_utf8_lossy(&json)
        ),
    }
});
