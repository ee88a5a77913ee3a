//! Single flight with streaming: every client that misses on an object while it is being
//! fetched joins the one fill in flight, and reads its bytes as they arrive.
//!
//! A [`Flight`] is a growing list of chunks shared by its readers. The fill publishes how it
//! starts (a streamed answer's head, a whole object, or a failure), then chunks, then the end.
//! Each reader keeps its own position, so a client that joins late reads from the first byte
//! at its own pace, and a slow client never holds back a fast one. The fill runs in its own
//! task: a client that goes away does not stop it for the others or for the cache.
//!
//! Readers wait through wakers registered under the same lock that publishing takes, so no
//! wake-up is lost between a reader's check and its sleep.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderValue, StatusCode};

use crate::metrics::Fetch;
use crate::object::Object;

/// The head of an answer streamed from the origin: its values as the origin sent them, passed
/// on to every client of the flight without copying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHead {
    pub content_type: HeaderValue,
    pub content_length: Option<u64>,
    pub etag: Option<HeaderValue>,
    pub last_modified: Option<HeaderValue>,
    pub cache_control: Option<HeaderValue>,
}

/// Where a whole object handed to a flight came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Disk,
    /// A stale copy the origin confirmed (304).
    Revalidated,
    /// A stale copy served because the origin failed.
    StaleMemory,
    StaleDisk,
}

/// Why a fill produced no object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The origin says the object does not exist (404, 410): passed on.
    Missing(StatusCode),
    /// The origin failed and no stale copy could stand in.
    Origin(Fetch),
    /// Larger than `max_object_bytes`.
    TooLarge,
}

/// What a fill publishes first.
#[derive(Debug, Clone)]
pub enum Start {
    Streaming(Arc<StreamHead>),
    Ready(Arc<Object>, Source),
    /// `remembered`: the failure came from the negative cache, not from a fetch just now.
    Failed {
        failure: Failure,
        remembered: bool,
    },
}

#[derive(Debug, Default)]
struct State {
    start: Option<Start>,
    chunks: Vec<Bytes>,
    /// `Some(true)` once the body is complete, `Some(false)` if it was cut.
    end: Option<bool>,
    wakers: Vec<Waker>,
    clients: u64,
}

/// One fill in flight.
#[derive(Debug, Default)]
pub struct Flight {
    state: Mutex<State>,
}

/// A reader's next step.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    Chunk(Bytes),
    End,
    /// The fill failed mid-body: the client's answer must be cut, not completed.
    Cut,
}

impl Flight {
    fn lock(&self) -> MutexGuard<'_, State> {
        telemetry::locks::lock(&self.state)
    }

    /// Counts one more client served by this fill.
    pub fn join(&self) {
        self.lock().clients += 1;
    }

    /// Clients served so far (the herd).
    pub fn clients(&self) -> u64 {
        self.lock().clients
    }

    fn publish(&self, change: impl FnOnce(&mut State)) {
        let wakers = {
            let mut s = self.lock();
            change(&mut s);
            std::mem::take(&mut s.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// Publishes how the fill starts; only the first call counts.
    pub fn start(&self, start: Start) {
        self.publish(|s| {
            s.start.get_or_insert(start);
        });
    }

    /// Publishes the next chunk of a streamed body.
    pub fn push(&self, chunk: Bytes) {
        self.publish(|s| s.chunks.push(chunk));
    }

    /// Publishes the end of a streamed body: complete, or cut.
    pub fn end(&self, complete: bool) {
        self.publish(|s| {
            s.end.get_or_insert(complete);
        });
    }

    /// Waits for how the fill starts.
    pub async fn started(&self) -> Start {
        std::future::poll_fn(|cx| {
            let mut s = self.lock();
            match &s.start {
                Some(start) => Poll::Ready(start.clone()),
                None => {
                    s.wakers.push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// The chunk at `at`, or the end, or `Pending` with the waker registered.
    pub fn poll_chunk(&self, at: usize, cx: &mut Context<'_>) -> Poll<Next> {
        let mut s = self.lock();
        if let Some(chunk) = s.chunks.get(at) {
            return Poll::Ready(Next::Chunk(chunk.clone()));
        }
        match s.end {
            Some(true) => Poll::Ready(Next::End),
            Some(false) => Poll::Ready(Next::Cut),
            None => {
                s.wakers.push(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    /// The whole body received so far, as one buffer (for storing it once complete).
    pub fn body(&self) -> Bytes {
        let s = self.lock();
        match s.chunks.as_slice() {
            [one] => one.clone(),
            chunks => {
                let mut all = Vec::with_capacity(chunks.iter().map(Bytes::len).sum());
                for c in chunks {
                    all.extend_from_slice(c);
                }
                Bytes::from(all)
            }
        }
    }
}

/// The flights in progress, by key.
#[derive(Debug, Default)]
pub struct Flights {
    map: Mutex<HashMap<String, Arc<Flight>>>,
}

impl Flights {
    /// The flight for `key`, joined; `true` when the caller started it and must run its fill.
    /// `recheck` runs under the lock when no flight is found: an object a fill stored just
    /// before landing is found there instead of being fetched twice.
    pub fn join_or_lead<T>(
        &self,
        key: &str,
        recheck: impl FnOnce() -> Option<T>,
    ) -> Result<(Arc<Flight>, bool), T> {
        let mut map = telemetry::locks::lock(&self.map);
        if let Some(flight) = map.get(key) {
            flight.join();
            return Ok((flight.clone(), false));
        }
        if let Some(found) = recheck() {
            return Err(found);
        }
        let flight = Arc::new(Flight::default());
        flight.join();
        map.insert(key.to_owned(), flight.clone());
        Ok((flight, true))
    }

    /// Removes the flight of `key` once its object is stored; later clients find it there.
    pub fn land(&self, key: &str, flight: &Arc<Flight>) {
        let mut map = telemetry::locks::lock(&self.map);
        if map.get(key).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            map.remove(key);
        }
    }

    /// Flights in progress now.
    pub fn in_flight(&self) -> usize {
        telemetry::locks::lock(&self.map).len()
    }
}

/// Fails and lands a flight when dropped: however its fill ends, a panic included, no client
/// of the herd waits for ever and the next client fetches anew rather than joining a flight
/// nobody runs. Once the fill has published, failing it changes nothing (the first start and
/// the first end count).
#[derive(Debug)]
pub struct Landing<'a> {
    pub flights: &'a Flights,
    pub key: &'a str,
    pub flight: &'a Arc<Flight>,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        self.flight.start(Start::Failed {
            failure: Failure::Origin(Fetch::BrokenBody),
            remembered: false,
        });
        self.flight.end(false);
        self.flights.land(self.key, self.flight);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    #[test]
    fn a_fill_that_panics_still_lands_its_flight_and_fails_its_herd() {
        let flights = Flights::default();
        let (flight, lead) = flights.join_or_lead("k", || None::<()>).unwrap();
        assert!(lead);
        let waiting = flights.join_or_lead("k", || None::<()>).unwrap().0;
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _landing = Landing {
                flights: &flights,
                key: "k",
                flight: &flight,
            };
            panic!("a bug inside a fill");
        }));
        assert!(panicked.is_err());
        assert_eq!(flights.in_flight(), 0, "landed");
        let started = futures_lite_block_on(waiting.started());
        assert!(matches!(started, Start::Failed { .. }), "{started:?}");
        let (_, lead) = flights.join_or_lead("k", || None::<()>).unwrap();
        assert!(lead, "the next client leads a new fill");
    }

    #[test]
    fn a_fill_that_published_keeps_what_it_published() {
        let flights = Flights::default();
        let (flight, _) = flights.join_or_lead("k", || None::<()>).unwrap();
        {
            let _landing = Landing {
                flights: &flights,
                key: "k",
                flight: &flight,
            };
            flight.start(Start::Streaming(Arc::new(StreamHead {
                content_type: HeaderValue::from_static("image/png"),
                content_length: Some(1),
                etag: None,
                last_modified: None,
                cache_control: None,
            })));
            flight.push(Bytes::from_static(b"x"));
            flight.end(true);
        }
        assert!(matches!(
            futures_lite_block_on(flight.started()),
            Start::Streaming(_)
        ));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(flight.poll_chunk(1, &mut cx), Poll::Ready(Next::End));
        assert_eq!(flights.in_flight(), 0);
    }

    /// Polls a future that is ready (or becomes ready without waking) to its end.
    fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }

    struct Counter(std::sync::atomic::AtomicU32);
    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiting_reader_is_woken_by_each_chunk_and_reads_them_in_order() {
        let flight = Flight::default();
        let counter = Arc::new(Counter(0.into()));
        let waker = Waker::from(counter.clone());
        let mut cx = Context::from_waker(&waker);
        assert_eq!(flight.poll_chunk(0, &mut cx), Poll::Pending);
        flight.push(Bytes::from_static(b"ab"));
        assert_eq!(counter.0.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(
            flight.poll_chunk(0, &mut cx),
            Poll::Ready(Next::Chunk(Bytes::from_static(b"ab")))
        );
        assert_eq!(flight.poll_chunk(1, &mut cx), Poll::Pending);
        flight.push(Bytes::from_static(b"cd"));
        flight.end(true);
        assert_eq!(
            flight.poll_chunk(1, &mut cx),
            Poll::Ready(Next::Chunk(Bytes::from_static(b"cd")))
        );
        assert_eq!(flight.poll_chunk(2, &mut cx), Poll::Ready(Next::End));
        assert_eq!(flight.body(), Bytes::from_static(b"abcd"));
    }

    #[test]
    fn a_cut_body_is_reported_after_the_chunks_that_came() {
        let flight = Flight::default();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        flight.push(Bytes::from_static(b"x"));
        flight.end(false);
        flight.end(true);
        assert!(matches!(
            flight.poll_chunk(0, &mut cx),
            Poll::Ready(Next::Chunk(_))
        ));
        assert_eq!(flight.poll_chunk(1, &mut cx), Poll::Ready(Next::Cut));
    }

    #[test]
    fn one_leader_per_key_until_it_lands() {
        let flights = Flights::default();
        let (first, led) = flights
            .join_or_lead::<()>("k", || None)
            .expect("no recheck hit");
        assert!(led);
        let (second, led) = flights.join_or_lead::<()>("k", || None).expect("joined");
        assert!(!led);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(first.clients(), 2);
        flights.land("k", &first);
        assert_eq!(flights.in_flight(), 0);
        assert_eq!(flights.join_or_lead("k", || Some(7)).err(), Some(7));
    }
}
