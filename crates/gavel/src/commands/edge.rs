//! `gavel edge [--config FILE] [--listen ADDR] [--admin-listen ADDR] [--check]`: serves until
//! SIGTERM or SIGINT, then drains (`drain.rs`).

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context;
use creative_edge::{Config, Edge, SystemClock};
use tokio::net::TcpListener;

use crate::cli::EdgeArgs;

pub async fn run(args: EdgeArgs) -> anyhow::Result<()> {
    let source = super::config_source(args.config.as_deref());
    let mut config = match &args.config {
        Some(file) => Config::load(file),
        None => Config::load_env(),
    }
    .with_context(|| format!("{source} refused"))?;
    config
        .front
        .set_addresses(args.listen, args.admin_listen)
        .map_err(|e| anyhow::anyhow!("--listen, --admin-listen: {}", e.problem))?;
    if args.check {
        return super::check_config::edge(std::path::Path::new(&source), &config);
    }
    let edge = Edge::new(&config, Arc::new(SystemClock))?;
    let listener = TcpListener::bind(config.front.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.front.listen))?;
    let admin_listener = TcpListener::bind(config.front.admin_listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (admin_listen)",
                config.front.admin_listen
            )
        })?;
    let admin_addr = admin_listener.local_addr()?;
    let scheme = if config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let origins: Vec<&str> = config.origins.iter().map(|o| o.name.as_str()).collect();
    println!(
        "gavel edge listening on {scheme}://{} (markup store: /cache; assets: /assets/{{origin}}/... \
         for {}; memory {} MiB, disk {}; metrics: http://{admin_addr}/metrics)",
        listener.local_addr()?,
        if origins.is_empty() {
            "no origins".to_owned()
        } else {
            origins.join(", ")
        },
        config.memory.max_bytes / (1024 * 1024),
        config.disk.as_ref().map_or("none".to_owned(), |d| format!(
            "{} MiB in {}",
            d.max_bytes / (1024 * 1024),
            d.dir.display()
        )),
    );
    let (admin_stop, admin_stopped) = tokio::sync::oneshot::channel::<()>();
    let admin = edge.clone();
    let admin_task = tokio::spawn(async move {
        admin
            .serve_admin(admin_listener, async {
                let _ = admin_stopped.await;
            })
            .await;
    });
    let mut drain = super::drain::Drain::new("edge", &config.front.http);
    edge.serve(listener, drain.until_listener_closes(edge.readiness()))
        .await;
    drain.report_in_flight(edge.connections());
    let _ = admin_stop.send(());
    let _ = admin_task.await;
    let _ = writeln!(std::io::stdout(), "gavel edge stopped");
    Ok(())
}
