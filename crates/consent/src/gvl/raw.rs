//! The GVL's JSON as read, before its shape is checked: only the keys the legal-basis rules
//! need (serde skips the rest: names, URLs, retention, stacks, translations). Id lists are read
//! into a 64-bit set as they stream by, and the vendors object into a list of at most 65,535
//! entries, so a hostile list cannot make the parser allocate much beyond the vendors it names.

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawList {
    pub gvl_specification_version: u64,
    pub vendor_list_version: u64,
    pub tcf_policy_version: u64,
    pub last_updated: String,
    pub vendors: RawVendors,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawVendor {
    pub id: u64,
    #[serde(default)]
    pub purposes: RawIds,
    #[serde(default)]
    pub leg_int_purposes: RawIds,
    #[serde(default)]
    pub flexible_purposes: RawIds,
    #[serde(default)]
    pub special_purposes: RawIds,
    #[serde(default)]
    pub features: RawIds,
    #[serde(default)]
    pub special_features: RawIds,
    #[serde(default)]
    pub deleted_date: Option<String>,
}

/// A list of ids: those in 1..=64 as bits (bit `id - 1`), and the first one outside, if any.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct RawIds {
    pub bits: u64,
    pub outside: Option<u64>,
}

impl<'de> Deserialize<'de> for RawIds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Ids;
        impl<'de> Visitor<'de> for Ids {
            type Value = RawIds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of ids")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawIds, A::Error> {
                let mut ids = RawIds::default();
                while let Some(id) = seq.next_element::<u64>()? {
                    match id.checked_sub(1) {
                        Some(bit) if bit < 64 => ids.bits |= 1 << bit,
                        _ => {
                            ids.outside.get_or_insert(id);
                        }
                    }
                }
                Ok(ids)
            }
        }
        d.deserialize_seq(Ids)
    }
}

/// The `vendors` object's entries in document order, keys as written (duplicates kept, for the
/// shape check to refuse).
#[derive(Debug, Default)]
pub(super) struct RawVendors(pub Vec<(String, RawVendor)>);

/// More entries than there are vendor ids means a key is repeated or not an id.
const MAX_ENTRIES: usize = u16::MAX as usize;

impl<'de> Deserialize<'de> for RawVendors {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = RawVendors;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of vendors keyed by id")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawVendors, A::Error> {
                let mut entries = Vec::new();
                while let Some((key, vendor)) = map.next_entry::<String, RawVendor>()? {
                    if entries.len() == MAX_ENTRIES {
                        return Err(de::Error::custom("more than 65535 vendors"));
                    }
                    entries.push((key, vendor));
                }
                Ok(RawVendors(entries))
            }
        }
        d.deserialize_map(Entries)
    }
}
