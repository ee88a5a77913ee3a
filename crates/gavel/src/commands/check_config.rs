//! `gavel check-config FILE [--kind K]`, and each server's `--check`: validate a configuration
//! the way its server does at start (and a bidder's campaign file with it), without binding a
//! port or calling Redis; print the values in effect, defaults filled in; fail naming the key.
//! Operators run it in CI before a deploy.
//!
//! Without `--kind`, the file's own keys tell what it configures:
//!
//! | kind | told by |
//! | --- | --- |
//! | bidder | `campaigns`, `[ledger]`, `[pacing]`, `seat` |
//! | edge | `[[origins]]`, `[memory]`, `[disk]`, `[store]` |
//! | exchange | `[[bidders]]` with an `endpoint`, `[[sellers]]`, `[notices]`, `[auction]`, `[breaker]`, `[cache]`, `open_to_all_sellers` |
//! | sim | `[[bidders]]` without an `endpoint` (or the old `[[bidder]]`) |

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, bail};

use crate::cli::{CheckConfigArgs, ConfigKind};

/// Largest file read to tell its kind (every server bounds its own read the same way).
const MAX_FILE_BYTES: usize = 1024 * 1024;

pub async fn run(args: &CheckConfigArgs) -> anyhow::Result<()> {
    let kind = match args.kind {
        Some(kind) => kind,
        None => kind_of(&args.file)?,
    };
    match kind {
        ConfigKind::Exchange => {
            let validated = exchange::Config::load(&args.file)
                .with_context(|| format!("{} refused", args.file.display()))?;
            exchange(&args.file, &validated)
        }
        ConfigKind::Bidder => {
            let config = bidder::BidderConfig::load(&args.file)
                .with_context(|| format!("{} refused", args.file.display()))?;
            bidder(&args.file, &config).await
        }
        ConfigKind::Edge => {
            let config = creative_edge::Config::load(&args.file)
                .with_context(|| format!("{} refused", args.file.display()))?;
            edge(&args.file, &config)
        }
        ConfigKind::Sim => {
            let text = settings::read_bounded(&args.file, MAX_FILE_BYTES)?;
            let profiles = sim::load_profiles(&text)
                .with_context(|| format!("{} refused", args.file.display()))?;
            #[derive(serde::Serialize)]
            struct Profiles<'a> {
                bidders: &'a [sim::BidderProfile],
            }
            print(
                &format!(
                    "{}: simulated bidders {} for `gavel sim --profiles`",
                    args.file.display(),
                    profiles.len()
                ),
                &Profiles { bidders: &profiles },
            )
        }
    }
}

/// An exchange configuration that loaded (keys, certificates and endpoints included); also
/// checks its admin token file, as the server does at start.
pub fn exchange(file: &Path, validated: &exchange::Validated) -> anyhow::Result<()> {
    http_front::AdminDoor::open(&validated.config.front.security).map_err(anyhow::Error::msg)?;
    let c = &validated.config;
    let mut headline = format!(
        "{}: a valid exchange configuration: bidders {}, sellers {}{}",
        file.display(),
        c.live.bidders.len(),
        c.live.sellers.len(),
        if c.live.open_to_all_sellers {
            ", open to callers without a key"
        } else {
            ""
        }
    );
    let keyed: Vec<String> = validated
        .bidders
        .iter()
        .filter_map(|b| {
            let k = b.price_key.as_ref()?;
            Some(format!("{} (key {})", b.config.name, k.id()))
        })
        .collect();
    if !keyed.is_empty() {
        let _ = write!(headline, "; price tokens for {}", keyed.join(", "));
    }
    // Names are looked up now, as the exchange does at start: say what they resolved to.
    let lookups = exchange::warnings::endpoint_lookups(validated);
    if !lookups.is_empty() {
        let hosts: Vec<String> = lookups
            .iter()
            .map(|l| match &l.found {
                Ok(ips) => format!("{} {} -> {}", l.bidder, l.host, ips[0]),
                Err(_) => format!("{} {} -> UNRESOLVED", l.bidder, l.host),
            })
            .collect();
        let _ = write!(
            headline,
            "\nbidder hosts resolved now: {}",
            hosts.join("; ")
        );
    }
    for w in exchange::warnings::warnings(validated) {
        let _ = write!(headline, "\nwarning: {w}");
    }
    let mut shown = c.clone();
    shown.front.http.max_body_bytes = Some(validated.max_body_bytes());
    print(&headline, &shown)
}

/// A bidder configuration that loaded, checked with everything its start reads.
pub async fn bidder(file: &Path, config: &bidder::BidderConfig) -> anyhow::Result<()> {
    let report = bidder::Bidder::check(config)
        .await
        .with_context(|| format!("{} refused", file.display()))?;
    let mut headline = format!(
        "{}: a valid bidder configuration: campaigns {} from {} ({}); ledger: {}; notices {}",
        file.display(),
        report.campaigns.len(),
        config.campaigns.display(),
        report.campaigns.join(", "),
        report.ledger,
        if report.signs_notices {
            "signed"
        } else {
            "NOT signed"
        },
    );
    if !report.price_keys.is_empty() {
        let _ = write!(
            headline,
            "; price keys {} ({})",
            report.price_keys.join(", "),
            if report.requires_price_token {
                "a price token is required"
            } else {
                "plain prices still charged"
            }
        );
    }
    if !report.admin_token {
        let _ = write!(headline, "; no admin token: admin mutations are refused");
    }
    for w in &report.warnings {
        let _ = write!(headline, "\nwarning: {w}");
    }
    let mut shown = config.clone();
    shown.front.http.max_body_bytes = Some(config.max_body_bytes());
    print(&headline, &shown)
}

/// An edge configuration that loaded, with what its start reads: the certificate directory.
/// The disk tier's directory is only looked at (the edge creates it at start).
pub fn edge(file: &Path, config: &creative_edge::Config) -> anyhow::Result<()> {
    if let Some(tls) = &config.tls {
        http_front::SniCerts::open(&tls.cert_dir, tls.max_certs, std::time::Duration::ZERO)
            .map_err(|e| anyhow::anyhow!("tls.cert_dir {}: {e}", tls.cert_dir.display()))?;
    }
    if let Some(disk) = &config.disk
        && disk.dir.exists()
        && !disk.dir.is_dir()
    {
        bail!("disk.dir {} is not a directory", disk.dir.display());
    }
    let mut shown = config.clone();
    shown.front.http.max_body_bytes = Some(config.max_request_bytes());
    print(
        &format!(
            "{}: a valid edge configuration: origins {}",
            file.display(),
            config.origins.len()
        ),
        &shown,
    )
}

/// The headline, then the values in effect as TOML (callers fill in what a default computes,
/// such as the body limit).
fn print(headline: &str, values: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = toml::to_string(values).context("printing the values in effect")?;
    // Not println!: a reader that stops early (`| head`) must not turn the check into a panic.
    let _ = writeln!(
        std::io::stdout(),
        "{headline}\n\n# The values in effect, defaults included:\n{text}"
    );
    Ok(())
}

/// What `file` configures, from its keys (see the module's table).
fn kind_of(file: &Path) -> anyhow::Result<ConfigKind> {
    let text = settings::read_bounded(file, MAX_FILE_BYTES)?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("{} is not TOML", file.display()))?;
    let has = |keys: &[&str]| keys.iter().any(|k| table.contains_key(*k));
    if has(&["campaigns", "ledger", "pacing", "seat"]) {
        return Ok(ConfigKind::Bidder);
    }
    if has(&["origins", "memory", "disk", "store"]) {
        return Ok(ConfigKind::Edge);
    }
    if has(&["bidder"]) {
        return Ok(ConfigKind::Sim);
    }
    if let Some(toml::Value::Array(bidders)) = table.get("bidders") {
        let with_endpoint = bidders
            .iter()
            .any(|b| b.as_table().is_some_and(|t| t.contains_key("endpoint")));
        return Ok(if with_endpoint {
            ConfigKind::Exchange
        } else {
            ConfigKind::Sim
        });
    }
    if has(&[
        "sellers",
        "notices",
        "auction",
        "breaker",
        "cache",
        "schain",
        "open_to_all_sellers",
    ]) {
        return Ok(ConfigKind::Exchange);
    }
    bail!(
        "cannot tell from its keys what {} configures; say it with --kind exchange, bidder, \
         edge or sim",
        file.display()
    )
}
