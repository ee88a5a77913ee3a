//! TCF consent strings as a real CMP writes them, for the generated requests of EU users:
//! about 300 of the first 1000 vendors consented (vendors 1-16, the demo's and the benchmarks'
//! bidders in `examples/gvl.json`, always), about 100 with legitimate interest, two publisher
//! restrictions. Made by IAB's own encoder: `crates/exchange/tests/fixtures/privacy/gen.mjs`
//! writes them to `consents.json` there (`realistic`); copy them here when it changes.

use rand::RngExt;

/// Everything consented, precise geolocation opted in.
const FULL: &str = "CQtAQoAQtAQoAAfACBENBNFoAP_AAEPAAAYgHyv__KI49IAAUSmQIgUAASEYQpBsvCsROiMBCgakgodxtkxQZAE4AalKFEkQAkIgoDFAaFAQCoVJCEgCQAkAAwIAygFQVURIIEMdjW0AkkCQGk2kQJgkqASBAJOF4m0laQkDICYiDKX6LCYhmvGo3-cgIAAAKgQDCS8kSVoQoHgP__AALQEIBAMAACAAIAIBAEAECBAAAAQAAAAQUAAAAAAAiCAEAAACCFAoQBAEQIAACAAAAAJACAAgAwBQAAIAiAgAAABABUIAMIQACCEEAAAAAEAACRCAASAAACAAAAAGAAIsAABCQAgAQAAJCAAjAAAAEAUhAAAQAgkAGA-oFujgAIDkAAAA";
/// Everything consented but precise geolocation.
const NO_GEO: &str = "CQtAQoAQtAQoAAfACBENBNFgAP_AAEPAAAYgH0P__KABgCVodAAjAIiFqAC2oAIDAy0AzAxABiABsSQaMHXBQERJINmAJNGIwQDJFEkAlIAcAaKYGNJEoaAIkEQcMgggCB1UNwUxioLBC8E0DhCqcADJxEDCDAyACU8RYJRQAAIFAAJCGJSFZCBUiCKIpkClBJgFChAR4AhEtA9d__4AAAAAQACgAAESgAAAAIAAAAAAAAAAAAAAIAQgAhAQAIAAAAAAAAgAAAAAgAECEBAAAFgAAIiAAgAAQASAAAAAAAAEAAAACQQACEAAAEAABAEigAAEAAAgIEAAoUYAIEAAACEAAAAhggEAAAAAEAgIgAQAAEgAAAAEAAAA";
/// Storage and basic ads only, to fewer vendors.
const BASIC_ONLY: &str = "CQtAQoAQtAQoAAfACBENBNFgAMAAAAAAAAYgHzv__oBIgCAAABAxggAibAAACYISCJBAGhCNEAAMASQASGMAAAQAAAIABQQAIIgALEAgkYIEgBkhCMBAx5AMOiCoKABgMLFQAAYAgJEBBgQEggJ-KgCpBCAASEECMCAABCADACAKwhAgABBYQsCAIASRhgCBCKKIQQgEAAJCCAAAAAAA";

/// One string, weighted as CMP answers often are: 70% accept all, 20% all but precise geo,
/// 10% the minimum.
pub(crate) fn pick(rng: &mut impl RngExt) -> &'static str {
    match rng.random_range(0..10) {
        0..7 => FULL,
        7..9 => NO_GEO,
        _ => BASIC_ONLY,
    }
}
