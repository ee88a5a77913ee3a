//! Per-campaign figures on `/metrics`, read at scrape time from the campaign snapshot in force
//! (nothing on the request path changes for them): budget, this instance's bids, wins and
//! charges, whether the ledger reported the budget gone, the pacer's bid share and, for `even`
//! campaigns that follow a curve (a flight end or a daily budget), the spend the curve wants by
//! now and the spend of record the pacer last read: the figures of the pacing alerts
//! (deploy/prometheus/alerts.yml).
//!
//! Campaign ids come from a file and may number 100,000, so the label set is capped: the first
//! `metrics.max_labelled_campaigns` campaigns of the file are labelled by id, and the rest are
//! summed under `campaign="_other"` (additive figures only: no share, no pacing). The series
//! count is then bounded by the cap, whatever the file holds.

use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

use campaigns::PacingModeConfig;
use campaigns::Snapshot;
use telemetry::{escape_label, family, sample};
use units::Timestamp;

/// The label of the campaigns past the cap, summed.
pub const OTHER: &str = "_other";

/// One labelled row (a campaign, or the sum of the rest).
struct Row<'a> {
    campaign: Cow<'a, str>,
    budget: i64,
    bids: u64,
    wins: u64,
    charged: i64,
    /// Campaigns the ledger last reported out of budget (0 or 1 for one campaign).
    exhausted: u64,
    /// The pacer's share of eligible requests that bid, 0..=1 (one campaign only).
    bid_share: Option<f64>,
    /// `even` campaigns that follow a curve only: the spend the curve wants by now, and the spend of record the
    /// pacing tick last read (nanos).
    pacing: Option<(i64, i64)>,
}

/// A family: name, type, help, and its value in a row (`None`: no sample for that row).
type Family = (
    &'static str,
    &'static str,
    &'static str,
    fn(&Row) -> Option<f64>,
);

/// Appends the `gavel_bidder_campaign_*` families for `snapshot`, labelling at most
/// `max_labelled` campaigns by id.
pub fn render(out: &mut String, snapshot: &Snapshot, now: Timestamp, max_labelled: usize) {
    let rows = rows(snapshot, now, max_labelled);
    let families: [Family; 8] = [
        (
            "gavel_bidder_campaign_budget_nanos",
            "gauge",
            "Each campaign's total budget, in nanos (\"_other\": the campaigns past metrics.max_labelled_campaigns, summed).",
            |r| Some(r.budget as f64),
        ),
        (
            "gavel_bidder_campaign_bids_total",
            "counter",
            "Bids this instance made per campaign.",
            |r| Some(r.bids as f64),
        ),
        (
            "gavel_bidder_campaign_wins_total",
            "counter",
            "Impressions this instance charged per campaign.",
            |r| Some(r.wins as f64),
        ),
        (
            "gavel_bidder_campaign_charged_nanos_total",
            "counter",
            "What this instance's notices charged per campaign, in nanos.",
            |r| Some(r.charged as f64),
        ),
        (
            "gavel_bidder_campaign_exhausted",
            "gauge",
            "1 while the ledger last reported a campaign's budget gone (\"_other\": how many).",
            |r| Some(r.exhausted as f64),
        ),
        (
            "gavel_bidder_campaign_bid_share",
            "gauge",
            "Share of a campaign's eligible requests its pacer lets bid, 0 to 1 (labelled campaigns only).",
            |r| r.bid_share,
        ),
        (
            "gavel_bidder_campaign_pacing_target_nanos",
            "gauge",
            "Total spend an even campaign's pacing curve wants by now, in nanos (labelled even campaigns with a flight end or a daily budget only).",
            |r| r.pacing.map(|(target, _)| target as f64),
        ),
        (
            "gavel_bidder_campaign_pacing_spent_nanos",
            "gauge",
            "Total spend of record an even campaign's pacer last read from the ledger, in nanos (labelled even campaigns with a flight end or a daily budget only).",
            |r| r.pacing.map(|(_, spent)| spent as f64),
        ),
    ];
    for (name, kind, help, value) in families {
        family(out, name, kind, help);
        for row in &rows {
            if let Some(v) = value(row) {
                sample(out, name, &[("campaign", &row.campaign)], v);
            }
        }
    }
}

/// Whether the campaign's pacer follows a curve (`even`, with a flight end or a daily budget),
/// the only campaigns whose target spend says anything: an `asap` one, or an `even` one with
/// neither, wants its whole budget at once.
fn follows_a_curve(c: &campaigns::Campaign) -> bool {
    c.pacing() == PacingModeConfig::Even && (c.flight().end.is_some() || c.budget().daily.is_some())
}

/// The labelled campaigns, in file order, then `_other` when any campaign is past the cap.
fn rows(snapshot: &Snapshot, now: Timestamp, max_labelled: usize) -> Vec<Row<'_>> {
    let mut rows = Vec::with_capacity(max_labelled.min(snapshot.states.len()) + 1);
    let mut other: Option<Row> = None;
    for (i, (state, campaign)) in snapshot
        .states
        .iter()
        .zip(snapshot.set.campaigns())
        .enumerate()
    {
        let exhausted = u64::from(state.is_exhausted(now));
        let (budget, bids, wins, charged) = (
            campaign.budget().total.get(),
            state.bids.load(Relaxed),
            state.wins.load(Relaxed),
            state.charged.load(Relaxed),
        );
        if i < max_labelled {
            // The pacer's lock, once per labelled campaign per scrape: the cap bounds it too.
            let pacing = state.pacing_state(now);
            rows.push(Row {
                campaign: escape_label(&state.id),
                budget,
                bids,
                wins,
                charged,
                exhausted,
                bid_share: Some(pacing.bid_share),
                pacing: follows_a_curve(campaign)
                    .then(|| (pacing.target.get(), pacing.actual.get())),
            });
            continue;
        }
        let o = other.get_or_insert(Row {
            campaign: Cow::Borrowed(OTHER),
            budget: 0,
            bids: 0,
            wins: 0,
            charged: 0,
            exhausted: 0,
            bid_share: None,
            pacing: None,
        });
        o.budget = o.budget.saturating_add(budget);
        o.bids = o.bids.saturating_add(bids);
        o.wins = o.wins.saturating_add(wins);
        o.charged = o.charged.saturating_add(charged);
        o.exhausted += exhausted;
    }
    rows.extend(other);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn snapshot(n: usize) -> Snapshot {
        let list: Vec<String> = (0..n)
            .map(|i| {
                let pacing = if i % 2 == 0 { "even" } else { "asap" };
                format!(
                    r#"{{"id": "c{i}", "pacing": "{pacing}", "budget": {{"total": 10, "daily": 5}}, "bid": {{"cpm": 1}},
                      "creatives": [{{"id": "cr", "w": 300, "h": 250, "adm": "x"}}]}}"#
                )
            })
            .collect();
        let set =
            campaigns::CampaignSet::from_json_bytes(format!("[{}]", list.join(",")).as_bytes())
                .unwrap();
        Snapshot::build(set, None, Timestamp::now(), Duration::from_secs(1))
    }

    fn series(text: &str) -> usize {
        text.lines().filter(|l| !l.starts_with('#')).count()
    }

    #[test]
    fn campaigns_past_the_cap_are_summed_under_other() {
        let s = snapshot(5);
        s.states[3].bids.store(2, Relaxed);
        s.states[4].bids.store(3, Relaxed);
        s.states[4].mark_exhausted(Timestamp::now(), Duration::from_secs(60));
        let mut out = String::new();
        render(&mut out, &s, Timestamp::now(), 3);
        assert!(out.contains("gavel_bidder_campaign_bids_total{campaign=\"_other\"} 5\n"));
        assert!(out.contains("gavel_bidder_campaign_exhausted{campaign=\"_other\"} 1\n"));
        // Two campaigns of 10 units each.
        assert!(
            out.contains("gavel_bidder_campaign_budget_nanos{campaign=\"_other\"} 20000000000\n")
        );
        assert!(out.contains("gavel_bidder_campaign_bid_share{campaign=\"c2\"}"));
        assert!(!out.contains("gavel_bidder_campaign_bid_share{campaign=\"_other\"}"));
        // Pacing figures for the labelled even campaigns (c0, c2) only.
        assert_eq!(
            out.matches("gavel_bidder_campaign_pacing_target_nanos{")
                .count(),
            2
        );
        assert!(!out.contains("campaign=\"c3\""));
    }

    #[test]
    fn the_series_count_stops_growing_at_the_cap() {
        let count = |n| {
            let mut out = String::new();
            render(&mut out, &snapshot(n), Timestamp::now(), 100);
            series(&out)
        };
        assert_eq!(count(150), count(1_000));
        assert!(count(50) < count(150));
        let mut none = String::new();
        render(&mut none, &snapshot(1_000), Timestamp::now(), 0);
        // Only `_other`, with its five additive figures.
        assert_eq!(series(&none), 5);
    }
}
