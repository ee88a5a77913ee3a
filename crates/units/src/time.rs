//! [`Timestamp`]: wall-clock time as the ledger and the pacer see it, passed in by the caller so
//! that tests can run simulated days in microseconds. Also the one RFC 3339 reader and writer
//! of the workspace ([`Timestamp::parse_rfc3339`], [`Timestamp::to_rfc3339`]): campaign flights
//! are written in it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch (UTC).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const MS_PER_DAY: u64 = 86_400_000;

    /// The system clock; for servers only, never called by decision code in this crate.
    pub fn now() -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timestamp(ms)
    }

    pub const fn millis(self) -> u64 {
        self.0
    }

    pub fn saturating_add(self, d: Duration) -> Timestamp {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(ms))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Days since the epoch (UTC): the key of daily budgets.
    pub const fn day(self) -> u64 {
        self.0 / Self::MS_PER_DAY
    }

    /// Start of this UTC day.
    pub const fn start_of_day(self) -> Timestamp {
        Timestamp(self.day() * Self::MS_PER_DAY)
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SSZ` (RFC 3339, UTC, no fraction, no offset, no leap
    /// second, years 1970-9999). `None` for anything else: a flight is money, and a lenient
    /// reading of a typo is a campaign running on the wrong day.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        let b = text.as_bytes();
        if b.len() != 20
            || b[4] != b'-'
            || b[7] != b'-'
            || b[10] != b'T'
            || b[13] != b':'
            || b[16] != b':'
            || b[19] != b'Z'
        {
            return None;
        }
        let num = |range: std::ops::Range<usize>| -> Option<u32> {
            let digits = b.get(range)?;
            digits.iter().try_fold(0u32, |acc, &d| {
                d.is_ascii_digit().then(|| acc * 10 + u32::from(d - b'0'))
            })
        };
        let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
        let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
        if year < 1970 || !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
        let days_in_month = match month {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        if day == 0 || day > days_in_month {
            return None;
        }
        let days = days_from_civil(i64::from(year), month, day);
        let secs = days * 86_400 + i64::from(hour * 3600 + minute * 60 + second);
        u64::try_from(secs).ok().map(|s| Timestamp(s * 1000))
    }

    /// `YYYY-MM-DDTHH:MM:SSZ`, the form [`Timestamp::parse_rfc3339`] reads; milliseconds are
    /// dropped.
    pub fn to_rfc3339(self) -> String {
        let secs = self.0 / 1000;
        let days = i64::try_from(secs / 86_400).unwrap_or(0);
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = i64::from((month + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_are_utc() {
        let t = Timestamp(3 * Timestamp::MS_PER_DAY + 5);
        assert_eq!(t.day(), 3);
        assert_eq!(t.start_of_day(), Timestamp(3 * Timestamp::MS_PER_DAY));
        assert_eq!(t.since(Timestamp(t.0 + 10)), Duration::ZERO);
    }

    #[test]
    fn rfc3339_parses_strictly() {
        for (text, ms) in [
            ("1970-01-01T00:00:00Z", 0),
            ("2025-03-01T12:00:00Z", 1_740_830_400_000),
            ("2024-02-29T23:59:59Z", 1_709_251_199_000),
            ("2000-03-01T00:00:00Z", 951_868_800_000),
            ("9999-12-31T23:59:59Z", 253_402_300_799_000),
        ] {
            assert_eq!(
                Timestamp::parse_rfc3339(text),
                Some(Timestamp(ms)),
                "{text}"
            );
        }
        for text in [
            "",
            "2023-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
            "2025-04-31T00:00:00Z",
            "2025-13-01T00:00:00Z",
            "2025-00-01T00:00:00Z",
            "2025-01-00T00:00:00Z",
            "2025-01-01T24:00:00Z",
            "2025-01-01T00:60:00Z",
            "2025-01-01T00:00:60Z",
            "2025-01-01t00:00:00Z",
            "2025-01-01T00:00:00z",
            "2025-01-01T00:00:00+00:00",
            "2025-01-01T00:00:00.5Z",
            "2025-01-01 00:00:00Z",
            "1969-12-31T23:59:59Z",
            "+025-01-01T00:00:00Z",
            "2025-1-01T00:00:00Z",
            "२०२५-01-01T00:00:00Z",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(text), None, "{text}");
        }
    }

    #[test]
    fn rfc3339_writes_what_it_reads() {
        assert_eq!(Timestamp(0).to_rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(
            Timestamp(1_795_000_000_000).to_rfc3339(),
            "2026-11-18T11:06:40Z"
        );
        assert_eq!(
            Timestamp(951_782_400_000).to_rfc3339(),
            "2000-02-29T00:00:00Z"
        );
        // Every day of four centuries (leap rules included) goes round the trip.
        for day in 0..146_097u64 {
            let t = Timestamp(day * Timestamp::MS_PER_DAY + 45_296_000);
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()), Some(t));
        }
        // Milliseconds are dropped, not rounded.
        assert_eq!(Timestamp(1_999).to_rfc3339(), "1970-01-01T00:00:01Z");
    }
}
