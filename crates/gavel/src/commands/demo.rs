//! `gavel demo`: simulated DSPs, the exchange and the load generator in one process, then a
//! report a person can read in ten seconds.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use exchange::{Config, Exchange, ExchangeReport};
use loadgen::{Arrivals, Corpus, LoadSpec, Report, ResponseCheck};
use openrtb::Price;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::demo_bidder::{self, DemoBidder};

/// The demo's vendor list (vendors 1-16, hand-made): `examples/gvl.json`.
const DEMO_VENDOR_LIST: &str = include_str!("../../../../examples/gvl.json");
use crate::cli::DemoArgs;

/// Most auctions per second the demo offers; beyond this a 2-core machine measures itself.
const MAX_DEMO_RATE: f64 = 50_000.0;

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    if !(args.rate > 0.0 && args.rate <= MAX_DEMO_RATE) {
        bail!("--rate must be more than 0 and at most {MAX_DEMO_RATE}");
    }
    if args.duration > Duration::from_secs(600) {
        bail!("--duration must be at most 10m for the demo");
    }
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let fleet = sim::start(
        sim::FleetConfig {
            seed: args.seed,
            bind: std::net::IpAddr::from([127, 0, 0, 1]),
            profiles: sim::demo_profiles(args.bidders),
            tls: None,
            transport: sim::Transport::Hyper,
        },
        stopped(stop_rx.clone()),
    )
    .await
    .context("starting the simulated bidders")?;

    let mut real_bidder = DemoBidder::start(args.duration, stopped(stop_rx.clone())).await?;

    // In flight at once ~ rate x tmax; give every bidder room for twice that.
    let in_flight = (args.rate * f64::from(args.tmax) / 1000.0).ceil() as u32;
    let per_bidder = (in_flight * 2).clamp(16, 4096);
    // Loss notices: the real bidder's lost bids then return their reserved price to their
    // campaign at once instead of when the reservation expires.
    // One seller, the load generator, with a fresh key; it bills on win, since nothing here
    // renders the ads. Every bidder is on loopback, and so is every connection of the load.
    let (seller_key_file, seller_key) = real_bidder.seller_key()?;
    // TCF enforced with the demo's vendor list (vendors 1-16; the generated EU requests carry
    // consent strings for them): the simulated bidders are vendors 1.., the real one 16.
    let gvl_file = seller_key_file.with_file_name("gvl.json");
    std::fs::write(&gvl_file, DEMO_VENDOR_LIST).context("writing the demo's vendor list")?;
    let config_text = format!(
        "node = \"demo\"\n[http]\nmax_connections_per_ip = 8192\n\
         [deadline]\ndefault_tmax_ms = {tmax}\nmax_tmax_ms = {tmax}\n\
         [notices]\nfire_lurl = true\nallow_private_addresses = true\n\
         [privacy]\ngvl_file = {gvl_file:?}\n\n\
         [records]\nsink = \"file\"\ndir = {records:?}\n\n\
         [[sellers]]\nname = \"demo-load\"\nkey_file = {key_file:?}\nbill_on_win = true\n\n\
         {bidders}\n{real}gvl_vendor_id = 16\n",
        key_file = seller_key_file.display().to_string(),
        gvl_file = gvl_file.display().to_string(),
        records = real_bidder.records_dir().display().to_string(),
        tmax = args.tmax,
        bidders = fleet.exchange_bidders_toml_as(per_bidder, Some(1)),
        real = real_bidder.exchange_toml(per_bidder),
    );
    let config = Config::from_toml(&config_text).context("the demo's exchange configuration")?;
    let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
    let url = format!(
        "http://{}{}",
        listener.local_addr()?,
        exchange::AUCTION_PATH
    );
    let (journal, records) = super::records_sink::start(
        &config.config.rtb.records,
        None,
        journal::Server::Exchange,
        "demo",
    )
    .await?;
    let exchange = Exchange::with_journal(config, journal);
    let server = tokio::spawn({
        let (exchange, stop) = (exchange.clone(), stopped(stop_rx.clone()));
        async move { exchange.serve(listener, stop).await }
    });

    println!(
        "Gavel demo: {} simulated bidders and a real one ({}), {} auctions/s for {:.0?}, tmax {} ms (seed {})...",
        fleet.bidders.len(),
        demo_bidder::NAME,
        args.rate,
        args.duration,
        args.tmax,
        args.seed
    );
    let spec = LoadSpec {
        url,
        arrivals: Arrivals::Rate(args.rate),
        duration: args.duration,
        connections: (in_flight as usize * 2).clamp(32, 4096),
        max_connections: None,
        timeout: Duration::from_millis(u64::from(args.tmax) * 10).min(loadgen::MAX_TIMEOUT),
        warmup: Duration::ZERO,
        warmup_rate: None,
        check: ResponseCheck::None,
        authorization: Some(format!("Bearer {seller_key}")),
        http: loadgen::HttpOptions::default(),
    };
    let corpus = Arc::new(Corpus::generated(args.seed, 1000, args.tmax));
    let report = loadgen::run(&spec, corpus).await?;
    // Let queued win and billing notices reach the bidders before counting them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sim_stats = fleet.stats();
    let campaigns = real_bidder.render().await;
    let real_notices = real_bidder.win_notices().await;
    let _ = stop_tx.send(true);
    let _ = server.await;
    let books = exchange.report();
    // The books closed: every notice answered, then every record written, then read back.
    exchange.flush_notices(Duration::from_secs(5)).await;
    super::records_sink::flush(records).await;
    real_bidder.flush_records().await;
    let reconciled = reconcile(&real_bidder.records_dir());

    print!(
        "{}",
        render(&args, &report, &books, &sim_stats, real_notices)
    );
    print!("{campaigns}");
    print!("{reconciled}");
    Ok(())
}

/// `gavel reconcile` over the demo's records: the exchange's books against the real bidder's.
fn reconcile(dir: &std::path::Path) -> String {
    let read = super::reconcile::reconcile_files(
        &[dir.to_owned()],
        &mut records::identity::Distinct::new(),
    );
    match read {
        Ok((reconciler, stats)) => {
            let report = reconciler.finish(&records::reconcile::Tolerance::default());
            format!(
                "Records: {} written and read back ({} files); reconcile: {}\n",
                stats.records,
                stats.files,
                super::reconcile::verdict_line(&report)
            )
        }
        Err(e) => format!("Records could not be read back: {e}\n"),
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Spend in currency units of a sum of clearing CPMs: a CPM is the price of a thousand
/// impressions.
fn spend(cleared: Price) -> String {
    format!(
        "{:.2}",
        Price::from_micros(cleared.micros() / 1000).as_cpm_f64()
    )
}

fn render(
    args: &DemoArgs,
    report: &Report,
    books: &ExchangeReport,
    sim: &[sim::BidderStats],
    real: demo_bidder::WinNotices,
) -> String {
    let mut o = String::new();
    let tmax = Duration::from_millis(u64::from(args.tmax));
    let sold = report.status.ok_200;
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "auctions          {} sent, {} answered ({:.0}/s achieved)",
        report.sent, report.completed, report.rate_achieved
    );
    // When the load generator, not the exchange, set the figures, say so first.
    for limit in report.limits() {
        let shared = match limit.kind {
            loadgen::LimitKind::Cpu => {
                " (Here the exchange and the bidders share those cores: their figures suffer too.)"
            }
            // The demo sizes its own pool and has no such flag: say where the flag lives.
            loadgen::LimitKind::Connections => {
                " (gavel demo takes no such flag: run the pieces with gavel load to set it.)"
            }
            loadgen::LimitKind::Target => "",
        };
        let _ = writeln!(o, "LIMITED           {}{shared}", limit.message);
    }
    let bid_or_no_bid = books.sold + books.no_bid;
    let late = books.late_answers;
    let _ = writeln!(
        o,
        "within tmax       {:.2}% answered within {} ms at the client (from each scheduled send); \
         exchange side {:.3}% ({late} of {bid_or_no_bid} ready after tmax)",
        100.0 * report.share_within(tmax),
        args.tmax,
        100.0 - pct(late, bid_or_no_bid)
    );
    let _ = writeln!(
        o,
        "fill rate         {:.1}% ({sold} auctions sold, {} no-bid)",
        pct(sold, report.sent),
        report.status.no_content_204
    );
    let sum = |f: fn(&exchange::BidderReport) -> u64| books.bidders.iter().map(f).sum::<u64>();
    let _ = writeln!(
        o,
        "privacy           {} bidder calls left out by TCF (no consent or no legal basis), {} copies sent \
         without user ids, {} with coarse geo (docs/privacy.md)",
        sum(|b| b.privacy_not_called),
        sum(|b| b.privacy_ids_removed),
        sum(|b| b.privacy_geo_coarsened)
    );
    let _ = writeln!(
        o,
        "latency (client)  p50 {:.1} ms  p90 {:.1} ms  p99 {:.1} ms  p99.9 {:.1} ms  max {:.1} ms",
        report.percentile_ms(50.0),
        report.percentile_ms(90.0),
        report.percentile_ms(99.0),
        report.percentile_ms(99.9),
        report.percentile_ms(100.0)
    );
    let _ = writeln!(
        o,
        "at the door       {} shed by the admission bound, {} answered at once for too little time left; \
         no bidder called for either",
        books.shed, books.no_time_left
    );
    let failures = report
        .sent
        .saturating_sub(sold + report.status.no_content_204);
    if failures > 0 {
        let s = &report.status;
        let _ = writeln!(
            o,
            "not answered      {failures}: {} timed out at the client, {} dropped unsent (their \
             tmax passed while they waited for a connection), {} connection errors, {} other \
             errors, {} answered 4xx/5xx",
            s.timeout,
            s.dropped,
            s.connect_error,
            s.other_error,
            s.client_4xx + s.server_5xx + s.other_status
        );
    }
    let cleared = books.cleared();
    let total_wins = books.wins();
    let avg = cleared
        .micros()
        .checked_div(i64::try_from(total_wins).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let _ = writeln!(
        o,
        "cleared value     {} USD spent on {total_wins} impressions (average clearing CPM {})",
        spend(cleared),
        Price::from_micros(avg)
    );
    let told = Price::from_micros(
        sim.iter().map(|s| s.win_value.micros()).sum::<i64>() + real.value.micros(),
    );
    let received: u64 = sim.iter().map(|s| s.win_notices).sum::<u64>() + real.received;
    let fired = books.win_notices_sent + books.markup_fetched;
    let lost = books.win_notices_lost;
    let _ = writeln!(
        o,
        "win notices       exchange sent {fired} ({lost} dropped or failed), bidders received {received}; \
         clearing CPMs: exchange books {cleared}, bidders told {told}"
    );
    let late_markup = books.markup_failed;
    if received != fired || cleared != told {
        let _ = writeln!(
            o,
            "                  (they differ by {} notices: {late_markup} markup fetches from nurl missed the deadline, and a \
             bidder that saw such a fetch counts a win the exchange did not serve)",
            received.abs_diff(fired)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{:<14} {:>8} {:>8} {:>7} {:>8} {:>7} {:>20} {:>10}",
        "bidder",
        "requests",
        "bids",
        "wins",
        "timeouts",
        "errors",
        "skipped pool/brk/qps",
        "spend USD"
    );
    for b in &books.bidders {
        let _ = writeln!(
            o,
            "{:<14} {:>8} {:>8} {:>7} {:>8} {:>7} {:>20} {:>10}",
            b.name,
            b.requests,
            b.bids,
            b.wins,
            b.timeouts,
            b.errors,
            format!(
                "{}/{}/{}",
                b.skipped_pool_full, b.skipped_breaker_open, b.skipped_qps_cap
            ),
            spend(b.cleared),
        );
    }
    let _ = writeln!(
        o,
        "\ntimeouts: no complete answer by the deadline; errors: failed or unusable answers; \
         skipped: not called, because its pool was full, its circuit breaker was open (it kept failing) or its qps cap was reached"
    );
    o
}
