//! [`CampaignError`]: why a campaign file was refused, naming the file position or field.

use std::path::PathBuf;

/// A campaign file that cannot be loaded. A refused file never replaces the running set.
///
/// Field paths count campaigns from 0 in file order whatever the format:
/// `campaigns[3].creatives[0].w: must be > 0`.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// The file extension is neither `.json` nor `.toml`.
    #[error("{}: unknown campaign file format, expected a .json or .toml extension", file.display())]
    UnknownFormat { file: PathBuf },
    /// The file is larger than [`crate::limits::MAX_FILE_BYTES`].
    #[error("campaign file is larger than {limit} bytes")]
    FileTooLarge { limit: u64 },
    /// The file is not well-formed JSON/TOML, or a value has the wrong type or an unknown key.
    /// `path` is the position in the document (`campaigns[3].bid.cpm`), empty at top level.
    #[error("{}{message} at line {line} column {column}", prefix(path))]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// A value is well-formed but not acceptable.
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: Problem },
}

fn prefix(path: &str) -> String {
    if path.is_empty() {
        String::new()
    } else {
        format!("{path}: ")
    }
}

/// What is wrong with a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("must not be empty")]
    Empty,
    #[error("must not be empty (omit the key to allow any value)")]
    EmptyList,
    #[error("must be > 0")]
    NotPositive,
    #[error("must be a finite number within +/-1e9")]
    NotFinite,
    #[error("is below the smallest amount representable ({0})")]
    TooSmall(&'static str),
    #[error("must be at most {0}")]
    TooBig(i64),
    #[error("must be > 0 and <= 1")]
    OutOfRangeFraction,
    #[error("must be within {0}..={1}")]
    OutOfRange(i64, i64),
    #[error("has more than {0} entries")]
    TooMany(usize),
    #[error("is longer than {0} bytes")]
    TooLong(usize),
    #[error("duplicate id {0:?}")]
    Duplicate(String),
    #[error("must be >= {0}")]
    BelowMinimum(&'static str),
    #[error("must be <= {0}")]
    AboveMaximum(&'static str),
    #[error("must be after {0}")]
    NotAfter(&'static str),
    #[error("a creative needs either `w` and `h` (banner) or `video`, not both")]
    BannerAndVideo,
    #[error("a creative needs either `w` and `h` (banner) or `video`")]
    NoMedia,
    #[error("`w` and `h` go together")]
    HalfSize,
    #[error("{0:?} is not an ISO-3166-1 alpha-3 country code")]
    BadCountry(String),
    #[error("{0:?} is not a size of the form \"300x250\"")]
    BadSize(String),
    #[error("{0:?} is not a domain name")]
    BadDomain(String),
    #[error("{0:?} is not an RFC 3339 UTC timestamp of the form YYYY-MM-DDTHH:MM:SSZ")]
    BadTimestamp(String),
}

impl CampaignError {
    /// A bounded label for metrics and logs (`campaign_load_errors_total{kind=...}`).
    pub fn kind(&self) -> &'static str {
        match self {
            CampaignError::UnknownFormat { .. } => "format",
            CampaignError::FileTooLarge { .. } => "too_large",
            CampaignError::Parse { .. } => "parse",
            CampaignError::Invalid { .. } => "invalid",
        }
    }

    /// The document path or field the error is about, when it is about one.
    pub fn field(&self) -> Option<&str> {
        match self {
            CampaignError::Parse { path, .. } => Some(path),
            CampaignError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, problem: Problem) -> Self {
        CampaignError::Invalid {
            field: field.into(),
            problem,
        }
    }
}
