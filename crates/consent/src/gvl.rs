//! The Global Vendor List, in its v3 JSON format (`gvlSpecificationVersion` 3, TCF 2.2 on):
//! each vendor's declared legal basis per purpose, which `basis` reads with a TC string.
//!
//! Read: `vendorListVersion`, `tcfPolicyVersion`, `lastUpdated`, and per vendor `id`,
//! `purposes`, `legIntPurposes`, `flexiblePurposes`, `specialPurposes`, `features`,
//! `specialFeatures`, `deletedDate`; every other key is skipped. Refused, naming the key: a
//! list over [`MAX_GVL_BYTES`]; a format other than 3; a version outside what a TC string can
//! carry (12 bits; policy 6 bits); a vendor key that is not an id 1..=65535 or differs from its
//! `id`, or appears twice; purposes outside 1..=[`MAX_PURPOSE_ID`] (TCF 2.2 has 11), special
//! features outside 1..=[`MAX_SPECIAL_FEATURE_ID`]; a purpose declared both as consent and as
//! legitimate interest; a flexible purpose declared as neither (the spec's constraints). A list
//! naming a purpose or special feature newer than this code is refused rather than half
//! understood: the caller keeps its last good list.
//!
//! A deleted vendor stays in the list, marked (`Vendor::is_deleted`): ids are never reused.

mod raw;
mod vendor;

#[cfg(test)]
mod tests;

pub use vendor::{IdSet, Vendor};

use raw::{RawIds, RawList, RawVendor};

/// Largest list read. IAB's list is about 1 MB (some 900 vendors); eight times that leaves room
/// for its growth while bounding what a bad file can cost.
pub const MAX_GVL_BYTES: usize = 8 * 1024 * 1024;
/// Highest purpose id: TCF 2.2 defines purposes 1 to 11.
pub const MAX_PURPOSE_ID: u8 = 11;
/// Highest special feature id: 1 (precise geolocation) and 2 (active device scanning).
pub const MAX_SPECIAL_FEATURE_ID: u8 = 2;
/// Special purposes and features have no legal-basis rule here; ids up to 64 are kept.
const MAX_OTHER_ID: u8 = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GvlError {
    #[error("vendor list of {len} bytes is over the {max}-byte limit")]
    TooLarge { len: usize, max: usize },
    #[error("vendor list is not the GVL's JSON: {0}")]
    Json(String),
    #[error("vendor list: {path}: {problem}")]
    Invalid { path: String, problem: String },
}

impl GvlError {
    /// A short fixed name of the kind of refusal, for a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            GvlError::TooLarge { .. } => "too_large",
            GvlError::Json(_) => "json",
            GvlError::Invalid { .. } => "invalid",
        }
    }
}

fn invalid(path: impl Into<String>, problem: impl Into<String>) -> GvlError {
    GvlError::Invalid {
        path: path.into(),
        problem: problem.into(),
    }
}

/// A checked vendor list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorList {
    version: u16,
    policy_version: u8,
    last_updated: String,
    /// Sorted by id, ids unique.
    vendors: Vec<Vendor>,
}

impl VendorList {
    pub fn from_json(bytes: &[u8]) -> Result<VendorList, GvlError> {
        if bytes.len() > MAX_GVL_BYTES {
            return Err(GvlError::TooLarge {
                len: bytes.len(),
                max: MAX_GVL_BYTES,
            });
        }
        let raw: RawList =
            serde_json::from_slice(bytes).map_err(|e| GvlError::Json(e.to_string()))?;
        if raw.gvl_specification_version != 3 {
            return Err(invalid(
                "gvlSpecificationVersion",
                format!("{}; only format 3 is read", raw.gvl_specification_version),
            ));
        }
        let version = u16::try_from(raw.vendor_list_version)
            .ok()
            .filter(|v| (1..=4095).contains(v))
            .ok_or_else(|| {
                let v = raw.vendor_list_version;
                invalid(
                    "vendorListVersion",
                    format!("{v} is not 1..=4095 (12 bits in a TC string)"),
                )
            })?;
        let policy_version = u8::try_from(raw.tcf_policy_version)
            .ok()
            .filter(|v| *v <= 63)
            .ok_or_else(|| {
                let v = raw.tcf_policy_version;
                invalid(
                    "tcfPolicyVersion",
                    format!("{v} is not 0..=63 (6 bits in a TC string)"),
                )
            })?;
        let mut vendors = raw
            .vendors
            .0
            .into_iter()
            .map(|(key, vendor)| checked_vendor(&key, vendor))
            .collect::<Result<Vec<_>, _>>()?;
        vendors.sort_unstable_by_key(|v| v.id);
        if let Some(pair) = vendors
            .windows(2)
            .find(|w| w.first().map(|v| v.id) == w.get(1).map(|v| v.id))
        {
            let id = pair.first().map_or(0, |v| v.id);
            return Err(invalid(format!("vendors[\"{id}\"]"), "appears twice"));
        }
        Ok(VendorList {
            version,
            policy_version,
            last_updated: raw.last_updated,
            vendors,
        })
    }

    /// The vendor of this id, deleted ones included.
    pub fn vendor(&self, id: u16) -> Option<&Vendor> {
        self.vendors
            .binary_search_by_key(&id, |v| v.id)
            .ok()
            .and_then(|i| self.vendors.get(i))
    }

    /// `vendorListVersion`: a TC string names the version its CMP used.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// `tcfPolicyVersion`: 4 is TCF 2.2, 5 is TCF 2.3.
    pub fn policy_version(&self) -> u8 {
        self.policy_version
    }

    pub fn last_updated(&self) -> &str {
        &self.last_updated
    }

    /// Every vendor, by ascending id.
    pub fn vendors(&self) -> impl Iterator<Item = &Vendor> + '_ {
        self.vendors.iter()
    }

    pub fn len(&self) -> usize {
        self.vendors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vendors.is_empty()
    }
}

/// One `vendors` entry: its key is its id, and its declarations keep the spec's constraints.
fn checked_vendor(key: &str, raw: RawVendor) -> Result<Vendor, GvlError> {
    let path = format!("vendors[\"{key}\"]");
    let id = key
        .parse::<u16>()
        .ok()
        .filter(|&id| id >= 1)
        .ok_or_else(|| invalid(&path, "the key is not a vendor id 1..=65535"))?;
    if raw.id != u64::from(id) {
        return Err(invalid(
            &path,
            format!("id {} differs from its key", raw.id),
        ));
    }
    let ids = |name: &str, ids: RawIds, max: u8| -> Result<IdSet, GvlError> {
        let set = IdSet::from_bits(ids.bits);
        let bad = ids
            .outside
            .or(set.max().filter(|&m| m > max).map(u64::from));
        match bad {
            Some(id) => Err(invalid(
                format!("{path}.{name}"),
                format!("{id} is not 1..={max}"),
            )),
            None => Ok(set),
        }
    };
    let purposes = ids("purposes", raw.purposes, MAX_PURPOSE_ID)?;
    let leg_int_purposes = ids("legIntPurposes", raw.leg_int_purposes, MAX_PURPOSE_ID)?;
    let flexible_purposes = ids("flexiblePurposes", raw.flexible_purposes, MAX_PURPOSE_ID)?;
    let both = IdSet::from_bits(purposes.bits() & leg_int_purposes.bits());
    if let Some(p) = both.ids().next() {
        return Err(invalid(
            format!("{path}.legIntPurposes"),
            format!("purpose {p} is also in purposes (one legal basis each)"),
        ));
    }
    let undeclared =
        IdSet::from_bits(flexible_purposes.bits() & !(purposes.bits() | leg_int_purposes.bits()));
    if let Some(p) = undeclared.ids().next() {
        return Err(invalid(
            format!("{path}.flexiblePurposes"),
            format!("purpose {p} is in neither purposes nor legIntPurposes"),
        ));
    }
    Ok(Vendor {
        id,
        purposes,
        leg_int_purposes,
        flexible_purposes,
        special_purposes: ids("specialPurposes", raw.special_purposes, MAX_OTHER_ID)?,
        features: ids("features", raw.features, MAX_OTHER_ID)?,
        special_features: ids(
            "specialFeatures",
            raw.special_features,
            MAX_SPECIAL_FEATURE_ID,
        )?,
        deleted_date: raw.deleted_date,
    })
}
