//! Repair of a sloppy bid request before [`validate`](super::validate): a value that breaks an
//! OpenRTB 2.6 or Native 1.2 rule but can be fixed without guessing the seller's intent is fixed
//! in place, and each change is reported as a [`Repaired`] (a bounded field label for a metric,
//! the exact JSON path for a debug header). `validate` still runs afterwards, so nothing invalid
//! reaches a bidder; what cannot be fixed stays a 400 with the message it had.
//!
//! Rules of the repair:
//!
//! - **Only what `validate` refuses is touched**, and each condition is `validate`'s own check
//!   (the `path` helpers, `media::format`, the Native 1.2 code lists...). A request `validate`
//!   accepts is left byte for byte and `repair` returns nothing; a second `repair` finds nothing.
//! - **Fixing is dropping** an optional value whose absence is valid (it then means "unknown" or
//!   the spec's default), or an entry of an optional list when a valid entry remains (a list
//!   emptied would say something else: no size, no duration, no tracker). The one thing ever
//!   filled in is a native asset `id`, as Prebid Server does. Required values are never invented.
//! - **Never touched, whatever the rule**: identities (request, imp, deal ids), money (floors and
//!   their currencies, `mincpmpersec`, duration floors, deal terms, `qty.multiplier`, `at`,
//!   `test`), privacy and legal signals (`dnt`, `lmt`, `regs`), the supply chain (the buyer's
//!   check on who sells) and `secure`. Dropping any of these would change who may buy, what is
//!   paid, or what the user or the law asked for.
//! - **A native request string is rewritten only when the result passes** `validate`'s Native
//!   1.2 check; otherwise it is left as sent (and refused with the message it had). Untouched
//!   values keep their text; see `native.rs`.
//!
//! Every rule of `validate`, and what repair does with it (paths without `imp[i]`):
//!
//! | rule | repair |
//! | --- | --- |
//! | `id` non-empty | refused: the auction's identity, quoted by bids and notices |
//! | `imp` non-empty | refused: nothing on offer |
//! | at most `MAX_IMPS` imps | refused: which to keep is the exchange's policy, [`cap_imps`] |
//! | `imp.id` non-empty and unique | refused: bids name their imp by id |
//! | `bidfloor` not negative, `bidfloorcur` the auction's | refused: money |
//! | deals: at most `MAX_DEALS`, ids present and unique, floors and currencies | refused: terms agreed with a buyer |
//! | `pmp.private_auction` 0/1, and 1 only with deals | refused: dropping it opens a private auction to every bid |
//! | deal `guar` 0/1, `mincpmpersec`, `durfloors` | refused: deal terms, money |
//! | a banner, video, audio or native object | refused: nothing to bid on |
//! | `instl`, `clickbrowser`, `rwdd` 0/1; `ssai` 0-3; `exp` not negative | dropped |
//! | `secure` 0/1 | refused: absent allows non-secure markup, which an HTTPS page blocks |
//! | `qty.multiplier` not negative | refused: it counts billable events |
//! | `refresh.count`, `refresh.refsettings[].minint` not negative | dropped |
//! | banner and companion `w`, `h` not negative; `topframe`, `vcm` 0/1 | dropped |
//! | `banner.format[]` sizes not negative | the bad entries dropped when a valid one remains; else refused (no size left to sell) |
//! | video and audio `mimes` present, non-empty | refused: required |
//! | video and audio durations, sizes, counts, bitrates not negative; `startdelay` -2 or more; `maxextended` -1 or more; `skip`, `boxingallowed`, `stitched` 0/1 | dropped |
//! | video and audio `rqddurs[]` not negative | the bad entries dropped when a valid one remains; else refused (absent would allow any duration) |
//! | video and audio `mincpmpersec`, `durfloors[]` | refused: money |
//! | `native.request` present, at most 32 KiB, a JSON object of the model's shape (types, no duplicate keys) | refused: nothing readable to fix |
//! | native `assets` present, 1 to 64 | refused: required |
//! | native asset `id` present | filled: its index in `assets` when no other asset uses it (what Prebid Server assigns when no asset has one), else the smallest number none uses |
//! | native asset `id` unique | refused: a bidder answers asset by asset id, and the seller's renderer maps that id back to its own assets; with two assets of id 2, an answer for 2 fills one of them and picking which is a guess (renumbering one in our copy leaves the seller with both) |
//! | native asset: exactly one of `title`, `img`, `video`, `data` | refused: which one is meant is a guess |
//! | native `required`, `aurlsupport`, `durlsupport`, `privacy` 0/1 | dropped |
//! | native `context` listed (1-3, 500+); `contextsubtype` listed (10-39, 500+) | dropped |
//! | native `contextsubtype` of another `context` | both dropped: they contradict each other and nothing says which is wrong |
//! | native `plcmttype` 1 or more; `plcmtcnt`, `seq` not negative | dropped |
//! | native title `len`; video `mimes`, `minduration`, `maxduration`, `protocols`; data `type`: present, in range | refused: required by Native 1.2 |
//! | native img `type` listed; img `w`, `wmin`, `h`, `hmin`, data `len` not negative | dropped |
//! | native `eventtrackers[]`: `event` present and listed, `methods` present | the bad trackers dropped when a valid one remains; else refused |
//! | native `eventtrackers[].methods[]` listed | the bad methods dropped when a valid one remains; else the tracker is bad (above) |
//! | `test` 0/1 | refused: absent means live and billable |
//! | `at` 1, 2 or 500+ | refused: the auction type sets the price paid |
//! | `allimps` 0/1 | dropped |
//! | at most one of `site`, `app`, `dooh` | refused: which one is the seller's is a guess |
//! | `site.mobile`, `site.privacypolicy`, `app.privacypolicy`, `app.paid` 0/1; content `livestream`, `sourcerelationship`, `embeddable` 0/1, `len` not negative | dropped |
//! | `device.dnt`, `device.lmt` 0/1 | refused: privacy signals; dropping one ignores what the user asked for |
//! | `device.h`, `w`, `ppi`, `pxratio` not negative; `js`, `geofetch`, `sua.mobile` 0/1 | dropped |
//! | `device.geo`, `user.geo`: `lat` in -90..90, `lon` in -180..180 | `lat` and `lon` dropped together (one without the other locates nothing), with `accuracy` and `lastfix`, which describe only that fix; `type`, `ipservice` and the named places stay (they also describe the IP-derived fields) |
//! | geo `accuracy`, `lastfix` not negative | dropped |
//! | `source.fd` 0/1 | dropped |
//! | `source.schain.complete`, `nodes[].hp` 0/1 | refused: required by the spec, and the buyer's check on who is paid |
//! | `regs.coppa`, `regs.gdpr` 0/1 | refused: legal signals |
//!
//! Paths in [`Repaired::path`] name the position of the value in the request as the seller sent
//! it (an entry dropped from a list keeps its original index).
//!
//! Cost on a valid request: one pass of comparisons over the fields, no allocation, plus, per
//! native imp, the parse of its request string that `validate` also does (`benches/repair.rs`).

mod context;
mod imp;
mod json;
mod native;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::BidRequest;

use super::MAX_IMPS;
use super::path::{self, Check, Path};

/// What a repair did to a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// A missing value was filled in (native asset ids only).
    Filled,
    /// A value, or an entry of a list, was removed.
    Dropped,
}

impl Action {
    /// Bounded metric label.
    pub fn label(self) -> &'static str {
        match self {
            Action::Filled => "filled",
            Action::Dropped => "dropped",
        }
    }
}

/// Why a field was changed: bounded labels for a metric (`field` is a fixed string like
/// `device.geo.lat`, never an index-bearing path) plus the exact JSON path for a debug header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// The field as a path without indices, e.g. `imp.native.request.assets.id`.
    pub field: &'static str,
    /// Where it is in this request, e.g. `imp[1].native.request.assets[3].id`.
    pub path: String,
    pub action: Action,
}

impl fmt::Display for Repaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.action.label())
    }
}

/// Fixes in place what can be fixed without guessing; returns what it did (empty when nothing).
/// See the module documentation for what is fixed and what is left for `validate` to refuse.
pub fn repair(request: &mut BidRequest) -> Vec<Repaired> {
    let mut log = Log::default();
    // Refused whatever else is fixed: no work spent on it.
    if request.imp.len() > MAX_IMPS {
        return log.done;
    }
    let imps = Path::root("imp");
    for (i, item) in request.imp.iter_mut().enumerate() {
        imp::imp(item, imps.index(i), &mut log);
    }
    context::request(request, &mut log);
    log.done
}

/// Drops the imps past the first `max` (the exchange's per-request cap) and returns how many
/// were dropped. The order is the seller's: the first imps are kept.
pub fn cap_imps(request: &mut BidRequest, max: usize) -> usize {
    let dropped = request.imp.len().saturating_sub(max);
    request.imp.truncate(max);
    dropped
}

/// The repairs made so far, and the ways of making one.
#[derive(Default)]
struct Log {
    done: Vec<Repaired>,
}

impl Log {
    #[cold]
    fn record(&mut self, field: &'static str, at: Path<'_>, action: Action) {
        self.done.push(Repaired {
            field,
            path: at.to_string(),
            action,
        });
    }

    /// Drops the value at `at` if there is one.
    fn drop<T>(&mut self, slot: &mut Option<T>, at: Path<'_>, field: &'static str) {
        if slot.take().is_some() {
            self.record(field, at, Action::Dropped);
        }
    }

    /// Drops the value at `at` when `rule`, validate's check of it, refuses it.
    fn drop_refused<T: Copy>(
        &mut self,
        slot: &mut Option<T>,
        at: Path<'_>,
        field: &'static str,
        rule: impl FnOnce(Option<T>, Path<'_>) -> Check,
    ) {
        if rule(*slot, at).is_err() {
            self.drop(slot, at, field);
        }
    }

    /// A `0/1` flag with another value.
    fn flag(&mut self, slot: &mut Option<i32>, at: Path<'_>, field: &'static str) {
        self.drop_refused(slot, at, field, path::flag);
    }

    /// A count, size or duration below zero.
    fn non_negative<T: Copy + PartialOrd + Default>(
        &mut self,
        slot: &mut Option<T>,
        at: Path<'_>,
        field: &'static str,
    ) {
        self.drop_refused(slot, at, field, path::non_negative);
    }

    /// Removes the entries of `list` that `valid` refuses, when at least one entry is valid.
    fn retain_valid<T>(
        &mut self,
        list: &mut Vec<T>,
        at: Path<'_>,
        field: &'static str,
        valid: impl Fn(&T, Path<'_>) -> bool,
    ) {
        let good = list
            .iter()
            .enumerate()
            .filter(|&(i, item)| valid(item, at.index(i)))
            .count();
        if good == 0 || good == list.len() {
            return;
        }
        let mut i = 0;
        list.retain(|item| {
            let keep = valid(item, at.index(i));
            if !keep {
                self.record(field, at.index(i), Action::Dropped);
            }
            i += 1;
            keep
        });
    }
}
