//! Tests of the file format and validation ([`schema`]) and of each targeting dimension and the
//! price rule ([`matching`]). The index against the brute-force scan, on synthetic sets, is in
//! `tests/index.rs`.

mod matching;
mod schema;

use openrtb::BidRequest;
use units::Timestamp;

use crate::{CampaignSet, Candidate, ImpFacts, RequestFacts};

/// The example of the campaign file format given in the brief (and in `docs/campaigns.md`).
pub(super) const BRIEF_EXAMPLE: &str = r#"[{"id": "c1", "budget": {"total": 1.00}, "bid": {"cpm": 2.00}, "pacing": "asap",
  "creatives": [{"id": "cr1", "w": 300, "h": 250, "adm": "<div>ad</div>", "adomain": ["shop.example"]}],
  "targeting": {}}]"#;

/// 2025-03-01T10:00:00Z.
pub(super) const TEN_UTC: Timestamp = Timestamp(1_740_823_200_000);

pub(super) fn request(json: &str) -> BidRequest {
    match BidRequest::from_slice(json.as_bytes()) {
        Ok(r) => r,
        Err(e) => panic!("test request does not decode: {e}\n{json}"),
    }
}

pub(super) fn set(json: &str) -> CampaignSet {
    match CampaignSet::from_json_bytes(json.as_bytes()) {
        Ok(s) => s,
        Err(e) => panic!("test campaigns do not load: {e}\n{json}"),
    }
}

/// Candidates of impression `imp` through the index, after checking that the brute-force scan
/// agrees exactly.
pub(super) fn candidates(
    set: &CampaignSet,
    req: &BidRequest,
    imp: usize,
    now: Timestamp,
) -> Vec<Candidate> {
    let facts = RequestFacts::from_request(req, now);
    let imp = ImpFacts::from_imp(&req.imp[imp]);
    let (mut indexed, mut scanned) = (Vec::new(), Vec::new());
    set.candidates(&facts, &imp, &mut indexed);
    set.candidates_scan(&facts, &imp, &mut scanned);
    assert_eq!(indexed, scanned, "index and scan disagree");
    indexed
}
