//! [`Keys`]: every key name the ledger uses, built in one place so that the scripts never
//! second-guess them (see the key layout table in [`crate::redis`]). Pure: names and hash slots,
//! no I/O.
//!
//! Redis Cluster runs a script on the node of its keys' slot, and every key a script touches
//! must be in that slot. So each campaign's keys share a **hash tag** (the part of a key
//! between the first `{` and the next `}`, which alone decides the slot): the campaign's name
//! when it is not empty and has no brace, else `#` and the name's bytes in hex (braces would end
//! the tag early; the hex form holds no brace and is unique per name). Two campaigns whose tags
//! are equal (a plain name that reads like another's hex form) only share a slot: their keys
//! still differ, since the name follows the tag.
//!
//! What is per hash slot rather than per campaign (the ledger marker, the list of campaigns) is
//! tagged with [`slot_tag`]: a short string whose slot is that slot, precomputed for all 16,384.

use std::borrow::Cow;
use std::sync::LazyLock;

/// Hash slots of Redis Cluster.
pub const SLOTS: u16 = 16_384;

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster takes of a key's hash tag.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot Redis Cluster puts `key` in: the CRC16 of its hash tag (or of the whole key
/// without one), modulo 16,384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = key.get(open + 1..)?;
        let close = rest.iter().position(|&b| b == b'}')?;
        // `{}` is no tag: the whole key is hashed.
        (close > 0).then(|| rest.get(..close)).flatten()
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// For each slot, the first decimal number (as text) whose CRC16 lands in it: found by
/// counting up, about 170,000 checksums once per process (a few milliseconds).
static SLOT_TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut tags: Vec<Option<String>> = vec![None; usize::from(SLOTS)];
    let mut missing = usize::from(SLOTS);
    let mut n: u64 = 0;
    while missing > 0 {
        let text = n.to_string();
        if let Some(slot @ None) = tags.get_mut(usize::from(crc16(text.as_bytes()) % SLOTS)) {
            *slot = Some(text);
            missing -= 1;
        }
        n += 1;
    }
    tags.into_iter().map(Option::unwrap_or_default).collect()
});

/// A hash tag whose slot is `slot` (taken modulo 16,384).
pub fn slot_tag(slot: u16) -> &'static str {
    SLOT_TAGS
        .get(usize::from(slot % SLOTS))
        .map_or("", String::as_str)
}

/// The hash tag of `campaign`'s keys (see the module docs).
pub fn campaign_tag(campaign: &str) -> Cow<'_, str> {
    if !campaign.is_empty() && !campaign.contains(['{', '}']) {
        return Cow::Borrowed(campaign);
    }
    let mut hex = String::with_capacity(1 + 2 * campaign.len());
    hex.push('#');
    for b in campaign.bytes() {
        hex.push_str(&format!("{b:02x}"));
    }
    Cow::Owned(hex)
}

/// The keys of one script call: `base` is what the script prepends to the keys it finds inside
/// (reservation and lease ids read from an index), `keys` what it declares in `KEYS`. All are
/// in one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Routed {
    pub(crate) base: String,
    pub(crate) keys: Vec<String>,
}

/// The key names under one prefix. The prefix must hold no brace (the settings refuse one):
/// a hash tag in it would put every key in one slot.
#[derive(Clone, Debug)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    pub fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_owned(),
        }
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `P{tag}`: what every key of `campaign` starts with.
    pub fn campaign_base(&self, campaign: &str) -> String {
        format!("{}{{{}}}", self.prefix, campaign_tag(campaign))
    }

    /// `P{slot tag}`: what the per-slot keys of `slot` start with.
    pub fn slot_base(&self, slot: u16) -> String {
        format!("{}{{{}}}", self.prefix, slot_tag(slot))
    }

    /// The hash slot of `campaign`'s keys.
    pub fn campaign_slot(campaign: &str) -> u16 {
        crc16(campaign_tag(campaign).as_bytes()) % SLOTS
    }

    /// `P{tag}c:<campaign>`: the campaign's hash (limits and counters).
    pub fn campaign(&self, campaign: &str) -> String {
        format!("{}c:{campaign}", self.campaign_base(campaign))
    }

    /// `P{tag}r:<id>`: a reservation of `campaign`.
    pub fn reservation(&self, campaign: &str, id: &str) -> String {
        format!("{}r:{id}", self.campaign_base(campaign))
    }

    /// `P{tag}l:<id>`: a lease of `campaign`.
    pub fn lease(&self, campaign: &str, id: &str) -> String {
        format!("{}l:{id}", self.campaign_base(campaign))
    }

    /// `P{tag}own:<node>:<campaign>`: the id of the lease `node` holds for `campaign`.
    pub fn owner(&self, campaign: &str, node: &str) -> String {
        format!("{}own:{node}:{campaign}", self.campaign_base(campaign))
    }

    /// `P{tag}exp`: the sweep index of the campaign's open reservations and leases.
    pub fn expiries(&self, campaign: &str) -> String {
        format!("{}exp", self.campaign_base(campaign))
    }

    /// `P{slot tag}ledger`: the ledger marker of `slot`.
    pub fn marker(&self, slot: u16) -> String {
        format!("{}ledger", self.slot_base(slot))
    }

    /// `P{slot tag}campaigns`: the campaigns of `slot` (a hash: name to key base).
    pub fn campaigns(&self, slot: u16) -> String {
        format!("{}campaigns", self.slot_base(slot))
    }

    /// The keys a script about `campaign` declares: the marker and the campaign list of its
    /// slot, its sweep index, its hash, then `extra` (suffixes after the campaign's base, such
    /// as `r:<id>`), in that order (`lua/common.lua` reads the first four by position).
    pub(crate) fn for_campaign(&self, campaign: &str, extra: &[String]) -> Routed {
        let slot = Keys::campaign_slot(campaign);
        let base = self.campaign_base(campaign);
        let mut keys = Vec::with_capacity(4 + extra.len());
        keys.push(self.marker(slot));
        keys.push(self.campaigns(slot));
        keys.push(format!("{base}exp"));
        keys.push(format!("{base}c:{campaign}"));
        keys.extend(extra.iter().map(|suffix| format!("{base}{suffix}")));
        Routed { base, keys }
    }

    /// The keys a script about a whole slot declares: its marker and its campaign list.
    pub(crate) fn for_slot(&self, slot: u16) -> Routed {
        Routed {
            base: self.slot_base(slot),
            keys: vec![self.marker(slot), self.campaigns(slot)],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // The examples of the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % SLOTS);
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
    }

    #[test]
    fn every_slot_has_a_tag_that_lands_in_it() {
        for slot in 0..SLOTS {
            let tag = slot_tag(slot);
            assert!(!tag.is_empty() && !tag.contains(['{', '}']));
            assert_eq!(key_slot(format!("x{{{tag}}}ledger").as_bytes()), slot);
        }
    }

    #[test]
    fn a_campaigns_keys_and_its_slots_keys_share_one_slot() {
        let keys = Keys::new("gavel:");
        for name in ["summer", "", "{", "a}b{c", "winter {sale}", "ünï"] {
            let slot = Keys::campaign_slot(name);
            let routed = keys.for_campaign(name, &["r:x{y}".to_owned(), "l:1".to_owned()]);
            assert_eq!(routed.keys.len(), 6);
            for key in &routed.keys {
                assert_eq!(key_slot(key.as_bytes()), slot, "{key}");
            }
            for key in keys.for_slot(slot).keys {
                assert_eq!(key_slot(key.as_bytes()), slot, "{key}");
            }
            assert!(routed.keys.contains(&keys.campaign(name)));
        }
        assert_eq!(keys.campaign("summer"), "gavel:{summer}c:summer");
        assert_eq!(campaign_tag("a}b"), "#617d62");
        assert_eq!(campaign_tag(""), "#");
    }
}
