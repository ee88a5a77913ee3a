//! Prints size statistics of a generated corpus and one sample request.
//!
//! `cargo run -p loadgen --release --example corpus_stats -- [SEED] [COUNT]`

use loadgen::Corpus;

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(1);
    let count: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let corpus = Corpus::generated(seed, count, 120);
    let mut sizes: Vec<usize> = corpus.bodies().iter().map(|b| b.len()).collect();
    sizes.sort_unstable();
    if sizes.is_empty() {
        return;
    }
    let at = |q: f64| sizes[((sizes.len() - 1) as f64 * q) as usize];
    println!(
        "{count} requests, seed {seed}: min {} p10 {} p50 {} p90 {} max {} bytes, mean {:.0}",
        at(0.0),
        at(0.1),
        at(0.5),
        at(0.9),
        at(1.0),
        sizes.iter().sum::<usize>() as f64 / sizes.len() as f64
    );
    println!("{}", String::from_utf8_lossy(&corpus.bodies()[0]));
}
