//! A reply as the ledger reads it: RESP2's five kinds, an error reply kept as a value (it is a
//! complete answer: the connection stays usable). Converted from the `redis` crate's replies.

/// One RESP2 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    Nil,
    Int(i64),
    Simple(String),
    Bulk(Vec<u8>),
    Array(Vec<Value>),
    /// An error reply (`-ERR ...`): its code and message, as Redis wrote them.
    Error(String),
}

impl Value {
    /// The value as text, for status strings.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Value::Simple(s) => Some(s),
            Value::Bulk(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }

    /// The value as an integer (an integer reply, or a bulk string holding one).
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(n) => Some(*n),
            Value::Bulk(_) | Value::Simple(_) => self.as_str().and_then(|s| s.parse().ok()),
            _ => None,
        }
    }

    /// A reply of the `redis` crate. The ledger speaks RESP2, whose replies are the kinds
    /// above; RESP3's others never reach it and read as an error reply.
    pub(crate) fn from_redis(v: redis::Value) -> Value {
        match v {
            redis::Value::Nil => Value::Nil,
            redis::Value::Int(n) => Value::Int(n),
            redis::Value::BulkString(b) => Value::Bulk(b),
            redis::Value::SimpleString(s) => Value::Simple(s),
            redis::Value::Okay => Value::Simple("OK".to_owned()),
            redis::Value::Array(items) => {
                Value::Array(items.into_iter().map(Value::from_redis).collect())
            }
            redis::Value::ServerError(e) => Value::Error(error_text(e.code(), e.details())),
            other => Value::Error(format!(
                "ERR a RESP3 reply the ledger does not read: {other:?}"
            )),
        }
    }
}

/// An error reply's text as Redis wrote it: its code, then its message.
pub(crate) fn error_text(code: &str, details: Option<&str>) -> String {
    match details {
        Some(d) => format!("{code} {d}"),
        None => code.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_convert_kind_for_kind() {
        let v = redis::Value::Array(vec![
            redis::Value::Nil,
            redis::Value::Int(-3),
            redis::Value::BulkString(b"ok".to_vec()),
            redis::Value::Okay,
        ]);
        assert_eq!(
            Value::from_redis(v),
            Value::Array(vec![
                Value::Nil,
                Value::Int(-3),
                Value::Bulk(b"ok".to_vec()),
                Value::Simple("OK".into()),
            ])
        );
        assert_eq!(Value::Bulk(b"42".to_vec()).as_i64(), Some(42));
        assert_eq!(Value::Bulk(vec![0xff]).as_str(), None);
        assert!(matches!(
            Value::from_redis(redis::Value::Double(1.5)),
            Value::Error(_)
        ));
    }
}
