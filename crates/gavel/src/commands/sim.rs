//! `gavel sim [--bidders N | --profiles FILE] [--write-bidders FILE] [--lean-http]`.

use anyhow::Context;

use crate::cli::SimArgs;

/// What makes the written `[[bidders]]` section a complete exchange configuration for a local
/// test: the simulated bidders live on loopback, and so does whoever sends the auctions.
const LOCAL_EXCHANGE_HEADER: &str = "\
# Written by `gavel sim`: a complete exchange configuration for a local test. Any caller is
# served (no [[sellers]]) and notices may go to loopback, where the simulated bidders live.
open_to_all_sellers = true

[notices]
allow_private_addresses = true

";

/// Simulated bidders without --bidders or --profiles.
const DEFAULT_BIDDERS: usize = 10;

/// Largest accepted profile file.
const MAX_PROFILE_BYTES: usize = 1024 * 1024;

pub async fn run(args: SimArgs) -> anyhow::Result<()> {
    let profiles = match &args.profiles {
        Some(path) => {
            let text = settings::read_bounded(path, MAX_PROFILE_BYTES)?;
            sim::load_profiles(&text).with_context(|| format!("{} refused", path.display()))?
        }
        None => sim::demo_profiles(args.bidders.unwrap_or(DEFAULT_BIDDERS)),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(std::sync::Arc::new(
            http_front::ServerTls::load(cert, key).map_err(anyhow::Error::msg)?,
        )),
        _ => None,
    };
    let config = sim::FleetConfig {
        seed: args.seed,
        bind: std::net::IpAddr::from([127, 0, 0, 1]),
        profiles,
        tls,
        transport: if args.lean_http {
            sim::Transport::Lean
        } else {
            sim::Transport::Hyper
        },
    };
    let fleet = sim::start(config, async {
        let _ = stop_rx.await;
    })
    .await?;
    for b in &fleet.bidders {
        println!("{:<16} {}", b.name, b.endpoint);
    }
    let section = fleet.exchange_bidders_toml(64);
    match &args.write_bidders {
        Some(path) => {
            std::fs::write(path, format!("{LOCAL_EXCHANGE_HEADER}{section}"))
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote the [[bidders]] section to {}", path.display());
        }
        None => println!("\n# paste into the exchange config:\n{section}"),
    }
    match args.duration {
        Some(d) => {
            tokio::select! {
                () = tokio::time::sleep(d) => {}
                () = super::shutdown_signal() => {}
            }
        }
        None => super::shutdown_signal().await,
    }
    let _ = stop_tx.send(());
    for s in fleet.stats() {
        println!(
            "{:<16} requests {:>8} bids {:>8} wins {:>7} win value {} CPM",
            s.name, s.requests, s.bids, s.win_notices, s.win_value
        );
    }
    Ok(())
}
