//! `gavel bidder --config FILE [--listen ADDR] [--admin-listen ADDR] [--check]`.

use std::io::Write as _;

use anyhow::Context;
use bidder::{Bidder, BidderConfig};
use tokio::net::TcpListener;

use crate::cli::BidderArgs;

pub async fn run(args: BidderArgs) -> anyhow::Result<()> {
    let mut config = BidderConfig::load(&args.config)
        .with_context(|| format!("{} refused", args.config.display()))?;
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(admin) = args.admin_listen {
        config
            .security
            .admin()
            .validate(admin)
            .map_err(|e| anyhow::anyhow!("--admin-listen: {}", e.problem))?;
        config.admin_listen = admin;
    }
    if args.check {
        return super::check_config::bidder(&args.config, &config).await;
    }
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    // Port 0 picks a free port: notice URLs must name the one actually bound.
    config.listen = listener.local_addr()?;
    let admin_listener = TcpListener::bind(config.admin_listen)
        .await
        .with_context(|| format!("cannot listen on {} (admin_listen)", config.admin_listen))?;
    let admin_addr = admin_listener.local_addr()?;
    let backend = format!("{:?}", config.ledger.backend).to_lowercase();
    // Without a node name, the process id keeps two bidders' record files apart.
    let node = config
        .node
        .clone()
        .unwrap_or_else(|| format!("bidder-{}", std::process::id()));
    let (journal, records) = super::records_sink::start(
        &config.records,
        Some(&args.config),
        journal::Server::Bidder,
        &node,
    )
    .await?;
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
    bidder.serve(listener, super::shutdown_signal()).await;
    let _ = admin_stop.send(());
    let _ = admin_task.await;
    // Requests are over: hand leased budget back so other instances can spend it now.
    bidder.shutdown().await;
    super::records_sink::flush(records).await;
    // Not println!: a parent that stopped reading stdout must not turn a clean exit into a panic.
    let _ = writeln!(std::io::stdout(), "gavel bidder stopped");
    Ok(())
}
