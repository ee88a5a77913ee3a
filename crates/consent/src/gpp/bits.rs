//! GPP's bit fields read straight out of base64url text: each character is six bits, most
//! significant first, with no padding character. Nothing is copied: a read maps the character
//! that holds the bit when it is needed. Every read is bounds-checked; running out of bits is
//! an error, never a panic, and bits left over at the end (the encoder's padding) are ignored.

/// Why a read failed; the caller adds which section and field it was reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BitsError {
    /// The text ended before the field did.
    OutOfBits,
    /// A Fibonacci-coded number larger than the caller's limit.
    TooLarge,
    /// A range list holding more values than the caller's limit.
    TooMany,
}

/// The six-bit value of a base64url character (`A-Z a-z 0-9 - _`), or `None`.
pub(crate) fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

/// A cursor over the bits of one base64url segment.
#[derive(Debug)]
pub(crate) struct Bits<'a> {
    chars: &'a [u8],
    /// Index of the next bit to read.
    pos: usize,
}

impl<'a> Bits<'a> {
    /// A reader over `text`, or `None` when a character is not base64url.
    pub(crate) fn new(text: &'a str) -> Option<Bits<'a>> {
        let chars = text.as_bytes();
        chars
            .iter()
            .all(|&c| sextet(c).is_some())
            .then_some(Bits { chars, pos: 0 })
    }

    /// One bit.
    pub(crate) fn bit(&mut self) -> Result<bool, BitsError> {
        let c = self.chars.get(self.pos / 6).copied();
        let value = c.and_then(sextet).ok_or(BitsError::OutOfBits)?;
        let bit = (value >> (5 - self.pos % 6)) & 1 == 1;
        self.pos += 1;
        Ok(bit)
    }

    /// An unsigned integer of `width` bits (at most 32), most significant bit first.
    pub(crate) fn int(&mut self, width: u32) -> Result<u32, BitsError> {
        debug_assert!(width <= 32);
        let mut value = 0u32;
        for _ in 0..width.min(32) {
            value = (value << 1) | u32::from(self.bit()?);
        }
        Ok(value)
    }

    /// A Fibonacci-coded positive integer (Zeckendorf bits, smallest weight first, ended by a
    /// second consecutive `1`), refused when it exceeds `max`. Weights saturate instead of
    /// overflowing, so a long run of zeros costs time in proportion to its length and nothing
    /// else.
    pub(crate) fn fibonacci(&mut self, max: u32) -> Result<u32, BitsError> {
        let (mut weight, mut next) = (1u64, 2u64);
        let mut value = 0u64;
        let mut previous = false;
        loop {
            let bit = self.bit()?;
            if bit && previous {
                // Two ones in a row end the number; the second is not a value bit.
                return u32::try_from(value).map_err(|_| BitsError::TooLarge);
            }
            if bit {
                value = value.saturating_add(weight);
                if value > u64::from(max) {
                    return Err(BitsError::TooLarge);
                }
            }
            previous = bit;
            (weight, next) = (next, weight.saturating_add(next));
        }
    }

    /// GPP's "Range (Fibonacci)": a 12-bit count of entries, each a single value or a run
    /// `start..=end`, coded as Fibonacci offsets (a single value or a run's start from the
    /// previous entry's last value, a run's end from its start). The result is therefore
    /// strictly increasing. Values above `max_value` are refused, and so is a list that would
    /// hold more than `max_items` values, before it is expanded.
    pub(crate) fn fibonacci_range(
        &mut self,
        max_value: u32,
        max_items: usize,
    ) -> Result<Vec<u32>, BitsError> {
        let count = self.int(12)?;
        let mut values = Vec::new();
        let mut last = 0u32;
        for _ in 0..count {
            let is_run = self.bit()?;
            let start = last
                .checked_add(self.fibonacci(max_value)?)
                .filter(|&v| v <= max_value)
                .ok_or(BitsError::TooLarge)?;
            let end = if is_run {
                start
                    .checked_add(self.fibonacci(max_value)?)
                    .filter(|&v| v <= max_value)
                    .ok_or(BitsError::TooLarge)?
            } else {
                start
            };
            // end - start cannot underflow: the offset is at least 1.
            let run = usize::try_from(end - start).unwrap_or(usize::MAX);
            if run >= max_items.saturating_sub(values.len()) {
                return Err(BitsError::TooMany);
            }
            values.extend(start..=end);
            last = end;
        }
        Ok(values)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Base64url text for a string of '0'/'1' bits, zero-padded to whole characters.
    pub(crate) fn text_of(bits: &str) -> String {
        const DICT: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut bits: Vec<u8> = bits.bytes().map(|b| b - b'0').collect();
        while !bits.len().is_multiple_of(6) {
            bits.push(0);
        }
        bits.chunks(6)
            .map(|c| c.iter().fold(0usize, |v, &b| v * 2 + usize::from(b)))
            .map(|v| char::from(DICT[v]))
            .collect()
    }

    #[test]
    fn sextets_cover_the_alphabet_and_nothing_else() {
        let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for (i, c) in alphabet.bytes().enumerate() {
            assert_eq!(sextet(c), Some(i as u8));
        }
        let others = (0..=255u8).filter(|c| !alphabet.as_bytes().contains(c));
        for c in others {
            assert_eq!(sextet(c), None, "{c}");
        }
    }

    #[test]
    fn integers_read_most_significant_bit_first_across_characters() {
        // "DBAA": 000011 000001 000000 000000: type 3, version 1, an empty range.
        let mut bits = Bits::new("DBAA").expect("base64url");
        assert_eq!(bits.int(6), Ok(3));
        assert_eq!(bits.int(6), Ok(1));
        assert_eq!(bits.int(12), Ok(0));
        assert_eq!(bits.bit(), Err(BitsError::OutOfBits));
        let text = text_of("101100111");
        let mut bits = Bits::new(&text).expect("base64url");
        assert_eq!(bits.int(9), Ok(0b1_0110_0111));
    }

    #[test]
    fn non_base64url_text_is_refused() {
        for text in ["DB=A", "DB A", "DB.A", "DBé", "DB+A", "DB/A"] {
            assert!(Bits::new(text).is_none(), "{text}");
        }
        assert!(Bits::new("").is_some());
    }

    #[test]
    fn fibonacci_codes_decode_to_their_values() {
        // Weights 1, 2, 3, 5, 8, 13, ...; the code ends with the extra 1.
        let table = [
            ("11", 1),
            ("011", 2),
            ("0011", 3),
            ("1011", 4),
            ("00011", 5),
            ("10011", 6),
            ("01011", 7),
            ("000011", 8),
            ("0101011", 20),
            ("10010011", 27),
            ("10001011", 30),
        ];
        for (code, value) in table {
            let text = text_of(code);
            let mut bits = Bits::new(&text).expect("base64url");
            assert_eq!(bits.fibonacci(u32::MAX), Ok(value), "{code}");
            assert_eq!(bits.pos, code.len(), "{code} consumed exactly");
        }
    }

    #[test]
    fn fibonacci_refuses_values_over_the_limit_and_unterminated_codes() {
        let text = text_of("0101011");
        let mut bits = Bits::new(&text).expect("base64url");
        assert_eq!(bits.fibonacci(19), Err(BitsError::TooLarge));
        // No "11" before the text ends.
        let text = text_of("0101010");
        let mut bits = Bits::new(&text).expect("base64url");
        assert_eq!(bits.fibonacci(u32::MAX), Err(BitsError::OutOfBits));
        // A thousand characters of zeros: saturating weights, no overflow, out of bits.
        let zeros = "A".repeat(1000);
        let mut bits = Bits::new(&zeros).expect("base64url");
        assert_eq!(bits.fibonacci(u32::MAX), Err(BitsError::OutOfBits));
        // Ones far out: the weight is huge, so the value is over any u32 limit.
        let far = format!("{}11", "0".repeat(200));
        let text = text_of(&far);
        let mut bits = Bits::new(&text).expect("base64url");
        assert_eq!(bits.fibonacci(u32::MAX), Err(BitsError::TooLarge));
    }

    #[test]
    fn ranges_expand_offsets_and_runs() {
        // 2 entries: single 2 (offset 2 = "011"), run 6..=8 (start offset 4 = "1011",
        // end offset 2 = "011").
        let bits = [&format!("{:012b}", 2), "0", "011", "1", "1011", "011"].concat();
        let text = text_of(&bits);
        let mut reader = Bits::new(&text).expect("base64url");
        assert_eq!(reader.fibonacci_range(100, 64), Ok(vec![2, 6, 7, 8]));
    }

    #[test]
    fn ranges_are_bounded_before_expansion() {
        // One run 1..=1+20: 21 values, over a limit of 10.
        let bits = format!("{:012b}1{}{}", 1, "11", "0101011");
        let text = text_of(&bits);
        let mut reader = Bits::new(&text).expect("base64url");
        assert_eq!(reader.fibonacci_range(1000, 10), Err(BitsError::TooMany));
        // The same run fits a limit of 21.
        let text = text_of(&bits);
        let mut reader = Bits::new(&text).expect("base64url");
        assert_eq!(reader.fibonacci_range(1000, 21).map(|v| v.len()), Ok(21));
        // A value past max_value.
        let text = text_of(&bits);
        let mut reader = Bits::new(&text).expect("base64url");
        assert_eq!(reader.fibonacci_range(10, 100), Err(BitsError::TooLarge));
        // The count promises an entry the text does not hold.
        let text = text_of(&format!("{:012b}", 3));
        let mut reader = Bits::new(&text).expect("base64url");
        assert_eq!(reader.fibonacci_range(10, 100), Err(BitsError::OutOfBits));
    }
}
