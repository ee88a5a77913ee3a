//! The JSON of a rate table, read into borrowed pieces and nothing more: the two dates as
//! text, and every `from -> to -> rate` in document order with the rate's number as its raw
//! text (`RawValue`), so that no float ever holds it. Duplicate keys are kept, for the table
//! to refuse by name; the counts are capped while reading, so a document of a mebibyte of
//! tiny entries is refused before it is all in memory.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Which cap a document hit while being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cap {
    Sources,
    Rates,
}

/// What reading a document can end in, before any rule about its content.
#[derive(Debug)]
pub(crate) enum ReadError {
    Json(serde_json::Error),
    Cap(Cap),
    /// A top-level key given twice.
    DuplicateField(&'static str),
}

/// One `"USD": { "EUR": 0.9213, ... }` of `conversions`.
#[derive(Debug)]
pub(crate) struct Row<'de> {
    pub from: Cow<'de, str>,
    pub rates: Vec<(Cow<'de, str>, &'de RawValue)>,
}

/// A currency file: `{"dataAsOf": ..., "generatedAt": ..., "conversions": {...}}`; other keys
/// are skipped.
#[derive(Debug, Default)]
pub(crate) struct Document<'de> {
    pub data_as_of: Option<Cow<'de, str>>,
    pub generated_at: Option<Cow<'de, str>>,
    pub conversions: Option<Vec<Row<'de>>>,
}

/// The most sources (rows) and rates read before the document is refused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caps {
    pub sources: usize,
    pub rates: usize,
}

/// Reads a whole currency file.
pub(crate) fn read_document(bytes: &[u8], caps: Caps) -> Result<Document<'_>, ReadError> {
    let state = State::new(caps);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read = DocumentSeed(&state).deserialize(&mut de).and_then(|doc| {
        de.end()?;
        Ok(doc)
    });
    read.map_err(|e| state.explain(e))
}

/// Reads a bare `conversions` object (a request's `ext.prebid.currency.rates`).
pub(crate) fn read_conversions(bytes: &[u8], caps: Caps) -> Result<Vec<Row<'_>>, ReadError> {
    let state = State::new(caps);
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read = ConversionsSeed(&state)
        .deserialize(&mut de)
        .and_then(|rows| {
            de.end()?;
            Ok(rows)
        });
    read.map_err(|e| state.explain(e))
}

/// What the visitors share: the caps, the counts so far, and which rule stopped the read
/// (serde errors carry only text; this keeps the cause typed).
struct State {
    caps: Caps,
    rates: Cell<usize>,
    stopped: Cell<Option<ReadError>>,
}

impl State {
    fn new(caps: Caps) -> State {
        State {
            caps,
            rates: Cell::new(0),
            stopped: Cell::new(None),
        }
    }

    /// Records why the read stops, for [`State::explain`], and the error that stops it.
    fn stop<E: de::Error>(&self, why: ReadError) -> E {
        self.stopped.set(Some(why));
        E::custom("rate table refused")
    }

    fn explain(&self, error: serde_json::Error) -> ReadError {
        self.stopped.take().unwrap_or(ReadError::Json(error))
    }
}

struct DocumentSeed<'s>(&'s State);

impl<'de> DeserializeSeed<'de> for DocumentSeed<'_> {
    type Value = Document<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Document<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocumentSeed<'_> {
    type Value = Document<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a currency file, an object with `conversions`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document<'de>, A::Error> {
        let mut doc = Document::default();
        while let Some(key) = map.next_key::<Text<'de>>()? {
            match key.0.as_ref() {
                "dataAsOf" => {
                    let value = map.next_value::<Text<'de>>()?;
                    set_once(self.0, &mut doc.data_as_of, value.0, "dataAsOf")?;
                }
                "generatedAt" => {
                    let value = map.next_value::<Text<'de>>()?;
                    set_once(self.0, &mut doc.generated_at, value.0, "generatedAt")?;
                }
                "conversions" => {
                    let rows = map.next_value_seed(ConversionsSeed(self.0))?;
                    set_once(self.0, &mut doc.conversions, rows, "conversions")?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(doc)
    }
}

fn set_once<T, E: de::Error>(
    state: &State,
    slot: &mut Option<T>,
    value: T,
    field: &'static str,
) -> Result<(), E> {
    if slot.is_some() {
        return Err(state.stop(ReadError::DuplicateField(field)));
    }
    *slot = Some(value);
    Ok(())
}

struct ConversionsSeed<'s>(&'s State);

impl<'de> DeserializeSeed<'de> for ConversionsSeed<'_> {
    type Value = Vec<Row<'de>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Row<'de>>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ConversionsSeed<'_> {
    type Value = Vec<Row<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of currency codes to objects of currency codes to rates")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Row<'de>>, A::Error> {
        let mut rows = Vec::new();
        while let Some(from) = map.next_key::<Text<'de>>()? {
            if rows.len() == self.0.caps.sources {
                return Err(self.0.stop(ReadError::Cap(Cap::Sources)));
            }
            let rates = map.next_value_seed(RowSeed(self.0))?;
            rows.push(Row {
                from: from.0,
                rates,
            });
        }
        Ok(rows)
    }
}

struct RowSeed<'s>(&'s State);

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_> {
    type Value = Vec<(Cow<'de, str>, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of currency codes to rates")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut rates = Vec::new();
        while let Some(to) = map.next_key::<Text<'de>>()? {
            let count = self.0.rates.get() + 1;
            if count > self.0.caps.rates {
                return Err(self.0.stop(ReadError::Cap(Cap::Rates)));
            }
            self.0.rates.set(count);
            let raw = map.next_value::<&'de RawValue>()?;
            rates.push((to.0, raw));
        }
        Ok(rates)
    }
}

/// A JSON string, borrowed from the input unless it had escapes to undo.
struct Text<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text<'de>, D::Error> {
        struct TextVisitor;
        impl<'de> Visitor<'de> for TextVisitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(TextVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAPS: Caps = Caps {
        sources: 3,
        rates: 4,
    };

    #[test]
    fn a_file_reads_into_borrowed_pieces_in_order() {
        let json = br#"{"dataAsOf":"2024-05-21","generatedAt":"2024-05-22T11:18:39.013Z",
            "extra":{"deep":[1,2,{"x":null}]},
            "conversions":{"USD":{"EUR":0.9213,"GBP":7.862e-1},"EUR":{"USD":1.0854}}}"#;
        let doc = read_document(json, CAPS).unwrap();
        assert_eq!(doc.data_as_of.as_deref(), Some("2024-05-21"));
        assert_eq!(
            doc.generated_at.as_deref(),
            Some("2024-05-22T11:18:39.013Z")
        );
        let rows = doc.conversions.unwrap();
        let flat: Vec<(&str, &str, &str)> = rows
            .iter()
            .flat_map(|r| {
                r.rates
                    .iter()
                    .map(|(to, raw)| (r.from.as_ref(), to.as_ref(), raw.get()))
            })
            .collect();
        assert_eq!(
            flat,
            [
                ("USD", "EUR", "0.9213"),
                ("USD", "GBP", "7.862e-1"),
                ("EUR", "USD", "1.0854")
            ]
        );
        assert!(matches!(rows[0].from, Cow::Borrowed(_)));
    }

    #[test]
    fn escaped_keys_are_undone_and_duplicates_kept() {
        let rows = read_conversions(br#"{"\u0055SD":{"EUR":1,"EUR":2}}"#, CAPS).unwrap();
        assert_eq!(rows[0].from, "USD");
        assert_eq!(rows[0].rates.len(), 2);
        // A rate that is not a number still reads: the table refuses it by name.
        let rows = read_conversions(br#"{"USD":{"EUR":"0.9","GBP":null}}"#, CAPS).unwrap();
        assert_eq!(rows[0].rates[0].1.get(), "\"0.9\"");
    }

    #[test]
    fn shapes_caps_and_repeated_fields_are_refused() {
        let refused = |json: &[u8]| read_document(json, CAPS).map(|_| ()).unwrap_err();
        assert!(matches!(refused(b"[]"), ReadError::Json(_)));
        assert!(matches!(
            refused(b"{\"conversions\":[]}"),
            ReadError::Json(_)
        ));
        assert!(matches!(
            refused(b"{\"conversions\":{\"USD\":[1]}}"),
            ReadError::Json(_)
        ));
        assert!(matches!(refused(b"{\"dataAsOf\":5}"), ReadError::Json(_)));
        assert!(matches!(refused(b"{} {}"), ReadError::Json(_)));
        assert!(matches!(
            refused(b"{\"conversions\":{}"),
            ReadError::Json(_)
        ));
        assert!(matches!(
            refused(br#"{"dataAsOf":"a","dataAsOf":"b"}"#),
            ReadError::DuplicateField("dataAsOf")
        ));
        assert!(matches!(
            refused(br#"{"conversions":{},"conversions":{}}"#),
            ReadError::DuplicateField("conversions")
        ));
        assert!(matches!(
            refused(br#"{"conversions":{"A":{},"B":{},"C":{},"D":{}}}"#),
            ReadError::Cap(Cap::Sources)
        ));
        assert!(matches!(
            refused(br#"{"conversions":{"A":{"x":1,"y":1},"B":{"x":1,"y":1,"z":1}}}"#),
            ReadError::Cap(Cap::Rates)
        ));
        // Exactly at the caps is fine.
        read_document(
            br#"{"conversions":{"A":{"x":1,"y":1},"B":{"x":1,"y":1},"C":{}}}"#,
            CAPS,
        )
        .unwrap();
    }
}
