//! Why a GPP string, one of its sections, or a US Privacy string was refused. Each variant
//! names the problem in its message (safe to show a caller: it quotes no input beyond numbers)
//! and has a bounded label for metrics.

use super::bits::BitsError;

/// A refusal from [`GppString::decode`](super::GppString::decode), a US section's decoder or
/// [`UsPrivacy::parse`](super::UsPrivacy::parse).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GppError {
    #[error("GPP string is empty")]
    Empty,
    #[error("GPP string is {len} bytes, over the {max}-byte limit")]
    TooLong { len: usize, max: usize },
    #[error("GPP header is not base64url text")]
    HeaderNotBase64Url,
    #[error("GPP header ends before its {field}")]
    HeaderTruncated { field: &'static str },
    #[error("GPP header type is {0}, not 3")]
    NotGppHeader(u32),
    #[error("GPP header version {0} is not supported (only 1)")]
    UnsupportedHeaderVersion(u32),
    #[error("GPP header lists a section id over {max}")]
    SectionIdTooLarge { max: u32 },
    #[error("GPP header lists more than {max} sections")]
    TooManySections { max: usize },
    #[error("GPP header lists {listed} sections but the string has {found}")]
    SectionCountMismatch { listed: usize, found: usize },
    #[error("GPP section {id} is empty")]
    EmptySection { id: u16 },
    #[error("GPP section {id} has a character other than base64url and '.'")]
    SectionNotBase64Url { id: u16 },
    #[error("GPP section {id} is not a US section this decoder knows")]
    NotUsSection { id: u16 },
    #[error("GPP section {id} has an empty sub-section")]
    EmptySubsection { id: u16 },
    #[error("GPP section {id} ends before its {field}")]
    SectionTruncated { id: u16, field: &'static str },
    #[error("GPP section {id} is version {version}, which this decoder does not know")]
    UnsupportedSectionVersion { id: u16, version: u32 },
    #[error("GPP section {id} has {field} = {value}, outside the values the field allows")]
    InvalidValue {
        id: u16,
        field: &'static str,
        value: u32,
    },
    #[error("US Privacy string is {len} bytes, not 4")]
    UspLength { len: usize },
    #[error("US Privacy string is not version 1")]
    UspVersion,
    #[error("US Privacy string character {position} is not Y, N or -")]
    UspSignal { position: usize },
}

impl GppError {
    /// A short fixed name for the kind of refusal, for a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Empty => "empty",
            Self::TooLong { .. } => "too_long",
            Self::HeaderNotBase64Url => "header_not_base64url",
            Self::HeaderTruncated { .. } => "header_truncated",
            Self::NotGppHeader(_) => "not_gpp_header",
            Self::UnsupportedHeaderVersion(_) => "header_version",
            Self::SectionIdTooLarge { .. } => "section_id_too_large",
            Self::TooManySections { .. } => "too_many_sections",
            Self::SectionCountMismatch { .. } => "section_count_mismatch",
            Self::EmptySection { .. } => "empty_section",
            Self::SectionNotBase64Url { .. } => "section_not_base64url",
            Self::NotUsSection { .. } => "not_us_section",
            Self::EmptySubsection { .. } => "empty_subsection",
            Self::SectionTruncated { .. } => "section_truncated",
            Self::UnsupportedSectionVersion { .. } => "section_version",
            Self::InvalidValue { .. } => "invalid_value",
            Self::UspLength { .. } => "usp_length",
            Self::UspVersion => "usp_version",
            Self::UspSignal { .. } => "usp_signal",
        }
    }

    /// A bit reader's failure inside section `id`, reading `field`.
    pub(crate) fn in_section(id: u16, field: &'static str) -> impl Fn(BitsError) -> GppError {
        move |_| GppError::SectionTruncated { id, field }
    }
}
