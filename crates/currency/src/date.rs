//! The two dates of a currency file, as Unix seconds: `generatedAt`, an RFC 3339 date-time
//! (`2024-05-22T11:18:39.013Z`: any fraction, dropped; `Z` or a `±hh:mm` offset), and
//! `dataAsOf`, a calendar date (`2024-05-21`, taken as its midnight UTC). Strict otherwise:
//! four-digit years, real days of real months, no leap second. (`units::Timestamp` reads only
//! the second-precision `Z` form campaign flights use; a currency file has milliseconds.)

/// `YYYY-MM-DD` as the Unix second of its midnight, UTC.
pub(crate) fn parse_date(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let (year, month, day) = (number(b, 0, 4)?, number(b, 5, 2)?, number(b, 8, 2)?);
    if !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400)
}

/// An RFC 3339 date-time as Unix seconds (the fraction dropped, the offset applied).
pub(crate) fn parse_date_time(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let midnight = parse_date(text.get(..10)?)?;
    if !matches!(b.get(10), Some(b'T' | b't'))
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
    {
        return None;
    }
    let (hour, minute, second) = (number(b, 11, 2)?, number(b, 14, 2)?, number(b, 17, 2)?);
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let mut rest = b.get(19..)?;
    if let Some((b'.', fraction)) = rest.split_first() {
        let digits = fraction.iter().take_while(|d| d.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = fraction.get(digits..)?;
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (number(rest, 1, 2)?, number(rest, 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            if *sign == b'-' { -minutes } else { minutes }
        }
        _ => return None,
    };
    Some(midnight + hour * 3600 + minute * 60 + second - offset * 60)
}

/// The decimal number in `b[at..at + len]`, all ASCII digits.
fn number(b: &[u8], at: usize, len: usize) -> Option<i64> {
    b.get(at..at + len)?.iter().try_fold(0i64, |acc, &d| {
        d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
    })
}

fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let shifted_month = (month + 9) % 12;
    let day_of_year = (153 * shifted_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_midnight_utc() {
        for (text, seconds) in [
            ("1970-01-01", Some(0)),
            ("2024-05-21", Some(1_716_249_600)),
            ("2024-02-29", Some(1_709_164_800)),
            ("2000-03-01", Some(951_868_800)),
            ("1969-12-31", Some(-86_400)),
            ("2023-02-29", None),
            ("2100-02-29", None),
            ("2024-04-31", None),
            ("2024-13-01", None),
            ("2024-00-01", None),
            ("2024-01-00", None),
            ("2024-1-01", None),
            ("24-01-01", None),
            ("2024/01/01", None),
            ("2024-01-01 ", None),
            ("+024-01-01", None),
            ("２０２４-01-01", None),
            ("", None),
        ] {
            assert_eq!(parse_date(text), seconds, "{text:?}");
        }
    }

    #[test]
    fn date_times_take_fractions_and_offsets() {
        let base = 1_716_376_719; // 2024-05-22T11:18:39Z
        for (text, seconds) in [
            ("2024-05-22T11:18:39Z", Some(base)),
            ("2024-05-22T11:18:39.013Z", Some(base)),
            ("2024-05-22T11:18:39.999999999999Z", Some(base)),
            ("2024-05-22t11:18:39z", Some(base)),
            ("2024-05-22T13:18:39+02:00", Some(base)),
            ("2024-05-22T06:48:39.5-04:30", Some(base)),
            ("2024-05-22T11:18:39+00:00", Some(base)),
            ("1970-01-01T00:00:00Z", Some(0)),
            ("2024-05-22T11:18:39", None),
            ("2024-05-22 11:18:39Z", None),
            ("2024-05-22T11:18:39.Z", None),
            ("2024-05-22T11:18:60Z", None),
            ("2024-05-22T24:00:00Z", None),
            ("2024-05-22T11:60:39Z", None),
            ("2024-05-22T11:18:39+24:00", None),
            ("2024-05-22T11:18:39+0200", None),
            ("2024-05-22T11:18:39Zjunk", None),
            ("2024-05-22T1:18:39Z", None),
            ("2024-05-32T11:18:39Z", None),
            ("2024-05-22", None),
            ("2024-05-22T11:18:3é", None),
        ] {
            assert_eq!(parse_date_time(text), seconds, "{text:?}");
        }
    }
}
