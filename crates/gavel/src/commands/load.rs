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
        warmup: std::time::Duration::ZERO,
    };
    let report = loadgen::run(&spec, Arc::new(corpus)).await?;
    print!("{}", report.render_text());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report.to_json())?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
