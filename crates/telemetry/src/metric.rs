//! Metrics declared once. A metric is a value that knows its name, help and label key, so the
//! struct that holds it is also the list of what is exported: [`Render::render`] writes the
//! family, and [`render_each`] writes one family over many members (a bidder each, say) with
//! the member's name as a label. Label values are a [`Label`] enum's, never a request's.

use std::fmt::Write as _;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Histogram, family, sample};

/// An enum whose variants are the values of one bounded label. `labelled_counters!` declares
/// such enums.
pub trait Label: Copy + 'static {
    /// Every variant, in the order they are rendered.
    fn all() -> &'static [Self];
    /// The label value.
    fn label(self) -> &'static str;
    /// Position in [`Label::all`].
    fn index(self) -> usize;
}

/// A metric's name and help, written once where it is declared.
#[derive(Clone, Copy, Debug)]
pub struct Meta {
    pub name: &'static str,
    pub help: &'static str,
}

/// Something that writes itself as Prometheus text.
pub trait Render {
    /// The family's `# HELP` and `# TYPE` lines.
    fn header(&self, out: &mut String);
    /// The samples, each with `labels` first (a member's name, say).
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]);
    /// The whole family.
    fn render(&self, out: &mut String) {
        self.header(out);
        self.samples(out, &[]);
    }
}

/// A counter without labels.
#[derive(Debug)]
pub struct Counter {
    meta: Meta,
    value: AtomicU64,
}

impl Counter {
    pub fn new(name: &'static str, help: &'static str) -> Counter {
        Counter {
            meta: Meta { name, help },
            value: AtomicU64::new(0),
        }
    }
    pub fn inc(&self) {
        self.value.fetch_add(1, Relaxed);
    }
    pub fn add(&self, n: u64) {
        if n > 0 {
            self.value.fetch_add(n, Relaxed);
        }
    }
    /// Sets the value (a counter mirrored from a count kept elsewhere).
    pub fn set(&self, n: u64) {
        self.value.store(n, Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.value.load(Relaxed)
    }
}

impl Render for Counter {
    fn header(&self, out: &mut String) {
        family(out, self.meta.name, "counter", self.meta.help);
    }
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]) {
        sample(out, self.meta.name, labels, self.get());
    }
}

/// A gauge: a value that goes up and down, kept as an integer and divided by `scale` when
/// rendered (a gauge of microseconds rendered in seconds has scale 1e6). Its cell may be shared
/// with the code that moves it ([`Gauge::cell`]).
#[derive(Debug)]
pub struct Gauge {
    meta: Meta,
    scale: f64,
    value: Arc<AtomicU64>,
}

impl Gauge {
    pub fn new(name: &'static str, help: &'static str) -> Gauge {
        Gauge::scaled(name, help, 1.0)
    }
    pub fn scaled(name: &'static str, help: &'static str, scale: f64) -> Gauge {
        Gauge {
            meta: Meta { name, help },
            scale,
            value: Arc::default(),
        }
    }
    /// The value, for code that moves it itself (a pool counting its busy connections).
    pub fn cell(&self) -> Arc<AtomicU64> {
        self.value.clone()
    }
    pub fn set(&self, n: u64) {
        self.value.store(n, Relaxed);
    }
    /// Sets it to `n` if `n` is higher (a high-water mark).
    pub fn raise_to(&self, n: u64) {
        self.value.fetch_max(n, Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.value.load(Relaxed)
    }
}

impl Render for Gauge {
    fn header(&self, out: &mut String) {
        family(out, self.meta.name, "gauge", self.meta.help);
    }
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]) {
        let v = self.get();
        if (self.scale - 1.0).abs() < f64::EPSILON {
            sample(out, self.meta.name, labels, v);
        } else {
            #[allow(clippy::cast_precision_loss)] // a scaled gauge is for display
            sample(out, self.meta.name, labels, v as f64 / self.scale);
        }
    }
}

/// Counters under one label whose values are static strings from code, met as they come (the
/// reasons another crate's enum gives, say): bounded by that code, rendered only once counted.
#[derive(Debug)]
pub struct Tally {
    meta: Meta,
    key: &'static str,
    /// One entry per value met; rare next to the hot path's counters, so a short lock.
    counts: Mutex<Vec<(&'static str, u64)>>,
}

impl Tally {
    pub fn new(name: &'static str, help: &'static str, key: &'static str) -> Tally {
        Tally {
            meta: Meta { name, help },
            key,
            counts: Mutex::default(),
        }
    }
    pub fn inc(&self, label: &'static str) {
        let mut counts = crate::locks::lock(&self.counts);
        match counts.iter_mut().find(|(l, _)| *l == label) {
            Some((_, n)) => *n += 1,
            None => counts.push((label, 1)),
        }
    }
    /// Every value met and its count.
    pub fn counts(&self) -> Vec<(&'static str, u64)> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl Render for Tally {
    fn header(&self, out: &mut String) {
        family(out, self.meta.name, "counter", self.meta.help);
    }
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]) {
        for (label, n) in self.counts() {
            let mut all: Vec<(&str, &str)> = labels.to_vec();
            all.push((self.key, label));
            sample(out, self.meta.name, &all, n);
        }
    }
}

/// A counter per value of the label enum `L`, under the label key `key`.
#[derive(Debug)]
pub struct Counters<L: Label> {
    meta: Meta,
    key: &'static str,
    values: Box<[AtomicU64]>,
    label: PhantomData<L>,
}

impl<L: Label> Counters<L> {
    pub fn new(name: &'static str, help: &'static str, key: &'static str) -> Counters<L> {
        Counters {
            meta: Meta { name, help },
            key,
            values: L::all().iter().map(|_| AtomicU64::new(0)).collect(),
            label: PhantomData,
        }
    }
    pub fn inc(&self, l: L) {
        self.add(l, 1);
    }
    pub fn add(&self, l: L, n: u64) {
        if let Some(c) = self.values.get(l.index())
            && n > 0
        {
            c.fetch_add(n, Relaxed);
        }
    }
    pub fn get(&self, l: L) -> u64 {
        self.values.get(l.index()).map_or(0, |c| c.load(Relaxed))
    }
    /// The sum over every label value.
    pub fn total(&self) -> u64 {
        self.values.iter().map(|c| c.load(Relaxed)).sum()
    }
}

impl<L: Label> Render for Counters<L> {
    fn header(&self, out: &mut String) {
        family(out, self.meta.name, "counter", self.meta.help);
    }
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]) {
        let mut all: Vec<(&str, &str)> = labels.to_vec();
        all.push((self.key, ""));
        for l in L::all() {
            if let Some(last) = all.last_mut() {
                last.1 = l.label();
            }
            sample(out, self.meta.name, &all, self.get(*l));
        }
    }
}

/// A counter per pair of values of two label enums (`kind` × `outcome`, say).
#[derive(Debug)]
pub struct Counters2<A: Label, B: Label> {
    meta: Meta,
    keys: (&'static str, &'static str),
    values: Box<[AtomicU64]>,
    labels: PhantomData<(A, B)>,
}

impl<A: Label, B: Label> Counters2<A, B> {
    pub fn new(
        name: &'static str,
        help: &'static str,
        keys: (&'static str, &'static str),
    ) -> Counters2<A, B> {
        let n = A::all().len() * B::all().len();
        Counters2 {
            meta: Meta { name, help },
            keys,
            values: (0..n).map(|_| AtomicU64::new(0)).collect(),
            labels: PhantomData,
        }
    }
    fn slot(a: A, b: B) -> usize {
        a.index() * B::all().len() + b.index()
    }
    pub fn inc(&self, a: A, b: B) {
        if let Some(c) = self.values.get(Self::slot(a, b)) {
            c.fetch_add(1, Relaxed);
        }
    }
    pub fn get(&self, a: A, b: B) -> u64 {
        self.values
            .get(Self::slot(a, b))
            .map_or(0, |c| c.load(Relaxed))
    }
}

impl<A: Label, B: Label> Render for Counters2<A, B> {
    fn header(&self, out: &mut String) {
        family(out, self.meta.name, "counter", self.meta.help);
    }
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]) {
        for a in A::all() {
            for b in B::all() {
                let mut all: Vec<(&str, &str)> = labels.to_vec();
                all.push((self.keys.0, a.label()));
                all.push((self.keys.1, b.label()));
                sample(out, self.meta.name, &all, self.get(*a, *b));
            }
        }
    }
}

/// A latency histogram ([`Histogram`]'s buckets) with its name and help.
#[derive(Debug)]
pub struct Latency {
    meta: Meta,
    histogram: Histogram,
}

impl Latency {
    pub fn new(name: &'static str, help: &'static str) -> Latency {
        Latency {
            meta: Meta { name, help },
            histogram: Histogram::default(),
        }
    }
    pub fn observe(&self, d: Duration) {
        self.histogram.observe(d);
    }
    pub fn count(&self) -> u64 {
        self.histogram.count()
    }
    /// The buckets, for code that observes through a plain [`Histogram`].
    pub fn histogram(&self) -> &Histogram {
        &self.histogram
    }
}

impl Render for Latency {
    fn header(&self, out: &mut String) {
        family(out, self.meta.name, "histogram", self.meta.help);
    }
    fn samples(&self, out: &mut String, labels: &[(&str, &str)]) {
        let mut text = String::new();
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            let _ = write!(text, "{k}=\"{v}\"");
        }
        self.histogram.render(out, self.meta.name, &text);
    }
}

/// Writes each family of `families` over every member of `members` (a name and the member),
/// the name under the label `key`: one header per family, then each member's samples. The
/// families are named by `prototype`, so that a family with no member is still declared.
pub fn render_each<'a, T: 'a>(
    out: &mut String,
    key: &str,
    prototype: &T,
    members: impl Iterator<Item = (&'a str, &'a T)> + Clone,
    families: &[fn(&T) -> &dyn Render],
) {
    for family in families {
        family(prototype).header(out);
        for (name, member) in members.clone() {
            family(member).samples(out, &[(key, name)]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::labelled_counters! {
        Colour {
            Red => "red",
            Blue => "blue",
        }
    }

    crate::labelled_counters! {
        Size {
            Small => "small",
            Large => "large",
        }
    }

    #[test]
    fn a_family_renders_its_header_and_every_label() {
        let c: Counters<Colour> = Counters::new("x_total", "Things by colour.", "colour");
        c.inc(Colour::Blue);
        c.add(Colour::Blue, 2);
        let mut out = String::new();
        c.render(&mut out);
        assert_eq!(
            out,
            "# HELP x_total Things by colour.\n# TYPE x_total counter\n\
             x_total{colour=\"red\"} 0\nx_total{colour=\"blue\"} 3\n"
        );
        assert_eq!(c.total(), 3);
    }

    #[test]
    fn two_labels_and_members() {
        struct Member {
            hits: Counters2<Colour, Size>,
            up: Gauge,
        }
        let member = || Member {
            hits: Counters2::new("hits_total", "Hits.", ("colour", "size")),
            up: Gauge::scaled("up_seconds", "Up.", 1e6),
        };
        let (a, b) = (member(), member());
        a.hits.inc(Colour::Red, Size::Large);
        b.up.set(1_500_000);
        let mut out = String::new();
        render_each(
            &mut out,
            "m",
            &member(),
            [("a", &a), ("b", &b)].into_iter(),
            &[|m| &m.hits, |m| &m.up],
        );
        assert!(out.starts_with("# HELP hits_total Hits.\n# TYPE hits_total counter\n"));
        assert!(out.contains("hits_total{m=\"a\",colour=\"red\",size=\"large\"} 1\n"));
        assert!(out.contains("hits_total{m=\"b\",colour=\"blue\",size=\"small\"} 0\n"));
        assert!(
            out.contains(
                "# TYPE up_seconds gauge\nup_seconds{m=\"a\"} 0\nup_seconds{m=\"b\"} 1.5\n"
            )
        );
        assert_eq!(out.matches("# HELP").count(), 2, "one header per family");
    }

    #[test]
    fn latency_with_labels() {
        let l = Latency::new("t_seconds", "Time.");
        l.observe(Duration::from_millis(3));
        let mut out = String::new();
        l.header(&mut out);
        l.samples(&mut out, &[("bidder", "a")]);
        assert!(
            out.contains("t_seconds_bucket{bidder=\"a\",le=\"0.005\"} 1\n"),
            "{out}"
        );
        assert!(out.contains("t_seconds_count{bidder=\"a\"} 1\n"), "{out}");
    }
}
