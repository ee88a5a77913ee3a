//! Tests only: a plain TC string encoder, field by field from the spec, to build the strings the
//! decoder's own tests and the legal-basis table need (any bit pattern, broken ones included).
//! Correctness against IAB is not this file's job: `iab_cases.rs` checks the decoder against
//! strings IAB's encoder wrote.

/// Bits, most significant first, written as base64url.
#[derive(Debug, Default)]
pub(crate) struct BitWriter {
    bits: Vec<bool>,
}

impl BitWriter {
    pub(crate) fn push(&mut self, value: u64, n: usize) {
        for i in (0..n).rev() {
            self.bits.push(i < 64 && (value >> i) & 1 == 1);
        }
    }

    pub(crate) fn push_bool(&mut self, value: bool) {
        self.bits.push(value);
    }

    /// Base64url of the bits, zero-padded to whole characters.
    pub(crate) fn finish(&self) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        self.bits
            .chunks(6)
            .map(|chunk| {
                let mut v = 0usize;
                for i in 0..6 {
                    v = (v << 1) | usize::from(chunk.get(i).copied().unwrap_or(false));
                }
                char::from(ALPHABET[v])
            })
            .collect()
    }
}

/// A vendor section as written: `max` is MaxVendorId as encoded (not checked against `ids`);
/// `ranges`, when given, are written as they are (broken ones too) instead of `ids`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Section {
    pub max: u16,
    pub ids: Vec<u16>,
    pub range: bool,
    pub ranges: Option<Vec<(u16, u16)>>,
}

impl Section {
    /// `ids` under MaxVendorId = the highest of them, in the encoding asked.
    pub(crate) fn of(ids: &[u16], range: bool) -> Section {
        Section {
            max: ids.iter().copied().max().unwrap_or(0),
            ids: ids.to_vec(),
            range,
            ranges: None,
        }
    }

    fn write(&self, w: &mut BitWriter) {
        w.push(u64::from(self.max), 16);
        w.push_bool(self.range);
        if self.range {
            let ranges = self.ranges.clone().unwrap_or_else(|| runs(&self.ids));
            write_ranges(w, &ranges);
        } else {
            for id in 1..=self.max {
                w.push_bool(self.ids.contains(&id));
            }
        }
    }
}

/// Consecutive runs of the sorted, deduplicated ids.
fn runs(ids: &[u16]) -> Vec<(u16, u16)> {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<(u16, u16)> = Vec::new();
    for id in sorted {
        match out.last_mut() {
            Some((_, end)) if u32::from(*end) + 1 == u32::from(id) => *end = id,
            _ => out.push((id, id)),
        }
    }
    out
}

fn write_ranges(w: &mut BitWriter, ranges: &[(u16, u16)]) {
    w.push(ranges.len() as u64, 12);
    for &(start, end) in ranges {
        w.push_bool(start != end);
        w.push(u64::from(start), 16);
        if start != end {
            w.push(u64::from(end), 16);
        }
    }
}

fn ids_field(w: &mut BitWriter, ids: &[u8], width: usize) {
    for id in 1..=width {
        w.push_bool(ids.iter().any(|&i| usize::from(i) == id));
    }
}

/// One publisher restriction entry as written: purpose, type (0-3), vendor ranges.
#[derive(Debug, Clone)]
pub(crate) struct RestrictionEntry {
    pub purpose: u8,
    pub kind: u8,
    pub ranges: Vec<(u16, u16)>,
}

#[derive(Debug, Clone)]
pub(crate) struct PublisherTcModel {
    pub consents: Vec<u8>,
    pub lis: Vec<u8>,
    pub num_custom: u8,
    pub custom_consents: Vec<u8>,
    pub custom_lis: Vec<u8>,
}

/// Every field of a TC string, to be written as is.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub version: u8,
    pub created: u64,
    pub last_updated: u64,
    pub cmp_id: u16,
    pub cmp_version: u16,
    pub consent_screen: u8,
    pub consent_language: [u8; 2],
    pub vendor_list_version: u16,
    pub policy_version: u8,
    pub is_service_specific: bool,
    pub use_non_standard_texts: bool,
    pub special_features: Vec<u8>,
    pub purpose_consents: Vec<u8>,
    pub purpose_lis: Vec<u8>,
    pub purpose_one_treatment: bool,
    pub publisher_cc: [u8; 2],
    pub vendor_consents: Section,
    pub vendor_lis: Section,
    pub restrictions: Vec<RestrictionEntry>,
    pub disclosed: Option<Section>,
    pub publisher_tc: Option<PublisherTcModel>,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            version: 2,
            created: 17_000_000_000,
            last_updated: 17_000_000_000,
            cmp_id: 7,
            cmp_version: 3,
            consent_screen: 1,
            consent_language: *b"EN",
            vendor_list_version: 150,
            policy_version: 4,
            is_service_specific: true,
            use_non_standard_texts: false,
            special_features: Vec::new(),
            purpose_consents: Vec::new(),
            purpose_lis: Vec::new(),
            purpose_one_treatment: false,
            publisher_cc: *b"DE",
            vendor_consents: Section::default(),
            vendor_lis: Section::default(),
            restrictions: Vec::new(),
            disclosed: None,
            publisher_tc: None,
        }
    }
}

impl Model {
    pub(crate) fn core_bits(&self) -> BitWriter {
        let mut w = BitWriter::default();
        w.push(u64::from(self.version), 6);
        w.push(self.created, 36);
        w.push(self.last_updated, 36);
        w.push(u64::from(self.cmp_id), 12);
        w.push(u64::from(self.cmp_version), 12);
        w.push(u64::from(self.consent_screen), 6);
        for letter in self.consent_language {
            w.push(u64::from(letter.wrapping_sub(b'A')), 6);
        }
        w.push(u64::from(self.vendor_list_version), 12);
        w.push(u64::from(self.policy_version), 6);
        w.push_bool(self.is_service_specific);
        w.push_bool(self.use_non_standard_texts);
        ids_field(&mut w, &self.special_features, 12);
        ids_field(&mut w, &self.purpose_consents, 24);
        ids_field(&mut w, &self.purpose_lis, 24);
        w.push_bool(self.purpose_one_treatment);
        for letter in self.publisher_cc {
            w.push(u64::from(letter.wrapping_sub(b'A')), 6);
        }
        self.vendor_consents.write(&mut w);
        self.vendor_lis.write(&mut w);
        w.push(self.restrictions.len() as u64, 12);
        for r in &self.restrictions {
            w.push(u64::from(r.purpose), 6);
            w.push(u64::from(r.kind), 2);
            write_ranges(&mut w, &r.ranges);
        }
        w
    }

    pub(crate) fn encode(&self) -> String {
        let mut out = self.core_bits().finish();
        if let Some(disclosed) = &self.disclosed {
            let mut w = BitWriter::default();
            w.push(1, 3);
            disclosed.write(&mut w);
            out.push('.');
            out.push_str(&w.finish());
        }
        if let Some(p) = &self.publisher_tc {
            let mut w = BitWriter::default();
            w.push(3, 3);
            ids_field(&mut w, &p.consents, 24);
            ids_field(&mut w, &p.lis, 24);
            w.push(u64::from(p.num_custom), 6);
            ids_field(&mut w, &p.custom_consents, usize::from(p.num_custom));
            ids_field(&mut w, &p.custom_lis, usize::from(p.num_custom));
            out.push('.');
            out.push_str(&w.finish());
        }
        out
    }
}
