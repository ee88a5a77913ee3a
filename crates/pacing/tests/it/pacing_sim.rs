//! Simulated days of traffic through a [`Pacer`], on a fake clock, seeded: deterministic.
//!
//! Every second (one clock step), the market offers `demand(t)` eligible requests; the pacer's
//! share of them bids (sampled in aggregate, not request by request); each bid wins with a fixed
//! probability at a uniform price, and the win is charged only if the budget (and today's) still
//! has room, as the ledger would. The spend goes back to the pacer every step. Each test states
//! the tolerance it holds the pacer to; the figures measured when this was written are in the
//! comments.

use std::collections::VecDeque;
use std::f64::consts::TAU;

use pacing::{Flight, Pacer, PacerConfig, PacingMode};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use units::{Limits, Nanos, Timestamp};

const DAY_MS: u64 = Timestamp::MS_PER_DAY;
const HOUR_MS: u64 = 3_600_000;
/// 2024-01-01T00:00:00Z, day 19723.
const EPOCH: u64 = 19_723 * DAY_MS;

fn units(u: f64) -> Nanos {
    Nanos::from_units(u).expect("in range")
}

/// The traffic one campaign sees.
struct Market {
    /// Eligible requests per second at second `t` of the simulation.
    demand: Box<dyn Fn(u64) -> f64>,
    win_probability: f64,
    /// CPM range in micros, which is the price of one impression in nanos.
    price_nanos: (i64, i64),
}

impl Market {
    fn mean_price(&self) -> f64 {
        (self.price_nanos.0 + self.price_nanos.1) as f64 / 2.0
    }
}

/// 200 requests/s, 10% win rate, CPM 1.00-4.00: 5e7 nanos/s at full share, 4,320 units a day.
fn market(demand: impl Fn(u64) -> f64 + 'static) -> Market {
    Market {
        demand: Box::new(demand),
        win_probability: 0.1,
        price_nanos: (1_000_000, 4_000_000),
    }
}

const BASE_DEMAND: f64 = 200.0;

/// Low at 03:00 UTC (0.25x), high at 15:00 (1.75x).
fn diurnal(t: u64) -> f64 {
    let phase = ((t % 86_400) as f64 / 86_400.0 - 3.0 / 24.0) * TAU;
    BASE_DEMAND * (1.0 - 0.75 * phase.cos())
}

/// A budget that stops wins as the ledger does.
#[derive(Debug)]
struct Ledger {
    limits: Limits,
    spent: Nanos,
    day: u64,
    spent_today: Nanos,
}

impl Ledger {
    fn charge(&mut self, now: Timestamp, price: Nanos) -> bool {
        self.roll(now);
        let total_ok = self.spent + price <= self.limits.total;
        let day_ok = self
            .limits
            .daily
            .is_none_or(|d| self.spent_today + price <= d);
        if total_ok && day_ok {
            self.spent += price;
            self.spent_today += price;
        }
        total_ok && day_ok
    }

    fn roll(&mut self, now: Timestamp) {
        if now.day() > self.day {
            self.day = now.day();
            self.spent_today = Nanos::ZERO;
        }
    }
}

/// What a run saw.
#[derive(Debug, Default, PartialEq)]
struct Run {
    spent: Nanos,
    /// Spend per UTC day, in order.
    per_day: Vec<Nanos>,
    /// Largest |actual - target| seen at the top of each hour, as a fraction of `scale`.
    worst_hourly_gap: f64,
    /// The same, over every second.
    worst_gap: f64,
    /// (hour, share ppm, actual, target) at each top of the hour, for failure messages.
    hourly: Vec<(u64, u32, Nanos, Nanos)>,
    /// Expected spend had every eligible request bid (no budget): what demand allows.
    offered: f64,
    /// Seconds in which the pacer admitted nothing.
    closed_secs: u64,
    /// Seconds from the start until the spend first hit the total budget.
    exhausted_after: Option<u64>,
}

/// Binomial(n, p) sample: geometric skipping when few successes are expected, a normal
/// approximation otherwise. Deterministic given the RNG.
fn binomial(rng: &mut SmallRng, n: u64, p: f64) -> u64 {
    if n == 0 || p <= 0.0 {
        return 0;
    }
    if p >= 1.0 {
        return n;
    }
    let mean = n as f64 * p;
    if mean < 30.0 {
        let log_q = (1.0 - p).ln();
        let mut successes = 0;
        let mut position = 0u64;
        loop {
            let u: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            position += (u.ln() / log_q).floor() as u64 + 1;
            if position > n {
                return successes;
            }
            successes += 1;
        }
    }
    let sd = (mean * (1.0 - p)).sqrt();
    // Box-Muller.
    let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rng.random();
    let z = (-2.0 * u1.ln()).sqrt() * (TAU * u2).cos();
    (mean + sd * z).round().clamp(0.0, n as f64) as u64
}

/// One simulated campaign.
struct Scenario {
    config: PacerConfig,
    market: Market,
    start: Timestamp,
    secs: u64,
    /// Gaps are reported as a fraction of this (the budget being paced).
    scale: Nanos,
    seed: u64,
    /// Seconds between a charge and the pacer hearing of it (a shared ledger syncs late).
    report_delay_secs: usize,
}

impl Scenario {
    fn new(config: PacerConfig, market: Market, secs: u64, scale: Nanos, seed: u64) -> Scenario {
        Scenario {
            start: config.flight.start,
            config,
            market,
            secs,
            scale,
            seed,
            report_delay_secs: 0,
        }
    }

    fn run(&self) -> Run {
        let Scenario {
            config,
            ref market,
            start,
            secs,
            scale,
            seed,
            report_delay_secs,
        } = *self;
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut pacer = Pacer::new(config);
        let mut ledger = Ledger {
            limits: config.limits,
            spent: Nanos::ZERO,
            day: start.day(),
            spent_today: Nanos::ZERO,
        };
        let mut reports: VecDeque<(Nanos, Nanos)> = VecDeque::new();
        let mut run = Run::default();
        let mut day_start_spent = Nanos::ZERO;
        let mut fractional_requests = 0.0;
        for t in 0..secs {
            let now = Timestamp(start.0 + t * 1_000);
            ledger.roll(now);
            if now.0.is_multiple_of(DAY_MS) && t > 0 {
                run.per_day.push(ledger.spent - day_start_spent);
                day_start_spent = ledger.spent;
            }
            reports.push_back((ledger.spent, ledger.spent_today));
            // The pacer hears of the ledger as it was `report_delay_secs` ago.
            let report = (reports.len() > report_delay_secs).then(|| reports.pop_front());
            if let Some((spent, today)) = report.flatten() {
                pacer.update(now, spent, today);
            }
            let target = pacer.target(now);
            let gap = (ledger.spent.get() - target.get()).abs() as f64 / scale.get() as f64;
            run.worst_gap = run.worst_gap.max(gap);
            if now.0.is_multiple_of(HOUR_MS) {
                run.worst_hourly_gap = run.worst_hourly_gap.max(gap);
                run.hourly.push((
                    (now.0 - start.0) / HOUR_MS,
                    pacer.bid_share_ppm(),
                    ledger.spent,
                    target,
                ));
            }
            // Requests this second, with the fraction carried over.
            fractional_requests += (market.demand)(t);
            let requests = fractional_requests.floor();
            fractional_requests -= requests;
            let requests = requests as u64;
            run.offered += requests as f64 * market.win_probability * market.mean_price();
            if pacer.bid_share_ppm() == 0 {
                run.closed_secs += 1;
            }
            let bids = if requests <= 16 {
                // Few requests: ask the pacer one by one, as the bidder does.
                (0..requests)
                    .filter(|_| pacer.admits(rng.random_range(0..1_000_000)))
                    .count() as u64
            } else {
                binomial(&mut rng, requests, f64::from(pacer.bid_share_ppm()) / 1e6)
            };
            let wins = binomial(&mut rng, bids, market.win_probability);
            for _ in 0..wins {
                let price = Nanos(rng.random_range(market.price_nanos.0..=market.price_nanos.1));
                ledger.charge(now, price);
            }
            if run.exhausted_after.is_none()
                && ledger.spent.get() + market.price_nanos.1 > config.limits.total.get()
            {
                run.exhausted_after = Some(t);
            }
        }
        run.per_day.push(ledger.spent - day_start_spent);
        run.spent = ledger.spent;
        run
    }
}

fn even(flight: Flight, limits: Limits) -> PacerConfig {
    PacerConfig::new(PacingMode::Even, flight, limits)
}

fn one_day_flight(start: Timestamp) -> Flight {
    Flight {
        start,
        end: Some(Timestamp(start.0 + DAY_MS)),
    }
}

fn report(run: &Run) -> String {
    let hours: Vec<String> = run
        .hourly
        .iter()
        .map(|(h, ppm, a, t)| format!("h{h}: share {ppm} actual {a} target {t}"))
        .collect();
    format!(
        "spent {} per day {:?} closed {} s\n{}",
        run.spent,
        run.per_day,
        run.closed_secs,
        hours.join("\n")
    )
}

fn shortfall(run: &Run, budget: Nanos) -> f64 {
    (budget.get() - run.spent.get()) as f64 / budget.get() as f64
}

/// One line per run, shown with `--nocapture`: the figures the tolerances are held against.
fn summary(name: &str, run: &Run, budget: Nanos) {
    eprintln!(
        "{name}: worst gap at the hour {:.5}, at any second {:.5}, short at the end {:.5}, gate closed {} s",
        run.worst_hourly_gap,
        run.worst_gap,
        shortfall(run, budget),
        run.closed_secs
    );
}

/// The Even one-day-flight contract: at every hour within 5% of the budget from the line, and
/// at the end 0-2% under the budget, never above.
fn assert_tracks_the_line(run: &Run, budget: Nanos) {
    assert!(run.worst_hourly_gap <= 0.05, "{}", report(run));
    assert!(run.spent <= budget, "{}", report(run));
    assert!(shortfall(run, budget) <= 0.02, "{}", report(run));
}

/// Constant, ample demand (the budget needs ~23% of it), flight starting at 06:00.
/// Measured: worst gap 0.012% of the budget at the hour (0.10% at any second), 0.004% short.
#[test]
fn even_flight_tracks_the_line_under_constant_demand() {
    let start = Timestamp(EPOCH + 6 * HOUR_MS);
    let budget = units(1_000.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: None,
        },
    );
    let run = Scenario::new(config, market(|_| BASE_DEMAND), 86_400, budget, 1).run();
    summary("constant", &run, budget);
    assert_tracks_the_line(&run, budget);
}

/// Demand swinging 7x between night and afternoon (the budget needs ~46% of the trough's
/// traffic, ~7% of the peak's). Measured: worst gap 0.020% at the hour (0.13% at any second),
/// 0.006% short.
#[test]
fn even_flight_tracks_the_line_under_diurnal_demand() {
    let start = Timestamp(EPOCH);
    let budget = units(500.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: None,
        },
    );
    let run = Scenario::new(config, market(diurnal), 86_400, budget, 2).run();
    summary("diurnal", &run, budget);
    assert_tracks_the_line(&run, budget);
}

/// 5x the traffic for two hours in the middle of the flight, then back: the gate holds the
/// burst, the integrator relearns the share both ways. Measured: worst gap 0.03% at the hour
/// (0.19% at any second).
#[test]
fn even_flight_rides_out_a_demand_surge() {
    let start = Timestamp(EPOCH);
    let budget = units(1_000.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: None,
        },
    );
    let surge = |t: u64| {
        if (10 * 3_600..12 * 3_600).contains(&t) {
            5.0 * BASE_DEMAND
        } else {
            BASE_DEMAND
        }
    };
    let run = Scenario::new(config, market(surge), 86_400, budget, 3).run();
    summary("surge", &run, budget);
    assert_tracks_the_line(&run, budget);
}

/// Far more traffic than budget (the budget needs ~0.12% of it, and a win every ~11 s): the
/// share comes down from its initial 10% without a burst at the start. Measured: worst gap
/// 0.065% at the hour (0.16% at any second), 0.02% short; the gate is closed a seventh of the
/// time, as single wins are bigger than its allowance.
#[test]
fn even_flight_finds_a_tiny_share_when_demand_is_huge() {
    let start = Timestamp(EPOCH);
    let budget = units(20.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: None,
        },
    );
    let run = Scenario::new(config, market(|_| 4.0 * BASE_DEMAND), 86_400, budget, 4).run();
    summary("huge", &run, budget);
    assert_tracks_the_line(&run, budget);
    assert!(run.worst_gap <= 0.01, "{}", report(&run));
}

/// The spend reaches the pacer 10 s late (a shared ledger's sync), under diurnal demand.
/// Measured: worst gap 0.025% at the hour (0.11% at any second).
#[test]
fn even_flight_tolerates_late_spend_reports() {
    let start = Timestamp(EPOCH);
    let budget = units(500.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: None,
        },
    );
    let mut scenario = Scenario::new(config, market(diurnal), 86_400, budget, 8);
    scenario.report_delay_secs = 10;
    let run = scenario.run();
    summary("late reports", &run, budget);
    assert_tracks_the_line(&run, budget);
}

/// A daily budget over three days, open-ended flight, diurnal demand: each day spends its daily
/// budget, 0-2% under, never over, and every hour is within 5% of the daily budget from the day's
/// line. Measured: each day 99.97-100% of the daily budget, worst gap 0.03% of a day's budget
/// at the hour.
#[test]
fn a_daily_budget_is_spent_each_day_and_never_exceeded() {
    let start = Timestamp(EPOCH);
    let daily = units(300.0);
    let limits = Limits {
        total: units(100_000.0),
        daily: Some(daily),
    };
    let config = even(Flight { start, end: None }, limits);
    let run = Scenario::new(config, market(diurnal), 3 * 86_400, daily, 5).run();
    summary("daily", &run, units(900.0));
    eprintln!("daily: per day {:?}", run.per_day);
    assert_eq!(run.per_day.len(), 3, "{}", report(&run));
    for day in &run.per_day {
        assert!(*day <= daily, "{}", report(&run));
        let short = (daily.get() - day.get()) as f64 / daily.get() as f64;
        assert!(short <= 0.02, "{}", report(&run));
    }
    assert!(run.worst_hourly_gap <= 0.05, "{}", report(&run));
}

/// A flight starting at noon with a daily budget: the first half-day still gets the whole daily
/// budget (the day's line runs over its in-flight part), and so does the next day.
#[test]
fn a_flight_starting_mid_day_spends_its_first_daily_budget_by_midnight() {
    let start = Timestamp(EPOCH + 12 * HOUR_MS);
    let daily = units(300.0);
    let config = even(
        Flight { start, end: None },
        Limits {
            total: units(100_000.0),
            daily: Some(daily),
        },
    );
    let run = Scenario::new(config, market(diurnal), 36 * 3_600, daily, 10).run();
    summary("mid-day start", &run, units(600.0));
    eprintln!("mid-day start: per day {:?}", run.per_day);
    assert_eq!(run.per_day.len(), 2, "{}", report(&run));
    for day in &run.per_day {
        assert!(*day <= daily, "{}", report(&run));
        assert!(
            day.get() as f64 >= 0.98 * daily.get() as f64,
            "{}",
            report(&run)
        );
    }
}

/// A 3-day flight from noon whose total (750) is below what the daily budget (300) would allow:
/// the flight's line binds (250 a day), no day goes over its budget, and the flight ends with its
/// total spent. Measured per day: 125.0, 250.0, 250.0, 125.0.
#[test]
fn with_a_flight_and_a_daily_budget_the_lower_line_binds() {
    let start = Timestamp(EPOCH + 12 * HOUR_MS);
    let daily = units(300.0);
    let total = units(750.0);
    let flight = Flight {
        start,
        end: Some(Timestamp(start.0 + 3 * DAY_MS)),
    };
    let config = even(
        flight,
        Limits {
            total,
            daily: Some(daily),
        },
    );
    let run = Scenario::new(config, market(diurnal), 3 * 86_400, total, 11).run();
    summary("flight and daily", &run, total);
    eprintln!("flight and daily: per day {:?}", run.per_day);
    // Days: [12:00, 24:00), two full days, [00:00, 12:00).
    assert_eq!(run.per_day.len(), 4, "{}", report(&run));
    let expected = [125.0, 250.0, 250.0, 125.0];
    for (day, want) in run.per_day.iter().zip(expected) {
        assert!(*day <= daily, "{}", report(&run));
        assert!(
            (day.as_units_f64() - want).abs() <= 0.02 * want,
            "{}",
            report(&run)
        );
    }
    assert_tracks_the_line(&run, total);
}

/// Asap bids on everything until the budget is gone. 1,000 units at 5e7 nanos/s take 20,000 s;
/// measured: exhausted after 19,938 s.
#[test]
fn asap_spends_as_fast_as_demand_allows() {
    let start = Timestamp(EPOCH);
    let budget = units(1_000.0);
    let limits = Limits {
        total: budget,
        daily: None,
    };
    let config = PacerConfig::new(PacingMode::Asap, one_day_flight(start), limits);
    let run = Scenario::new(config, market(|_| BASE_DEMAND), 86_400, budget, 6).run();
    let exhausted = run.exhausted_after.unwrap_or(u64::MAX);
    eprintln!("asap: exhausted after {exhausted} s, spent {}", run.spent);
    assert!(
        (19_000..=21_000).contains(&exhausted),
        "{exhausted} s\n{}",
        report(&run)
    );
    let (_, share, first_hour, _) = run.hourly[1];
    assert_eq!(share, 1_000_000);
    let allowed = 3_600.0 * BASE_DEMAND * 0.1 * 2_500_000.0;
    assert!(
        (first_hour.get() as f64 / allowed - 1.0).abs() <= 0.02,
        "{}",
        report(&run)
    );
    assert!(run.spent <= budget && shortfall(&run, budget) <= 0.001);
}

/// Too little traffic for an Even budget (864 units a day at full share for a budget of 1,000):
/// the share saturates at 100% and the campaign takes everything demand allows but the first
/// minutes spent at the initial share. Measured: 99.7% of what demand allowed.
#[test]
fn with_too_little_demand_the_share_saturates_and_takes_everything() {
    let start = Timestamp(EPOCH);
    let budget = units(1_000.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: None,
        },
    );
    let run = Scenario::new(config, market(|_| BASE_DEMAND / 5.0), 86_400, budget, 7).run();
    let taken = run.spent.get() as f64 / run.offered;
    eprintln!("thin: took {taken:.4} of what demand allowed");
    let shares_after_the_first_hour = run.hourly.iter().skip(1).map(|(_, share, _, _)| *share);
    assert!(
        shares_after_the_first_hour
            .into_iter()
            .all(|s| s == 1_000_000),
        "{}",
        report(&run)
    );
    assert!(taken >= 0.98, "{taken}\n{}", report(&run));
}

/// Same seed, same run.
#[test]
fn simulations_are_deterministic() {
    let start = Timestamp(EPOCH);
    let budget = units(100.0);
    let config = even(
        one_day_flight(start),
        Limits {
            total: budget,
            daily: Some(units(60.0)),
        },
    );
    let a = Scenario::new(config, market(diurnal), 6 * 3_600, budget, 9).run();
    let b = Scenario::new(config, market(diurnal), 6 * 3_600, budget, 9).run();
    assert_eq!(a, b);
    assert!(a.spent.is_positive());
}

/// A ten-minute flight (the loop's horizon and gate shrink with the line): the budget needs
/// ~10% of the traffic. Held to 5% of the budget from the line at every second and 0-2% short
/// at the end.
#[test]
fn even_short_flight_tracks_the_line() {
    let start = Timestamp(EPOCH + 9 * HOUR_MS);
    let budget = units(3.0);
    let config = even(
        Flight {
            start,
            end: Some(Timestamp(start.0 + 600_000)),
        },
        Limits {
            total: budget,
            daily: None,
        },
    );
    let run = Scenario::new(config, market(|_| BASE_DEMAND), 600, budget, 5).run();
    summary("ten minutes", &run, budget);
    assert!(run.worst_gap <= 0.05, "{}", report(&run));
    assert!(run.spent <= budget, "{}", report(&run));
    assert!(shortfall(&run, budget) <= 0.02, "{}", report(&run));
}
