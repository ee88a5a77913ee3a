//! GPP strings (IAB Global Privacy Platform): a header, then one section per id the header
//! lists, separated by `~`; a section may hold sub-sections separated by `.`.
//!
//! [`GppString::decode`] checks the header and splits the sections, no more: each section's
//! text is kept as sent and decoded on request. TCF EU v2 (id 2) is handed out raw for
//! `consent::tcf`; US Privacy (id 6) is parsed by [`UsPrivacy`]; the US national and state
//! sections (ids 7 to 27, every one `@iabgpp/cmpapi` 3.2.0 defines) decode to [`UsSection`];
//! any other id is kept raw, not refused.
//!
//! Rules: at most [`MAX_GPP_LEN`] bytes and [`MAX_SECTIONS`] sections; the header is type 3,
//! version 1, and lists exactly as many ids as there are sections, in increasing order (the
//! range coding cannot say otherwise); every section is non-empty base64url text (with `.`
//! between sub-sections); every bit read is bounds-checked. A legacy TCF string on its own
//! (`C...`) is not a GPP string and is refused. Pure: no I/O, no panic on any input.

mod bits;
mod error;
mod header;
mod us;
mod us_layouts;
mod usp;

pub use error::GppError;
pub use us::{ChildConsent, Consent, Notice, OptOut, UsSection, YesNo};
pub use usp::{UsPrivacy, UspSignal};

/// Longest GPP string accepted, in bytes. A TCF section naming every vendor of today's list
/// by bit field is about 1.5 KB; 32 KiB leaves room for long publisher-restriction lists and
/// stays small to scan.
pub const MAX_GPP_LEN: usize = 32 * 1024;
/// Most sections a string may list. The registry holds 27 ids today.
pub const MAX_SECTIONS: usize = 64;

/// Section id of TCF EU v2.
pub const TCF_EU_V2: u16 = 2;
/// Section id of US Privacy (`uspv1`).
pub const USP_V1: u16 = 6;
/// Section id of the US national section (`usnat`).
pub const US_NAT: u16 = 7;

/// A GPP string whose header is valid and whose sections are split out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GppString {
    text: String,
    ids: Vec<u16>,
    /// Byte range of each section in `text`, in the order of `ids`.
    spans: Vec<(usize, usize)>,
}

impl GppString {
    /// Checks the header and splits the sections (see the module's rules); decodes no section.
    pub fn decode(s: &str) -> Result<GppString, GppError> {
        if s.is_empty() {
            return Err(GppError::Empty);
        }
        if s.len() > MAX_GPP_LEN {
            return Err(GppError::TooLong {
                len: s.len(),
                max: MAX_GPP_LEN,
            });
        }
        let mut parts = s.split('~');
        let header_text = parts.next().unwrap_or_default();
        let ids = header::section_ids(header_text, MAX_SECTIONS)?;
        let mut spans = Vec::with_capacity(ids.len());
        // Each section starts after the previous part and its '~'.
        let mut start = header_text.len() + 1;
        for part in parts {
            let Some(&id) = ids.get(spans.len()) else {
                return Err(GppError::SectionCountMismatch {
                    listed: ids.len(),
                    found: s.split('~').count().saturating_sub(1),
                });
            };
            if part.is_empty() {
                return Err(GppError::EmptySection { id });
            }
            if !part.bytes().all(|c| c == b'.' || bits::sextet(c).is_some()) {
                return Err(GppError::SectionNotBase64Url { id });
            }
            spans.push((start, start + part.len()));
            start += part.len() + 1;
        }
        if spans.len() != ids.len() {
            return Err(GppError::SectionCountMismatch {
                listed: ids.len(),
                found: spans.len(),
            });
        }
        Ok(GppString {
            text: s.to_owned(),
            ids,
            spans,
        })
    }

    /// The string as it was decoded.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The section ids the header lists, in increasing order.
    pub fn section_ids(&self) -> &[u16] {
        &self.ids
    }

    /// The raw text of section `id` (sub-sections and their `.` included), if present.
    pub fn section(&self, id: u16) -> Option<&str> {
        let index = self.ids.iter().position(|&i| i == id)?;
        let &(start, end) = self.spans.get(index)?;
        self.text.get(start..end)
    }

    /// The raw TCF EU v2 section (id 2), for `consent::tcf`.
    pub fn tcf_eu_v2(&self) -> Option<&str> {
        self.section(TCF_EU_V2)
    }

    /// The US Privacy section (id 6), parsed.
    pub fn us_privacy(&self) -> Option<Result<UsPrivacy, GppError>> {
        self.section(USP_V1).map(UsPrivacy::parse)
    }

    /// Every US national and state section present (ids 7 to 27), decoded, in header order.
    /// A section that fails to decode is reported beside the others, which still decode.
    pub fn us_sections(&self) -> Vec<(u16, Result<UsSection, GppError>)> {
        self.ids
            .iter()
            .zip(&self.spans)
            .filter(|(id, _)| us_layouts::is_us_section(**id))
            .map(|(&id, &(start, end))| {
                let text = self.text.get(start..end).unwrap_or_default();
                (id, UsSection::decode(id, text))
            })
            .collect()
    }
}

/// The name GPP's client API gives section `id` (`tcfeuv2`, `uspv1`, `usnat`, `usca`, ...),
/// for logs and metric labels; `None` for an id this crate does not know.
pub fn section_name(id: u16) -> Option<&'static str> {
    match id {
        TCF_EU_V2 => Some("tcfeuv2"),
        5 => Some("tcfcav1"),
        USP_V1 => Some("uspv1"),
        _ => us::us_section_name(id),
    }
}

#[cfg(test)]
mod tests;
