#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use flate2::write::GzEncoder;
use std::io::Write;

const REQUEST: &[u8] = include_bytes!("../../benches/fixtures/bid_request.json");
const RESPONSE: &[u8] = include_bytes!("../../benches/fixtures/bid_response.json");

/// Bytes from a seeded xorshift, half of them from a small alphabet: compressible, but not
/// trivially, and the same on every run.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = (x >> 24) as u8;
            if x & 1 == 0 { b } else { b'a' + b % 8 }
        })
        .collect()
}

fn gzip_at(level: u32, body: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::new(level));
    e.write_all(body).unwrap();
    e.finish().unwrap()
}

#[test]
fn what_is_compressed_inflates_to_the_same_bytes() {
    for body in [
        REQUEST.to_vec(),
        RESPONSE.to_vec(),
        Vec::new(),
        b"{}".to_vec(),
        noise(100_000, 7),
    ] {
        let gz = compress(&body).unwrap();
        assert_eq!(inflate(&gz, body.len()).unwrap(), body);
    }
    let gz = compress(REQUEST).unwrap();
    assert!(
        gz.len() * 3 < REQUEST.len() * 2,
        "a bid request (many unique ids, a consent string) deflates by a third: {} of {}",
        gz.len(),
        REQUEST.len()
    );
    assert_eq!(&gz[..3], &[0x1f, 0x8b, 8], "gzip magic and deflate");
}

/// The thread's reused deflate state leaves no trace: the same body gives the same bytes
/// after other bodies, and on a thread that never compressed before.
#[test]
fn reusing_the_deflate_state_changes_nothing() {
    let first = compress(REQUEST).unwrap();
    let random: Vec<u8> = noise(300_000, 11)
        .iter()
        .map(|b| b.rotate_left(3) ^ 0x5a)
        .collect();
    for other in [RESPONSE, &random, b"", &REQUEST[..100]] {
        let gz = compress(other).unwrap();
        assert_eq!(inflate(&gz, other.len()).unwrap(), other);
    }
    assert_eq!(compress(REQUEST).unwrap(), first);
    let elsewhere = std::thread::spawn(|| compress(REQUEST).unwrap())
        .join()
        .unwrap();
    assert_eq!(elsewhere, first);
    assert_eq!(&first[..10], &GZIP_HEADER);
    let size = u32::from_le_bytes(first[first.len() - 4..].try_into().unwrap());
    assert_eq!(size as usize, REQUEST.len());
}

/// Bytes no deflate can shrink still come out whole, and deflating into a buffer with no room
/// grows it as often as needed.
#[test]
fn incompressible_bodies_and_a_full_buffer() {
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let random: Vec<u8> = (0..200_000)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 56) as u8
        })
        .collect();
    let gz = compress(&random).unwrap();
    assert!(gz.len() > random.len(), "{} of {}", gz.len(), random.len());
    assert_eq!(inflate(&gz, random.len()).unwrap(), random);

    for body in [&random[..], REQUEST] {
        let mut raw = Vec::new();
        deflate_into(&mut Compress::new(LEVEL, false), body, &mut raw).unwrap();
        let mut back = Vec::new();
        flate2::read::DeflateDecoder::new(&raw[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, body);
    }
}

/// The limit, byte for byte: a body of exactly `max` passes, one byte more does not.
#[test]
fn the_limit_is_exact() {
    let body = noise(20_000, 3);
    let gz = compress(&body).unwrap();
    for (max, fits) in [
        (20_000, true),
        (20_001, true),
        (usize::MAX, true),
        (19_999, false),
        (4_096, false),
        (1, false),
        (0, false),
    ] {
        match inflate(&gz, max) {
            Ok(out) => assert!(fits && out == body, "max {max}"),
            Err(InflateError::TooLarge(m)) => assert!(!fits && m == max, "max {max}"),
            Err(e) => panic!("max {max}: {e}"),
        }
    }
    let empty = compress(b"").unwrap();
    assert_eq!(inflate(&empty, 0).unwrap(), b"");
}

/// 10 MB of zeros gzip to about 10 KB; with a 1 MB limit inflating stops at the limit.
#[test]
fn a_zip_bomb_is_refused_at_the_limit() {
    let zeros = vec![0u8; 10 * 1024 * 1024];
    let bomb = gzip_at(9, &zeros);
    assert!(bomb.len() < 20_000, "{}", bomb.len());
    let started = std::time::Instant::now();
    let r = inflate(&bomb, 1024 * 1024);
    assert!(matches!(r, Err(InflateError::TooLarge(1_048_576))), "{r:?}");
    // Generous: stopping at 1 MB takes about a millisecond; inflating all 10 MB would not
    // fail the test by time alone, but the error above proves the stop.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

/// The output buffer grows by doubling from its first guess and never past the ceiling
/// (`max` + 1): what bounds the memory a bomb can cost.
#[test]
fn the_buffer_never_grows_past_the_ceiling() {
    for (input, ceiling) in [
        (0, 1),
        (10, 1),
        (10_000, 1_048_577),
        (100, 5_000),
        (usize::MAX, usize::MAX),
        (3, usize::MAX),
    ] {
        let mut len = first_buffer(input, ceiling);
        assert!(
            len >= 1 && len <= ceiling,
            "first {len} for {input}, {ceiling}"
        );
        let mut steps = 0;
        while len < ceiling && steps < 80 {
            let next = grown(len, ceiling);
            assert!(
                next > len && next <= ceiling,
                "{len} -> {next} under {ceiling}"
            );
            len = next;
            steps += 1;
        }
        assert!(steps < 80, "reaches the ceiling in few steps");
    }
}

#[test]
fn every_truncation_is_an_error() {
    let gz = compress(RESPONSE).unwrap();
    for cut in 0..gz.len() {
        let r = inflate(&gz[..cut], usize::MAX);
        assert!(
            matches!(r, Err(InflateError::Truncated)),
            "cut at {cut} of {}: {r:?}",
            gz.len()
        );
    }
}

#[test]
fn damaged_streams_and_trailing_bytes_are_errors() {
    let gz = compress(REQUEST).unwrap().to_vec();
    let len = gz.len();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = gz.clone();
        f(&mut v);
        v
    };
    // Bytes after the last member are read as the start of another: garbage is a bad header,
    // fewer bytes than a header are a truncated one. Either way, an error.
    let cases: [(&str, Vec<u8>, bool); 8] = [
        ("not gzip at all", REQUEST.to_vec(), true),
        ("bad magic", with(&|v| v[0] = 0x1e), true),
        ("not deflate", with(&|v| v[2] = 7), true),
        ("checksum off", with(&|v| v[len - 8] ^= 1), true),
        ("length off", with(&|v| v[len - 4] ^= 1), true),
        (
            "garbage after",
            with(&|v| v.extend_from_slice(b"garbage after the stream")),
            true,
        ),
        (
            "zeros after",
            with(&|v| v.extend_from_slice(&[0; 16])),
            true,
        ),
        ("one byte after", with(&|v| v.push(0x1f)), false),
    ];
    for (name, body, malformed) in cases {
        let r = inflate(&body, usize::MAX);
        if malformed {
            assert!(
                matches!(r, Err(InflateError::Malformed(_))),
                "{name}: {r:?}"
            );
        } else {
            assert!(matches!(r, Err(InflateError::Truncated)), "{name}: {r:?}");
        }
    }
}

#[test]
fn members_one_after_another_are_one_body() {
    let mut two = compress(b"{\"id\":").unwrap().to_vec();
    two.extend_from_slice(&compress(b"\"a\"}").unwrap());
    assert_eq!(inflate(&two, 100).unwrap(), b"{\"id\":\"a\"}");
    assert!(matches!(inflate(&two, 9), Err(InflateError::TooLarge(9))));
}

/// Against another implementation: the system's `gzip` reads what `compress` writes, and
/// `inflate` reads what `gzip` writes at its default and best levels.
#[test]
fn the_system_gzip_agrees() {
    use std::process::{Command, Stdio};
    let run = |args: &[&str], input: &[u8]| -> Vec<u8> {
        let mut child = Command::new("gzip")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the gzip command (Debian's essential package gzip)");
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || stdin.write_all(&input));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(out.status.success(), "gzip {args:?}");
        out.stdout
    };
    let body = [REQUEST, RESPONSE].concat();
    assert_eq!(run(&["-dc"], &compress(&body).unwrap()), body);
    for level in ["-6", "-9", "-1"] {
        let theirs = run(&["-c", "-n", level], &body);
        assert_eq!(inflate(&theirs, body.len()).unwrap(), body, "{level}");
    }
}
