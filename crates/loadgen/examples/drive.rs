//! Drives one open-loop run with a generated corpus and prints the text report.
//! Single-threaded runtime (plus the scheduler thread), so pinning the process pins the
//! generator to one core.
//!
//! `taskset -c 0 cargo run -p loadgen --release --example drive -- URL RATE SECONDS [CONNECTIONS]`

use std::sync::Arc;
use std::time::Duration;

use loadgen::{Corpus, LoadSpec};

/// User + system CPU time of this process (all threads), from /proc (Linux only).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesized command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: drive URL RATE SECONDS [CONNECTIONS]");
        std::process::exit(2);
    }
    let mut spec = LoadSpec::new(
        args[0].clone(),
        args[1].parse().unwrap_or(1000.0),
        Duration::from_secs_f64(args[2].parse().unwrap_or(5.0)),
    );
    if let Some(c) = args.get(3).and_then(|c| c.parse().ok()) {
        spec.connections = c;
    }
    spec.warmup = Duration::from_secs(1);
    spec.timeout = Duration::from_secs(1);
    let corpus = Arc::new(Corpus::generated(1, 10_000, 120));
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("runtime: {e}");
            std::process::exit(1);
        }
    };
    let cpu_before = cpu_seconds();
    match rt.block_on(loadgen::run(&spec, corpus)) {
        Ok(report) => {
            print!("{}", report.render_text());
            if let (Some(a), Some(b)) = (cpu_before, cpu_seconds()) {
                // Warm-up requests cost CPU too.
                let rate = spec.arrivals.peak_rate().unwrap_or(0.0);
                let requests = (rate * (spec.warmup + spec.duration).as_secs_f64()).ceil();
                println!(
                    "driver cpu  {:.2} s for {requests} requests: {:.1} us/request, ceiling ~{:.0} req/s per core",
                    b - a,
                    (b - a) * 1e6 / requests,
                    requests / (b - a)
                );
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
