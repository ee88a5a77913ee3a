//! What strict framing costs per request, beside the parse it guards: the header checks
//! (`framing::check`) and the scanner that counts the `Content-Length` lines hyper folds
//! (`HeadScanner::feed`), on a typical auction request (a 2 KB body after a 200-byte head),
//! read whole and read in 512-byte pieces.
//!
//! `cargo bench -p edge --bench framing -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use http_front::framing::{HeadScanner, check};

fn request() -> Vec<u8> {
    let body = format!(
        "{{\"id\":\"r1\",\"imp\":[{{\"id\":\"1\"}}],\"pad\":\"{}\"}}",
        "x".repeat(2_000)
    );
    let mut r = format!(
        "POST /openrtb2/auction HTTP/1.1\r\nHost: exchange.example\r\nContent-Type: application/json\r\n\
         Authorization: Bearer 0123456789abcdef0123456789abcdef\r\nx-openrtb-version: 2.6\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body.as_bytes());
    r
}

fn bench(c: &mut Criterion) {
    let bytes = request();
    let mut headers = http::HeaderMap::new();
    for (n, v) in [
        ("host", "exchange.example"),
        ("content-type", "application/json"),
        ("content-length", "2040"),
    ] {
        if let (Ok(n), Ok(v)) = (n.parse::<http::HeaderName>(), v.parse()) {
            headers.insert(n, v);
        }
    }
    c.bench_function("framing/check_headers", |b| {
        b.iter(|| check(http::Version::HTTP_11, black_box(&headers)))
    });
    // One scanner per connection, as in the server: many requests through it.
    let mut scanner = HeadScanner::default();
    c.bench_function("framing/scan_request_whole", |b| {
        b.iter(|| {
            scanner.feed(black_box(&bytes));
            scanner.next_head()
        })
    });
    c.bench_function("framing/scan_request_512_byte_reads", |b| {
        b.iter(|| {
            for part in bytes.chunks(512) {
                scanner.feed(black_box(part));
            }
            scanner.next_head()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
