//! The bits of one segment. Its base64url characters (six bits each, most significant first,
//! as IAB's decoder reads them) are unpacked once into bytes, with zero bytes after them, so
//! that any read of up to 57 bits is one unaligned big-endian load and a shift. The length of a
//! segment need not be a multiple of four characters (IAB's encoder pads to 24 bits, others may
//! not); bits after the last field are ignored.

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

/// Zero bytes after the unpacked characters: a 64-bit load at any bit inside them is in bounds.
const SLACK: usize = 8;

/// A cursor over the bits of one segment.
#[derive(Debug, Clone)]
pub(super) struct Bits {
    bytes: Vec<u8>,
    /// Next bit to read.
    pos: usize,
    /// Bits in the segment: six per character. At most `MAX_TC_STRING_BYTES * 6`.
    len: usize,
    segment: Segment,
}

impl Bits {
    /// Unpacks `chars`, checking that each is base64url (one allocation of three bytes per four
    /// characters, plus `SLACK`). `offset` is where the segment starts in the string, for the
    /// error.
    pub(super) fn new(chars: &[u8], segment: Segment, offset: usize) -> Result<Self, TcfError> {
        let len = chars.len().saturating_mul(6);
        let mut bytes = vec![0u8; len.div_ceil(8) + SLACK];
        // Every table value ORed together: INVALID's top bit survives if any byte was not
        // base64url, which is looked for again, slowly, only then.
        let mut seen = 0u8;
        let mut pack = |group: &[u8]| {
            group.iter().fold(0u32, |acc, &c| {
                let value = SEXTETS[usize::from(c)];
                seen |= value;
                (acc << 6) | u32::from(value & 0x3f)
            })
        };
        let mut quads = chars.chunks_exact(4);
        for (quad, out) in (&mut quads).zip(bytes.chunks_exact_mut(3)) {
            let [_, b1, b2, b3] = pack(quad).to_be_bytes();
            out.copy_from_slice(&[b1, b2, b3]);
        }
        // One to three characters left: 6 to 18 bits, packed from the most significant bit.
        let rest = quads.remainder();
        if !rest.is_empty() {
            let [_, b1, b2, b3] = (pack(rest) << (24 - 6 * rest.len())).to_be_bytes();
            let at = chars.len() / 4 * 3;
            let used = (6 * rest.len()).div_ceil(8);
            if let (Some(out), Some(packed)) =
                (bytes.get_mut(at..at + used), [b1, b2, b3].get(..used))
            {
                out.copy_from_slice(packed);
            }
        }
        let first_bad = (seen & 0x80 != 0)
            .then(|| chars.iter().position(|&c| !is_base64url(c)))
            .flatten();
        if let Some(i) = first_bad {
            return Err(TcfError::NotBase64 {
                offset: offset + i,
                byte: chars.get(i).copied().unwrap_or_default(),
            });
        }
        Ok(Bits {
            bytes,
            pos: 0,
            len,
            segment,
        })
    }

    /// The 3-bit segment type of a segment: the top half of its first character (`None` when
    /// that is not base64url).
    pub(super) fn segment_type(chars: &[u8]) -> Option<u8> {
        let first = SEXTETS[usize::from(*chars.first()?)];
        (first != INVALID).then_some(first >> 3)
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
        let value = if n > 32 {
            let high = self.take(n - 32);
            (high << 32) | self.take(32)
        } else {
            self.take(n)
        };
        Ok(value)
    }

    /// `n` (at most 32) bits the caller checked are there: one 64-bit load from the byte
    /// holding the first bit (the slack keeps it in bounds), shifted.
    fn take(&mut self, n: usize) -> u64 {
        if n == 0 {
            return 0;
        }
        let at = self.pos / 8;
        let window = self
            .bytes
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map_or(0, u64::from_be_bytes);
        self.pos += n;
        // At most 7 + 32 bits from the top: the value is inside the window.
        (window << ((self.pos - n) % 8)) >> (64 - n)
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
}
