//! The file format: both syntaxes, parse errors, every validation error, timestamps, limits.

use openrtb::Price;
use serde_json::{Value, json};
use units::{Nanos, Timestamp};

use super::BRIEF_EXAMPLE;
use crate::error::{CampaignError, Problem};
use crate::parse::{parse_json, parse_toml};
use crate::{CampaignSet, Media, PacingModeConfig, Size};

const FULL_JSON: &str = r#"[
  {
    "id": "spring-sale",
    "adomain": ["Shop.example"],
    "pacing": "even",
    "budget": {"total": 1500.50, "daily": 100},
    "bid": {"cpm": 2.75, "max_cpm": 4.0, "shading": 0.8},
    "flight": {"start": "2025-03-01T00:00:00Z", "end": "2025-04-01T00:00:00Z"},
    "creatives": [
      {"id": "mpu", "w": 300, "h": 250, "adm": "<img src=\"https://cdn.shop.example/a.png?p=${AUCTION_PRICE}\">", "cat": ["IAB22-4"]},
      {"id": "preroll", "video": {"mimes": ["video/mp4"], "duration": 15, "protocols": [3, 7]},
       "adm": "<VAST version=\"4.0\"></VAST>", "adomain": ["video.shop.example"]}
    ],
    "targeting": {
      "countries": ["FRA", "deu"], "regions": ["IDF"], "device_types": [2, 4], "os": ["iOS", "Android"],
      "domains": ["example.com"], "block_domains": ["bad.example.com"], "publishers": ["pub-1"],
      "categories": ["IAB12"], "sizes": ["300x250", "728x90"], "deals": ["deal-9"],
      "hours": [8, 9, 10, 18, 19], "segments": ["seg-a", "seg-b"]
    }
  },
  {"id": "c2", "budget": {"total": 10}, "bid": {"cpm": 1},
   "creatives": [{"id": "b", "w": 728, "h": 90, "adm": "<div></div>"}]}
]"#;

const FULL_TOML: &str = r#"
[[campaign]]
id = "spring-sale"
adomain = ["Shop.example"]
pacing = "even"
budget = { total = 1500.50, daily = 100 }
bid = { cpm = 2.75, max_cpm = 4.0, shading = 0.8 }
flight = { start = "2025-03-01T00:00:00Z", end = 2025-04-01T00:00:00Z }

[[campaign.creatives]]
id = "mpu"
w = 300
h = 250
adm = '<img src="https://cdn.shop.example/a.png?p=${AUCTION_PRICE}">'
cat = ["IAB22-4"]

[[campaign.creatives]]
id = "preroll"
video = { mimes = ["video/mp4"], duration = 15, protocols = [3, 7] }
adm = '<VAST version="4.0"></VAST>'
adomain = ["video.shop.example"]

[campaign.targeting]
countries = ["FRA", "deu"]
regions = ["IDF"]
device_types = [2, 4]
os = ["iOS", "Android"]
domains = ["example.com"]
block_domains = ["bad.example.com"]
publishers = ["pub-1"]
categories = ["IAB12"]
sizes = ["300x250", "728x90"]
deals = ["deal-9"]
hours = [8, 9, 10, 18, 19]
segments = ["seg-a", "seg-b"]

[[campaign]]
id = "c2"
budget.total = 10
bid.cpm = 1
creatives = [{ id = "b", w = 728, h = 90, adm = "<div></div>" }]
"#;

fn load_err(json: &str) -> CampaignError {
    match CampaignSet::from_json_bytes(json.as_bytes()) {
        Ok(_) => panic!("expected an error for {json}"),
        Err(e) => e,
    }
}

#[test]
fn brief_example_loads_with_integer_money() {
    let set = super::set(BRIEF_EXAMPLE);
    let c = set.get("c1").expect("campaign c1");
    assert_eq!(c.bid().cpm, Price::from_micros(2_000_000));
    assert_eq!(c.bid().max_cpm, c.bid().cpm);
    assert_eq!(c.bid().shading_ppm, None);
    assert_eq!(c.budget().total, Nanos(1_000_000_000));
    assert_eq!(c.budget().daily, None);
    assert_eq!(c.pacing(), PacingModeConfig::Asap);
    assert_eq!(c.flight().start, None);
    let cr = &c.creatives()[0];
    assert_eq!(cr.media(), &Media::Banner(Size::new(300, 250)));
    assert_eq!(cr.adomain(), ["shop.example"]);
    assert_eq!(cr.adm(), "<div>ad</div>");
    assert_eq!(set.position("c1"), Some(0));
    assert!(set.get("c2").is_none());
}

#[test]
fn json_and_toml_forms_are_equal() {
    let from_json = parse_json(FULL_JSON.as_bytes()).expect("json");
    let from_toml = parse_toml(FULL_TOML).expect("toml");
    assert_eq!(from_json, from_toml);
    // The JSON object form `{"campaign": [...]}` is the same document.
    let wrapped = format!("{{\"campaign\": {FULL_JSON}}}");
    assert_eq!(parse_json(wrapped.as_bytes()).expect("wrapped"), from_json);

    let a = super::set(FULL_JSON);
    let b = CampaignSet::from_toml_str(FULL_TOML).expect("toml set");
    assert_eq!(a.campaigns(), b.campaigns());
    let c = &a.campaigns()[0];
    assert_eq!(c.bid().cpm, Price::from_micros(2_750_000));
    assert_eq!(c.bid().max_cpm, Price::from_micros(4_000_000));
    assert_eq!(c.bid().shading_ppm, Some(800_000));
    assert_eq!(c.budget().total, Nanos(1_500_500_000_000));
    assert_eq!(c.budget().daily, Some(Nanos(100_000_000_000)));
    assert_eq!(c.pacing(), PacingModeConfig::Even);
    assert_eq!(c.flight().start, Some(Timestamp(1_740_787_200_000)));
    assert_eq!(c.flight().end, Some(Timestamp(1_743_465_600_000)));
    // Normalized: upper-case countries, lower-case OS and domains, sorted.
    let t = c.targeting();
    let countries: Vec<String> = t
        .countries()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(countries, ["DEU", "FRA"]);
    assert_eq!(t.os(), Some(&["android".to_owned(), "ios".to_owned()][..]));
    assert!(t.allows_hour(18) && !t.allows_hour(11));
    // Creative adomain: its own, else the campaign's (lower case).
    assert_eq!(c.creatives()[0].adomain(), ["shop.example"]);
    assert_eq!(c.creatives()[1].adomain(), ["video.shop.example"]);
    assert!(matches!(c.creatives()[1].media(), Media::Video(v) if v.duration == 15));
}

#[test]
fn empty_documents_are_empty_sets() {
    assert!(super::set("[]").is_empty());
    assert!(
        CampaignSet::from_toml_str("")
            .expect("empty toml")
            .is_empty()
    );
    assert!(super::set("{}").is_empty());
}

#[test]
fn unknown_keys_are_named_with_their_position() {
    let typo = BRIEF_EXAMPLE.replace(
        "\"targeting\": {}",
        "\"targeting\": {\"countires\": [\"USA\"]}",
    );
    let e = load_err(&typo);
    let CampaignError::Parse {
        path,
        line,
        column,
        message,
    } = &e
    else {
        panic!("expected a parse error, got {e}");
    };
    assert_eq!(path, "campaigns[0].targeting.countires");
    assert!(message.contains("unknown field `countires`"), "{message}");
    assert_eq!((*line, *column > 0), (3, true));
    assert!(
        e.to_string()
            .starts_with("campaigns[0].targeting.countires: unknown field"),
        "{e}"
    );

    let toml = FULL_TOML.replace("segments = ", "segmens = ");
    let e = CampaignSet::from_toml_str(&toml).expect_err("toml typo");
    let CampaignError::Parse {
        path,
        line,
        message,
        ..
    } = &e
    else {
        panic!("expected a parse error, got {e}");
    };
    assert_eq!(path, "campaigns[0].targeting.segmens");
    assert!(message.contains("unknown field `segmens`"), "{message}");
    assert_eq!(*line, 35);
}

#[test]
fn type_errors_and_syntax_errors_give_path_line_and_column() {
    let e = load_err(&BRIEF_EXAMPLE.replace("\"cpm\": 2.00", "\"cpm\": \"2\""));
    assert_eq!(e.field(), Some("campaigns[0].bid.cpm"));
    assert!(e.to_string().contains("at line 1 column"), "{e}");

    let e = load_err(&BRIEF_EXAMPLE.replace("\"pacing\": \"asap\"", "\"pacing\": \"fast\""));
    assert_eq!(e.field(), Some("campaigns[0].pacing"));
    assert!(e.to_string().contains("unknown variant `fast`"), "{e}");

    let e = load_err("[{\"id\": \"c1\",");
    assert_eq!(e.kind(), "parse");
    assert!(e.to_string().contains("line 1"), "{e}");

    let e = load_err("[] trailing");
    assert_eq!(e.kind(), "parse");

    let e = CampaignSet::from_toml_str("[[campaign]]\nid = \"x\"\nbid = { cpm = \"high\" }")
        .expect_err("toml type error");
    assert_eq!(e.field(), Some("campaigns[0].bid.cpm"));
    assert!(e.to_string().contains("line 3"), "{e}");
    let e = CampaignSet::from_toml_str("[[campaign]\n").expect_err("toml syntax error");
    assert_eq!(e.kind(), "parse");
}

/// A valid single campaign as a JSON value, to be broken one field at a time.
fn base() -> Value {
    json!({
        "id": "c1",
        "budget": {"total": 100.0, "daily": 10.0},
        "bid": {"cpm": 2.0},
        "creatives": [{"id": "cr1", "w": 300, "h": 250, "adm": "<div></div>"}],
        "targeting": {}
    })
}

fn broken(edit: impl FnOnce(&mut Value)) -> CampaignError {
    let mut c = base();
    edit(&mut c);
    load_err(&Value::Array(vec![c]).to_string())
}

#[test]
fn every_validation_error_names_its_field() {
    type Edit = Box<dyn Fn(&mut Value)>;
    let video = || json!({"mimes": ["video/mp4"], "duration": 15});
    let cases: Vec<(Edit, &str, Problem)> = vec![
        (
            Box::new(|c| c["id"] = json!(" ")),
            "campaigns[0].id",
            Problem::Empty,
        ),
        (
            Box::new(|c| c["id"] = json!("x".repeat(300))),
            "campaigns[0].id",
            Problem::TooLong(256),
        ),
        (
            Box::new(|c| c["creatives"] = json!([])),
            "campaigns[0].creatives",
            Problem::Empty,
        ),
        (
            Box::new(|c| {
                let cr = c["creatives"][0].clone();
                c["creatives"] = Value::Array(vec![cr; 101]);
            }),
            "campaigns[0].creatives",
            Problem::TooMany(100),
        ),
        (
            Box::new(|c| c["creatives"][0]["w"] = json!(0)),
            "campaigns[0].creatives[0].w",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["creatives"][0]["h"] = json!(-5)),
            "campaigns[0].creatives[0].h",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["creatives"][0]["w"] = json!(99_999)),
            "campaigns[0].creatives[0].w",
            Problem::TooBig(16_384),
        ),
        (
            Box::new(|c| {
                c["creatives"][0].as_object_mut().map(|o| o.remove("h"));
            }),
            "campaigns[0].creatives[0].h",
            Problem::HalfSize,
        ),
        (
            Box::new(move |c| c["creatives"][0]["video"] = video()),
            "campaigns[0].creatives[0].video",
            Problem::BannerAndVideo,
        ),
        (
            Box::new(|c| c["creatives"][0] = json!({"id": "v", "adm": "x"})),
            "campaigns[0].creatives[0]",
            Problem::NoMedia,
        ),
        (
            Box::new(|c| {
                c["creatives"][0] =
                    json!({"id": "v", "adm": "x", "video": {"mimes": ["video/mp4"], "duration": 0}})
            }),
            "campaigns[0].creatives[0].video.duration",
            Problem::OutOfRange(1, 3600),
        ),
        (
            Box::new(|c| {
                c["creatives"][0] =
                    json!({"id": "v", "adm": "x", "video": {"mimes": [], "duration": 5}})
            }),
            "campaigns[0].creatives[0].video.mimes",
            Problem::EmptyList,
        ),
        (
            Box::new(
                |c| c["creatives"][0] = json!({"id": "v", "adm": "x", "video": {"mimes": ["a"], "duration": 5, "protocols": [0]}}),
            ),
            "campaigns[0].creatives[0].video.protocols[0]",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| {
                let mut second = c["creatives"][0].clone();
                second["w"] = json!(728);
                if let Some(a) = c["creatives"].as_array_mut() {
                    a.push(second)
                }
            }),
            "campaigns[0].creatives[1].id",
            Problem::Duplicate("cr1".to_owned()),
        ),
        (
            Box::new(|c| c["creatives"][0]["adm"] = json!("")),
            "campaigns[0].creatives[0].adm",
            Problem::Empty,
        ),
        (
            Box::new(|c| c["creatives"][0]["adm"] = json!("x".repeat(64 * 1024 + 1))),
            "campaigns[0].creatives[0].adm",
            Problem::TooLong(65_536),
        ),
        (
            Box::new(|c| c["creatives"][0]["cat"] = json!(["IAB1", ""])),
            "campaigns[0].creatives[0].cat[1]",
            Problem::Empty,
        ),
        (
            Box::new(|c| c["creatives"][0]["adomain"] = json!(["shop example"])),
            "campaigns[0].creatives[0].adomain[0]",
            Problem::BadDomain("shop example".to_owned()),
        ),
        (
            Box::new(|c| c["adomain"] = json!(["a..b"])),
            "campaigns[0].adomain[0]",
            Problem::BadDomain("a..b".to_owned()),
        ),
        (
            Box::new(|c| c["targeting"]["countries"] = json!([])),
            "campaigns[0].targeting.countries",
            Problem::EmptyList,
        ),
        (
            Box::new(|c| c["targeting"]["countries"] = json!(["USA", "US"])),
            "campaigns[0].targeting.countries[1]",
            Problem::BadCountry("US".to_owned()),
        ),
        (
            Box::new(|c| c["targeting"]["regions"] = json!([])),
            "campaigns[0].targeting.regions",
            Problem::EmptyList,
        ),
        (
            Box::new(|c| c["targeting"]["device_types"] = json!([2, 0])),
            "campaigns[0].targeting.device_types[1]",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["targeting"]["os"] = json!([" "])),
            "campaigns[0].targeting.os[0]",
            Problem::Empty,
        ),
        (
            Box::new(|c| c["targeting"]["domains"] = json!(["https://x.example/"])),
            "campaigns[0].targeting.domains[0]",
            Problem::BadDomain("https://x.example/".to_owned()),
        ),
        (
            Box::new(|c| c["targeting"]["block_domains"] = json!([])),
            "campaigns[0].targeting.block_domains",
            Problem::EmptyList,
        ),
        (
            Box::new(|c| c["targeting"]["publishers"] = json!([""])),
            "campaigns[0].targeting.publishers[0]",
            Problem::Empty,
        ),
        (
            Box::new(|c| c["targeting"]["categories"] = json!(["x".repeat(300)])),
            "campaigns[0].targeting.categories[0]",
            Problem::TooLong(256),
        ),
        (
            Box::new(|c| c["targeting"]["sizes"] = json!(["300x250", "300by250"])),
            "campaigns[0].targeting.sizes[1]",
            Problem::BadSize("300by250".to_owned()),
        ),
        (
            Box::new(|c| c["targeting"]["sizes"] = json!(["0x250"])),
            "campaigns[0].targeting.sizes[0]",
            Problem::BadSize("0x250".to_owned()),
        ),
        (
            Box::new(|c| c["targeting"]["deals"] = json!([])),
            "campaigns[0].targeting.deals",
            Problem::EmptyList,
        ),
        (
            Box::new(|c| c["targeting"]["hours"] = json!([0, 23, 24])),
            "campaigns[0].targeting.hours[2]",
            Problem::OutOfRange(0, 23),
        ),
        (
            Box::new(|c| c["targeting"]["hours"] = json!([-1])),
            "campaigns[0].targeting.hours[0]",
            Problem::OutOfRange(0, 23),
        ),
        (
            Box::new(|c| {
                c["targeting"]["segments"] =
                    json!((0..10_001).map(|i| i.to_string()).collect::<Vec<_>>())
            }),
            "campaigns[0].targeting.segments",
            Problem::TooMany(10_000),
        ),
        (
            Box::new(|c| c["bid"]["cpm"] = json!(0)),
            "campaigns[0].bid.cpm",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["bid"]["cpm"] = json!(-1.5)),
            "campaigns[0].bid.cpm",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["bid"]["cpm"] = json!(1e-9)),
            "campaigns[0].bid.cpm",
            Problem::TooSmall("0.000001"),
        ),
        (
            Box::new(|c| c["bid"]["cpm"] = json!(1e12)),
            "campaigns[0].bid.cpm",
            Problem::NotFinite,
        ),
        (
            Box::new(|c| c["bid"]["max_cpm"] = json!(1.5)),
            "campaigns[0].bid.max_cpm",
            Problem::BelowMinimum("bid.cpm"),
        ),
        (
            Box::new(|c| c["bid"]["shading"] = json!(0)),
            "campaigns[0].bid.shading",
            Problem::OutOfRangeFraction,
        ),
        (
            Box::new(|c| c["bid"]["shading"] = json!(1.01)),
            "campaigns[0].bid.shading",
            Problem::OutOfRangeFraction,
        ),
        (
            Box::new(|c| c["bid"]["shading"] = json!(1e-9)),
            "campaigns[0].bid.shading",
            Problem::TooSmall("0.000001"),
        ),
        (
            Box::new(|c| c["budget"]["total"] = json!(0)),
            "campaigns[0].budget.total",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["budget"]["total"] = json!(1e-12)),
            "campaigns[0].budget.total",
            Problem::TooSmall("0.000000001"),
        ),
        (
            Box::new(|c| c["budget"]["total"] = json!(5e9)),
            "campaigns[0].budget.total",
            Problem::NotFinite,
        ),
        (
            Box::new(|c| c["budget"]["daily"] = json!(-1)),
            "campaigns[0].budget.daily",
            Problem::NotPositive,
        ),
        (
            Box::new(|c| c["budget"]["daily"] = json!(100.5)),
            "campaigns[0].budget.daily",
            Problem::AboveMaximum("budget.total"),
        ),
        (
            Box::new(|c| c["flight"] = json!({"start": "2025-03-01"})),
            "campaigns[0].flight.start",
            Problem::BadTimestamp("2025-03-01".to_owned()),
        ),
        (
            Box::new(|c| {
                c["flight"] =
                    json!({"start": "2025-03-01T00:00:00Z", "end": "2025-03-01T00:00:00Z"})
            }),
            "campaigns[0].flight.end",
            Problem::NotAfter("flight.start"),
        ),
    ];
    for (i, (edit, field, problem)) in cases.into_iter().enumerate() {
        let e = broken(edit);
        let CampaignError::Invalid {
            field: got,
            problem: got_problem,
        } = &e
        else {
            panic!("case {i}: expected a validation error for {field}, got {e}");
        };
        assert_eq!((got.as_str(), got_problem), (field, &problem), "case {i}");
        assert!(
            e.to_string().starts_with(&format!("{field}: ")),
            "case {i}: {e}"
        );
        assert_eq!(e.kind(), "invalid");
    }
}

#[test]
fn duplicate_campaign_ids_name_the_second() {
    let two = Value::Array(vec![base(), base()]).to_string();
    let e = load_err(&two);
    assert_eq!(e.to_string(), "campaigns[1].id: duplicate id \"c1\"");
    // The same check guards sets built from already validated campaigns.
    let campaigns = super::set(BRIEF_EXAMPLE).campaigns().to_vec();
    let doubled = [campaigns.clone(), campaigns].concat();
    let e = CampaignSet::from_campaigns(doubled).expect_err("duplicate");
    assert_eq!(e.field(), Some("campaigns[1].id"));
    // Named by file position, although the set reorders by max_cpm: the duplicate (cpm 5)
    // would come first.
    let mut cheap = base();
    cheap["bid"] = json!({"cpm": 1});
    let mut other = base();
    other["id"] = json!("c2");
    other["bid"] = json!({"cpm": 3});
    let mut dear = base();
    dear["bid"] = json!({"cpm": 5});
    let first_two = Value::Array(vec![cheap.clone(), other.clone()]).to_string();
    let last = Value::Array(vec![dear.clone()]).to_string();
    let three = Value::Array(vec![cheap, other, dear]).to_string();
    let e = CampaignSet::from_json_bytes(three.as_bytes()).expect_err("duplicate");
    assert_eq!(e.field(), Some("campaigns[2].id"));
    let validated = [
        super::set(&first_two).campaigns().to_vec(),
        super::set(&last).campaigns().to_vec(),
    ]
    .concat();
    let e = CampaignSet::from_campaigns(validated).expect_err("duplicate");
    assert_eq!(e.field(), Some("campaigns[2].id"));
}

#[test]
fn toml_accepts_native_datetimes_but_only_utc() {
    let doc = |end: &str| {
        format!(
            "[[campaign]]\nid = \"t\"\nbudget.total = 1\nbid.cpm = 1\ncreatives = [{{ id = \"a\", w = 1, h = 1, adm = \"x\" }}]\nflight = {{ end = {end} }}\n"
        )
    };
    let set = CampaignSet::from_toml_str(&doc("2025-03-01T00:00:00Z")).expect("utc datetime");
    assert_eq!(
        set.campaigns()[0].flight().end,
        Some(Timestamp(1_740_787_200_000))
    );
    let e = CampaignSet::from_toml_str(&doc("2025-03-01T00:00:00+01:00")).expect_err("offset");
    assert_eq!(e.field(), Some("campaigns[0].flight.end"));
    let e = CampaignSet::from_toml_str(&doc("2025-03-01")).expect_err("date only");
    assert_eq!(e.field(), Some("campaigns[0].flight.end"));
    let e = CampaignSet::from_toml_str(&doc("12")).expect_err("integer");
    assert_eq!(e.kind(), "parse");
}

#[test]
fn formats_go_by_extension_and_both_say_the_same_within_the_size_limit() {
    use std::path::Path;

    use crate::Format;
    assert_eq!(Format::from_path(Path::new("c.JSON")), Some(Format::Json));
    assert_eq!(
        Format::from_path(Path::new("dir/c.toml")),
        Some(Format::Toml)
    );
    assert_eq!(Format::from_path(Path::new("c.yaml")), None);
    assert_eq!(Format::from_path(Path::new("campaigns")), None);
    let a = CampaignSet::from_bytes(Format::Json, FULL_JSON.as_bytes()).expect("json");
    let b = CampaignSet::from_bytes(Format::Toml, FULL_TOML.as_bytes()).expect("toml");
    assert_eq!(a.campaigns(), b.campaigns());

    let huge = vec![b' '; 64 * 1024 * 1024 + 1];
    for format in [Format::Json, Format::Toml] {
        let e = CampaignSet::from_bytes(format, &huge).expect_err("too large");
        assert!(matches!(e, CampaignError::FileTooLarge { .. }), "{e}");
    }
    let e = CampaignSet::from_bytes(Format::Toml, &[0xff, 0xfe]).expect_err("not UTF-8");
    assert_eq!(e.kind(), "parse");
}

#[test]
fn truncated_and_mangled_files_are_errors_not_panics() {
    for doc in [FULL_JSON, BRIEF_EXAMPLE] {
        for end in 0..doc.len() {
            if doc.is_char_boundary(end) {
                let _ = CampaignSet::from_json_bytes(&doc.as_bytes()[..end]);
            }
        }
    }
    for end in 0..FULL_TOML.len() {
        if FULL_TOML.is_char_boundary(end) {
            let _ = CampaignSet::from_toml_str(&FULL_TOML[..end]);
        }
    }
    // Deep nesting hits serde_json's recursion limit, not the stack.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(load_err(&deep).kind(), "parse");
    let deep_toml = format!("x = {}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert!(CampaignSet::from_toml_str(&deep_toml).is_err());
    // TOML can spell non-finite floats; they are refused like out-of-range amounts.
    let nan = FULL_TOML.replace("cpm = 2.75", "cpm = nan");
    let e = CampaignSet::from_toml_str(&nan).expect_err("nan");
    assert_eq!(
        e.to_string(),
        "campaigns[0].bid.cpm: must be a finite number within +/-1e9"
    );
}

proptest::proptest! {
    // Fixed seed, no failure files: the same cases on every run.
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x67_6176_656c),
        failure_persistence: None,
        ..Default::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
        let _ = CampaignSet::from_json_bytes(&bytes);
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = CampaignSet::from_toml_str(text);
        }
    }

    #[test]
    fn single_byte_mutations_never_panic(pos in 0usize..1_000, byte in proptest::prelude::any::<u8>()) {
        let mut doc = FULL_JSON.as_bytes().to_vec();
        let pos = pos % doc.len();
        doc[pos] = byte;
        let _ = CampaignSet::from_json_bytes(&doc);
    }
}
