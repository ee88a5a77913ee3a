//! `gavel config push|show|keygen`: the operator's side of a fleet's pushed configuration
//! (docs/fleet.md). A document is validated here exactly as the servers of its kind validate
//! a push (`exchange::fleet_doc`, `bidder::fleet_doc`), so a refused one never reaches the
//! bucket, then signed with the operator's key; the signing and the bucket work are
//! `fleet::push`'s.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, bail};

use crate::cli::{ConfigAction, ConfigArgs, FleetKind, FleetTarget};

pub async fn run(args: ConfigArgs) -> anyhow::Result<()> {
    match args.action {
        ConfigAction::Push {
            target,
            signing_key,
            config,
            file,
        } => {
            let signer = fleet::SigningKey::load(&signing_key)
                .map_err(|e| anyhow::anyhow!("--signing-key {e}"))?;
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
            let receipt = fleet::push(&section, &key, &bytes, &signer).await?;
            if let Some(ahead) = receipt.passed_over {
                eprintln!(
                    "warning: the bucket's latest value claims serial {ahead}, more than ten \
                     minutes ahead of this clock; nodes refuse it (ahead), and this push was not \
                     ordered after it: check the clock that signed it, or who put it"
                );
            }
            println!(
                "revision {} digest {digest} bytes {size} serial {} signer {}",
                receipt.revision,
                receipt.serial,
                signer.id()
            );
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
                    let signed = match &shown.signed {
                        Some((serial, signer)) => {
                            format!("serial {serial} signer {signer} (unverified)")
                        }
                        None => "unsigned".to_owned(),
                    };
                    println!(
                        "revision {} digest {digest} bytes {} {signed}",
                        shown.revision, shown.bytes
                    );
                    Ok(())
                }
                None => bail!("bucket {} holds no key {key}", section.bucket),
            }
        }
        ConfigAction::Keygen { out } => keygen(&out),
    }
}

/// Writes a new key pair: the private key to `out` (created, never overwritten, mode 0600),
/// the public key to `out.pub`.
fn keygen(out: &Path) -> anyhow::Result<()> {
    let (key, private) = fleet::SigningKey::generate()?;
    let mut public_path = out.as_os_str().to_owned();
    public_path.push(".pub");
    let public_path = std::path::PathBuf::from(public_path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(out).with_context(|| {
        format!(
            "{} not written (an existing key is never replaced)",
            out.display()
        )
    })?;
    file.write_all(private.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("writing {}", out.display()))?;
    std::fs::write(&public_path, key.public_pem())
        .with_context(|| format!("writing {}", public_path.display()))?;
    println!("key {}", key.id());
    println!(
        "private key {} (keep it with the operator; `gavel config push --signing-key`)",
        out.display()
    );
    println!(
        "public key {} (append it to every node's fleet.trusted_keys_file)",
        public_path.display()
    );
    Ok(())
}

/// The `[fleet]` section the flags describe, checked as any connection is, and the key.
fn section(target: &FleetTarget) -> anyhow::Result<(fleet::FleetSection, String)> {
    let section = fleet::FleetSection {
        bucket: target.bucket.clone(),
        key: target.key.clone(),
        ca_file: target.ca_file.clone(),
        token_file: target.token_file.clone(),
        user: target.user.clone(),
        password_file: target.password_file.clone(),
        nkey_seed_file: target.nkey_seed_file.clone(),
        creds_file: target.creds_file.clone(),
        client_cert_file: target.client_cert_file.clone(),
        client_key_file: target.client_key_file.clone(),
        ..fleet::FleetSection::new(target.nats.clone())
    };
    section.check_connection()?;
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
                Some(path) => {
                    let v = exchange::Config::load_with(path, |c| doc.over(c))
                        .map_err(|e| anyhow::anyhow!("over {}: {e}", path.display()))?;
                    // The secrets it names, as that node's [fleet] allows them.
                    doc.check_secrets(v.config.rtb.fleet.as_ref(), path.parent())
                        .map_err(|e| anyhow::anyhow!("over {}: {e}", path.display()))?;
                    v
                }
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
                validated.config.live.bidders.len(),
                validated.config.live.sellers.len()
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
