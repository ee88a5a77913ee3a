//! `[privacy]`: the Global Vendor List that turns TCF enforcement on, and the host's default
//! for a request without `regs.gdpr` (docs/privacy.md). GPP, `us_privacy`, COPPA and `lmt` are
//! always enforced and need no setting.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use consent::gvl::VendorList;
use serde::Deserialize;
use settings::invalid;

use settings::ConfigError;

/// A vendor list larger than this is refused (IAB's own is about 1 MB).
pub const MAX_GVL_BYTES: usize = 8 * 1024 * 1024;

/// `[privacy]` as written in the file.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PrivacySection {
    /// The Global Vendor List, IAB's v3 JSON format (relative to the configuration file). With
    /// it, TCF 2.2 is enforced where GDPR applies: each bidder by its `gvl_vendor_id`. Read again
    /// at every reload and when the file changes; a list that does not load keeps the last
    /// good one. Default: none, TCF not enforced (start and `check-config` warn).
    pub gvl_file: Option<PathBuf>,
    /// Whether GDPR applies to a request without `regs.gdpr`, unless its seller says otherwise
    /// (`[[sellers]] gdpr_default`). Default true: unknown is treated as applying, as Prebid
    /// Server does; it only matters once a `gvl_file` is set.
    pub gdpr_default: bool,
}

impl Default for PrivacySection {
    fn default() -> Self {
        PrivacySection {
            gvl_file: None,
            gdpr_default: true,
        }
    }
}

impl PrivacySection {
    /// The vendor list `gvl_file` names, read and checked; `None` without one.
    pub fn load_gvl(&self, dir: Option<&Path>) -> Result<Option<Arc<VendorList>>, ConfigError> {
        let Some(file) = &self.gvl_file else {
            return Ok(None);
        };
        let path = settings::relative_to(dir, file);
        let bytes = settings::read_bounded_bytes(&path, MAX_GVL_BYTES)
            .map_err(|e| invalid("privacy.gvl_file", e.to_string()))?;
        let list = VendorList::from_json(&bytes)
            .map_err(|e| invalid("privacy.gvl_file", format!("{}: {e}", path.display())))?;
        Ok(Some(Arc::new(list)))
    }
}
