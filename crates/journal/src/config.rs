//! `[records]`: where a server's records go. The same section in the exchange's and the
//! bidder's configuration.

use serde::{Deserialize, Serialize};
use settings::{ConfigError, invalid};

/// Where records are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SinkKind {
    /// No records (the default).
    #[default]
    Off,
    /// Rotating NDJSON files in `dir`: the embedded default.
    File,
    /// A NATS JetStream stream, with a disk spill in `spill_dir` while the server is away.
    Nats,
}

/// The `[records]` section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub sink: SinkKind,
    /// File sink: the directory of the record files (created if missing).
    pub dir: String,
    /// File sink: a file is completed (compressed, never written again) past this size...
    pub max_file_mb: u64,
    /// ...or this age, whichever comes first.
    pub max_file_age_s: u64,
    /// Records waiting to be written; past it a record is dropped and counted, never waited
    /// for.
    pub queue: usize,
    /// NATS sink: the server.
    pub nats_url: String,
    /// NATS sink: the JetStream stream (created when missing, over `gavel.records.>`).
    pub nats_stream: String,
    /// NATS sink: records written while the server is away, sent in order when it is back.
    pub spill_dir: String,
    /// NATS sink: most bytes the spill may hold; past it records are dropped and counted.
    pub max_spill_mb: u64,
    /// The most the records may hold: the file sink's files of this server and node (the
    /// oldest completed ones removed first), or the NATS stream (`max_bytes`: it discards its
    /// oldest messages).
    pub max_total_mb: u64,
    /// How long records are kept: a completed file last written longer ago is removed; the
    /// NATS stream's `max_age`.
    pub max_age_days: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sink: SinkKind::Off,
            dir: "records".to_owned(),
            max_file_mb: 64,
            max_file_age_s: 3600,
            queue: 65_536,
            nats_url: "nats://127.0.0.1:4222".to_owned(),
            nats_stream: "GAVEL_RECORDS".to_owned(),
            spill_dir: "records-spill".to_owned(),
            max_spill_mb: 1024,
            max_total_mb: 10 * 1024,
            max_age_days: 35,
        }
    }
}

/// Bounds on `max_total_mb` (up to 16 TiB) and `max_age_days` (up to ten years): every record
/// directory and stream has both limits; none is unbounded.
pub const MAX_TOTAL_MB: std::ops::RangeInclusive<u64> = 1..=16 * 1024 * 1024;
pub const MAX_AGE_DAYS: std::ops::RangeInclusive<u64> = 1..=3650;

/// Largest queue: each waiting record is a few KB, so this bounds the memory to a few GB.
pub const MAX_QUEUE: usize = 1 << 20;

impl Config {
    /// What the file sink keeps.
    pub fn retention(&self) -> crate::layout::Retention {
        crate::layout::Retention {
            max_total_bytes: self.max_total_mb.saturating_mul(1024 * 1024),
            max_age: std::time::Duration::from_secs(self.max_age_days.saturating_mul(86_400)),
        }
    }

    /// Checks every key, naming the one at fault (`records.queue`...).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.queue == 0 || self.queue > MAX_QUEUE {
            return Err(invalid(
                "records.queue",
                format!("must be between 1 and {MAX_QUEUE}"),
            ));
        }
        if self.max_file_mb == 0 || self.max_file_mb > 64 * 1024 {
            return Err(invalid(
                "records.max_file_mb",
                "must be between 1 and 65536",
            ));
        }
        if self.max_file_age_s == 0 {
            return Err(invalid("records.max_file_age_s", "must be at least 1"));
        }
        if !MAX_TOTAL_MB.contains(&self.max_total_mb) {
            return Err(invalid(
                "records.max_total_mb",
                format!("must be {}..={}", MAX_TOTAL_MB.start(), MAX_TOTAL_MB.end()),
            ));
        }
        if self.max_total_mb < self.max_file_mb {
            return Err(invalid(
                "records.max_total_mb",
                format!(
                    "must be at least records.max_file_mb ({}): one file is kept whole",
                    self.max_file_mb
                ),
            ));
        }
        if !MAX_AGE_DAYS.contains(&self.max_age_days) {
            return Err(invalid(
                "records.max_age_days",
                format!("must be {}..={}", MAX_AGE_DAYS.start(), MAX_AGE_DAYS.end()),
            ));
        }
        match self.sink {
            SinkKind::File if self.dir.is_empty() => {
                Err(invalid("records.dir", "must name a directory"))
            }
            SinkKind::Nats
                if !self.nats_url.starts_with("nats://")
                    && !self.nats_url.starts_with("tls://") =>
            {
                Err(invalid(
                    "records.nats_url",
                    "must be a nats:// or tls:// URL",
                ))
            }
            SinkKind::Nats if self.spill_dir.is_empty() => {
                Err(invalid("records.spill_dir", "must name a directory"))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each bad value is refused naming its key; the defaults and each sink's own settings pass.
    #[test]
    fn every_bad_value_is_refused_by_its_key() {
        let ok = Config::default();
        assert!(ok.validate().is_ok());
        let bad = [
            (
                "records.queue",
                Config {
                    queue: 0,
                    ..Config::default()
                },
            ),
            (
                "records.queue",
                Config {
                    queue: MAX_QUEUE + 1,
                    ..Config::default()
                },
            ),
            (
                "records.max_file_mb",
                Config {
                    max_file_mb: 0,
                    ..Config::default()
                },
            ),
            (
                "records.max_file_age_s",
                Config {
                    max_file_age_s: 0,
                    ..Config::default()
                },
            ),
            (
                "records.dir",
                Config {
                    sink: SinkKind::File,
                    dir: String::new(),
                    ..Config::default()
                },
            ),
            (
                "records.max_total_mb",
                Config {
                    max_total_mb: 0,
                    ..Config::default()
                },
            ),
            (
                "records.max_total_mb",
                Config {
                    max_total_mb: 10,
                    max_file_mb: 64,
                    ..Config::default()
                },
            ),
            (
                "records.max_age_days",
                Config {
                    max_age_days: 0,
                    ..Config::default()
                },
            ),
            (
                "records.nats_url",
                Config {
                    sink: SinkKind::Nats,
                    nats_url: "http://127.0.0.1:4222".to_owned(),
                    ..Config::default()
                },
            ),
            (
                "records.spill_dir",
                Config {
                    sink: SinkKind::Nats,
                    spill_dir: String::new(),
                    ..Config::default()
                },
            ),
        ];
        for (key, config) in bad {
            let err = config.validate().expect_err(key).to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
        for sink in [SinkKind::File, SinkKind::Nats] {
            assert!(
                Config {
                    sink,
                    ..Config::default()
                }
                .validate()
                .is_ok()
            );
        }
    }

    #[test]
    fn an_unknown_key_or_sink_is_refused() {
        let parse = |text: &str| toml::from_str::<Config>(text).map_err(|e| e.to_string());
        assert!(parse("sink = \"file\"\ndir = \"r\"").is_ok());
        assert!(parse("sink = \"kafka\"").unwrap_err().contains("kafka"));
        assert!(
            parse("directory = \"r\"")
                .unwrap_err()
                .contains("directory")
        );
    }
}
