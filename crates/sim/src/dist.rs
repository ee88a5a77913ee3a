//! Seeded randomness: per-request RNG derivation and the latency / price distributions.
//!
//! Everything random in a bidder flows from [`request_rng`], which is a pure function of the
//! fleet seed, the bidder's index and the request's identity (its id and imp ids). Decisions
//! therefore do not depend on arrival order or concurrency, and a run can be repeated.
//!
//! Log-normal from two quantiles: `mu = ln(p50)`, `sigma = (ln(p99) - ln(p50)) / z99` with
//! `z99 = 2.326348` (the standard normal's 0.99 quantile). Normals come from a hand-written
//! Box–Muller transform, so the crate needs no `rand_distr`.

use std::time::Duration;

use openrtb::Price;
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// The 0.99 quantile of the standard normal distribution.
pub const Z99: f64 = 2.326_347_874_040_841;

/// Upper bound on any sampled latency: a log-normal tail is unbounded, a simulated answer is not.
pub const MAX_LATENCY: Duration = Duration::from_secs(60);

/// How long a bidder waits before answering. Serde-tagged by `kind`, e.g.
/// `{ kind = "lognormal", p50_ms = 20, p99_ms = 80 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum LatencyDist {
    /// Always `ms` milliseconds.
    Fixed { ms: u64 },
    /// Uniform in `[min_ms, max_ms]` (continuous, sub-millisecond resolution).
    Uniform { min_ms: u64, max_ms: u64 },
    /// Log-normal with the given median and 99th percentile (both > 0, `p99_ms >= p50_ms`).
    #[serde(alias = "log_normal")]
    LogNormal { p50_ms: f64, p99_ms: f64 },
}

/// A bidder's valuation of an impression, as a CPM in currency units (USD). Sampled values are
/// rounded to whole micros ([`Price`]). Serde-tagged by `kind`, e.g.
/// `{ kind = "lognormal", median = 1.2, p99 = 6.0 }`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum PriceDist {
    /// Always `cpm`.
    Fixed { cpm: f64 },
    /// Uniform in `[min, max]`.
    Uniform { min: f64, max: f64 },
    /// Log-normal with the given median and 99th percentile (both > 0, `p99 >= median`).
    #[serde(alias = "log_normal")]
    LogNormal { median: f64, p99: f64 },
}

impl LatencyDist {
    /// Samples a latency, capped at [`MAX_LATENCY`].
    pub fn sample<R: RngExt + ?Sized>(&self, rng: &mut R) -> Duration {
        let ms = match *self {
            LatencyDist::Fixed { ms } => ms as f64,
            LatencyDist::Uniform { min_ms, max_ms } => uniform(rng, min_ms as f64, max_ms as f64),
            LatencyDist::LogNormal { p50_ms, p99_ms } => lognormal(rng, p50_ms, p99_ms),
        };
        let max_ms = MAX_LATENCY.as_secs_f64() * 1000.0;
        // NaN (only from an invalid profile) falls to zero through `max`.
        Duration::from_secs_f64(ms.max(0.0).min(max_ms) / 1000.0)
    }
}

impl PriceDist {
    /// Samples a CPM and rounds it to whole micros. Never negative; capped at [`Price::MAX_CPM`].
    pub fn sample<R: RngExt + ?Sized>(&self, rng: &mut R) -> Price {
        let cpm = match *self {
            PriceDist::Fixed { cpm } => cpm,
            PriceDist::Uniform { min, max } => uniform(rng, min, max),
            PriceDist::LogNormal { median, p99 } => lognormal(rng, median, p99),
        };
        // A NaN can only come from an unvalidated profile; `from_cpm` refuses it.
        Price::from_cpm(cpm.clamp(0.0, Price::MAX_CPM)).unwrap_or(Price::ZERO)
    }
}

/// Uniform in `[lo, hi)`; `lo` when the range is empty.
fn uniform<R: RngExt + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    if hi <= lo {
        return lo;
    }
    lo + (hi - lo) * rng.random::<f64>()
}

/// A log-normal sample with median `p50` and 99th percentile `p99`.
fn lognormal<R: RngExt + ?Sized>(rng: &mut R, p50: f64, p99: f64) -> f64 {
    let mu = p50.ln();
    let sigma = ((p99.ln() - mu) / Z99).max(0.0);
    (mu + sigma * standard_normal(rng)).exp()
}

/// One standard normal sample (Box–Muller, cosine branch; the sine half is discarded so that
/// each call consumes exactly two uniforms and the RNG stream stays easy to reason about).
pub fn standard_normal<R: RngExt + ?Sized>(rng: &mut R) -> f64 {
    // `random::<f64>()` is in [0, 1); 1 - u is in (0, 1], so the logarithm is finite.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// FNV-1a, 64-bit: a stable hash (unlike `DefaultHasher`, fixed across Rust releases).
#[derive(Clone, Copy, Debug)]
pub struct Fnv(u64);

impl Fnv {
    pub fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    /// Feeds `bytes` followed by a separator byte, so that ("ab","c") and ("a","bc") differ.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes.iter().chain(std::iter::once(&0xff)) {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish(self) -> u64 {
        self.0
    }
}

impl Default for Fnv {
    fn default() -> Self {
        Self::new()
    }
}

/// SplitMix64's finaliser: spreads the bits of a 64-bit value.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The RNG for one request: a function of (fleet seed, bidder index, request identity) only.
pub fn request_rng(seed: u64, bidder_index: usize, request_hash: u64) -> SmallRng {
    let s = mix64(seed ^ mix64(bidder_index as u64 ^ mix64(request_hash)));
    SmallRng::seed_from_u64(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantile(mut xs: Vec<f64>, q: f64) -> f64 {
        xs.sort_by(f64::total_cmp);
        let i = ((xs.len() as f64 - 1.0) * q).round() as usize;
        xs[i]
    }

    fn close(actual: f64, expected: f64, rel: f64) -> bool {
        (actual - expected).abs() <= expected * rel
    }

    #[test]
    fn lognormal_latency_hits_its_quantiles() {
        let mut rng = SmallRng::seed_from_u64(7);
        let d = LatencyDist::LogNormal {
            p50_ms: 20.0,
            p99_ms: 80.0,
        };
        let xs: Vec<f64> = (0..40_000)
            .map(|_| d.sample(&mut rng).as_secs_f64() * 1e3)
            .collect();
        let (p50, p99) = (quantile(xs.clone(), 0.5), quantile(xs, 0.99));
        assert!(close(p50, 20.0, 0.03), "p50 = {p50}");
        assert!(close(p99, 80.0, 0.08), "p99 = {p99}");
    }

    #[test]
    fn lognormal_price_hits_its_quantiles() {
        let mut rng = SmallRng::seed_from_u64(11);
        let d = PriceDist::LogNormal {
            median: 1.5,
            p99: 6.0,
        };
        let xs: Vec<f64> = (0..40_000)
            .map(|_| d.sample(&mut rng).as_cpm_f64())
            .collect();
        let (p50, p99) = (quantile(xs.clone(), 0.5), quantile(xs, 0.99));
        assert!(close(p50, 1.5, 0.03), "median = {p50}");
        assert!(close(p99, 6.0, 0.08), "p99 = {p99}");
    }

    #[test]
    fn uniform_stays_in_range_and_spreads() {
        let mut rng = SmallRng::seed_from_u64(3);
        let d = PriceDist::Uniform { min: 0.5, max: 2.5 };
        let xs: Vec<f64> = (0..20_000)
            .map(|_| d.sample(&mut rng).as_cpm_f64())
            .collect();
        assert!(xs.iter().all(|&x| (0.5..=2.5).contains(&x)));
        assert!(close(quantile(xs.clone(), 0.25), 1.0, 0.05));
        assert!(close(quantile(xs.clone(), 0.5), 1.5, 0.03));
        assert!(close(quantile(xs, 0.75), 2.0, 0.03));

        let l = LatencyDist::Uniform {
            min_ms: 10,
            max_ms: 30,
        };
        for _ in 0..1000 {
            let ms = l.sample(&mut rng).as_secs_f64() * 1e3;
            assert!((10.0..=30.0).contains(&ms), "{ms}");
        }
    }

    #[test]
    fn fixed_is_fixed_and_exact() {
        let mut rng = SmallRng::seed_from_u64(0);
        assert_eq!(
            LatencyDist::Fixed { ms: 50 }.sample(&mut rng),
            Duration::from_millis(50)
        );
        assert_eq!(
            PriceDist::Fixed { cpm: 1.23 }.sample(&mut rng).micros(),
            1_230_000
        );
    }

    #[test]
    fn standard_normal_moments() {
        let mut rng = SmallRng::seed_from_u64(42);
        let n = 50_000;
        let xs: Vec<f64> = (0..n).map(|_| standard_normal(&mut rng)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "var {var}");
        assert!(close(quantile(xs, 0.99), Z99, 0.05));
    }

    #[test]
    fn request_rng_is_a_pure_function() {
        let draw = |seed, idx, h| request_rng(seed, idx, h).random::<u64>();
        assert_eq!(draw(1, 0, 99), draw(1, 0, 99));
        assert_ne!(draw(1, 0, 99), draw(2, 0, 99));
        assert_ne!(draw(1, 0, 99), draw(1, 1, 99));
        assert_ne!(draw(1, 0, 99), draw(1, 0, 98));
    }

    #[test]
    fn fnv_separates_fields() {
        let h = |parts: &[&str]| {
            let mut f = Fnv::new();
            parts.iter().for_each(|p| f.write(p.as_bytes()));
            f.finish()
        };
        assert_ne!(h(&["ab", "c"]), h(&["a", "bc"]));
        assert_eq!(h(&["x"]), h(&["x"]));
    }

    #[test]
    fn latency_is_capped() {
        let mut rng = SmallRng::seed_from_u64(0);
        let d = LatencyDist::Fixed { ms: u64::MAX };
        assert_eq!(d.sample(&mut rng), MAX_LATENCY);
    }
}
