//! Who may ask for auctions: sellers (publishers, SSPs) and their API keys, with the few
//! settings an exchange keeps per seller. A seller sends `Authorization: Bearer <key>`; the key
//! is looked up before the body is read, and an unknown or missing one is answered 401 and
//! counted, so no bidder ever sees the request.
//!
//! Keys come from a file (`key_file`, one key per line) or the environment (`key_env`,
//! separated by commas or whitespace): several at once, so a key is rotated by adding the new
//! one, moving the seller over, then removing the old one. They are read when the
//! configuration loads (start and every reload) and kept only as SHA-256 digests, so a lookup
//! compares digests of equal length and the keys themselves are never logged or shown.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// Most sellers one configuration may name.
pub const MAX_SELLERS: usize = 4096;
/// Shortest accepted key: guessing one must be hopeless.
pub const MIN_KEY_CHARS: usize = 16;
/// Longest accepted key.
pub const MAX_KEY_CHARS: usize = 256;
/// Most keys one seller may have at once (rotation needs two).
pub const MAX_KEYS_PER_SELLER: usize = 8;
/// How the example keys shipped in `examples/keys/` begin: a key that does is known to
/// everyone who has read the repository.
pub const EXAMPLE_KEY_PREFIX: &str = "example-only-";

/// One seller as the configuration file writes it (`[[sellers]]`).
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SellerConfig {
    /// Unique name, used in metrics and logs.
    pub name: String,
    /// File holding the seller's keys, one per line (`#` comments and blank lines ignored);
    /// relative to the configuration file.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Environment variable holding the seller's keys, separated by commas or whitespace.
    #[serde(default)]
    pub key_env: Option<String>,
    /// Bidders this seller's auctions go to, by name. Default: every bidder.
    #[serde(default)]
    pub bidders: Option<Vec<String>>,
    /// Factor applied to every floor of this seller's requests (imp and deal), as a decimal:
    /// 1.1 raises floors by 10%. Default 1.0; 0.01..=100.
    #[serde(default)]
    pub floor_multiplier: Option<f64>,
    /// Cap on this seller's `tmax`, in milliseconds (below `deadline.max_tmax_ms`).
    #[serde(default)]
    pub max_tmax_ms: Option<u32>,
    /// The exchange fires the winner's `burl` at auction end: the seller bills on win. Default
    /// `notices.fire_burl` (false: the seller fires `burl` on render, so it is in the answer).
    #[serde(default)]
    pub bill_on_win: Option<bool>,
    /// The seller fires the winners' notices itself: the answer keeps `nurl`, `burl` and `lurl`
    /// and the exchange fires none of them. Default false.
    #[serde(default)]
    pub fires_notices: bool,
    /// `repair` (default): what breaks an OpenRTB rule but can be fixed without guessing the
    /// seller's intent (native asset ids missing, an out-of-range coordinate, an invalid
    /// optional field) is fixed and counted; `strict`: refused with 400 like the rest.
    #[serde(default)]
    pub validation: Validation,
    /// Whether GDPR applies to this seller's requests without `regs.gdpr`. Default:
    /// `privacy.gdpr_default`.
    #[serde(default)]
    pub gdpr_default: Option<bool>,
    /// Honour the exchange rates a request carries (`ext.prebid.currency.rates`) before the
    /// exchange's own. Default false: a seller could otherwise set the price of every bid.
    #[serde(default)]
    pub trusted_rates: bool,
    /// Honour `ext.prebid.debug` in this seller's requests: the answer's `ext.debug` then
    /// holds every bidder's outcome, latency and bids, as for a `test: 1` request. Default
    /// false.
    #[serde(default)]
    pub trusted_debug: bool,
}

/// How strictly a seller's requests are held to the OpenRTB rules.
#[derive(Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Validation {
    #[default]
    Repair,
    Strict,
}

/// A seller's settings as an auction reads them.
#[derive(Debug)]
pub struct Seller {
    pub name: String,
    /// Allowed bidder names; `None`: all.
    pub bidders: Option<HashSet<String>>,
    /// Floors are multiplied by this many thousandths (1000: unchanged).
    pub floor_permille: u32,
    pub max_tmax_ms: Option<u32>,
    pub bill_on_win: bool,
    pub fires_notices: bool,
    /// One of its keys is an example key from the repository ([`EXAMPLE_KEY_PREFIX`]).
    pub example_key: bool,
    pub validation: Validation,
    /// Whether GDPR applies without `regs.gdpr`; `None`: the host's default.
    pub gdpr_default: Option<bool>,
    /// Its requests' own exchange rates are honoured.
    pub trusted_rates: bool,
    /// Its requests' `ext.prebid.debug` is honoured.
    pub trusted_debug: bool,
    /// Requests taken from this seller (authenticated).
    pub requests: AtomicU64,
}

impl Seller {
    /// The seller of every request when `open_to_all_sellers` is set and no key matched.
    pub fn anonymous(bill_on_win: bool) -> Seller {
        Seller {
            name: "-".to_owned(),
            bidders: None,
            floor_permille: 1000,
            max_tmax_ms: None,
            bill_on_win,
            fires_notices: false,
            example_key: false,
            validation: Validation::Repair,
            gdpr_default: None,
            trusted_rates: false,
            trusted_debug: false,
            requests: AtomicU64::new(0),
        }
    }

    /// May this seller's auctions call the bidder named `name`?
    pub fn allows(&self, name: &str) -> bool {
        self.bidders.as_ref().is_none_or(|b| b.contains(name))
    }

    /// `floor` raised by the seller's multiplier, rounded to the nearest micro.
    pub fn floor(&self, floor: openrtb::Price) -> openrtb::Price {
        if self.floor_permille == 1000 {
            return floor;
        }
        let scaled = (i128::from(floor.micros()) * i128::from(self.floor_permille) + 500) / 1000;
        openrtb::Price::from_micros(i64::try_from(scaled).unwrap_or(i64::MAX))
    }
}

telemetry::labelled_counters! {
    /// Why a request's key was not accepted: none (no `Authorization: Bearer` header), or a
    /// key no seller has.
    KeyRefusal {
        Missing => "missing_key",
        Unknown => "unknown_key",
    }
}

/// Every seller and its keys: what the auction route asks before reading a body.
#[derive(Debug)]
pub struct Sellers {
    by_digest: HashMap<[u8; 32], usize>,
    sellers: Vec<Arc<Seller>>,
    /// Set when `open_to_all_sellers`: a request without a known key is this seller's.
    anonymous: Option<Arc<Seller>>,
}

impl Sellers {
    /// No seller at all: every request is refused.
    pub fn empty() -> Sellers {
        Sellers {
            by_digest: HashMap::new(),
            sellers: Vec::new(),
            anonymous: None,
        }
    }

    /// The seller whose key a request's bearer token (`http_front::bearer_token`) is.
    ///
    /// # Errors
    /// [`KeyRefusal`] when there is no token or it names no seller (and the exchange is not
    /// open to all sellers).
    pub fn authenticate(&self, key: Option<&[u8]>) -> Result<&Arc<Seller>, KeyRefusal> {
        let found = key.and_then(|k| self.by_digest.get(&digest(k)));
        match (found, &self.anonymous) {
            (Some(&i), _) => self.sellers.get(i).ok_or(KeyRefusal::Unknown),
            (None, Some(anyone)) => Ok(anyone),
            (None, None) if key.is_none() => Err(KeyRefusal::Missing),
            (None, None) => Err(KeyRefusal::Unknown),
        }
    }

    /// Configured sellers, in file order (the anonymous one excluded).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Seller>> {
        self.sellers.iter()
    }

    /// The seller named `name`.
    pub fn named(&self, name: &str) -> Option<&Arc<Seller>> {
        self.sellers.iter().find(|s| s.name == name)
    }

    /// Builds the table, reading every key (blocking: at load time only). `dir` resolves
    /// relative key files; `fire_burl` is the default of `bill_on_win`.
    ///
    /// # Errors
    /// [`settings::Invalid`] naming the seller's key at fault.
    pub fn build(
        configs: &[SellerConfig],
        open_to_all: bool,
        fire_burl: bool,
        bidder_names: &HashSet<&str>,
        files: &KeySources<'_>,
    ) -> Result<Sellers, settings::Invalid> {
        if configs.is_empty() && !open_to_all {
            return Err(settings::Invalid::new(
                "sellers".to_owned(),
                "no [[sellers]] configured: add sellers with keys, or set open_to_all_sellers = true to serve anyone who can reach the port".to_owned(),
            ));
        }
        if configs.len() > MAX_SELLERS {
            return Err(settings::Invalid::new(
                "sellers".to_owned(),
                format!("at most {MAX_SELLERS} sellers"),
            ));
        }
        let mut by_digest = HashMap::new();
        let mut sellers = Vec::with_capacity(configs.len());
        let mut names = HashSet::new();
        for (i, c) in configs.iter().enumerate() {
            let key = |field: &str| format!("sellers[{i}].{field} ({:?})", c.name);
            if c.name.is_empty()
                || c.name.len() > 64
                || c.name == "-"
                || !c
                    .name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
            {
                return Err(settings::Invalid::new(
                    key("name"),
                    "must be 1-64 ASCII letters, digits, '-', '_' or '.'".to_owned(),
                ));
            }
            if !names.insert(c.name.as_str()) {
                return Err(settings::Invalid::new(
                    key("name"),
                    "duplicate seller name".to_owned(),
                ));
            }
            let keys = read_keys(c, files).map_err(|e| e.rekey(key))?;
            let example_key = keys
                .iter()
                .any(|k| k.starts_with(EXAMPLE_KEY_PREFIX.as_bytes()));
            for k in keys {
                if by_digest.insert(digest(&k), i).is_some() {
                    return Err(settings::Invalid::new(
                        key("key_file"),
                        "a key is also another seller's (or listed twice): each key names one seller".to_owned(),
                    ));
                }
            }
            if let Some(allowed) = &c.bidders
                && let Some(unknown) = allowed.iter().find(|b| !bidder_names.contains(b.as_str()))
            {
                return Err(settings::Invalid::new(
                    key("bidders"),
                    format!("no bidder is named {unknown:?}"),
                ));
            }
            let floor_permille = match c.floor_multiplier {
                None => 1000,
                Some(m) if (0.01..=100.0).contains(&m) => (m * 1000.0).round() as u32,
                Some(_) => {
                    return Err(settings::Invalid::new(
                        key("floor_multiplier"),
                        "must be 0.01..=100".to_owned(),
                    ));
                }
            };
            if c.max_tmax_ms.is_some_and(|t| t == 0 || t > 60_000) {
                return Err(settings::Invalid::new(
                    key("max_tmax_ms"),
                    "must be 1..=60000".to_owned(),
                ));
            }
            let bill_on_win = c.bill_on_win.unwrap_or(fire_burl);
            if bill_on_win && c.fires_notices {
                return Err(settings::Invalid::new(
                    key("bill_on_win"),
                    "the seller fires notices itself (fires_notices), so the exchange firing burl on win would bill twice".to_owned(),
                ));
            }
            sellers.push(Arc::new(Seller {
                name: c.name.clone(),
                bidders: c.bidders.as_ref().map(|b| b.iter().cloned().collect()),
                floor_permille,
                max_tmax_ms: c.max_tmax_ms,
                bill_on_win,
                fires_notices: c.fires_notices,
                example_key,
                validation: c.validation,
                gdpr_default: c.gdpr_default,
                trusted_rates: c.trusted_rates,
                trusted_debug: c.trusted_debug,
                requests: AtomicU64::new(0),
            }));
        }
        Ok(Sellers {
            by_digest,
            sellers,
            anonymous: open_to_all.then(|| Arc::new(Seller::anonymous(fire_burl))),
        })
    }

    /// The anonymous seller, when the exchange is open to all.
    pub fn anonymous(&self) -> Option<&Arc<Seller>> {
        self.anonymous.as_ref()
    }
}

fn digest(key: &[u8]) -> [u8; 32] {
    Sha256::digest(key).into()
}

/// Where keys are read from: relative key files are under `dir`; `env` reads a variable
/// (`std::env::var` in production, a table in tests).
pub struct KeySources<'a> {
    pub dir: Option<&'a Path>,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl std::fmt::Debug for KeySources<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySources")
            .field("dir", &self.dir)
            .finish()
    }
}

/// A seller's keys, from its file or its environment variable (exactly one of them).
fn read_keys(
    c: &SellerConfig,
    sources: &KeySources<'_>,
) -> Result<Vec<Vec<u8>>, settings::Invalid> {
    let path = c
        .key_file
        .as_ref()
        .map(|file| settings::relative_to(sources.dir, file));
    let owner = format!("seller {:?}", c.name);
    let (field, keys) =
        settings::read_key_source(&owner, path.as_deref(), c.key_env.as_deref(), sources.env)?
            .ok_or_else(|| {
                settings::Invalid::new("key_file", "give exactly one of key_file and key_env")
            })?;
    let keys: Vec<Vec<u8>> = keys.into_iter().map(String::into_bytes).collect();
    if keys.is_empty() {
        return Err(settings::Invalid::new(field, "holds no key".to_owned()));
    }
    if keys.len() > MAX_KEYS_PER_SELLER {
        return Err(settings::Invalid::new(
            field,
            format!("holds {} keys; at most {MAX_KEYS_PER_SELLER}", keys.len()),
        ));
    }
    for (n, k) in keys.iter().enumerate() {
        if !(MIN_KEY_CHARS..=MAX_KEY_CHARS).contains(&k.len())
            || !k.iter().all(u8::is_ascii_graphic)
        {
            return Err(settings::Invalid::new(
                field,
                format!(
                    "key {} must be {MIN_KEY_CHARS}..={MAX_KEY_CHARS} visible ASCII characters (the key itself is not shown)",
                    n + 1
                ),
            ));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_A: &str = "pub-a-0123456789abcdef";
    const KEY_A2: &str = "pub-a-rotated-fedcba9876543210";
    const KEY_B: &str = "pub-b-0123456789abcdef";

    fn seller(name: &str, env: &str) -> SellerConfig {
        SellerConfig {
            name: name.to_owned(),
            key_file: None,
            key_env: Some(env.to_owned()),
            bidders: None,
            floor_multiplier: None,
            max_tmax_ms: None,
            bill_on_win: None,
            fires_notices: false,
            validation: Validation::Repair,
            gdpr_default: None,
            trusted_rates: false,
            trusted_debug: false,
        }
    }

    /// Headers holding `Authorization: {value}`.
    fn header(value: &str) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        h.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        h
    }

    fn env(var: &str) -> Option<String> {
        (var == "GAVEL_SELLER_PUB_A").then(|| format!(" {KEY_A},{KEY_A2} "))
    }

    /// Builds the sellers of `configs`, their key files relative to `d`.
    fn build_in(
        d: &Path,
        configs: &[SellerConfig],
        open: bool,
    ) -> Result<Sellers, settings::Invalid> {
        let names: HashSet<&str> = ["dsp-a", "dsp-b"].into();
        let sources = KeySources {
            dir: Some(d),
            env: &env,
        };
        Sellers::build(configs, open, false, &names, &sources)
    }

    /// [`build_in`] an empty directory, removed afterwards.
    fn build(configs: &[SellerConfig], open: bool) -> Result<Sellers, settings::Invalid> {
        build_in(testkit::TempDir::new("sellers").path(), configs, open)
    }

    #[test]
    fn keys_from_a_file_name_their_seller_and_several_are_valid_at_once() {
        let dir = testkit::TempDir::new("sellers");
        let d = dir.path();
        std::fs::write(
            d.join("a.key"),
            format!("# pub-a, rotating\n{KEY_A}\n\n  {KEY_A2}  \n"),
        )
        .unwrap();
        std::fs::write(d.join("b.key"), KEY_B).unwrap();
        let mut a = seller("pub-a", "");
        (a.key_env, a.key_file) = (None, Some("a.key".into()));
        let mut b = seller("pub-b", "");
        (b.key_env, b.key_file) = (None, Some(d.join("b.key")));
        let s = build_in(d, &[a, b], false).unwrap();
        let who = |h: &str| {
            let headers = header(h);
            s.authenticate(http_front::bearer_token(&headers))
                .map(|s| s.name.clone())
        };
        assert_eq!(who(&format!("Bearer {KEY_A}")), Ok("pub-a".into()));
        assert_eq!(who(&format!("bearer   {KEY_A2} ")), Ok("pub-a".into()));
        assert_eq!(who(&format!("Bearer {KEY_B}")), Ok("pub-b".into()));
        assert_eq!(
            who("Bearer pub-a-0123456789abcdeX"),
            Err(KeyRefusal::Unknown)
        );
        assert_eq!(who(&format!("Basic {KEY_A}")), Err(KeyRefusal::Missing));
        assert_eq!(who("Bearer "), Err(KeyRefusal::Missing));
        assert_eq!(s.authenticate(None).map(|_| ()), Err(KeyRefusal::Missing));
    }

    #[test]
    fn keys_from_the_environment() {
        let s = build(&[seller("pub-a", "GAVEL_SELLER_PUB_A")], false).unwrap();
        for key in [KEY_A, KEY_A2] {
            let found = s.authenticate(Some(key.as_bytes()));
            assert_eq!(found.map(|s| s.name.as_str()), Ok("pub-a"));
        }
        let e = build(&[seller("pub-a", "GAVEL_UNSET")], false).unwrap_err();
        assert_eq!(e.key, "sellers[0].key_env (\"pub-a\")");
        assert!(e.problem.contains("GAVEL_UNSET"), "{e:?}");
    }

    #[test]
    fn no_sellers_needs_the_explicit_open_flag() {
        let e = build(&[], false).unwrap_err();
        assert_eq!(e.key, "sellers");
        let open = build(&[], true).unwrap();
        let anyone = open.authenticate(None).unwrap();
        assert_eq!(anyone.name, "-");
        assert!(anyone.allows("dsp-a"));
    }

    #[test]
    fn bad_seller_settings_are_named() {
        let dir = testkit::TempDir::new("sellers");
        let d = dir.path();
        std::fs::write(d.join("short.key"), "tooshort").unwrap();
        std::fs::write(d.join("empty.key"), "# nothing\n").unwrap();
        std::fs::write(d.join("dup.key"), format!("{KEY_A}\n")).unwrap();
        let with_file = |name: &str, file: &str| {
            let mut c = seller(name, "");
            (c.key_env, c.key_file) = (None, Some(file.into()));
            c
        };
        let cases: Vec<(Vec<SellerConfig>, &str)> = vec![
            (vec![with_file("a", "short.key")], "sellers[0].key_file"),
            (vec![with_file("a", "empty.key")], "sellers[0].key_file"),
            (vec![with_file("a", "missing.key")], "sellers[0].key_file"),
            (
                vec![with_file("a", "dup.key"), with_file("b", "dup.key")],
                "sellers[1].key_file",
            ),
            (
                vec![with_file("a", "dup.key"), with_file("a", "dup.key")],
                "sellers[1].name",
            ),
            (vec![with_file("a b", "dup.key")], "sellers[0].name"),
            (
                vec![SellerConfig {
                    bidders: Some(vec!["nobody".into()]),
                    ..with_file("a", "dup.key")
                }],
                "sellers[0].bidders",
            ),
            (
                vec![SellerConfig {
                    floor_multiplier: Some(0.0),
                    ..with_file("a", "dup.key")
                }],
                "sellers[0].floor_multiplier",
            ),
            (
                vec![SellerConfig {
                    max_tmax_ms: Some(0),
                    ..with_file("a", "dup.key")
                }],
                "sellers[0].max_tmax_ms",
            ),
            (
                vec![SellerConfig {
                    bill_on_win: Some(true),
                    fires_notices: true,
                    ..with_file("a", "dup.key")
                }],
                "sellers[0].bill_on_win",
            ),
            (
                vec![SellerConfig {
                    key_env: Some("X".into()),
                    ..with_file("a", "dup.key")
                }],
                "sellers[0].key_file",
            ),
        ];
        for (configs, key) in cases {
            let e = build_in(d, &configs, false).unwrap_err();
            assert!(e.key.starts_with(key), "{key}: got {e:?}");
            assert!(!e.problem.contains(KEY_A), "a key is never shown: {e:?}");
        }
    }

    #[test]
    fn floors_scale_by_the_multiplier_in_integer_micros() {
        let mut s = Seller::anonymous(false);
        let p = openrtb::Price::from_micros;
        assert_eq!(s.floor(p(1_234_567)), p(1_234_567));
        s.floor_permille = 1_100;
        assert_eq!(s.floor(p(1_000_000)), p(1_100_000));
        assert_eq!(s.floor(p(5)), p(6), "5.5 micros rounds half up");
        s.floor_permille = 100_000;
        assert_eq!(s.floor(p(i64::MAX)), p(i64::MAX), "saturates, no overflow");
    }

    #[test]
    fn allowed_bidders_are_by_name() {
        let mut s = Seller::anonymous(false);
        s.bidders = Some(["dsp-a".to_owned()].into());
        assert!(s.allows("dsp-a"));
        assert!(!s.allows("dsp-b"));
    }
}
