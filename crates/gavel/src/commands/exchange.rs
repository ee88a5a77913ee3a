//! `gavel exchange --config FILE [--listen ADDR]`.

use anyhow::Context;
use exchange::{Config, Exchange};
use tokio::net::TcpListener;

use crate::cli::ExchangeArgs;

pub async fn run(args: ExchangeArgs) -> anyhow::Result<()> {
    let text = super::read_bounded(&args.config, exchange::config::MAX_CONFIG_BYTES as u64)?;
    let mut validated =
        Config::from_toml(&text).with_context(|| format!("{} refused", args.config.display()))?;
    if let Some(listen) = args.listen {
        validated.config.listen = listen;
    }
    let listen = validated.config.listen;
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let bidders = validated.config.bidders.len();
    let exchange = Exchange::new(validated);
    println!(
        "gavel exchange listening on http://{}{} with {bidders} bidders (metrics: /metrics)",
        listener.local_addr()?,
        exchange::AUCTION_PATH
    );
    exchange.serve(listener, super::shutdown_signal()).await;
    Ok(())
}
