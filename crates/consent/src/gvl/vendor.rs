//! One vendor of the Global Vendor List: its declared legal bases per purpose and what it uses,
//! as small bit sets (ids 1..=64), so that `basis` asks each question with a shift.

/// Ids 1..=64, one bit each (bit `id - 1`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IdSet(u64);

impl IdSet {
    /// The ids of `bits` (bit `id - 1` set for each id).
    pub(crate) fn from_bits(bits: u64) -> Self {
        IdSet(bits)
    }

    pub(crate) fn bits(self) -> u64 {
        self.0
    }

    /// Whether `id` is in the set; false for 0 and for ids over 64.
    pub fn contains(self, id: u8) -> bool {
        match id.checked_sub(1) {
            Some(bit) if bit < 64 => (self.0 >> bit) & 1 == 1,
            _ => false,
        }
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The highest id in the set, if any.
    pub fn max(self) -> Option<u8> {
        // 64 - leading zeros is at most 64.
        (self.0 != 0).then(|| 64 - self.0.leading_zeros() as u8)
    }

    /// The ids, ascending.
    pub fn ids(self) -> impl Iterator<Item = u8> {
        (1..=64u8).filter(move |&id| self.contains(id))
    }
}

/// A vendor's declarations, as the GVL publishes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vendor {
    pub(super) id: u16,
    pub(super) purposes: IdSet,
    pub(super) leg_int_purposes: IdSet,
    pub(super) flexible_purposes: IdSet,
    pub(super) special_purposes: IdSet,
    pub(super) features: IdSet,
    pub(super) special_features: IdSet,
    pub(super) deleted_date: Option<String>,
}

impl Vendor {
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Purposes declared on the legal basis of consent (`purposes`).
    pub fn purposes(&self) -> IdSet {
        self.purposes
    }

    /// Purposes declared on the legal basis of legitimate interest (`legIntPurposes`).
    pub fn leg_int_purposes(&self) -> IdSet {
        self.leg_int_purposes
    }

    /// Purposes whose legal basis a publisher restriction may switch (`flexiblePurposes`); each
    /// is also in `purposes` or `leg_int_purposes`, which says the default.
    pub fn flexible_purposes(&self) -> IdSet {
        self.flexible_purposes
    }

    pub fn special_purposes(&self) -> IdSet {
        self.special_purposes
    }

    pub fn features(&self) -> IdSet {
        self.features
    }

    pub fn special_features(&self) -> IdSet {
        self.special_features
    }

    /// A vendor with a `deletedDate` is kept in the list (ids are never reused) but must not be
    /// given any legal basis.
    pub fn is_deleted(&self) -> bool {
        self.deleted_date.is_some()
    }

    pub fn deleted_date(&self) -> Option<&str> {
        self.deleted_date.as_deref()
    }
}
