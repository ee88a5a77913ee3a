//! The fields a conversion can move or drop, as a closed list with bounded labels, and
//! [`Converted`], the sets of them one conversion touched (for metrics and a debug header).

use std::fmt;

/// Declares [`Field`] with its label (the OpenRTB 2.6 path, without array indices) and
/// [`Field::ALL`].
macro_rules! fields {
    ($( $(#[$meta:meta])* $variant:ident => $label:literal, )*) => {
        /// One OpenRTB 2.6 field that a conversion moves or drops, named by its 2.6 path
        /// without array indices (`imp.video.poddur`, not `imp[2].video.poddur`), so that the
        /// set of labels is bounded.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Field {
            $( $(#[$meta])* $variant, )*
        }

        impl Field {
            /// Every field, in declaration order.
            pub const ALL: &'static [Field] = &[$( Field::$variant, )*];

            /// The 2.6 path, e.g. `regs.gdpr`.
            pub const fn label(self) -> &'static str {
                match self {
                    $( Field::$variant => $label, )*
                }
            }
        }
    };
}

fields! {
    // Fields with a 2.5 home in an `ext` (moved both ways).
    SourceSchain => "source.schain",
    RegsGdpr => "regs.gdpr",
    RegsUsPrivacy => "regs.us_privacy",
    UserConsent => "user.consent",
    UserEids => "user.eids",
    /// 2.5 home: `imp.ext.prebid.is_rewarded_inventory` (Prebid's spelling).
    ImpRwdd => "imp.rwdd",
    // 2.6-only fields (dropped going down; the two `inventorypartnerdomain` also come up from
    // their former `ext` home).
    Dooh => "dooh",
    Wlangb => "wlangb",
    Acat => "acat",
    Cattax => "cattax",
    RegsGpp => "regs.gpp",
    RegsGppSid => "regs.gpp_sid",
    ImpSsai => "imp.ssai",
    ImpQty => "imp.qty",
    ImpDt => "imp.dt",
    ImpRefresh => "imp.refresh",
    VideoMaxseq => "imp.video.maxseq",
    VideoPoddur => "imp.video.poddur",
    VideoPodid => "imp.video.podid",
    VideoPodseq => "imp.video.podseq",
    VideoRqddurs => "imp.video.rqddurs",
    VideoPlcmt => "imp.video.plcmt",
    VideoSlotinpod => "imp.video.slotinpod",
    VideoMincpmpersec => "imp.video.mincpmpersec",
    VideoPoddedupe => "imp.video.poddedupe",
    VideoDurfloors => "imp.video.durfloors",
    AudioPoddur => "imp.audio.poddur",
    AudioPodid => "imp.audio.podid",
    AudioPodseq => "imp.audio.podseq",
    AudioRqddurs => "imp.audio.rqddurs",
    AudioSlotinpod => "imp.audio.slotinpod",
    AudioMincpmpersec => "imp.audio.mincpmpersec",
    AudioDurfloors => "imp.audio.durfloors",
    DealGuar => "imp.pmp.deals.guar",
    DealMincpmpersec => "imp.pmp.deals.mincpmpersec",
    DealDurfloors => "imp.pmp.deals.durfloors",
    SiteCattax => "site.cattax",
    SiteKwarray => "site.kwarray",
    SiteInventorypartnerdomain => "site.inventorypartnerdomain",
    AppCattax => "app.cattax",
    AppKwarray => "app.kwarray",
    AppInventorypartnerdomain => "app.inventorypartnerdomain",
    /// Of the site's or the app's publisher.
    PublisherCattax => "publisher.cattax",
    /// Of the site's or the app's content (`content.*` below likewise).
    ProducerCattax => "content.producer.cattax",
    ContentCattax => "content.cattax",
    ContentKwarray => "content.kwarray",
    ContentLangb => "content.langb",
    ContentNetwork => "content.network",
    ContentChannel => "content.channel",
    // Content and Data fields of later 2.6 releases that the object model does not type (they
    // live in `unknown`).
    ContentGtax => "content.gtax",
    ContentGenres => "content.genres",
    ContentRealtime => "content.realtime",
    ContentFirstbroadcast => "content.firstbroadcast",
    DeviceSua => "device.sua",
    DeviceLangb => "device.langb",
    UserKwarray => "user.kwarray",
    /// Of `user.data` or `content.data`.
    DataCids => "data.cids",
}

const _: () = assert!(Field::ALL.len() <= 128, "FieldSet is a u128");

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// A set of [`Field`]s (a bit set: copying and inserting cost nothing).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FieldSet(u128);

impl FieldSet {
    pub const EMPTY: FieldSet = FieldSet(0);

    const fn bit(field: Field) -> u128 {
        // At most 127 by the assertion above: the shift cannot overflow.
        1u128 << (field as u8)
    }

    pub fn insert(&mut self, field: Field) {
        self.0 |= Self::bit(field);
    }

    pub const fn contains(self, field: Field) -> bool {
        self.0 & Self::bit(field) != 0
    }

    pub const fn len(self) -> u32 {
        self.0.count_ones()
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Field> {
        Field::ALL
            .iter()
            .copied()
            .filter(move |f| self.contains(*f))
    }

    /// The labels of the members, in declaration order.
    pub fn labels(self) -> impl Iterator<Item = &'static str> {
        self.iter().map(Field::label)
    }
}

impl fmt::Debug for FieldSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.labels()).finish()
    }
}

/// Comma-separated labels, e.g. `regs.gdpr,user.consent`; empty for the empty set.
impl fmt::Display for FieldSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, label) in self.labels().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(label)?;
        }
        Ok(())
    }
}

impl FromIterator<Field> for FieldSet {
    fn from_iter<I: IntoIterator<Item = Field>>(iter: I) -> Self {
        let mut set = FieldSet::EMPTY;
        for field in iter {
            set.insert(field);
        }
        set
    }
}

/// What one conversion did, field by field (each field counted once however many imps or
/// deals carried it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Converted {
    /// Fields whose value now sits in its other-version home.
    pub moved: FieldSet,
    /// Fields whose value was discarded: 2.6-only fields going down; going up, a 2.5 `ext`
    /// value whose 2.6 field was already set (the 2.6 value wins).
    pub dropped: FieldSet,
}

impl Converted {
    /// Nothing moved, nothing dropped: the request was already in the target shape.
    pub const fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.dropped.is_empty()
    }
}

/// `moved=regs.gdpr,user.consent dropped=device.sua` (either part left out when empty,
/// `-` when both are), short enough for a debug response header.
impl fmt::Display for Converted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.moved.is_empty(), self.dropped.is_empty()) {
            (true, true) => f.write_str("-"),
            (false, true) => write!(f, "moved={}", self.moved),
            (true, false) => write!(f, "dropped={}", self.dropped),
            (false, false) => write!(f, "moved={} dropped={}", self.moved, self.dropped),
        }
    }
}
