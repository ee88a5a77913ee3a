//! `gavel load --url URL --rate R --duration D ...`.

use std::sync::Arc;

use anyhow::Context;
use loadgen::{Corpus, LoadSpec};

use crate::cli::LoadArgs;

/// Generated corpus size: enough variety that caches see realistic diversity.
const GENERATED_REQUESTS: usize = 1000;

pub async fn run(args: LoadArgs) -> anyhow::Result<()> {
    let corpus = match &args.requests {
        Some(path) => Corpus::from_path(path)?,
        None => Corpus::generated(args.seed, GENERATED_REQUESTS, args.tmax),
    };
    let spec = LoadSpec {
        url: args.url.clone(),
        rate: args.rate,
        duration: args.duration,
        connections: args.connections,
        timeout: args.timeout,
        warmup: args.warmup.unwrap_or_default(),
    };
    let report = loadgen::run(&spec, Arc::new(corpus)).await?;
    print!("{}", report.render_text());
    let mut json = report.to_json();
    if let Some(slo) = args.slo {
        let share = report.share_within(slo);
        println!("within {slo:?}: {:.3}% of requests sent", 100.0 * share);
        json["slo"] = serde_json::json!({ "ms": slo.as_secs_f64() * 1000.0, "share": share });
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&json)?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
