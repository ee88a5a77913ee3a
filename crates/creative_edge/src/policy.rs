//! Which tiers an object is stored in, by its size and content type. Pure.
//!
//! Each tier has a rule: objects from `min_object_bytes` to `max_object_bytes`, of the listed
//! content types (all when the list is empty). The usual shape keeps small, hot objects
//! (images, scripts, VAST) in memory and on disk, and sends large video to disk only.

use serde::Deserialize;

/// One tier's admission rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TierRule {
    /// Smallest object stored in this tier, in bytes. Default 0.
    pub min_object_bytes: u64,
    /// Largest object stored in this tier, in bytes.
    pub max_object_bytes: u64,
    /// Media types stored in this tier: exact (`image/png`) or a whole type (`video/*`).
    /// Empty means every type. Default empty.
    pub content_types: Vec<String>,
}

impl Default for TierRule {
    fn default() -> Self {
        TierRule {
            min_object_bytes: 0,
            max_object_bytes: 1024 * 1024,
            content_types: Vec::new(),
        }
    }
}

impl TierRule {
    /// Whether an object of `size` bytes and `content_type` belongs in this tier.
    pub fn admits(&self, size: u64, content_type: &str) -> bool {
        (self.min_object_bytes..=self.max_object_bytes).contains(&size)
            && (self.content_types.is_empty()
                || self
                    .content_types
                    .iter()
                    .any(|pattern| type_matches(pattern, content_type)))
    }

    /// A content-type pattern that is neither `type/subtype` nor `type/*`, if any.
    pub fn bad_pattern(&self) -> Option<&str> {
        self.content_types
            .iter()
            .find(|p| {
                let Some((kind, sub)) = p.split_once('/') else {
                    return true;
                };
                kind.is_empty() || sub.is_empty() || kind == "*" || p.contains([' ', ';', ','])
            })
            .map(String::as_str)
    }
}

/// Whether a media type (parameters after `;` ignored, any case) matches a pattern.
fn type_matches(pattern: &str, content_type: &str) -> bool {
    let media = content_type.split(';').next().unwrap_or("").trim();
    match pattern.strip_suffix("/*") {
        Some(kind) => media
            .split_once('/')
            .is_some_and(|(k, _)| k.eq_ignore_ascii_case(kind)),
        None => media.eq_ignore_ascii_case(pattern),
    }
}

/// The tiers an object goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub memory: bool,
    pub disk: bool,
}

impl Placement {
    /// Stored nowhere: served to the clients waiting for it, then dropped.
    pub fn nowhere(self) -> bool {
        !self.memory && !self.disk
    }
}

/// Where an object of `size` bytes and `content_type` is stored; `disk` is `None` when the
/// edge has no disk tier.
pub fn place(
    size: u64,
    content_type: &str,
    memory: &TierRule,
    disk: Option<&TierRule>,
) -> Placement {
    Placement {
        memory: memory.admits(size, content_type),
        disk: disk.is_some_and(|rule| rule.admits(size, content_type)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(min: u64, max: u64, types: &[&str]) -> TierRule {
        TierRule {
            min_object_bytes: min,
            max_object_bytes: max,
            content_types: types.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn small_images_go_to_both_tiers_and_video_to_disk_only() {
        let memory = rule(0, 1_000_000, &["image/*", "application/xml"]);
        let disk = rule(0, 100_000_000, &[]);
        let both = Placement {
            memory: true,
            disk: true,
        };
        assert_eq!(place(50_000, "image/png", &memory, Some(&disk)), both);
        assert_eq!(
            place(
                2_000,
                "Application/XML; charset=utf-8",
                &memory,
                Some(&disk)
            ),
            both
        );
        let disk_only = Placement {
            memory: false,
            disk: true,
        };
        assert_eq!(place(50_000, "video/mp4", &memory, Some(&disk)), disk_only);
        assert_eq!(
            place(5_000_000, "image/png", &memory, Some(&disk)),
            disk_only
        );
        assert!(place(500_000_000, "video/mp4", &memory, Some(&disk)).nowhere());
        assert!(!place(10, "image/gif", &memory, None).disk);
    }

    #[test]
    fn sizes_are_inclusive_bounds() {
        let r = rule(10, 20, &[]);
        assert!(!r.admits(9, "x/y"));
        assert!(r.admits(10, "x/y"));
        assert!(r.admits(20, "x/y"));
        assert!(!r.admits(21, "x/y"));
    }

    #[test]
    fn a_whole_type_pattern_does_not_match_a_prefix_of_another_type() {
        let r = rule(0, 100, &["image/*"]);
        assert!(!r.admits(1, "imagery/png"));
        assert!(!r.admits(1, ""));
        assert!(r.admits(1, "IMAGE/webp"));
    }

    #[test]
    fn malformed_patterns_are_named() {
        assert_eq!(
            rule(0, 1, &["image/*", "video"]).bad_pattern(),
            Some("video")
        );
        assert_eq!(rule(0, 1, &["*/*"]).bad_pattern(), Some("*/*"));
        assert_eq!(
            rule(0, 1, &["text/html; q=1"]).bad_pattern(),
            Some("text/html; q=1")
        );
        assert_eq!(rule(0, 1, &["image/*", "text/html"]).bad_pattern(), None);
    }
}
