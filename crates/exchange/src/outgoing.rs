//! What each bidder of one auction is sent. The enriched request is the same for everyone; a
//! bidder's copy differs by what privacy law removes for its vendor id, the currency its floors
//! are in, and the OpenRTB version it speaks. Bidders that agree on all three share one
//! encoded body (and one compressed copy of it, when any of them wants gzip), so the usual
//! auction (no privacy action, one currency, one version) still encodes once.

use bytes::Bytes;
use openrtb::BidRequest;

use crate::config::OpenRtbVersion;
use crate::money::{self, Rates};
use crate::outcome::{BidderIx, NotCalled, SkipReason};
use crate::privacy::{self, Actions, Signals};
use crate::roster::{Bidder, Roster};

/// One encoded request, as sent to the bidders that share it.
#[derive(Debug)]
pub(crate) struct Body {
    pub(crate) plain: Bytes,
    /// Compressed once, when a bidder of this body wants gzip.
    pub(crate) gzipped: Option<Bytes>,
}

/// What one bidder of the auction gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// The body at this index of [`Outgoing::bodies`].
    Send(usize),
    /// Not asked: why (its call is recorded as skipped).
    Skip(SkipReason),
}

/// Every bidder's route for one auction, and the privacy actions taken for each.
#[derive(Debug, Default)]
pub(crate) struct Outgoing {
    pub(crate) bodies: Vec<Body>,
    /// Index-aligned with the roster; `None`: the seller does not use it, or it is not serving.
    pub(crate) routes: Vec<Option<Route>>,
    /// Per bidder whose copy privacy changed (or that it left out), what it did.
    pub(crate) privacy: Vec<(BidderIx, Actions)>,
    /// Why privacy left bidders out, per bidder left out.
    pub(crate) not_called: Vec<(BidderIx, NotCalled)>,
}

impl Outgoing {
    /// The body bidder `ix` is sent, and whether it is the gzipped copy.
    pub(crate) fn body_for(&self, ix: BidderIx, gzip: bool) -> Option<(Bytes, bool)> {
        let Some(Some(Route::Send(i))) = self.routes.get(ix.index()) else {
            return None;
        };
        let body = self.bodies.get(*i)?;
        match (&body.gzipped, gzip) {
            (Some(z), true) => Some((z.clone(), true)),
            _ => Some((body.plain.clone(), false)),
        }
    }

    pub(crate) fn route(&self, ix: BidderIx) -> Option<Route> {
        self.routes.get(ix.index()).copied().flatten()
    }
}

/// What shapes a bidder's copy: bidders with equal keys share a body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key<'r> {
    version: OpenRtbVersion,
    /// Floors in this currency (`None`: the auction's, unchanged); borrowed from the roster.
    currency: Option<&'r str>,
    actions: Actions,
}

/// Everything [`prepare`] reads besides the roster.
#[derive(Debug)]
pub(crate) struct Inputs<'a> {
    /// Enriched, in the auction currency, 2.6.
    pub(crate) request: &'a BidRequest,
    pub(crate) auction_currency: &'a str,
    pub(crate) signals: &'a Signals,
    pub(crate) gvl: Option<&'a consent::gvl::VendorList>,
    pub(crate) rates: Rates<'a>,
}

/// Decides every bidder's copy and encodes each distinct one once. `allowed`: the seller's
/// choice of bidders.
pub(crate) fn prepare(
    roster: &Roster,
    allowed: impl Fn(&Bidder) -> bool,
    inputs: &Inputs<'_>,
) -> Outgoing {
    let mut out = Outgoing {
        routes: vec![None; roster.iter().count()],
        ..Outgoing::default()
    };
    let mut keys: Vec<Key<'_>> = Vec::new();
    for (ix, bidder) in roster.iter() {
        if !(bidder.serving() && allowed(bidder)) {
            continue;
        }
        let actions = privacy::actions(inputs.signals, bidder.wants.vendor_id, inputs.gvl);
        if !actions.is_none() {
            out.privacy.push((ix, actions));
        }
        let route = if let Some(reason) = actions.not_called {
            out.not_called.push((ix, reason));
            Route::Skip(SkipReason::Privacy)
        } else {
            let key = Key {
                version: bidder.wants.version,
                currency: bidder
                    .wants
                    .currency
                    .as_deref()
                    .filter(|c| *c != inputs.auction_currency),
                actions,
            };
            match keys.iter().position(|k| *k == key) {
                Some(i) => {
                    want_gzip(&mut out.bodies[i], bidder.wants.gzip);
                    Route::Send(i)
                }
                None => match encode(inputs, &key) {
                    Ok(plain) => {
                        keys.push(key);
                        let mut body = Body {
                            plain,
                            gzipped: None,
                        };
                        want_gzip(&mut body, bidder.wants.gzip);
                        out.bodies.push(body);
                        Route::Send(out.bodies.len() - 1)
                    }
                    Err(reason) => Route::Skip(reason),
                },
            }
        };
        if let Some(slot) = out.routes.get_mut(ix.index()) {
            *slot = Some(route);
        }
    }
    out
}

/// Compresses the body the first time a bidder of it wants gzip.
fn want_gzip(body: &mut Body, gzip: bool) {
    if gzip && body.gzipped.is_none() {
        // A body that cannot be compressed goes out plain (it cannot happen with an in-memory
        // buffer; the error exists for the library's sake).
        body.gzipped = upstream::gzip::compress(&body.plain).ok();
    }
}

/// One bidder's copy, encoded: scrubbed, its floors in its currency, in its version.
fn encode(inputs: &Inputs<'_>, key: &Key<'_>) -> Result<Bytes, SkipReason> {
    let plain =
        key.actions.is_none() && key.currency.is_none() && key.version == OpenRtbVersion::V2_6;
    if plain {
        return inputs
            .request
            .to_vec()
            .map(Bytes::from)
            .map_err(|_| SkipReason::Unconvertible);
    }
    let mut copy = inputs.request.clone();
    privacy::scrub(&mut copy, key.actions);
    if let Some(currency) = key.currency {
        money::floors_to(&mut copy, currency, &inputs.rates).map_err(|_| SkipReason::NoRate)?;
        copy.cur = Some(vec![currency.to_owned()]);
    }
    if key.version == OpenRtbVersion::V2_5 {
        legacy_from_gpp(&mut copy);
        openrtb::convert::down_to_2_5(&mut copy).map_err(|_| SkipReason::Unconvertible)?;
    }
    copy.to_vec()
        .map(Bytes::from)
        .map_err(|_| SkipReason::Unconvertible)
}

/// 2.5 has no place for GPP, so a 2.5 bidder would lose a signal that only GPP carried: the
/// GDPR flag and consent string of its TCF section, the `us_privacy` of its `uspv1` section,
/// filled in where the request has none (as Prebid Server does before converting down).
fn legacy_from_gpp(request: &mut BidRequest) {
    let Some(regs) = request.regs.as_mut() else {
        return;
    };
    let (Some(text), Some(sids)) = (regs.gpp.as_deref(), regs.gpp_sid.as_deref()) else {
        return;
    };
    let Ok(gpp) = consent::gpp::GppString::decode(text) else {
        return;
    };
    let named = |id: u16| sids.contains(&i32::from(id));
    if named(consent::gpp::USP_V1) && regs.us_privacy.is_none() {
        regs.us_privacy = gpp.section(consent::gpp::USP_V1).map(str::to_owned);
    }
    if !named(consent::gpp::TCF_EU_V2) {
        return;
    }
    regs.gdpr.get_or_insert(1);
    let user = request.user.get_or_insert_with(Default::default);
    if user.consent.is_none() {
        user.consent = gpp.tcf_eu_v2().map(str::to_owned);
    }
}
