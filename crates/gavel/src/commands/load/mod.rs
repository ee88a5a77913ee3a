//! `gavel load`: one run (open loop at a rate, rate steps or a ramp; or closed loop), or a
//! capacity search; figures as text, JSON and a self-contained HTML report; an exit status
//! that CI can gate on (`verdict.rs`).

mod progress_line;
pub mod verdict;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use loadgen::capacity::{self, CapacitySpec};
use loadgen::gate::Gates;
use loadgen::{Arrivals, Corpus, HttpMethod, HttpOptions, LoadSpec, Progress, ResponseCheck};

use crate::cli::{CheckArg, LoadArgs, MethodArg, RateArg};
use verdict::{Failed, usage};

/// Generated corpus size: enough variety that caches see realistic diversity.
const GENERATED_REQUESTS: usize = 1000;
/// Measured length of a run when --duration is not given.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Length and warm-up of each capacity trial when not given.
const DEFAULT_TRIAL: Duration = Duration::from_secs(5);
const DEFAULT_TRIAL_WARMUP: Duration = Duration::from_secs(1);
/// Requests per second without --rate.
const DEFAULT_RATE: f64 = 1000.0;
/// --find-capacity's pass mark and ceiling without --min-success and --max-rate.
const DEFAULT_MIN_SUCCESS: f64 = 0.999;
const DEFAULT_MAX_RATE: f64 = 200_000.0;

pub async fn run(args: LoadArgs) -> anyhow::Result<()> {
    let spec = spec_of(&args).map_err(usage)?;
    let corpus = match (&args.requests, args.method) {
        (Some(_), MethodArg::Head) => {
            return Err(usage(anyhow::anyhow!(
                "--requests with --method HEAD: a HEAD request has no body"
            )));
        }
        (Some(path), _) => Corpus::from_path(path)?,
        (None, MethodArg::Post) => Corpus::generated(args.seed, GENERATED_REQUESTS, args.tmax),
        // GET and HEAD without --requests: one empty body, sent as none.
        (None, MethodArg::Get | MethodArg::Head) => Corpus::from_bodies(vec![Default::default()]),
    };
    let corpus = Arc::new(corpus);
    if args.find_capacity {
        return find_capacity(&args, spec, corpus).await;
    }

    let progress = Progress::new();
    let line = progress_line::start(Arc::clone(&progress), !args.no_progress);
    let result = loadgen::run_with_progress(&spec, corpus, progress).await;
    line.stop().await;
    let report = result?;

    print!("{}", report.render_text());
    let mut json = report.to_json();
    if let Some(slo) = args.slo {
        let within = slo.within;
        let share = report.share_within(within);
        println!("within {within:?}: {:.3}% of requests sent", 100.0 * share);
        json["slo"] = serde_json::json!({
            "ms": within.as_secs_f64() * 1000.0,
            "share": share,
            "target_share": slo.share,
        });
        for (step, phase) in report.phases.iter().enumerate() {
            json["steps"][step]["within_slo"] = serde_json::json!(phase.share_within(within));
        }
    }
    let gates = Gates {
        slo: args.slo,
        fail_if: args.fail_if.clone(),
        allow_limited: args.allow_limited,
    };
    let failures = gates.judge(&report);
    let verdict_line = if failures.is_empty() {
        "passed".to_owned()
    } else {
        format!(
            "FAILED ({})",
            failures
                .iter()
                .map(|f| verdict::one_line(&f.reason))
                .collect::<Vec<_>>()
                .join("; ")
        )
    };
    println!("verdict     {verdict_line}");
    json["gate"] = gates.verdict_json(&failures);
    if let Some(path) = &args.json {
        write(path, &serde_json::to_string_pretty(&json)?)?;
    }
    if let Some(path) = &args.html {
        let mut params = params(&args, &spec);
        params.push(("verdict".to_owned(), verdict_line));
        let html = loadgen::render_html(&report, "gavel load", &params);
        write(path, &html)?;
    }
    match verdict::of_failures(&failures) {
        Some(failed) if !args.report_only => Err(failed.into()),
        _ => Ok(()),
    }
}

/// The run described by the flags (for a capacity search: each trial's template).
fn spec_of(args: &LoadArgs) -> anyhow::Result<LoadSpec> {
    let default_duration = if args.find_capacity {
        DEFAULT_TRIAL
    } else {
        DEFAULT_DURATION
    };
    let mut duration = args.duration.unwrap_or(default_duration);
    let arrivals = match (args.closed_loop, args.ramp, rate(args)) {
        (true, _, RateArg::Fixed(_)) => Arrivals::Closed,
        (true, _, RateArg::Steps { .. }) => bail!("--closed-loop takes no rate steps"),
        (false, Some((from, to)), RateArg::Fixed(_)) => Arrivals::Ramp { from, to },
        (false, Some(_), RateArg::Steps { .. }) => {
            bail!("--ramp and rate steps exclude each other")
        }
        (false, None, RateArg::Fixed(r)) => Arrivals::Rate(r),
        (false, None, RateArg::Steps { from, to, step }) => {
            if args.find_capacity {
                bail!("--find-capacity takes one starting --rate, not steps");
            }
            let arrivals = Arrivals::Steps { from, to, step };
            let steps = arrivals.step_rates().len() as u32;
            duration = args.step_duration.unwrap_or(duration) * steps;
            arrivals
        }
    };
    if args.step_duration.is_some() && !matches!(arrivals, Arrivals::Steps { .. }) {
        bail!("--step-duration needs rate steps, e.g. --rate 1000:5000:1000");
    }
    let default_warmup = if args.find_capacity {
        DEFAULT_TRIAL_WARMUP
    } else {
        Duration::ZERO
    };
    let spec = LoadSpec {
        url: args.url.clone(),
        arrivals,
        duration,
        connections: args.connections,
        max_connections: args.max_connections,
        timeout: args.timeout,
        warmup: args.warmup.unwrap_or(default_warmup),
        warmup_rate: args.warmup_rate,
        check: match args.check {
            Some(CheckArg::BidResponse) => ResponseCheck::BidResponse,
            None => ResponseCheck::None,
        },
        authorization: match &args.seller_key_env {
            Some(var) => Some(format!(
                "Bearer {}",
                std::env::var(var)
                    .map_err(|_| anyhow::anyhow!("--seller-key-env: {var} is not set"))?
                    .trim()
            )),
            None => None,
        },
        http: HttpOptions {
            method: match args.method {
                MethodArg::Get => HttpMethod::Get,
                MethodArg::Post => HttpMethod::Post,
                MethodArg::Head => HttpMethod::Head,
            },
            headers: args.headers.clone(),
            ca_file: args.ca_file.clone(),
        },
    };
    spec.validate().map_err(flag_named)?;
    // A generated request gives its auction `--tmax`; a generator that gives up sooner
    // (`--timeout`) would count as timeouts answers that are on time by the request's own word.
    if args.requests.is_none()
        && args.method == MethodArg::Post
        && Duration::from_millis(u64::from(args.tmax)) > spec.timeout
    {
        bail!(
            "--tmax {} ms is longer than --timeout {:?}: the generator would give up on auctions \
             that are still inside their deadline; raise --timeout",
            args.tmax,
            spec.timeout
        );
    }
    Ok(spec)
}

/// `--rate`, or its default.
fn rate(args: &LoadArgs) -> RateArg {
    args.rate.unwrap_or(RateArg::Fixed(DEFAULT_RATE))
}

/// A spec refusal named by the flag that set the field, not by the library's field name.
fn flag_named(e: loadgen::LoadError) -> anyhow::Error {
    let loadgen::LoadError::InvalidSpec { field, reason } = &e else {
        return e.into();
    };
    let flag = match *field {
        "rate" => "--rate/--ramp",
        "warmup_rate" => "--warmup-rate",
        "duration" => "--duration (or --step-duration × the number of steps)",
        "warmup" => "--warmup",
        "connections" => "--connections",
        "max_connections" => "--max-connections",
        "timeout" => "--timeout",
        "authorization" => "--seller-key-env",
        "headers" => "--header",
        "ca_file" => "--ca-file",
        _ => return e.into(),
    };
    anyhow::anyhow!("{flag}: {reason}")
}

async fn find_capacity(args: &LoadArgs, base: LoadSpec, corpus: Arc<Corpus>) -> anyhow::Result<()> {
    let Some(slo) = args.slo_p99 else {
        return Err(usage(anyhow::anyhow!(
            "--find-capacity needs --slo-p99, e.g. --slo-p99 10ms"
        )));
    };
    let mut cap = CapacitySpec::new(slo);
    cap.min_success = args.min_success.unwrap_or(DEFAULT_MIN_SUCCESS);
    cap.max_rate = args.max_rate.unwrap_or(DEFAULT_MAX_RATE);
    cap.start_rate = match rate(args) {
        RateArg::Fixed(r) if args.rate.is_some() && r > cap.max_rate => {
            return Err(usage(anyhow::anyhow!(
                "--rate {r} is above --max-rate {}: the search would never try it",
                cap.max_rate
            )));
        }
        RateArg::Fixed(r) => r.min(cap.max_rate),
        RateArg::Steps { from, .. } => from,
    };
    cap.min_rate = cap.min_rate.min(cap.start_rate);
    println!(
        "searching for the highest rate with p99 <= {slo:?} and >= {}% answered 2xx \
         ({:?} per trial after {:?} of warm-up)",
        100.0 * cap.min_success,
        base.duration,
        base.warmup
    );
    let result = capacity::find_capacity(&base, corpus, &cap, |trial| {
        if trial.report.sent > 0 {
            println!("{}", capacity::trial_line(trial));
        }
    })
    .await?;
    let text = result.render_text();
    // The trial lines were printed as they came; the verdict is the last line.
    if let Some(verdict) = text.lines().last() {
        println!("{verdict}");
    }
    if let Some(path) = &args.json {
        write(path, &serde_json::to_string_pretty(&result.to_json())?)?;
    }
    if let Some(path) = &args.html {
        let Some(at) = result.at_capacity() else {
            return Err(capacity_failure(&result).map_or_else(
                || anyhow::anyhow!("no run at capacity to draw in {}", path.display()),
                |mut failed| {
                    failed.reasons.push(format!(
                        "no rate passed, so there is no run to draw in {}",
                        path.display()
                    ));
                    failed.into()
                },
            ));
        };
        let mut params = params(args, &base);
        params.push((
            "capacity".to_owned(),
            text.lines().last().unwrap_or_default().to_owned(),
        ));
        params.push(("trials".to_owned(), trials_summary(&result.trials)));
        write(
            path,
            &loadgen::render_html(&at.report, "gavel load: run at capacity", &params),
        )?;
    }
    match capacity_failure(&result) {
        Some(failed) if !args.report_only => Err(failed.into()),
        _ => Ok(()),
    }
}

/// A capacity search fails when no rate passed: 5 when no trial got a single answer, 3
/// otherwise (the criteria were missed at every rate tried, a latency floor included).
fn capacity_failure(result: &capacity::CapacityReport) -> Option<Failed> {
    if result.capacity.is_some() {
        return None;
    }
    let answered = result.trials.iter().any(|t| t.report.completed > 0);
    let verdict = result.render_text();
    let line = verdict.lines().last().unwrap_or("capacity: none found");
    Some(Failed {
        code: if answered {
            verdict::THRESHOLD
        } else {
            verdict::NOTHING_ANSWERED
        },
        reasons: vec![if answered {
            verdict::one_line(line)
        } else {
            format!(
                "nothing answered: no request of {} trials got an HTTP answer",
                result.trials.len()
            )
        }],
    })
}

fn trials_summary(trials: &[capacity::Trial]) -> String {
    trials
        .iter()
        .map(|t| {
            format!(
                "{}/s {} (p99 {:.2} ms)",
                t.rate,
                if t.passed { "pass" } else { "fail" },
                t.report.percentile_ms(99.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run's parameters, for the HTML report.
fn params(args: &LoadArgs, spec: &LoadSpec) -> Vec<(String, String)> {
    let corpus = match &args.requests {
        Some(p) => format!("{}", p.display()),
        None => format!(
            "{GENERATED_REQUESTS} generated OpenRTB 2.6 requests (seed {}, tmax {} ms)",
            args.seed, args.tmax
        ),
    };
    vec![
        ("url".to_owned(), spec.url.clone()),
        ("arrivals".to_owned(), spec.arrivals.describe()),
        ("duration".to_owned(), format!("{:?}", spec.duration)),
        (
            "warm-up".to_owned(),
            match spec.warmup_rate {
                Some(r) => format!("{:?} at {r}/s", spec.warmup),
                None => format!("{:?}", spec.warmup),
            },
        ),
        ("connections".to_owned(), connections(spec)),
        ("timeout".to_owned(), format!("{:?}", spec.timeout)),
        ("requests".to_owned(), corpus),
        (
            "check".to_owned(),
            match spec.check {
                ResponseCheck::None => "status only".to_owned(),
                ResponseCheck::BidResponse => {
                    "every 200 decoded as an OpenRTB 2.6 BidResponse".to_owned()
                }
            },
        ),
        (
            "generator".to_owned(),
            format!("gavel {}", env!("CARGO_PKG_VERSION")),
        ),
    ]
}

/// `64`, `64, more on demand up to 500`, or `64, more on demand (cap set by the rate)`.
fn connections(spec: &LoadSpec) -> String {
    match (spec.arrivals, spec.max_connections) {
        (Arrivals::Closed, _) => spec.connections.to_string(),
        (_, Some(max)) if max == spec.connections => format!("{max}, fixed"),
        (_, Some(max)) => format!("{} at start, more on demand up to {max}", spec.connections),
        (_, None) => format!(
            "{} at start, more on demand (up to rate × timeout)",
            spec.connections
        ),
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
