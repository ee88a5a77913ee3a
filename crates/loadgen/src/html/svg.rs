//! Inline SVG line charts for the HTML report: linear scales from zero, "nice" ticks and number
//! formatting. Plain data in, markup out, so the geometry is tested without parsing a page.
//!
//! Every coordinate written goes through [`Scale::at`] or [`coord`], which never let a NaN or
//! an infinity through and keep points inside the view box: a bad sample bends a line, it does
//! not break the document.

use std::fmt::Write as _;

use super::esc;

/// Size of a chart in user units; the page lets CSS shrink it on narrow screens (the view box
/// keeps the proportions).
pub(super) const WIDTH: f64 = 720.0;
pub(super) const HEIGHT: f64 = 300.0;
/// Room for the y tick labels and the y axis title.
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
/// Room for the legend above the plot, where it cannot hide a line.
const TOP: f64 = 32.0;
/// Room for the x tick labels and the x axis title.
const BOTTOM: f64 = 44.0;

const GRID: &str = "#e5e7eb";
const BASELINE: &str = "#9ca3af";
const INK: &str = "#4b5563";

/// One axis, from 0 to `max` in data units, with labelled ticks inside that range.
pub(super) struct Axis {
    pub title: String,
    pub max: f64,
    pub ticks: Vec<(f64, String)>,
}

impl Axis {
    /// A value axis from 0 up to a nice round value at or above `max`, with about `target`
    /// ticks.
    pub fn nice(title: &str, max: f64, target: usize) -> Axis {
        let values = nice_ticks(max, target);
        let step = values.get(1).copied().unwrap_or(1.0);
        Axis {
            title: title.to_owned(),
            max: values.last().copied().unwrap_or(1.0),
            ticks: values.iter().map(|&v| (v, fmt_tick(v, step))).collect(),
        }
    }

    /// An axis that ends exactly at `max` (at least 1), with nice ticks up to it: for time,
    /// where a blank tail after the last second would only waste width.
    pub fn exact(title: &str, max: f64, target: usize) -> Axis {
        let max = if max.is_finite() && max >= 1.0 {
            max
        } else {
            1.0
        };
        let mut axis = Axis::nice(title, max, target);
        axis.ticks.retain(|(v, _)| *v <= max * (1.0 + 1e-9));
        axis.max = max;
        axis
    }
}

/// One line of a chart, in data units.
pub(super) struct Series<'a> {
    pub label: String,
    pub color: &'a str,
    pub points: Vec<(f64, f64)>,
}

/// A line chart: axes from zero, series drawn in order (the last on top).
pub(super) struct Chart<'a> {
    /// Element id, unique in the page.
    pub id: &'a str,
    /// What the chart shows, for screen readers.
    pub label: &'a str,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series<'a>>,
}

/// Maps `0..=domain_max` onto `r0..=r1`, clamping: out-of-range or non-finite values land on
/// an edge instead of outside the view box.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scale {
    pub domain_max: f64,
    pub r0: f64,
    pub r1: f64,
}

impl Scale {
    pub fn at(self, v: f64) -> f64 {
        let t = if self.domain_max.is_finite() && self.domain_max > 0.0 && v.is_finite() {
            (v / self.domain_max).clamp(0.0, 1.0)
        } else {
            0.0
        };
        self.r0 + t * (self.r1 - self.r0)
    }
}

/// The chart as one `<svg>` element (polyglot: namespaced, every element closed).
pub(super) fn render(chart: &Chart<'_>) -> String {
    let xs = Scale {
        domain_max: chart.x.max,
        r0: LEFT,
        r1: WIDTH - RIGHT,
    };
    let ys = Scale {
        domain_max: chart.y.max,
        r0: HEIGHT - BOTTOM,
        r1: TOP,
    };
    let mut out = String::with_capacity(16 * 1024);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{}\" class=\"chart\" \
         viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"{}\" \
         font-size=\"12\" font-family=\"system-ui, sans-serif\">",
        esc(chart.id),
        esc(chart.label),
        w = coord(WIDTH),
        h = coord(HEIGHT),
    );

    out.push_str("<g fill=\"none\" stroke-width=\"1\">");
    for (v, _) in &chart.y.ticks {
        let y = ys.at(*v);
        let color = if *v <= 0.0 { BASELINE } else { GRID };
        line(&mut out, (xs.r0, y), (xs.r1, y), color);
    }
    for (v, _) in &chart.x.ticks {
        let x = xs.at(*v);
        line(&mut out, (x, ys.r0), (x, ys.r1), GRID);
    }
    out.push_str("</g>");

    let _ = write!(out, "<g fill=\"{INK}\">");
    for (v, label) in &chart.y.ticks {
        let (x, y) = (xs.r0 - 6.0, ys.at(*v) + 4.0);
        text(&mut out, (x, y), "end", label);
    }
    for (v, label) in &chart.x.ticks {
        let (x, y) = (xs.at(*v), ys.r0 + 16.0);
        // A label centred on the right edge would be cut in half: end it at its tick instead.
        let anchor = if x > xs.r1 - 20.0 { "end" } else { "middle" };
        text(&mut out, (x, y), anchor, label);
    }
    text(
        &mut out,
        ((xs.r0 + xs.r1) / 2.0, HEIGHT - 6.0),
        "middle",
        &chart.x.title,
    );
    let _ = write!(
        out,
        "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        coord((ys.r0 + ys.r1) / 2.0),
        esc(&chart.y.title)
    );
    out.push_str("</g>");

    legend(&mut out, &chart.series);

    out.push_str("<g fill=\"none\" stroke-width=\"1.75\" stroke-linejoin=\"round\">");
    for s in &chart.series {
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|&(x, y)| (xs.at(x), ys.at(y)))
            .collect();
        match pts.as_slice() {
            [] => {}
            // A single point draws no line: show it as a dot.
            [(x, y)] => {
                let _ = write!(
                    out,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"><title>{}</title></circle>",
                    coord(*x),
                    coord(*y),
                    esc(s.color),
                    esc(&s.label)
                );
            }
            _ => {
                let _ = write!(out, "<polyline stroke=\"{}\" points=\"", esc(s.color));
                for (i, (x, y)) in pts.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    let _ = write!(out, "{},{}", coord(*x), coord(*y));
                }
                let _ = write!(out, "\"><title>{}</title></polyline>", esc(&s.label));
            }
        }
    }
    out.push_str("</g></svg>");
    out
}

/// A row of swatches and names above the plot.
fn legend(out: &mut String, series: &[Series<'_>]) {
    let _ = write!(out, "<g fill=\"{INK}\">");
    let mut x = LEFT;
    let y = TOP - 14.0;
    for s in series {
        let _ = write!(
            out,
            "<line x1=\"{}\" y1=\"{y1}\" x2=\"{}\" y2=\"{y1}\" stroke=\"{}\" stroke-width=\"3\"/>",
            coord(x),
            coord(x + 18.0),
            esc(s.color),
            y1 = coord(y - 4.0),
        );
        text(out, (x + 24.0, y), "start", &s.label);
        // System fonts at 12 px average about 6.5 px per character.
        x += 24.0 + 6.5 * s.label.chars().count() as f64 + 20.0;
    }
    out.push_str("</g>");
}

fn line(out: &mut String, (x1, y1): (f64, f64), (x2, y2): (f64, f64), color: &str) {
    let _ = write!(
        out,
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\"/>",
        coord(x1),
        coord(y1),
        coord(x2),
        coord(y2),
        esc(color)
    );
}

fn text(out: &mut String, (x, y): (f64, f64), anchor: &str, body: &str) {
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
        coord(x),
        coord(y),
        esc(body)
    );
}

/// A coordinate with one decimal (a tenth of a pixel is below what a screen shows, and keeps
/// the page small); 0 for anything not finite.
pub(super) fn coord(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let s = format!("{v:.1}");
    match s.strip_suffix(".0") {
        Some(int) if int != "-0" => int.to_owned(),
        Some(_) => "0".to_owned(),
        None => s,
    }
}

/// Ticks `0, step, 2 step, ..` up to the first at or above `max`, where `step` is 1, 2 or 5
/// times a power of ten and gives about `target` intervals. A `max` that is not a positive
/// finite number is taken as 1, so the result always has at least two ticks.
pub(super) fn nice_ticks(max: f64, target: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 1e-9 {
        max
    } else {
        1.0
    };
    let raw = max / target.max(1) as f64;
    let exp = raw.log10().floor() as i32;
    let norm = raw / 10f64.powi(exp);
    // Round the normalized step to the nearest of 1, 2, 5, 10 on a log scale (d3's rule).
    let mult: u64 = if norm >= 50f64.sqrt() {
        10
    } else if norm >= 10f64.sqrt() {
        5
    } else if norm >= 2f64.sqrt() {
        2
    } else {
        1
    };
    // `i * mult / 10^-exp` rather than `i * step`: 0.3 stays 0.3, not 0.30000000000000004.
    let at = |i: u64| {
        let units = (i * mult) as f64;
        if exp < 0 {
            units / 10f64.powi(-exp)
        } else {
            units * 10f64.powi(exp)
        }
    };
    let step = at(1);
    let count = (max / step - 1e-9).ceil().max(1.0) as u64;
    (0..=count).map(at).collect()
}

/// A tick label with just the decimals that `step` needs: `0.5`, `2`, `1500`.
pub(super) fn fmt_tick(v: f64, step: f64) -> String {
    let decimals = if step.is_finite() && step > 0.0 && step < 1.0 {
        ((-step.log10() - 1e-9).ceil() as usize).min(6)
    } else {
        0
    };
    let v = if v.is_finite() { v } else { 0.0 };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn nice_ticks_are_round() {
        let cases: &[(f64, usize, &[f64])] = &[
            (9.3, 5, &[0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
            (10.0, 5, &[0.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
            (
                1000.4,
                5,
                &[0.0, 200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0],
            ),
            (0.75, 5, &[0.0, 0.2, 0.4, 0.6, 0.8]),
            (0.03, 3, &[0.0, 0.01, 0.02, 0.03]),
            (29.0, 8, &[0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]),
            (4999.0, 5, &[0.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0]),
        ];
        for (max, target, want) in cases {
            let got = nice_ticks(*max, *target);
            assert!(close(&got, want), "{max}: {got:?}");
        }
    }

    #[test]
    fn nice_ticks_survive_degenerate_input() {
        for max in [0.0, -3.0, f64::NAN, f64::INFINITY, 1e-300] {
            let got = nice_ticks(max, 5);
            assert!(
                close(&got, &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]),
                "{max}: {got:?}"
            );
        }
        assert!(close(&nice_ticks(3.0, 0), &[0.0, 2.0, 4.0]));
    }

    #[test]
    fn tick_labels_have_the_decimals_the_step_needs() {
        assert_eq!(fmt_tick(0.30000000000000004, 0.1), "0.3");
        assert_eq!(fmt_tick(0.05, 0.05), "0.05");
        assert_eq!(fmt_tick(1500.0, 500.0), "1500");
        assert_eq!(fmt_tick(2.0, 1.0), "2");
        assert_eq!(fmt_tick(f64::NAN, 1.0), "0");
    }

    #[test]
    fn scale_clamps_and_guards() {
        let s = Scale {
            domain_max: 10.0,
            r0: 100.0,
            r1: 0.0,
        };
        assert!((s.at(5.0) - 50.0).abs() < 1e-12);
        assert!((s.at(20.0) - 0.0).abs() < 1e-12);
        assert!((s.at(-1.0) - 100.0).abs() < 1e-12);
        assert!((s.at(f64::NAN) - 100.0).abs() < 1e-12);
        let flat = Scale {
            domain_max: 0.0,
            ..s
        };
        assert!((flat.at(3.0) - 100.0).abs() < 1e-12);
    }

    #[test]
    fn coordinates_are_short_and_finite() {
        assert_eq!(coord(12.0), "12");
        assert_eq!(coord(12.345), "12.3");
        assert_eq!(coord(-0.01), "0");
        assert_eq!(coord(f64::INFINITY), "0");
    }

    #[test]
    fn exact_axis_ends_at_max() {
        let a = Axis::exact("s", 29.0, 8);
        assert!((a.max - 29.0).abs() < 1e-12);
        let labels: Vec<&str> = a.ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(labels, ["0", "5", "10", "15", "20", "25"]);
        assert!((Axis::exact("s", 0.0, 8).max - 1.0).abs() < 1e-12);
    }
}
