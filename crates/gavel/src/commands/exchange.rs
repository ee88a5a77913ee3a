//! `gavel exchange [--config FILE] [--listen ADDR] [--admin-listen ADDR] [--check]`: serves
//! until SIGTERM or SIGINT, then drains (`drain.rs`).

use std::io::Write as _;

use anyhow::Context;
use exchange::{Config, Exchange};
use tokio::net::TcpListener;

use crate::cli::ExchangeArgs;

pub async fn run(args: ExchangeArgs) -> anyhow::Result<()> {
    let source = super::config_source(args.config.as_deref());
    let mut validated = match &args.config {
        Some(file) => Config::load(file),
        None => Config::load_env(),
    }
    .with_context(|| format!("{source} refused"))?;
    validated
        .config
        .front
        .set_addresses(args.listen, args.admin_listen)
        .map_err(|e| anyhow::anyhow!("--listen, --admin-listen: {}", e.problem))?;
    if args.check {
        return super::check_config::exchange(std::path::Path::new(&source), &validated);
    }
    let listen = validated.config.front.listen;
    let examples = exchange::warnings::example_key_sellers(&validated);
    if !examples.is_empty() && !listen.ip().is_loopback() {
        anyhow::bail!(
            "sellers {} use example keys from the repository (examples/keys), and {listen} is not \
             a loopback address: anyone could run auctions as them. Make keys with `openssl rand \
             -hex 32`",
            examples.join(", ")
        );
    }
    for w in exchange::warnings::warnings(&validated) {
        tracing::warn!("{w}");
    }
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let admin_listen = validated.config.front.admin_listen;
    let admin_listener = TcpListener::bind(admin_listen)
        .await
        .with_context(|| format!("cannot listen on {admin_listen} (admin_listen)"))?;
    let admin_addr = admin_listener.local_addr()?;
    let bidders = validated.config.live.bidders.len();
    let mut drain = super::drain::Drain::new("exchange", &validated.config.front.http);
    let (journal, records) = super::records_sink::start(
        &validated.config.rtb.records,
        validated.source.as_deref(),
        journal::Server::Exchange,
        validated.config.node(),
    )
    .await?;
    let exchange = Exchange::with_journal(validated, journal);
    let admin = exchange.admin()?;
    // The bidder list follows the file: on every change, and on SIGHUP.
    exchange.watch();
    let on_hup = exchange.clone();
    super::on_hangup(move || {
        let exchange = on_hup.clone();
        async move {
            let _ = exchange.reload().await;
        }
    });
    println!(
        "gavel exchange listening on http://{}{} with {bidders} bidders (admin: \
         http://{admin_addr}/admin/bidders; metrics: http://{admin_addr}/metrics; the bidder \
         list reloads when {source} changes, and on SIGHUP)",
        listener.local_addr()?,
        exchange::AUCTION_PATH,
    );
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin_task = tokio::spawn(async move {
        admin
            .serve(admin_listener, async {
                let _ = admin_stopped.await;
            })
            .await;
    });
    exchange
        .serve(listener, drain.until_listener_closes(exchange.readiness()))
        .await;
    drain.report_in_flight(exchange.connections());
    let _ = admin_stop.send(());
    let _ = admin_task.await;
    // Auctions are over; what they promised bidders (win and billing notices) goes out now.
    let unsent = exchange
        .flush_notices(std::time::Duration::from_secs(5))
        .await;
    if unsent > 0 {
        tracing::warn!(unsent, "notices still unsent at exit");
    } else {
        tracing::info!("drain: notice queues flushed");
    }
    // Every auction and notice has its record queued by now.
    super::records_sink::flush(records).await;
    // Not println!: a parent that stopped reading stdout must not turn a clean exit into a panic.
    let _ = writeln!(std::io::stdout(), "gavel exchange stopped");
    Ok(())
}
