#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The built-in OpenRTB 2.6 request generator.

use std::collections::HashSet;

use loadgen::Corpus;
use loadgen::generate;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use serde_json::Value;

#[test]
fn same_seed_same_bytes() {
    let a = Corpus::generated(42, 300, 120);
    let b = Corpus::generated(42, 300, 120);
    assert_eq!(a.bodies(), b.bodies());
    let c = Corpus::generated(43, 300, 120);
    assert_ne!(a.bodies(), c.bodies());
    // A prefix of a longer corpus is the shorter corpus.
    let d = Corpus::generated(42, 100, 120);
    assert_eq!(&a.bodies()[..100], d.bodies());
}

#[test]
fn every_request_decodes_as_openrtb_2_6() {
    let corpus = Corpus::generated(7, 2000, 150);
    for (i, body) in corpus.bodies().iter().enumerate() {
        let req = openrtb::BidRequest::from_slice(body).unwrap_or_else(|e| {
            panic!(
                "request {i} does not decode: {e}\n{}",
                String::from_utf8_lossy(body)
            )
        });
        assert!(!req.imp.is_empty());
    }
    openrtb::BidRequest::from_slice(&generate::realistic_2_5k()).unwrap();
}

#[test]
fn ids_are_unique() {
    let corpus = Corpus::generated(1, 4000, 100);
    let mut ids = HashSet::new();
    for body in corpus.bodies() {
        let v: Value = serde_json::from_slice(body).unwrap();
        assert!(
            ids.insert(v["id"].as_str().unwrap().to_owned()),
            "duplicate id {}",
            v["id"]
        );
    }
}

#[test]
fn sizes_are_realistic() {
    let corpus = Corpus::generated(3, 3000, 100);
    let mut sizes: Vec<usize> = corpus.bodies().iter().map(|b| b.len()).collect();
    sizes.sort_unstable();
    let (min, max) = (sizes[0], sizes[sizes.len() - 1]);
    let median = sizes[sizes.len() / 2];
    assert!(min >= 500 && max <= 5000, "min {min} max {max}");
    assert!((1000..=3000).contains(&median), "median {median}");
    let fixed = generate::realistic_2_5k().len();
    assert!((2300..=2800).contains(&fixed), "{fixed}");
}

#[test]
fn field_values_are_plausible() {
    let mut rng = SmallRng::seed_from_u64(99);
    let (mut sites, mut apps, mut deals, mut at2) = (0, 0, 0, 0);
    for seq in 0..2000 {
        let r = generate::request(&mut rng, seq, 80);
        assert_eq!(r["tmax"], 80);
        assert_eq!(r["cur"], serde_json::json!(["USD"]));
        assert!(r["at"] == 1 || r["at"] == 2);
        at2 += usize::from(r["at"] == 2);
        assert!(
            r.get("site").is_some() != r.get("app").is_some(),
            "site xor app: {r}"
        );
        sites += usize::from(r.get("site").is_some());
        apps += usize::from(r.get("app").is_some());
        let country = r["device"]["geo"]["country"].as_str().unwrap();
        assert!(
            country.len() == 3 && country.bytes().all(|b| b.is_ascii_uppercase()),
            "{country}"
        );
        assert!(
            r["device"]["ua"]
                .as_str()
                .unwrap()
                .starts_with("Mozilla/5.0")
        );
        assert!(r["source"]["tid"].is_string());
        let nodes = r["source"]["schain"]["nodes"].as_array().unwrap();
        assert!((1..=2).contains(&nodes.len()));
        let imps = r["imp"].as_array().unwrap();
        assert!((1..=3).contains(&imps.len()));
        for imp in imps {
            let floor = imp["bidfloor"].as_f64().unwrap();
            assert!((0.05..=5.0).contains(&floor), "floor {floor}");
            assert_eq!(imp["bidfloorcur"], "USD");
            let kinds = ["banner", "video", "native"]
                .iter()
                .filter(|k| imp.get(**k).is_some())
                .count();
            assert_eq!(kinds, 1, "{imp}");
            if let Some(formats) = imp["banner"]["format"].as_array() {
                assert!(!formats.is_empty());
            }
            if let Some(native) = imp["native"]["request"].as_str() {
                let n: Value = serde_json::from_str(native).unwrap();
                assert!(n["assets"].is_array());
            }
            if let Some(pmp) = imp.get("pmp") {
                let ds = pmp["deals"].as_array().unwrap();
                assert!((1..=2).contains(&ds.len()));
                for d in ds {
                    deals += 1;
                    assert!(d["bidfloor"].as_f64().unwrap() > floor, "{d} vs {floor}");
                }
            }
        }
        if r["regs"]["gdpr"] == 1 {
            assert!(r["user"]["consent"].is_string());
        }
    }
    assert!(sites > 1000 && apps > 600, "sites {sites} apps {apps}");
    assert!(deals > 250, "deals {deals}");
    assert!(at2 > 1500, "at=2 {at2}");
}
