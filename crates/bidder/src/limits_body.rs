//! Pure: the body of `PUT /admin/campaigns/<id>/limits`, read into the change it asks for, or
//! refused naming the field. Money as the campaign file writes it (currency units, a JSON
//! number) or as an exact decimal string (`"1250.50"`, at most 9 decimals); kept as integer
//! nanos from here on.

use units::{Limits, Nanos};

/// Largest body accepted: three small fields fit many times over.
pub(crate) const MAX_BODY_BYTES: usize = 1_024;

/// A change of one campaign's limits, based on the version the caller last saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LimitsRequest {
    pub(crate) limits: Limits,
    /// The version the change is based on; 0: the campaign must not exist yet.
    pub(crate) base_version: u64,
}

/// Why a body was refused; the message names the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BodyProblem {
    #[error("body: {0}")]
    NotAnObject(String),
    #[error("{field}: {problem}")]
    Field {
        field: &'static str,
        problem: &'static str,
    },
    #[error("{0}: unknown field (total, daily, base_version)")]
    Unknown(String),
}

fn field(field: &'static str, problem: &'static str) -> BodyProblem {
    BodyProblem::Field { field, problem }
}

/// Reads the body: `{"total": .., "daily": .. (optional, null for none), "base_version": N}`.
pub(crate) fn parse(body: &[u8]) -> Result<LimitsRequest, BodyProblem> {
    if body.len() > MAX_BODY_BYTES {
        return Err(BodyProblem::NotAnObject(format!(
            "larger than {MAX_BODY_BYTES} bytes"
        )));
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| BodyProblem::NotAnObject(e.to_string()))?;
    let Some(object) = value.as_object() else {
        return Err(BodyProblem::NotAnObject("not a JSON object".to_owned()));
    };
    if let Some(other) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "total" | "daily" | "base_version"))
    {
        return Err(BodyProblem::Unknown(other.chars().take(64).collect()));
    }
    let total = match object.get("total") {
        None | Some(serde_json::Value::Null) => return Err(field("total", "is required")),
        Some(v) => money(v).map_err(|p| field("total", p))?,
    };
    let daily = match object.get("daily") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(money(v).map_err(|p| field("daily", p))?),
    };
    if daily.is_some_and(|d| d > total) {
        return Err(field("daily", "must not exceed total"));
    }
    let base_version = object
        .get("base_version")
        .ok_or_else(|| field("base_version", "is required (0 to create the campaign)"))?
        .as_u64()
        .ok_or_else(|| field("base_version", "must be a non-negative integer"))?;
    Ok(LimitsRequest {
        limits: Limits { total, daily },
        base_version,
    })
}

/// A positive amount within the ledger's exact range.
fn money(v: &serde_json::Value) -> Result<Nanos, &'static str> {
    let n = match v {
        serde_json::Value::String(s) => decimal(s)?,
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(units) => units
                .checked_mul(Nanos::PER_UNIT)
                .map(Nanos)
                .ok_or("is beyond the ledger's exact range")?,
            None => {
                let units = n.as_f64().ok_or("is not a number")?;
                Nanos::from_units(units).map_err(|_| "is beyond the ledger's exact range")?
            }
        },
        _ => return Err("must be a number or a decimal string"),
    };
    if !n.is_positive() {
        return Err("must be positive");
    }
    if n.get() > ledger::MAX_AMOUNT {
        return Err("is beyond the ledger's exact range");
    }
    Ok(n)
}

/// An exact decimal in currency units: digits, then at most 9 decimals.
fn decimal(s: &str) -> Result<Nanos, &'static str> {
    const BAD: &str = "must be a decimal like \"1250.50\" (at most 9 decimals)";
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 12 || frac.len() > 9 || !digits(whole) || !digits(frac) {
        return Err(BAD);
    }
    if s.ends_with('.') {
        return Err(BAD);
    }
    let whole: i64 = whole.parse().map_err(|_| BAD)?;
    let scale = 10_i64.pow(9 - u32::try_from(frac.len()).map_err(|_| BAD)?);
    let frac: i64 = if frac.is_empty() {
        0
    } else {
        frac.parse::<i64>().map_err(|_| BAD)? * scale
    };
    whole
        .checked_mul(Nanos::PER_UNIT)
        .and_then(|w| w.checked_add(frac))
        .map(Nanos)
        .ok_or("is beyond the ledger's exact range")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> LimitsRequest {
        parse(body.as_bytes()).unwrap_or_else(|e| panic!("{body}: {e}"))
    }

    fn refused(body: &str) -> String {
        match parse(body.as_bytes()) {
            Ok(r) => panic!("{body} accepted: {r:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn money_is_read_exactly_as_numbers_or_decimal_strings() {
        let r = ok(r#"{"total": "1250.5", "daily": 10, "base_version": 3}"#);
        assert_eq!(r.limits.total, Nanos(1_250_500_000_000));
        assert_eq!(r.limits.daily, Some(Nanos(10_000_000_000)));
        assert_eq!(r.base_version, 3);
        let r = ok(r#"{"total": 0.25, "daily": null, "base_version": 0}"#);
        assert_eq!(
            r.limits,
            Limits {
                total: Nanos(250_000_000),
                daily: None
            }
        );
        assert_eq!(
            ok(r#"{"total": "0.000000001", "base_version": 0}"#)
                .limits
                .total,
            Nanos(1)
        );
    }

    #[test]
    fn each_refusal_names_its_field() {
        for (body, starts) in [
            (r#"{"daily": 1, "base_version": 0}"#, "total: is required"),
            (
                r#"{"total": -1, "base_version": 0}"#,
                "total: must be positive",
            ),
            (
                r#"{"total": "1.2.3", "base_version": 0}"#,
                "total: must be a decimal",
            ),
            (
                r#"{"total": "1.0000000001", "base_version": 0}"#,
                "total: must be a decimal",
            ),
            (
                r#"{"total": "1e3", "base_version": 0}"#,
                "total: must be a decimal",
            ),
            (
                r#"{"total": true, "base_version": 0}"#,
                "total: must be a number",
            ),
            (r#"{"total": 1e12, "base_version": 0}"#, "total: is beyond"),
            (
                r#"{"total": "9999999999", "base_version": 0}"#,
                "total: is beyond",
            ),
            (
                r#"{"total": 1, "daily": 2, "base_version": 0}"#,
                "daily: must not exceed",
            ),
            (
                r#"{"total": 1, "daily": "x", "base_version": 0}"#,
                "daily: must be a decimal",
            ),
            (r#"{"total": 1}"#, "base_version: is required"),
            (
                r#"{"total": 1, "base_version": -2}"#,
                "base_version: must be",
            ),
            (
                r#"{"total": 1, "base_version": 0, "budget": 1}"#,
                "budget: unknown field",
            ),
            ("[1]", "body: not a JSON object"),
            ("{", "body: "),
        ] {
            let e = refused(body);
            assert!(e.starts_with(starts), "{body}: {e}");
        }
        let huge = format!(
            r#"{{"total": 1, "base_version": 0, "x": "{}"}}"#,
            "a".repeat(2_000)
        );
        assert!(refused(&huge).contains("larger than"));
    }
}
