//! Checks shared by the campaign-file targets (`campaigns_json`, `campaigns_toml`).
//!
//! [`check_outcome`] holds a loaded [`CampaignSet`] to what `campaigns` documents:
//! every campaign is found by its id at its own position; campaigns are ordered by descending
//! `max_cpm`; validated values are in their documented ranges and lists are normalized;
//! rebuilding the set from its own campaigns changes nothing; and the index returns exactly
//! what the brute-force scan returns, in the same order, on probe requests aimed at the loaded
//! campaigns (built from their own targeting) and on the spec's example requests. A refusal
//! must be a parse or validation error with a message, naming a field when it is invalid.

use std::ops::ControlFlow;
use std::sync::OnceLock;

use campaigns::limits::{
    MAX_ADM_BYTES, MAX_CAMPAIGNS, MAX_CREATIVES, MAX_DIMENSION, MAX_ID_BYTES, MAX_VIDEO_SECONDS,
};
use campaigns::{
    Campaign, CampaignError, CampaignSet, Candidate, ImpFacts, Media, RequestFacts,
};
use openrtb::BidRequest;
use units::{Nanos, Timestamp};
use serde_json::{Value, json};

/// Whether the checks of open findings run (feature `strict`; see docs/FUZZING.md).
pub const STRICT: bool = cfg!(feature = "strict");

/// 2025-03-01T10:00:00Z, a decision time inside most example flights.
const T0: Timestamp = Timestamp(1_740_823_200_000);
const HOUR_MS: u64 = 3_600_000;
/// Probe requests are built for at most this many campaigns per input (bounded work).
const PROBED_CAMPAIGNS: usize = 4;

/// Checks a load outcome and returns the set when it loaded.
pub fn check_outcome(outcome: Result<CampaignSet, CampaignError>) -> Option<CampaignSet> {
    match outcome {
        Ok(set) => {
            check_set(&set);
            Some(set)
        }
        Err(e) => {
            check_error(&e);
            None
        }
    }
}

/// A refusal of in-memory input is a parse or validation error, and says what is wrong.
pub fn check_error(e: &CampaignError) {
    let message = e.to_string();
    assert!(!message.is_empty(), "{e:?}");
    match e {
        // toml gives some syntax errors (a NUL in a comment) no message; the parser supplies one.
        CampaignError::Parse { message, .. } => assert!(!message.is_empty(), "{e:?}"),
        CampaignError::Invalid { field, .. } => assert!(!field.is_empty(), "{e:?}"),
        CampaignError::FileTooLarge { .. } => {}
        CampaignError::UnknownFormat { .. } => panic!("no file was involved: {e:?}"),
    }
    assert!(
        ["format", "too_large", "parse", "invalid"].contains(&e.kind()),
        "{e:?}"
    );
}

/// Every documented invariant of a loaded set that the public API can observe.
pub fn check_set(set: &CampaignSet) {
    let campaigns = set.campaigns();
    assert_eq!(set.len(), campaigns.len());
    assert_eq!(set.is_empty(), campaigns.is_empty());
    assert!(campaigns.len() <= MAX_CAMPAIGNS);
    for (i, c) in campaigns.iter().enumerate() {
        let at = u32::try_from(i).expect("fewer than u32::MAX campaigns");
        assert_eq!(set.position(c.id()), Some(at), "position of {:?}", c.id());
        assert!(
            set.get(c.id()).is_some_and(|found| std::ptr::eq(found, c)),
            "get({:?}) is not campaign {i}",
            c.id()
        );
        check_campaign(c);
    }
    for pair in campaigns.windows(2) {
        assert!(
            pair[0].bid().max_cpm >= pair[1].bid().max_cpm,
            "not by descending max_cpm: {:?} before {:?}",
            pair[0].bid(),
            pair[1].bid()
        );
    }
    // The order is a fixed point: indexing the set's own campaigns keeps them as they are.
    match CampaignSet::from_campaigns(campaigns.to_vec()) {
        Ok(again) => assert!(
            again.campaigns() == campaigns,
            "rebuilding reordered the set"
        ),
        Err(e) => panic!("the set's own campaigns are refused: {e}"),
    }
    check_matching(set);
}

fn check_campaign(c: &Campaign) {
    assert!(!c.id().trim().is_empty() && c.id().len() <= MAX_ID_BYTES);
    let bid = c.bid();
    assert!(bid.cpm.is_positive() && bid.max_cpm >= bid.cpm, "{bid:?}");
    assert!(
        bid.shading_ppm.is_none_or(|p| (1..=1_000_000).contains(&p)),
        "{bid:?}"
    );
    let budget = c.budget();
    assert!(budget.total > Nanos::ZERO, "{budget:?}");
    assert!(
        budget
            .daily
            .is_none_or(|d| d > Nanos::ZERO && d <= budget.total),
        "{budget:?}"
    );
    let flight = c.flight();
    if let (Some(s), Some(e)) = (flight.start, flight.end) {
        assert!(s < e, "{flight:?}");
    }
    let creatives = c.creatives();
    assert!((1..=MAX_CREATIVES).contains(&creatives.len()));
    for (j, cr) in creatives.iter().enumerate() {
        assert!(!cr.id().trim().is_empty() && cr.id().len() <= MAX_ID_BYTES);
        assert!(
            creatives[..j].iter().all(|other| other.id() != cr.id()),
            "duplicate creative"
        );
        assert!(!cr.adm().trim().is_empty() && cr.adm().len() <= MAX_ADM_BYTES);
        match cr.media() {
            Media::Banner(s) => {
                assert!((1..=MAX_DIMENSION).contains(&s.w) && (1..=MAX_DIMENSION).contains(&s.h))
            }
            Media::Video(v) => {
                assert!((1..=MAX_VIDEO_SECONDS).contains(&v.duration));
                assert!(!v.mimes.is_empty() && normalized(&v.mimes));
                assert!(
                    v.mimes
                        .iter()
                        .all(|m| !m.bytes().any(|b| b.is_ascii_uppercase()))
                );
                assert!(v.protocols.windows(2).all(|p| p[0] < p[1]));
                assert!(v.protocols.iter().all(|&p| p > 0));
            }
        }
        for d in cr.adomain() {
            assert!(!d.bytes().any(|b| b.is_ascii_uppercase()), "{d:?}");
        }
    }
    let t = c.targeting();
    let lists: [(&str, Option<&[String]>); 8] = [
        ("regions", t.regions()),
        ("os", t.os()),
        ("domains", t.domains()),
        ("block_domains", t.block_domains()),
        ("publishers", t.publishers()),
        ("categories", t.categories()),
        ("deals", t.deals()),
        ("segments", t.segments()),
    ];
    for (name, list) in lists {
        if let Some(list) = list {
            assert!(!list.is_empty() && normalized(list), "{name}: {list:?}");
        }
    }
    for list in [t.regions(), t.os(), t.domains(), t.block_domains()]
        .into_iter()
        .flatten()
    {
        assert!(
            list.iter()
                .all(|s| !s.bytes().any(|b| b.is_ascii_uppercase())),
            "{list:?}"
        );
    }
    if let Some(list) = t.countries() {
        assert!(!list.is_empty() && list.windows(2).all(|p| p[0] < p[1]));
    }
    if let Some(list) = t.device_types() {
        assert!(!list.is_empty() && list.windows(2).all(|p| p[0] < p[1]) && list[0] > 0);
    }
    if let Some(list) = t.sizes() {
        assert!(!list.is_empty() && list.windows(2).all(|p| p[0] < p[1]));
    }
    if let Some(mask) = t.hours_mask() {
        assert!(mask != 0 && mask < 1 << 24, "hours {mask:#x}");
    }
}

/// Sorted and without duplicates.
fn normalized(list: &[String]) -> bool {
    list.windows(2).all(|p| p[0] < p[1])
}

/// The index against the scan on probe requests: the same candidates in the same order, each
/// pointing at a real campaign, creative and deal; a visitor that stops after the first
/// candidate sees exactly that one.
fn check_matching(set: &CampaignSet) {
    let mut probes: Vec<(BidRequest, Vec<Timestamp>)> = Vec::new();
    for c in set.campaigns().iter().take(PROBED_CAMPAIGNS) {
        let times = times_for(c);
        for blocking in [false, true] {
            if let Ok(r) = BidRequest::from_slice(probe(c, blocking).to_string().as_bytes()) {
                probes.push((r, times.clone()));
            }
        }
    }
    let (mut indexed, mut scanned) = (Vec::new(), Vec::new());
    let examples = examples().iter().map(|r| (r, vec![T0]));
    for (r, times) in probes.iter().map(|(r, t)| (r, t.clone())).chain(examples) {
        for now in times {
            let req = RequestFacts::from_request(r, now);
            for (k, imp) in r.imp.iter().enumerate() {
                let imp_facts = ImpFacts::from_imp(imp);
                indexed.clear();
                scanned.clear();
                set.candidates(&req, &imp_facts, &mut indexed);
                set.candidates_scan(&req, &imp_facts, &mut scanned);
                assert_eq!(
                    indexed, scanned,
                    "index and scan differ on imp {k} of {r:?} at {now:?}"
                );
                for cand in &indexed {
                    check_candidate(set, imp, *cand);
                }
                let mut first = None;
                let flow = set.visit_candidates(&req, &imp_facts, |cand| {
                    assert!(first.is_none(), "visited again after Break");
                    first = Some(cand);
                    ControlFlow::Break(())
                });
                assert_eq!(first, indexed.first().copied());
                assert_eq!(flow.is_break(), !indexed.is_empty());
            }
        }
    }
}

fn check_candidate(set: &CampaignSet, imp: &openrtb::Imp, cand: Candidate) {
    let campaign = set
        .campaigns()
        .get(cand.campaign as usize)
        .unwrap_or_else(|| panic!("{cand:?}: no such campaign"));
    assert!(
        (cand.creative as usize) < campaign.creatives().len(),
        "{cand:?}"
    );
    if let Some(d) = cand.deal {
        let deals = imp.pmp.as_ref().and_then(|p| p.deals.as_ref());
        assert!(
            deals.is_some_and(|list| (d as usize) < list.len()),
            "{cand:?}"
        );
    }
}

/// Decision times for a campaign's probes: its flight start (or `T0`), and the first hour its
/// hour targeting allows on that day or the next.
fn times_for(c: &Campaign) -> Vec<Timestamp> {
    let base = c.flight().start.unwrap_or(T0);
    let mut times = vec![base];
    if let Some(mask) = c.targeting().hours_mask().filter(|&m| m != 0) {
        let hour = u64::from(mask.trailing_zeros());
        let mut at = Timestamp(base.start_of_day().0 + hour * HOUR_MS);
        if at < base {
            at = Timestamp(at.0 + Timestamp::MS_PER_DAY);
        }
        times.push(at);
    }
    times
}

/// A request aimed at campaign `c`: the first value of each of its targeted dimensions, one
/// impression offering every banner size and video mime of its creatives (and its deals), and
/// a plain 300x250 impression. With `blocking`, `bcat`/`badv` name the first creative's
/// category and advertiser domain.
fn probe(c: &Campaign, blocking: bool) -> Value {
    let t = c.targeting();
    let first = |list: Option<&[String]>| list.and_then(|l| l.first()).cloned();
    let mut geo = json!({});
    if let Some(country) = t.countries().and_then(|l| l.first()) {
        geo["country"] = json!(country.as_str());
    }
    if let Some(region) = first(t.regions()) {
        geo["region"] = json!(region);
    }
    let mut device = json!({ "geo": geo });
    if let Some(dt) = t.device_types().and_then(|l| l.first()) {
        device["devicetype"] = json!(dt);
    }
    if let Some(os) = first(t.os()) {
        device["os"] = json!(os);
    }
    let mut site =
        json!({ "domain": first(t.domains()).unwrap_or_else(|| "probe.example".to_owned()) });
    if let Some(p) = first(t.publishers()) {
        site["publisher"] = json!({ "id": p });
    }
    if let Some(cat) = first(t.categories()) {
        site["cat"] = json!([cat]);
    }
    let mut imp = json!({ "id": "1" });
    let sizes: Vec<Value> = c
        .creatives()
        .iter()
        .filter_map(|cr| match cr.media() {
            Media::Banner(s) => Some(json!({ "w": s.w, "h": s.h })),
            Media::Video(_) => None,
        })
        .collect();
    if !sizes.is_empty() {
        imp["banner"] = json!({ "format": sizes });
    }
    let video = c.creatives().iter().find_map(|cr| match cr.media() {
        Media::Video(v) => Some(v),
        Media::Banner(_) => None,
    });
    if let Some(v) = video {
        imp["video"] = json!({ "mimes": [v.mimes.first()], "minduration": 1, "maxduration": MAX_VIDEO_SECONDS });
    }
    if let Some(deal) = first(t.deals()) {
        imp["pmp"] = json!({ "private_auction": 1, "deals": [{ "id": deal, "bidfloor": 0.01 }] });
    }
    let mut request = json!({
        "id": "probe",
        "imp": [imp, { "id": "2", "banner": { "w": 300, "h": 250 } }],
        "site": site,
        "device": device,
    });
    if let Some(seg) = first(t.segments()) {
        request["user"] = json!({ "data": [{ "segment": [{ "id": seg }] }] });
    }
    if blocking && let Some(cr) = c.creatives().first() {
        request["bcat"] = json!(cr.cat().first().cloned().into_iter().collect::<Vec<_>>());
        request["badv"] = json!(
            cr.adomain()
                .first()
                .cloned()
                .into_iter()
                .collect::<Vec<_>>()
        );
        request["at"] = json!(1);
    }
    request
}

/// The spec's example requests, decoded once.
fn examples() -> &'static [BidRequest] {
    static EXAMPLES: OnceLock<Vec<BidRequest>> = OnceLock::new();
    EXAMPLES.get_or_init(|| {
        const DIR: &str = "../crates/openrtb/tests/fixtures/spec-2.6";
        let files: [&[u8]; 5] = [
            include_bytes!(
                "../../crates/openrtb/tests/fixtures/spec-2.6/request-1-simple-banner.json"
            ),
            include_bytes!(
                "../../crates/openrtb/tests/fixtures/spec-2.6/request-2-expandable-creative.json"
            ),
            include_bytes!("../../crates/openrtb/tests/fixtures/spec-2.6/request-3-mobile.json"),
            include_bytes!("../../crates/openrtb/tests/fixtures/spec-2.6/request-4-video.json"),
            include_bytes!(
                "../../crates/openrtb/tests/fixtures/spec-2.6/request-5-pmp-direct-deal.json"
            ),
        ];
        files
            .iter()
            .map(|bytes| {
                BidRequest::from_slice(bytes)
                    .unwrap_or_else(|e| panic!("an example request in {DIR} does not decode: {e}"))
            })
            .collect()
    })
}
