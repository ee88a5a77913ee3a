//! The bits of one segment, read straight from its base64url characters: each character is six
//! bits, most significant first, as IAB's decoder reads them. Nothing is copied into a byte
//! buffer, and the length of a segment need not be a multiple of four characters (IAB's
//! encoder pads to 24 bits, other encoders may not; bits after the last field are ignored).

use super::error::{Segment, TcfError};

/// The value of each base64url character, `INVALID` for every other byte.
const SEXTETS: [u8; 256] = sextet_table();
const INVALID: u8 = 0xff;

const fn sextet_table() -> [u8; 256] {
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut table = [INVALID; 256];
    let mut i = 0;
    while i < alphabet.len() {
        table[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    table
}

/// Whether `byte` is a base64url character.
pub(super) fn is_base64url(byte: u8) -> bool {
    SEXTETS[usize::from(byte)] != INVALID
}

/// A cursor over the bits of one segment. The characters were checked to be base64url before
/// (`TcString::decode` checks the whole string once), so every character has a value.
#[derive(Debug, Clone)]
pub(super) struct Bits<'a> {
    chars: &'a [u8],
    /// Next bit to read.
    pos: usize,
    /// Bits in the segment: six per character. At most `MAX_TC_STRING_BYTES * 6`.
    len: usize,
    segment: Segment,
}

impl<'a> Bits<'a> {
    pub(super) fn new(chars: &'a [u8], segment: Segment) -> Self {
        Bits {
            chars,
            pos: 0,
            len: chars.len().saturating_mul(6),
            segment,
        }
    }

    /// The 3-bit segment type of a segment: the top half of its first character.
    pub(super) fn segment_type(chars: &[u8]) -> u8 {
        chars
            .first()
            .map_or(0, |&c| (SEXTETS[usize::from(c)] & 0x3f) >> 3)
    }

    pub(super) fn segment(&self) -> Segment {
        self.segment
    }

    /// Index of the next bit to read, from the start of the segment.
    pub(super) fn position(&self) -> usize {
        self.pos
    }

    /// Bits not read yet.
    pub(super) fn remaining(&self) -> usize {
        self.len.saturating_sub(self.pos)
    }

    /// Refuses, as truncated, a field of `n` bits that the segment does not hold.
    pub(super) fn ensure(&self, n: usize, field: &'static str) -> Result<(), TcfError> {
        if n > self.remaining() {
            return Err(TcfError::Truncated {
                segment: self.segment,
                field,
                bit: self.len,
            });
        }
        Ok(())
    }

    /// The next `n` bits (at most 64) as an unsigned number, first bit most significant.
    pub(super) fn read(&mut self, n: usize, field: &'static str) -> Result<u64, TcfError> {
        debug_assert!(n <= 64);
        self.ensure(n, field)?;
        let end = self.pos + n;
        let mut value: u64 = 0;
        let mut at = self.pos;
        while at < end {
            let left_in_char = 6 - at % 6;
            let take = left_in_char.min(end - at);
            let sextet = u64::from(self.sextet(at / 6));
            let bits = (sextet >> (left_in_char - take)) & ((1u64 << take) - 1);
            value = (value << take) | bits;
            at += take;
        }
        self.pos = end;
        Ok(value)
    }

    pub(super) fn read_bool(&mut self, field: &'static str) -> Result<bool, TcfError> {
        Ok(self.read(1, field)? == 1)
    }

    pub(super) fn read_u8(&mut self, n: usize, field: &'static str) -> Result<u8, TcfError> {
        debug_assert!(n <= 8);
        Ok(u8::try_from(self.read(n, field)?).unwrap_or(u8::MAX))
    }

    pub(super) fn read_u16(&mut self, n: usize, field: &'static str) -> Result<u16, TcfError> {
        debug_assert!(n <= 16);
        Ok(u16::try_from(self.read(n, field)?).unwrap_or(u16::MAX))
    }

    pub(super) fn read_u32(&mut self, n: usize, field: &'static str) -> Result<u32, TcfError> {
        debug_assert!(n <= 32);
        Ok(u32::try_from(self.read(n, field)?).unwrap_or(u32::MAX))
    }

    /// Two letters of six bits each, `A` = 0 to `Z` = 25 (a language or a country code).
    pub(super) fn read_letters(&mut self, field: &'static str) -> Result<[u8; 2], TcfError> {
        let at = self.pos;
        let mut letters = [0u8; 2];
        for letter in &mut letters {
            let value = self.read_u8(6, field)?;
            if value > 25 {
                return Err(TcfError::NotALetter {
                    segment: self.segment,
                    field,
                    value,
                    bit: at,
                });
            }
            *letter = b'A' + value;
        }
        Ok(letters)
    }

    fn sextet(&self, index: usize) -> u8 {
        self.chars
            .get(index)
            .map_or(0, |&c| SEXTETS[usize::from(c)] & 0x3f)
    }
}
