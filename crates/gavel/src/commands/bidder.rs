//! `gavel bidder [--config FILE] [--listen ADDR] [--admin-listen ADDR] [--check]`: serves
//! until SIGTERM or SIGINT, then drains (`drain.rs`) and hands its leases back.

use std::io::Write as _;

use anyhow::Context;
use bidder::{Bidder, BidderConfig};
use tokio::net::TcpListener;

use crate::cli::BidderArgs;

pub async fn run(args: BidderArgs) -> anyhow::Result<()> {
    let source = super::config_source(args.config.as_deref());
    let mut config = match &args.config {
        Some(file) => BidderConfig::load(file),
        None => BidderConfig::load_env(),
    }
    .with_context(|| format!("{source} refused"))?;
    config
        .front
        .set_addresses(args.listen, args.admin_listen)
        .map_err(|e| anyhow::anyhow!("--listen, --admin-listen: {}", e.problem))?;
    if args.check {
        return super::check_config::bidder(std::path::Path::new(&source), &config).await;
    }
    let listener = TcpListener::bind(config.front.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.front.listen))?;
    // Port 0 picks a free port: notice URLs must name the one actually bound.
    config.front.listen = listener.local_addr()?;
    let admin_listener = TcpListener::bind(config.front.admin_listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (admin_listen)",
                config.front.admin_listen
            )
        })?;
    let admin_addr = admin_listener.local_addr()?;
    let backend = format!("{:?}", config.ledger.backend).to_lowercase();
    // Without a node name, the process id keeps two bidders' record files apart.
    let node = config
        .rtb
        .node
        .clone()
        .unwrap_or_else(|| format!("bidder-{}", std::process::id()));
    let (journal, records) = super::records_sink::start(
        &config.rtb.records,
        args.config.as_deref(),
        journal::Server::Bidder,
        &node,
    )
    .await?;
    let mut drain = super::drain::Drain::new("bidder", &config.front.http);
    let bidder = Bidder::start_with_journal(config, journal).await?;
    // The campaign file is followed, and SIGHUP reloads it too.
    bidder.watch();
    let on_hup = bidder.clone();
    super::on_hangup(move || {
        let bidder = on_hup.clone();
        async move {
            let _ = bidder.reload().await;
            let _ = bidder.reload_price_keys().await;
        }
    });
    println!(
        "gavel bidder listening on {}{} (ledger: {backend}; admin: http://{admin_addr}/admin/campaigns; metrics: http://{admin_addr}/metrics; campaigns reload on change and on SIGHUP)",
        bidder.public_url(),
        bidder::BID_PATH,
    );
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin = bidder.clone();
    let admin_task = tokio::spawn(async move {
        admin
            .serve_admin(admin_listener, async {
                let _ = admin_stopped.await;
            })
            .await;
    });
    bidder
        .serve(listener, drain.until_listener_closes(bidder.readiness()))
        .await;
    drain.report_in_flight(bidder.connections());
    let _ = admin_stop.send(());
    let _ = admin_task.await;
    // Requests are over: hand leased budget back so other instances can spend it now.
    bidder.shutdown().await;
    tracing::info!("drain: leases handed back");
    super::records_sink::flush(records).await;
    // Not println!: a parent that stopped reading stdout must not turn a clean exit into a panic.
    let _ = writeln!(std::io::stdout(), "gavel bidder stopped");
    Ok(())
}
