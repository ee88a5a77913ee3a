//! `gavel ledger create|status --config bidder.toml`: the operator's acts on a bidder fleet's
//! shared Redis ledger. The work is `bidder::ledger_open`'s; this prints and sets the exit code.

use anyhow::{Context, bail};

use crate::cli::{LedgerAction, LedgerArgs};

pub async fn run(args: LedgerArgs) -> anyhow::Result<()> {
    match args.action {
        LedgerAction::Create {
            config,
            after_loss,
            no_marker,
        } => {
            let loaded = bidder::BidderConfig::load(&config)
                .with_context(|| format!("{} refused", config.display()))?;
            let rule = if no_marker {
                bidder::ledger_open::MarkerRule::Waived
            } else {
                bidder::ledger_open::MarkerRule::Required
            };
            match bidder::ledger_open::create(&loaded, after_loss, rule, &who()).await {
                Ok(bidder::ledger_open::Opened::Existing { ledger }) => {
                    println!("ledger {ledger} already exists; nothing created");
                    Ok(())
                }
                Ok(bidder::ledger_open::Opened::Created { ledger, evidence }) => {
                    if evidence.any() {
                        println!(
                            "created ledger {ledger} after a loss ({}); every campaign starts from zero spend",
                            evidence.describe()
                        );
                    } else {
                        println!("created ledger {ledger}");
                    }
                    Ok(())
                }
                Err(e) => bail!("{e}"),
            }
        }
        LedgerAction::Status { config } => {
            let loaded = bidder::BidderConfig::load(&config)
                .with_context(|| format!("{} refused", config.display()))?;
            let state = bidder::ledger_open::status(&loaded)
                .await
                .map_err(anyhow::Error::msg)?;
            match state.ledger {
                Some(id) => {
                    println!("ledger {id} is open in {}", state.redis);
                    Ok(())
                }
                None if state.evidence.any() => bail!(
                    "{} holds no ledger, but one lived there: {}",
                    state.redis,
                    state.evidence.describe()
                ),
                None => bail!(
                    "{} holds no ledger and nothing says one lived there: create it with `gavel ledger create`",
                    state.redis
                ),
            }
        }
    }
}

/// Who ran the command, for the audit line.
fn who() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    format!("cli user {user} pid {}", std::process::id())
}
