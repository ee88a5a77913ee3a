//! The NATS JetStream sink against a real `nats-server -js` each test starts on a free port:
//! records arrive in order and once each, through retries, a server killed mid-run, and a
//! spill left by an earlier run.

use std::borrow::Cow;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use journal::nats::{NatsSink, SPILL_FILE, read_stream};
use journal::sink::{Line, Sink};
use journal::{Config, SinkKind};
use records::{NoticeRecord, Record, VERSION, to_line};
use testkit::{NatsServer, TempDir, time::wait_until};

const STREAM: &str = "GAVEL_RECORDS";
const SUBJECT: &str = "gavel.records.exchange";

/// Every test ends within this, whatever the server does.
async fn bounded<F: Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(90), test)
        .await
        .expect("the test did not end within 90 s");
}

/// A stream of 64 MiB: the default (10 GiB) is more than the test server's JetStream grants
/// (`testkit::nats`: 1 GiB), and the stream would not be created (every line spilled).
fn config(server_url: &str, spill: &TempDir) -> Config {
    Config {
        sink: SinkKind::Nats,
        nats_url: server_url.to_owned(),
        nats_stream: STREAM.to_owned(),
        spill_dir: spill.path().display().to_string(),
        max_total_mb: 64,
        ..Config::default()
    }
}

/// Line `n`: a notice record whose auction id is `a-{n}`, with line id `x-{n}`.
fn line(n: u64) -> Line {
    let record = Record::Notice(NoticeRecord {
        v: VERSION,
        auction: format!("a-{n}"),
        bidder: "dsp".to_owned(),
        notice: Cow::Borrowed("win"),
        outcome: Cow::Borrowed("sent"),
        at_ms: 1_764_000_000_000,
        attempts: 1,
        ..NoticeRecord::default()
    });
    let mut bytes = Vec::new();
    to_line(&record, &mut bytes).expect("a notice encodes");
    Line {
        id: format!("x-{n}"),
        bytes,
    }
}

fn lines(range: std::ops::Range<u64>) -> Vec<Line> {
    range.map(line).collect()
}

/// The auction ids of the stream's records, in stream order.
async fn stored(server: &NatsServer) -> Vec<String> {
    let mut ids = Vec::new();
    let stats = read_stream(&server.url(), STREAM, |record| match record {
        Record::Notice(n) => ids.push(n.auction),
        other => panic!("not a notice: {other:?}"),
    })
    .await
    .expect("the stream reads back");
    assert_eq!(stats.records, ids.len() as u64);
    ids
}

fn expected(range: std::ops::Range<u64>) -> Vec<String> {
    range.map(|n| format!("a-{n}")).collect()
}

async fn drained(sink: &NatsSink) {
    wait_until(Duration::from_secs(60), "the spill replayed", || {
        sink.stats().spill_bytes == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_read_back_in_order_once_each() {
    bounded(async {
        let server = NatsServer::start().await;
        let spill = TempDir::new("nats-order");
        let mut sink = NatsSink::connect(&config(&server.url(), &spill), SUBJECT.into())
            .await
            .unwrap();
        for batch in lines(0..2_500).chunks(250) {
            sink.write(batch).await.unwrap();
        }
        sink.flush().await.unwrap();
        let stats = sink.stats();
        assert_eq!(
            (stats.published, stats.spilled, stats.dropped),
            (2_500, 0, 0)
        );
        assert_eq!(stored(&server).await, expected(0..2_500));
        assert!(!spill.join(SPILL_FILE).exists());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_published_twice_is_stored_once() {
    bounded(async {
        let server = NatsServer::start().await;
        let spill = TempDir::new("nats-dup");
        let mut sink = NatsSink::connect(&config(&server.url(), &spill), SUBJECT.into())
            .await
            .unwrap();
        sink.write(&lines(0..10)).await.unwrap();
        // A retry of lines 5..10 (their acks lost, say) with new lines behind them.
        sink.write(&lines(5..15)).await.unwrap();
        let stats = sink.stats();
        assert_eq!((stats.published, stats.duplicates), (20, 5));
        assert_eq!(stored(&server).await, expected(0..15));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_loses_and_doubles_nothing() {
    bounded(async {
        let mut server = NatsServer::start().await;
        let spill = TempDir::new("nats-kill");
        let mut sink = NatsSink::connect(&config(&server.url(), &spill), SUBJECT.into())
            .await
            .unwrap();
        // The writer writes on its own task while this one kills the server, so the kill
        // lands wherever it lands: mid-batch, acks in flight, or between batches.
        let batches = Arc::new(AtomicUsize::new(0));
        let written = Arc::clone(&batches);
        let writer = tokio::spawn(async move {
            for batch in lines(0..6_000).chunks(30) {
                sink.write(batch).await.unwrap();
                written.fetch_add(1, SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            sink
        });
        wait_until(Duration::from_secs(30), "50 batches written", || {
            batches.load(SeqCst) >= 50
        })
        .await;
        // SIGKILL while records keep coming: no goodbye, acks in flight lost.
        server.kill();
        let at_kill = batches.load(SeqCst);
        wait_until(Duration::from_secs(30), "30 batches more written", || {
            batches.load(SeqCst) >= at_kill + 30
        })
        .await;
        // Back on the same port and store while the writer still writes.
        server.restart().await;
        let sink = writer.await.unwrap();
        drained(&sink).await;
        let stats = sink.stats();
        assert!(
            stats.spilled > 0,
            "the outage never reached the spill: {stats:?}"
        );
        assert!(stats.replayed > 0, "nothing was replayed: {stats:?}");
        assert_eq!(stats.dropped, 0);
        assert!(!spill.join(SPILL_FILE).exists());
        let ids = stored(&server).await;
        assert_eq!(ids.len(), 6_000, "stored {} records, not 6000", ids.len());
        assert_eq!(ids, expected(0..6_000));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_away_at_start_gets_everything_once_it_comes() {
    bounded(async {
        let mut server = NatsServer::start().await;
        server.kill();
        let spill = TempDir::new("nats-late");
        let mut sink = NatsSink::connect(&config(&server.url(), &spill), SUBJECT.into())
            .await
            .unwrap();
        sink.write(&lines(0..200)).await.unwrap();
        assert_eq!(sink.stats().spilled, 200);
        assert!(spill.join(SPILL_FILE).exists());
        server.restart().await;
        sink.write(&lines(200..400)).await.unwrap();
        drained(&sink).await;
        sink.write(&lines(400..500)).await.unwrap();
        let stats = sink.stats();
        assert_eq!(stats.replayed + stats.published, 500, "{stats:?}");
        assert_eq!(stored(&server).await, expected(0..500));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spill_left_on_disk_is_replayed_at_start() {
    bounded(async {
        let server = NatsServer::start().await;
        let spill = TempDir::new("nats-left");
        // What a crashed run leaves: lines of `id<TAB>json`, the last one torn mid-write.
        let mut left = Vec::new();
        for l in lines(0..300) {
            left.extend_from_slice(l.id.as_bytes());
            left.push(b'\t');
            left.extend_from_slice(&l.bytes);
            left.push(b'\n');
        }
        left.extend_from_slice(b"x-300\t{\"kind\":\"no");
        std::fs::write(spill.join(SPILL_FILE), left).unwrap();
        let mut sink = NatsSink::connect(&config(&server.url(), &spill), SUBJECT.into())
            .await
            .unwrap();
        // Written before the replay ends: behind the spill, never around it.
        sink.write(&lines(300..350)).await.unwrap();
        drained(&sink).await;
        assert!(!spill.join(SPILL_FILE).exists());
        sink.write(&lines(350..400)).await.unwrap();
        assert_eq!(stored(&server).await, expected(0..400));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spill_drops_counts_and_says_so() {
    bounded(async {
        let mut server = NatsServer::start().await;
        server.kill();
        let spill = TempDir::new("nats-full");
        let mut config = config(&server.url(), &spill);
        config.max_spill_mb = 1;
        let mut sink = NatsSink::connect(&config, SUBJECT.into()).await.unwrap();
        let line_bytes = (line(0).bytes.len() + 8) as u64;
        let fit = (1 << 20) / line_bytes;
        let err = sink
            .write(&lines(0..fit + 500))
            .await
            .expect_err("a full spill is an error");
        assert!(err.to_string().contains("spill is full"), "{err}");
        let stats = sink.stats();
        assert!(stats.dropped >= 500, "{stats:?}");
        assert_eq!(stats.spilled + stats.dropped, fit + 500);
    })
    .await;
}

/// The stream is made with the configured limits (`records.max_total_mb`, `max_age_days`,
/// the oldest discarded); a stream that exists with other limits is kept as it is, and the
/// difference is what the sink reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_is_bounded_by_size_and_age() {
    bounded(async {
        let server = NatsServer::start().await;
        let spill = TempDir::new("nats-spill");
        let config = Config {
            max_total_mb: 5,
            max_file_mb: 1,
            max_age_days: 2,
            ..config(&server.url(), &spill)
        };
        let mut sink = NatsSink::connect(&config, SUBJECT.to_owned())
            .await
            .expect("the sink starts");
        sink.write(&lines(0..10)).await.expect("published");
        let js = async_nats::jetstream::new(async_nats::connect(server.url()).await.unwrap());
        let mut stream = js.get_stream(STREAM).await.unwrap();
        let made = stream.info().await.unwrap().config.clone();
        assert_eq!(made.max_bytes, 5 * 1024 * 1024);
        assert_eq!(made.max_age, Duration::from_secs(2 * 86_400));
        assert_eq!(
            made.discard,
            async_nats::jetstream::stream::DiscardPolicy::Old
        );
        let spec = journal::nats::StreamSpec {
            name: STREAM.to_owned(),
            max_bytes: 5 * 1024 * 1024,
            max_age: Duration::from_secs(2 * 86_400),
        };
        assert_eq!(journal::nats::limits_differ(&spec, &made), None);
        // A stream made by hand without limits: kept, and the difference named.
        let unbounded = async_nats::jetstream::stream::Config {
            name: "HANDMADE".to_owned(),
            subjects: vec!["hand.>".to_owned()],
            ..Default::default()
        };
        let hand = js
            .create_stream(unbounded)
            .await
            .unwrap()
            .cached_info()
            .config
            .clone();
        let diff = journal::nats::limits_differ(&spec, &hand).unwrap_or_default();
        assert!(
            diff.contains("max_bytes unlimited") && diff.contains("max_age unlimited"),
            "{diff}"
        );
    })
    .await;
}
