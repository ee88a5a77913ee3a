//! The IAB US Privacy string (CCPA), as `regs.us_privacy` carries it and as GPP section 6
//! (`uspv1`) holds it: four characters, the version `1` then three signals, each `Y`, `N` or
//! `-` (not applicable): notice given, opted out of sale, covered by the LSPA. Lower-case `y`
//! and `n` are accepted, as Prebid Server accepts them; nothing else is.

use super::GppError;

/// One signal of a US Privacy string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UspSignal {
    /// `Y`.
    Yes,
    /// `N`.
    No,
    /// `-`.
    NotApplicable,
}

/// A parsed US Privacy string (version 1, the only one defined).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsPrivacy {
    /// Explicit notice of the opportunity to opt out was given.
    pub notice: UspSignal,
    /// The user opted out of the sale of their personal information.
    pub opt_out_sale: UspSignal,
    /// The publisher is a signatory to the IAB Limited Service Provider Agreement.
    pub lspa_covered: UspSignal,
}

impl UsPrivacy {
    /// The string's only length.
    pub const LEN: usize = 4;

    /// Parses `1YNN`-style text.
    pub fn parse(s: &str) -> Result<UsPrivacy, GppError> {
        let [version, notice, opt_out_sale, lspa_covered] =
            <[u8; Self::LEN]>::try_from(s.as_bytes())
                .map_err(|_| GppError::UspLength { len: s.len() })?;
        if version != b'1' {
            return Err(GppError::UspVersion);
        }
        Ok(UsPrivacy {
            notice: signal(notice, 1)?,
            opt_out_sale: signal(opt_out_sale, 2)?,
            lspa_covered: signal(lspa_covered, 3)?,
        })
    }

    /// Whether the user opted out of sale (`Y` in the third place).
    pub fn opted_out_of_sale(&self) -> bool {
        self.opt_out_sale == UspSignal::Yes
    }
}

fn signal(c: u8, position: usize) -> Result<UspSignal, GppError> {
    match c {
        b'Y' | b'y' => Ok(UspSignal::Yes),
        b'N' | b'n' => Ok(UspSignal::No),
        b'-' => Ok(UspSignal::NotApplicable),
        _ => Err(GppError::UspSignal { position }),
    }
}

#[cfg(test)]
mod tests {
    use super::UspSignal::{No, NotApplicable as NA, Yes};
    use super::*;

    #[test]
    fn strings_parse_to_their_signals() {
        let table = [
            ("1YNN", Yes, No, No, false),
            ("1YYN", Yes, Yes, No, true),
            ("1NYY", No, Yes, Yes, true),
            ("1---", NA, NA, NA, false),
            ("1-Y-", NA, Yes, NA, true),
            ("1yyn", Yes, Yes, No, true),
        ];
        for (text, notice, opt_out_sale, lspa_covered, opted_out) in table {
            let parsed = UsPrivacy::parse(text).expect(text);
            let expected = UsPrivacy {
                notice,
                opt_out_sale,
                lspa_covered,
            };
            assert_eq!(parsed, expected, "{text}");
            assert_eq!(parsed.opted_out_of_sale(), opted_out, "{text}");
        }
    }

    #[test]
    fn malformed_strings_are_refused_with_their_reason() {
        let table = [
            ("", GppError::UspLength { len: 0 }),
            ("1YN", GppError::UspLength { len: 3 }),
            ("1YNNY", GppError::UspLength { len: 5 }),
            // Four bytes, the last two one character.
            ("1YÑ", GppError::UspSignal { position: 2 }),
            ("2YNN", GppError::UspVersion),
            ("1XNN", GppError::UspSignal { position: 1 }),
            ("1Y0N", GppError::UspSignal { position: 2 }),
            ("1YN ", GppError::UspSignal { position: 3 }),
        ];
        for (text, error) in table {
            assert_eq!(UsPrivacy::parse(text), Err(error), "{text:?}");
        }
    }
}
