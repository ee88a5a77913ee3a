//! `gavel config push|show`: the operator's side of a fleet's pushed configuration
//! (docs/fleet.md). A document is validated here exactly as the servers of its kind validate
//! a push (`exchange::fleet_doc`, `bidder::fleet_doc`), so a refused one never reaches the
//! bucket; the bucket work is `fleet::push`'s.

use std::path::Path;

use anyhow::{Context, bail};
use bytes::Bytes;

use crate::cli::{ConfigAction, ConfigArgs, FleetKind, FleetTarget};

pub async fn run(args: ConfigArgs) -> anyhow::Result<()> {
    match args.action {
        ConfigAction::Push {
            target,
            config,
            file,
        } => {
            let limit = fleet::MAX_DOCUMENT_BYTES;
            let bytes = settings::read_bounded_bytes(&file, limit)
                .with_context(|| format!("{} not pushed", file.display()))?;
            let (kind, base) = (target.kind, config);
            let checked = bytes.clone();
            tokio::task::spawn_blocking(move || validate(kind, &checked, base.as_deref()))
                .await
                .context("validation stopped")?
                .with_context(|| format!("{} refused; nothing pushed", file.display()))?;
            let (section, key) = section(&target)?;
            let digest = fleet::digest(&bytes);
            let size = bytes.len();
            let revision = fleet::push(&section, &key, Bytes::from(bytes)).await?;
            println!("revision {revision} digest {digest} bytes {size}");
            println!(
                "pushed to {} key {key} at {}",
                section.bucket, section.nats_url
            );
            Ok(())
        }
        ConfigAction::Show { target } => {
            let (section, key) = section(&target)?;
            match fleet::show(&section, &key).await? {
                Some(shown) => {
                    let digest = shown.digest.as_deref().unwrap_or("removed");
                    println!(
                        "revision {} digest {digest} bytes {}",
                        shown.revision, shown.bytes
                    );
                    Ok(())
                }
                None => bail!("bucket {} holds no key {key}", section.bucket),
            }
        }
    }
}

/// The `[fleet]` section the flags describe, checked as a server checks its own, and the key.
fn section(target: &FleetTarget) -> anyhow::Result<(fleet::FleetSection, String)> {
    let section = fleet::FleetSection {
        bucket: target.bucket.clone(),
        key: target.key.clone(),
        ca_file: target.ca_file.clone(),
        token_file: target.token_file.clone(),
        ..fleet::FleetSection::new(target.nats.clone())
    };
    section.validate()?;
    let key = section.key_or(default_key(target.kind)).to_owned();
    Ok((section, key))
}

fn default_key(kind: FleetKind) -> &'static str {
    match kind {
        FleetKind::Exchange => exchange::fleet_doc::DEFAULT_KEY,
        FleetKind::Bidder => bidder::fleet_doc::DEFAULT_KEY,
    }
}

/// What a server of `kind` does with a pushed document before applying it. An exchange
/// document goes over `base` (a node's file) when given, else over the defaults, open to all
/// sellers so that only the document's own content is judged. Blocking: reads key files and
/// looks bidder hosts up.
fn validate(kind: FleetKind, bytes: &[u8], base: Option<&Path>) -> anyhow::Result<()> {
    match kind {
        FleetKind::Bidder => {
            if base.is_some() {
                bail!("--config is for --kind exchange; a campaign set is judged on its own");
            }
            let set = bidder::fleet_doc::campaign_set(bytes).map_err(flat)?;
            eprintln!("{} campaigns valid", set.len());
        }
        FleetKind::Exchange => {
            let doc = exchange::fleet_doc::RosterDocument::parse(bytes).map_err(flat)?;
            let validated = match base {
                Some(path) => exchange::Config::load_with(path, |c| doc.over(c))
                    .map_err(|e| anyhow::anyhow!("over {}: {e}", path.display()))?,
                None => {
                    let text = std::str::from_utf8(bytes).unwrap_or_default();
                    exchange::Config::from_toml(&format!("open_to_all_sellers = true\n{text}"))
                        .map_err(flat)?
                }
            };
            for warning in exchange::warnings::warnings(&validated) {
                eprintln!("warning: {warning}");
            }
            eprintln!(
                "{} bidders and {} sellers valid",
                validated.config.bidders.len(),
                validated.config.sellers.len()
            );
        }
    }
    Ok(())
}

/// An error as its message alone: configuration errors already include their cause, which
/// `{:#}` would print a second time.
fn flat(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}
