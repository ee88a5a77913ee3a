//! The `[admission]` section of a server's configuration: how the bound on requests in flight
//! is set, how a refused request is answered, and the pause check's limit.

use std::time::Duration;

use serde::Deserialize;

/// How the gate decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// No bound beyond the connection cap.
    Off,
    /// `max_in_flight`, always.
    Fixed,
    /// Between `min_in_flight` and `max_in_flight`, adapted from the runtime's busy time and
    /// how long requests hold their place ([`crate::aimd`]).
    #[default]
    Adaptive,
    /// By each request's deadline: started when the work ahead of it and its own fit before it,
    /// waiting while they do not, refused only when no start would be in time
    /// ([`crate::fit`], [`crate::starter`]); `max_in_flight` is a hard cap on requests held,
    /// waiting ones included. For servers whose requests tell their deadline before the work
    /// starts (the exchange calls [`crate::Admission::start`] once it has decoded `tmax`).
    Deadline,
}

/// How a shed request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
pub enum NoBidStyle {
    /// 204 No Content.
    #[default]
    #[serde(rename = "204")]
    NoContent,
    /// 200 with `{"id": <request id>, "nbr": <reason>}` (OpenRTB no-bid reasons).
    #[serde(rename = "nbr")]
    Nbr,
}

/// The `[admission]` section of a server's configuration.
#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// `deadline`, `adaptive`, `fixed` or `off`. Unset, each server picks its own
    /// ([`AdmissionConfig::or_mode`]; [`Mode::default`] otherwise).
    pub mode: Option<Mode>,
    /// Requests in flight at most (the fixed limit, or the adaptive one's ceiling). Default 1024.
    pub max_in_flight: u32,
    /// The adaptive limit's floor (at most `max_in_flight` in adaptive mode). Default 1.
    pub min_in_flight: u32,
    /// Requests with less time than this left before their deadline get an immediate no-bid:
    /// a bidder asked with less time cannot answer usefully. In milliseconds. Default 5.
    pub min_time_left_ms: u64,
    /// `"204"` (default) or `"nbr"`: how shed requests are answered.
    pub no_bid: NoBidStyle,
    /// Share of the runtime's worker time, 0.5 to 0.99, that the adaptive limit aims to keep
    /// busy at most. Default 0.9.
    pub busy_target: f64,
    /// Requests are refused while the runtime has run this long without a pause (no worker
    /// parked): a backlog, seen on the next request rather than the next windows
    /// ([`crate::busy_streak`]). In milliseconds; 0 turns the check off. Unset, each server
    /// picks its own ([`AdmissionConfig::or_max_busy_ms`]): a server whose handlers finish in
    /// one poll needs it, one whose requests wait on the network shows its backlog in flight.
    pub max_busy_ms: Option<u64>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            mode: None,
            max_in_flight: 1_024,
            min_in_flight: 1,
            min_time_left_ms: 5,
            no_bid: NoBidStyle::NoContent,
            busy_target: 0.9,
            max_busy_ms: None,
        }
    }
}

impl AdmissionConfig {
    /// Checks the values; the error names the key (under `[admission]`) and the rule.
    pub fn validate(&self) -> Result<(), settings::Invalid> {
        settings::check_range("admission.max_in_flight", self.max_in_flight, 1..=1_000_000)?;
        if self.min_in_flight == 0
            || (self.mode() == Mode::Adaptive && self.min_in_flight > self.max_in_flight)
        {
            return Err(settings::Invalid::new(
                "admission.min_in_flight",
                "must be at least 1, and in adaptive mode at most admission.max_in_flight",
            ));
        }
        if self.min_time_left_ms > 10_000 {
            return Err(settings::Invalid::new(
                "admission.min_time_left_ms",
                "must be at most 10000",
            ));
        }
        if !(self.busy_target >= 0.5 && self.busy_target <= 0.99) {
            return Err(settings::Invalid::new(
                "admission.busy_target",
                "must be 0.5..=0.99",
            ));
        }
        if self.max_busy_ms.is_some_and(|ms| ms > 10_000) {
            return Err(settings::Invalid::new(
                "admission.max_busy_ms",
                "must be at most 10000 (0 turns it off)",
            ));
        }
        Ok(())
    }

    pub fn min_time_left(&self) -> Duration {
        Duration::from_millis(self.min_time_left_ms)
    }

    /// The mode: the file's, or the server's default, or [`Mode::default`].
    pub fn mode(&self) -> Mode {
        self.mode.unwrap_or_default()
    }

    /// This configuration with `mode` set to `mode` unless the file set it.
    #[must_use]
    pub fn or_mode(mut self, mode: Mode) -> AdmissionConfig {
        self.mode.get_or_insert(mode);
        self
    }

    /// This configuration with `max_busy_ms` set to `ms` unless the file set it.
    #[must_use]
    pub fn or_max_busy_ms(mut self, ms: u64) -> AdmissionConfig {
        self.max_busy_ms.get_or_insert(ms);
        self
    }

    /// The pause check's limit; zero (off) when unset or in `off` mode.
    pub fn max_busy(&self) -> Duration {
        match self.mode() {
            Mode::Off => Duration::ZERO,
            Mode::Fixed | Mode::Adaptive | Mode::Deadline => {
                Duration::from_millis(self.max_busy_ms.unwrap_or(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_outside_their_ranges_name_the_key() {
        let mut c = AdmissionConfig::default();
        assert!(c.validate().is_ok());
        c.min_in_flight = 5_000;
        assert_eq!(c.validate().unwrap_err().key, "admission.min_in_flight");
        let c = AdmissionConfig {
            busy_target: f64::NAN,
            ..AdmissionConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "admission.busy_target");
        let c = AdmissionConfig {
            max_busy_ms: Some(10_001),
            ..AdmissionConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "admission.max_busy_ms");
    }

    #[test]
    fn the_pause_check_takes_the_servers_default_unless_set_and_is_off_with_the_gate() {
        let unset = AdmissionConfig::default();
        assert_eq!(
            unset.max_busy(),
            Duration::ZERO,
            "unset and no server default"
        );
        assert_eq!(
            unset.clone().or_max_busy_ms(10).max_busy(),
            Duration::from_millis(10)
        );
        let set = AdmissionConfig {
            max_busy_ms: Some(0),
            ..AdmissionConfig::default()
        };
        assert_eq!(
            set.or_max_busy_ms(10).max_busy(),
            Duration::ZERO,
            "the file wins"
        );
        let off = AdmissionConfig {
            mode: Some(Mode::Off),
            max_busy_ms: Some(10),
            ..AdmissionConfig::default()
        };
        assert_eq!(
            off.max_busy(),
            Duration::ZERO,
            "mode off turns every check off"
        );
    }
}
