//! Sections that several servers' files share (`listen`, `[security]`, `[deadline]`...),
//! declared once as their own types and read from the same top-level table as the server's
//! own keys.
//!
//! serde's `flatten` cannot do this: it turns `deny_unknown_fields` off, so a typo would load.
//! Instead [`Whole`] walks the file's top-level keys once: a key the shared [`Sections`] own is
//! read into them, every other key goes on to the server's own derived type, which still
//! refuses what it does not know. Values are read straight from the document, so a refusal
//! inside one keeps its line and its path.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{
    DeserializeOwned, DeserializeSeed, Deserializer, Error as _, IntoDeserializer, MapAccess,
    Visitor, value::MapAccessDeserializer,
};

/// A set of top-level sections shared by several servers' files.
pub trait Sections {
    /// Whether the top-level `key` is one of these sections'.
    fn owns(key: &str) -> bool;
    /// Every key these sections own, for the message that refuses an unknown one.
    fn keys() -> Vec<&'static str>;
    /// Reads `key` (one it [owns](Sections::owns)) from `map`'s next value.
    ///
    /// # Errors
    /// The value is not the section's.
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// No shared sections.
impl Sections for () {
    fn owns(_: &str) -> bool {
        false
    }
    fn keys() -> Vec<&'static str> {
        Vec::new()
    }
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, _: &mut A) -> Result<(), A::Error> {
        Err(A::Error::custom(format!("`{key}` is not a shared section")))
    }
}

/// Two sets side by side (the front door every server has, and the RTB servers' own).
impl<S: Sections, T: Sections> Sections for (S, T) {
    fn owns(key: &str) -> bool {
        S::owns(key) || T::owns(key)
    }
    fn keys() -> Vec<&'static str> {
        let mut keys = S::keys();
        keys.extend(T::keys());
        keys
    }
    fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        if S::owns(key) {
            self.0.read(key, map)
        } else {
            self.1.read(key, map)
        }
    }
}

/// A server's file type whose shared sections are read by [`Whole`]. The type itself declares
/// them `#[serde(flatten, skip_deserializing)]`: written out with its own keys, never read by
/// its derived code (which would then refuse their keys as unknown).
pub trait WithShared: DeserializeOwned {
    type Shared: Sections;
    /// The shared sections with this server's defaults (its own ports).
    fn shared_defaults() -> Self::Shared;
    /// Puts the sections read from the file in place.
    fn set_shared(&mut self, shared: Self::Shared);
}

/// A server's whole file: its shared sections and its own keys from one table.
#[derive(Debug)]
pub struct Whole<T>(pub T);

impl<'de, T: WithShared> serde::Deserialize<'de> for Whole<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(WholeVisitor(PhantomData))
    }
}

struct WholeVisitor<T>(PhantomData<T>);

impl<'de, T: WithShared> Visitor<'de> for WholeVisitor<T> {
    type Value = Whole<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a table of settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Whole<T>, A::Error> {
        let mut shared = T::shared_defaults();
        let mut own = T::deserialize(MapAccessDeserializer::new(Split {
            map,
            shared: &mut shared,
        }))?;
        own.set_shared(shared);
        Ok(Whole(own))
    }
}

/// The file's map with the shared keys taken out, as the server's own type sees it.
struct Split<'s, A, S> {
    map: A,
    shared: &'s mut S,
}

impl<'de, A: MapAccess<'de>, S: Sections> MapAccess<'de> for Split<'_, A, S> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key::<String>()? else {
                return Ok(None);
            };
            if S::owns(&key) {
                self.shared.read(&key, &mut self.map)?;
                continue;
            }
            let name: serde::de::value::StringDeserializer<A::Error> =
                key.clone().into_deserializer();
            return seed.deserialize(name).map(Some).map_err(|e| {
                // The derived code lists only the server's own keys; name the shared ones too.
                let shared = S::keys()
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ");
                A::Error::custom(format!("{e}, or a shared one: {shared}"))
            });
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize as _;

    #[derive(Debug, PartialEq, serde::Serialize)]
    struct Front {
        listen: String,
        http: Http,
    }

    #[derive(Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields, default)]
    struct Http {
        max_connections: u32,
    }

    impl Sections for Front {
        fn owns(key: &str) -> bool {
            matches!(key, "listen" | "http")
        }
        fn keys() -> Vec<&'static str> {
            vec!["listen", "http"]
        }
        fn read<'de, A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
            match key {
                "listen" => self.listen = map.next_value()?,
                _ => self.http = map.next_value()?,
            }
            Ok(())
        }
    }

    fn front() -> Front {
        Front {
            listen: "default".to_owned(),
            http: Http::default(),
        }
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Server {
        #[serde(flatten, skip_deserializing, default = "front")]
        front: Front,
        #[serde(default)]
        bidders: Vec<String>,
    }

    impl WithShared for Server {
        type Shared = Front;
        fn shared_defaults() -> Front {
            front()
        }
        fn set_shared(&mut self, shared: Front) {
            self.front = shared;
        }
    }

    fn parse(text: &str) -> Result<Server, toml::de::Error> {
        toml::from_str::<Whole<Server>>(text).map(|w| w.0)
    }

    #[test]
    fn shared_and_own_keys_come_from_one_table_in_any_order() {
        let s = parse("bidders = [\"a\"]\nlisten = \"x\"\n[http]\nmax_connections = 3").unwrap();
        assert_eq!(s.front.listen, "x");
        assert_eq!(s.front.http.max_connections, 3);
        assert_eq!(s.bidders, ["a"]);
        let empty = parse("").unwrap();
        assert_eq!(
            empty.front,
            front(),
            "an empty file keeps the server's defaults"
        );
    }

    #[test]
    fn an_unknown_key_is_refused_naming_the_shared_keys_too() {
        let e = parse("listn = \"x\"").unwrap_err().to_string();
        assert!(e.contains("unknown field `listn`"), "{e}");
        assert!(
            e.contains("`bidders`") && e.contains("`listen`, `http`"),
            "{e}"
        );
        let inner = parse("[http]\nmax_conections = 3").unwrap_err().to_string();
        assert!(inner.contains("max_conections"), "{inner}");
        assert!(
            inner.contains("line 2"),
            "a shared section's refusal keeps its line: {inner}"
        );
    }

    #[test]
    fn a_shared_value_of_the_wrong_type_is_refused_with_its_path() {
        let value =
            toml::Value::Table(toml::from_str("[http]\nmax_connections = \"many\"").unwrap());
        let e = serde_path_to_error::deserialize::<_, Whole<Server>>(value).unwrap_err();
        assert_eq!(e.path().to_string(), "http.max_connections");
    }

    #[test]
    fn written_out_the_shared_sections_sit_among_the_own_keys() {
        let s = parse("listen = \"x\"\nbidders = [\"a\"]").unwrap();
        let value = toml::Value::try_from(&s).unwrap();
        assert_eq!(
            value.get("listen").and_then(|v| v.as_str()),
            Some("x"),
            "{value:?}"
        );
        let back = Whole::<Server>::deserialize(value.clone()).unwrap().0;
        assert_eq!(back, s, "{value:?}");
    }
}
