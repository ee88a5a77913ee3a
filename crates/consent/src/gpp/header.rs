//! The GPP header, the string's first `~`-separated part: `Type` (6 bits, always 3), `Version`
//! (6 bits, 1 is the only one defined) and the ids of the sections that follow, as a Fibonacci
//! range. Bits after the range are the encoder's padding and are ignored.

use super::GppError;
use super::bits::{Bits, BitsError};

/// The header's `Type`.
const GPP_HEADER_TYPE: u32 = 3;
/// The one header version defined.
const GPP_HEADER_VERSION: u32 = 1;
/// Section ids are kept as `u16`; the registry holds a few dozen.
const MAX_SECTION_ID: u32 = u16::MAX as u32;

/// The section ids the header lists, in order (strictly increasing, as the range coding makes
/// them), at most `max_sections` of them.
pub(crate) fn section_ids(header: &str, max_sections: usize) -> Result<Vec<u16>, GppError> {
    let mut bits = Bits::new(header).ok_or(GppError::HeaderNotBase64Url)?;
    let truncated = |field| move |_| GppError::HeaderTruncated { field };
    let kind = bits.int(6).map_err(truncated("type"))?;
    if kind != GPP_HEADER_TYPE {
        return Err(GppError::NotGppHeader(kind));
    }
    let version = bits.int(6).map_err(truncated("version"))?;
    if version != GPP_HEADER_VERSION {
        return Err(GppError::UnsupportedHeaderVersion(version));
    }
    let ids = bits
        .fibonacci_range(MAX_SECTION_ID, max_sections)
        .map_err(|e| match e {
            BitsError::OutOfBits => GppError::HeaderTruncated {
                field: "section ids",
            },
            BitsError::TooLarge => GppError::SectionIdTooLarge {
                max: MAX_SECTION_ID,
            },
            BitsError::TooMany => GppError::TooManySections { max: max_sections },
        })?;
    // Every id is at most MAX_SECTION_ID, so none is dropped here.
    Ok(ids
        .into_iter()
        .filter_map(|id| u16::try_from(id).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::bits::tests::text_of;
    use super::*;

    #[test]
    fn headers_from_the_spec_and_the_library() {
        let table: [(&str, &[u16]); 4] = [
            // No sections: what the library writes for an empty model.
            ("DBAA", &[]),
            // TCF EU v2 alone.
            ("DBABMA", &[2]),
            // TCF EU v2 and US Privacy.
            ("DBACNYA", &[2, 6]),
            // US Privacy, US national, Indiana: written by @iabgpp/cmpapi 3.2.0.
            ("DBACzws", &[6, 7, 25]),
        ];
        for (header, ids) in table {
            assert_eq!(section_ids(header, 64).as_deref(), Ok(ids), "{header}");
        }
    }

    #[test]
    fn a_run_of_ids_expands() {
        // Type 3, version 1, one entry: the run 7..=27 (start offset 7, end offset 20).
        let bits = [
            "000011",
            "000001",
            &format!("{:012b}", 1),
            "1",
            "01011",
            "0101011",
        ]
        .concat();
        let ids: Vec<u16> = (7..=27).collect();
        assert_eq!(section_ids(&text_of(&bits), 64), Ok(ids));
        assert_eq!(
            section_ids(&text_of(&bits), 20),
            Err(GppError::TooManySections { max: 20 })
        );
    }

    #[test]
    fn bad_headers_are_refused_with_their_reason() {
        let huge_id = [
            "000011",
            "000001",
            &format!("{:012b}", 1),
            "0",
            &"0".repeat(30),
            "11",
        ];
        let table: [(&str, GppError); 7] = [
            ("D", GppError::HeaderTruncated { field: "version" }),
            (
                "DB",
                GppError::HeaderTruncated {
                    field: "section ids",
                },
            ),
            ("DB=A", GppError::HeaderNotBase64Url),
            // A TCF v2 string on its own ("C..." is type 2 in the first six bits).
            ("CPXxRfAPXxRfAAfKABENB", GppError::NotGppHeader(2)),
            ("DCAA", GppError::UnsupportedHeaderVersion(2)),
            // The count promises one id and the text ends.
            (
                "DBAB",
                GppError::HeaderTruncated {
                    field: "section ids",
                },
            ),
            (
                &text_of(&huge_id.concat()),
                GppError::SectionIdTooLarge { max: 65535 },
            ),
        ];
        for (header, error) in table {
            assert_eq!(section_ids(header, 64), Err(error), "{header}");
        }
    }
}
