//! The body of the edge's answers: whole bytes (hits, small answers) or a reader of a flight
//! (misses, streamed as the origin sends). Counts the bytes it hands to the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use crate::flight::{Flight, Next};
use crate::metrics::Metrics;

/// A body cut because its fill failed mid-way; the connection is closed so the client sees a
/// short answer, never a complete-looking wrong one.
#[derive(Debug, thiserror::Error)]
#[error("the origin's answer was cut")]
pub struct Cut;

/// An answer's body.
#[derive(Debug)]
pub struct EdgeBody {
    kind: Kind,
    served: Option<Arc<Metrics>>,
}

#[derive(Debug)]
enum Kind {
    Whole(Option<Bytes>),
    Flight {
        flight: Arc<Flight>,
        next: usize,
        /// The length the origin announced, for the size hint.
        length: Option<u64>,
    },
}

impl EdgeBody {
    /// A whole body.
    pub fn whole(bytes: impl Into<Bytes>) -> EdgeBody {
        let bytes = bytes.into();
        EdgeBody {
            kind: Kind::Whole((!bytes.is_empty()).then_some(bytes)),
            served: None,
        }
    }

    /// No body.
    pub fn empty() -> EdgeBody {
        EdgeBody {
            kind: Kind::Whole(None),
            served: None,
        }
    }

    /// The body of a flight, from its first byte; `length` when the origin announced it.
    pub fn flight(flight: Arc<Flight>, length: Option<u64>) -> EdgeBody {
        EdgeBody {
            kind: Kind::Flight {
                flight,
                next: 0,
                length,
            },
            served: None,
        }
    }

    /// Counts the bytes this body sends in `metrics.bytes_served`.
    pub fn metered(mut self, metrics: Arc<Metrics>) -> EdgeBody {
        self.served = Some(metrics);
        self
    }

    fn count(&self, n: usize) {
        if let Some(m) = &self.served {
            m.bytes_served.add(n as u64);
        }
    }
}

impl Body for EdgeBody {
    type Data = Bytes;
    type Error = Cut;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
        let this = self.get_mut();
        let chunk = match &mut this.kind {
            Kind::Whole(bytes) => match bytes.take() {
                Some(b) => b,
                None => return Poll::Ready(None),
            },
            Kind::Flight { flight, next, .. } => match flight.poll_chunk(*next, cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Next::End) => return Poll::Ready(None),
                Poll::Ready(Next::Cut) => return Poll::Ready(Some(Err(Cut))),
                Poll::Ready(Next::Chunk(c)) => {
                    *next += 1;
                    c
                }
            },
        };
        this.count(chunk.len());
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, Kind::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Whole(None) => SizeHint::with_exact(0),
            Kind::Whole(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Flight {
                length: Some(n),
                next: 0,
                ..
            } => SizeHint::with_exact(*n),
            Kind::Flight { .. } => SizeHint::default(),
        }
    }
}
