//! `openrtb_object!`: one declaration per OpenRTB object generates the struct, a hand-rolled
//! `Serialize`/`Deserialize` pair and the direct decoder's in-place reader (`direct::Decode`),
//! which follows the same rules as the `Deserialize` impl.
//!
//! Why not `#[derive]` with `#[serde(flatten)]` for the unknown fields: flatten makes serde
//! buffer every field of the object into its private `Content` tree and decode a second time
//! from there, which costs several times the direct path. The generated code below is what the
//! derive would produce for a plain struct, plus: unknown keys go to [`UnknownFields`] as raw
//! text, `ext` is kept raw, a key seen twice is an error, `null` means absent.
//!
//! Contract of the generated code:
//! - struct fields are named after their JSON keys (`r#type`/`r#ref` for Rust keywords);
//!   `required` fields have their plain type, `optional` ones are wrapped in `Option`;
//!   every object also gets `ext: Option<RawJson>` and `unknown: UnknownFields`.
//! - encoding writes required fields, present optional fields, `ext`, then unknown fields, in
//!   declaration order; `None` is omitted (never written as `null`).
//! - decoding borrows key strings from the input when it can (no allocation for known keys),
//!   refuses a duplicate known key (`duplicate field `x``) and a missing required one
//!   (`missing field `x``), and maps `null` to `None` for optional fields.
//!
//! [`UnknownFields`]: crate::UnknownFields

/// See the module documentation. Syntax:
///
/// ```text
/// openrtb_object! {
///     /// docs
///     pub struct Name {
///         required { /// docs
///                    field: Type = "key", }
///         optional { field: InnerType = "key", }
///     }
/// }
/// ```
macro_rules! openrtb_object {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            required {
                $( $(#[$rmeta:meta])* $rfield:ident : $rty:ty = $rkey:literal, )*
            }
            optional {
                $( $(#[$ometa:meta])* $ofield:ident : $oty:ty = $okey:literal, )*
            }
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name {
            $( $(#[$rmeta])* pub $rfield: $rty, )*
            $( $(#[$ometa])* pub $ofield: Option<$oty>, )*
            /// Placeholder for exchange-specific extensions, kept verbatim.
            pub ext: Option<$crate::RawJson>,
            /// Fields not modelled by this crate, kept verbatim and re-emitted on encode.
            pub unknown: $crate::UnknownFields,
        }

        const _: () = {
            use ::std::borrow::Cow;
            use ::std::fmt;
            use ::serde::de::{self, MapAccess, Visitor};
            use ::serde::ser::SerializeMap;

            impl ::serde::Serialize for $name {
                fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                    let mut map = serializer.serialize_map(None)?;
                    $( map.serialize_entry($rkey, &self.$rfield)?; )*
                    $(
                        if let Some(value) = &self.$ofield {
                            map.serialize_entry($okey, value)?;
                        }
                    )*
                    if let Some(ext) = &self.ext {
                        map.serialize_entry("ext", ext)?;
                    }
                    for (key, value) in &self.unknown.0 {
                        map.serialize_entry(key.as_str(), value)?;
                    }
                    map.end()
                }
            }

            #[allow(non_camel_case_types)]
            enum Field<'de> {
                $( $rfield, )*
                $( $ofield, )*
                ext,
                Unknown(Cow<'de, str>),
            }

            impl<'de> Field<'de> {
                #[inline]
                fn known(key: &str) -> Option<Field<'de>> {
                    Some(match key {
                        $( $rkey => Field::$rfield, )*
                        $( $okey => Field::$ofield, )*
                        "ext" => Field::ext,
                        _ => return None,
                    })
                }
            }

            struct FieldVisitor;

            impl<'de> Visitor<'de> for FieldVisitor {
                type Value = Field<'de>;

                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a field name")
                }

                fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Field<'de>, E> {
                    Ok(Field::known(key).unwrap_or(Field::Unknown(Cow::Borrowed(key))))
                }

                fn visit_str<E: de::Error>(self, key: &str) -> Result<Field<'de>, E> {
                    Ok(Field::known(key).unwrap_or_else(|| Field::Unknown(Cow::Owned(key.to_owned()))))
                }

                fn visit_string<E: de::Error>(self, key: String) -> Result<Field<'de>, E> {
                    Ok(Field::known(&key).unwrap_or(Field::Unknown(Cow::Owned(key))))
                }
            }

            impl<'de> ::serde::Deserialize<'de> for Field<'de> {
                #[inline]
                fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    deserializer.deserialize_str(FieldVisitor)
                }
            }

            struct ObjectVisitor;

            impl<'de> Visitor<'de> for ObjectVisitor {
                type Value = $name;

                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str(concat!("an OpenRTB ", stringify!($name), " object"))
                }

                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                    $( let mut $rfield: Option<$rty> = None; )*
                    // Outer Option: key seen (duplicate detection); inner: value or `null`.
                    $( let mut $ofield: Option<Option<$oty>> = None; )*
                    let mut ext: Option<Option<$crate::RawJson>> = None;
                    let mut unknown = $crate::UnknownFields::new();
                    while let Some(key) = map.next_key::<Field<'de>>()? {
                        match key {
                            $(
                                Field::$rfield => {
                                    if $rfield.is_some() {
                                        return Err(de::Error::duplicate_field($rkey));
                                    }
                                    $rfield = Some(map.next_value()?);
                                }
                            )*
                            $(
                                Field::$ofield => {
                                    if $ofield.is_some() {
                                        return Err(de::Error::duplicate_field($okey));
                                    }
                                    $ofield = Some(map.next_value()?);
                                }
                            )*
                            Field::ext => {
                                if ext.is_some() {
                                    return Err(de::Error::duplicate_field("ext"));
                                }
                                ext = Some(map.next_value()?);
                            }
                            Field::Unknown(key) => {
                                let value = map.next_value::<$crate::RawJson>()?;
                                unknown.push(key.into_owned(), value);
                            }
                        }
                    }
                    Ok($name {
                        $(
                            $rfield: match $rfield {
                                Some(value) => value,
                                None => return Err(de::Error::missing_field($rkey)),
                            },
                        )*
                        $( $ofield: $ofield.flatten(), )*
                        ext: ext.flatten(),
                        unknown,
                    })
                }
            }

            impl<'de> ::serde::Deserialize<'de> for $name {
                fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    deserializer.deserialize_map(ObjectVisitor)
                }
            }

            // The direct decoder (see `direct`): the same rules as the visitor above, reading
            // into the struct in place.

            /// Bit of each member in the set of members seen so far.
            #[allow(non_camel_case_types)]
            #[derive(Clone, Copy)]
            #[repr(u32)]
            enum Slot {
                $( $rfield, )*
                $( $ofield, )*
                ext,
            }

            const _: () = assert!((Slot::ext as u32) < 64, "more members than bits in a u64");

            /// The bits of the required members.
            const REQUIRED: u64 = {
                let slots: &[Slot] = &[$( Slot::$rfield, )*];
                let mut mask = 0u64;
                let mut i = 0;
                while i < slots.len() {
                    mask |= 1 << slots[i] as u32;
                    i += 1;
                }
                mask
            };

            /// Adds `slot` to `seen`; a member seen twice is refused (`duplicate field`).
            #[inline(always)]
            fn first_time(seen: &mut u64, slot: Slot) -> $crate::direct::Result<()> {
                let bit = 1u64 << slot as u32;
                if *seen & bit != 0 {
                    return Err($crate::direct::Reject);
                }
                *seen |= bit;
                Ok(())
            }

            impl $crate::direct::Decode for $name {
                #[inline]
                fn decode(r: &mut $crate::direct::Reader<'_>) -> $crate::direct::Result<Self> {
                    let mut out = Self::default();
                    Self::decode_into(r, &mut out)?;
                    Ok(out)
                }

                fn decode_into(
                    r: &mut $crate::direct::Reader<'_>,
                    out: &mut Self,
                ) -> $crate::direct::Result<()> {
                    use $crate::direct::Decode;
                    let mut seen = 0u64;
                    if r.begin_object()? {
                        loop {
                            let key = r.key()?;
                            match key {
                                $(
                                    $rkey => {
                                        first_time(&mut seen, Slot::$rfield)?;
                                        <$rty as Decode>::decode_into(r, &mut out.$rfield)?;
                                    }
                                )*
                                $(
                                    $okey => {
                                        first_time(&mut seen, Slot::$ofield)?;
                                        <$oty as Decode>::decode_option(r, &mut out.$ofield)?;
                                    }
                                )*
                                "ext" => {
                                    first_time(&mut seen, Slot::ext)?;
                                    if !r.null() {
                                        out.ext = Some(r.raw()?);
                                    }
                                }
                                _ => {
                                    let value = r.raw()?;
                                    out.unknown.push(key.to_owned(), value);
                                }
                            }
                            if !r.next_member()? {
                                break;
                            }
                        }
                    }
                    $crate::direct::all_seen(seen, REQUIRED) // or `missing field`
                }

                #[inline]
                fn decode_option(
                    r: &mut $crate::direct::Reader<'_>,
                    out: &mut Option<Self>,
                ) -> $crate::direct::Result<()> {
                    if !r.null() {
                        Self::decode_into(r, out.insert(Self::default()))?;
                    }
                    Ok(())
                }

                #[inline]
                fn decode_vec(
                    r: &mut $crate::direct::Reader<'_>,
                    out: &mut Vec<Self>,
                ) -> $crate::direct::Result<()> {
                    if r.begin_array()? {
                        loop {
                            out.push(Self::default());
                            let slot = out.last_mut().ok_or($crate::direct::Reject)?;
                            Self::decode_into(r, slot)?;
                            if !r.next_element()? {
                                break;
                            }
                        }
                    }
                    Ok(())
                }
            }
        };
    };
}

pub(crate) use openrtb_object;
