//! When requests are due: [`Segments`] yields send offsets from the start of a run.
//!
//! The engine asks for offsets one by one and never accumulates sleeps: request `i` is due
//! at `start + offset_i`, whatever happened before it. A run is a chain of constant stretches
//! and linear ramps (a warm-up, one rate, rate steps, a ramp), each offset computed from its
//! index in its segment alone.

use std::time::Duration;

/// One stretch of a [`Segments`] schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Segment {
    /// `rate` requests per second for `length`.
    Constant { rate: f64, length: Duration },
    /// A rate moving linearly from `from` (at the start) to `to` (at the end of `length`).
    Ramp {
        from: f64,
        to: f64,
        length: Duration,
    },
}

impl Segment {
    pub fn length(&self) -> Duration {
        match *self {
            Segment::Constant { length, .. } | Segment::Ramp { length, .. } => length,
        }
    }

    /// Highest instantaneous rate of the segment.
    pub fn peak_rate(&self) -> f64 {
        match *self {
            Segment::Constant { rate, .. } => rate,
            Segment::Ramp { from, to, .. } => from.max(to),
        }
    }

    /// Seconds from the segment's start to its request `i`, or `None` when that request would
    /// fall at or beyond the segment's end. Rates must be finite and positive.
    fn offset_of(&self, i: u64) -> Option<f64> {
        let i = i as f64;
        let (t, length) = match *self {
            Segment::Constant { rate, length } => (i / rate, length),
            Segment::Ramp { from, to, length } => {
                // Requests issued by time t: N(t) = from·t + (to − from)·t² / (2L). Request i
                // is due when N(t) = i; the root is written as 2i / (b + √(b² + 4ai)) so that
                // a flat ramp (a → 0) does not cancel catastrophically.
                let l = length.as_secs_f64();
                let a = (to - from) / (2.0 * l);
                let disc = from * from + 4.0 * a * i;
                if disc < 0.0 {
                    return None;
                }
                let denom = from + disc.sqrt();
                if denom <= 0.0 {
                    return None;
                }
                (2.0 * i / denom, length)
            }
        };
        (t.is_finite() && t < length.as_secs_f64()).then_some(t)
    }
}

/// Segments back to back: each request is due at its segment's start plus its own offset in
/// the segment. Used for every open-loop run: an optional warm-up segment, then the measured
/// ones (one constant rate, rate steps, or a ramp).
#[derive(Debug, Clone)]
pub struct Segments {
    segments: Vec<Segment>,
    /// Index of the current segment and of the next request inside it.
    current: usize,
    next: u64,
    /// Start of the current segment, from the start of the run.
    base: Duration,
}

impl Segments {
    pub fn new(segments: Vec<Segment>) -> Segments {
        Segments {
            segments,
            current: 0,
            next: 0,
            base: Duration::ZERO,
        }
    }

    /// Total length: no offset is at or beyond it.
    pub fn length(&self) -> Duration {
        self.segments.iter().map(Segment::length).sum()
    }

    /// Offsets at which each segment starts, from the start of the run.
    pub fn starts(&self) -> Vec<Duration> {
        let mut at = Duration::ZERO;
        self.segments
            .iter()
            .map(|s| {
                let start = at;
                at += s.length();
                start
            })
            .collect()
    }
}

impl Iterator for Segments {
    type Item = Duration;

    /// The offset of the next request, or `None` when the schedule is over.
    fn next(&mut self) -> Option<Duration> {
        loop {
            let seg = self.segments.get(self.current)?;
            if let Some(t) = seg.offset_of(self.next) {
                self.next += 1;
                return Some(self.base + Duration::from_secs_f64(t));
            }
            self.base += seg.length();
            self.current += 1;
            self.next = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(s: Segments) -> Vec<Duration> {
        s.collect()
    }

    /// One constant rate over `length`.
    fn constant(rate: f64, length: Duration) -> Segments {
        Segments::new(vec![Segment::Constant { rate, length }])
    }

    /// How many requests one segment issues.
    fn count(seg: Segment) -> usize {
        all(Segments::new(vec![seg])).len()
    }

    #[test]
    fn exact_counts() {
        for (rate, secs, n) in [
            (2000.0, 1.0, 2000),
            (500.0, 2.0, 1000),
            (3.0, 1.0, 3),
            (0.5, 1.0, 1),
            (0.5, 3.0, 2),
            (1.0 / 3.0, 3.0, 1),
            (7.0, 1.5, 11),
            (100_000.0, 0.25, 25_000),
        ] {
            let got = all(constant(rate, Duration::from_secs_f64(secs))).len();
            assert_eq!(got, n, "rate {rate} over {secs} s");
        }
    }

    #[test]
    fn offsets_are_absolute_and_monotone() {
        let offs = all(constant(3000.0, Duration::from_secs(2)));
        assert_eq!(offs[0], Duration::ZERO);
        assert!(offs.windows(2).all(|w| w[0] <= w[1]));
        // No drift: the 3000th request is due at exactly 1 s.
        assert_eq!(offs[3000], Duration::from_secs(1));
        assert!(*offs.last().unwrap_or(&Duration::MAX) < Duration::from_secs(2));
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn segments_chain_and_count() {
        let plan = Segments::new(vec![
            Segment::Constant {
                rate: 100.0,
                length: secs(1.0),
            },
            Segment::Constant {
                rate: 200.0,
                length: secs(2.0),
            },
            Segment::Constant {
                rate: 300.0,
                length: secs(0.5),
            },
        ]);
        assert_eq!(plan.starts(), vec![secs(0.0), secs(1.0), secs(3.0)]);
        assert_eq!(plan.length(), secs(3.5));
        let offs = all(plan);
        assert_eq!(offs.len(), 100 + 400 + 150);
        // Each segment starts exactly on its boundary, with its own spacing.
        assert_eq!(offs[100], secs(1.0));
        assert_eq!(offs[101] - offs[100], secs(1.0 / 200.0));
        assert_eq!(offs[500], secs(3.0));
        assert!(offs.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn ramp_issues_the_area_under_the_rate() {
        // 1000/s rising to 3000/s over 2 s: (1000 + 3000) / 2 * 2 = 4000 requests.
        let ramp = Segment::Ramp {
            from: 1000.0,
            to: 3000.0,
            length: secs(2.0),
        };
        assert_eq!(count(ramp), 4000);
        let offs = all(Segments::new(vec![ramp]));
        assert_eq!(offs.len(), 4000);
        // The instantaneous rate follows the line: count the requests of each half-second.
        let in_window = |a: f64, b: f64| {
            offs.iter()
                .filter(|o| o.as_secs_f64() >= a && o.as_secs_f64() < b)
                .count() as f64
        };
        // Mean rates 1250, 1750, 2250, 2750 over 0.5 s each.
        for (k, expect) in [625.0, 875.0, 1125.0, 1375.0].into_iter().enumerate() {
            let got = in_window(k as f64 * 0.5, (k + 1) as f64 * 0.5);
            assert!((got - expect).abs() <= 1.0, "window {k}: {got} vs {expect}");
        }
        // A falling ramp mirrors it.
        let down = Segment::Ramp {
            from: 3000.0,
            to: 1000.0,
            length: secs(2.0),
        };
        assert_eq!(count(down), 4000);
        // A flat ramp is a constant rate.
        let flat = Segment::Ramp {
            from: 500.0,
            to: 500.0,
            length: secs(1.0),
        };
        assert_eq!(count(flat), 500);
    }
}
