//! The bounded multi-consumer queue between the scheduler task and the connection workers.
//!
//! A job waits here while every connection is busy: its latency keeps growing from its
//! scheduled instant, which is the open-loop accounting we want. The producer never blocks:
//! when the queue is full the job is handed back and counted as dropped. The queue also knows
//! how many consumers are idle, so the producer learns when a job found none (the pool may
//! grow then, or the run is short of connections).

use std::collections::VecDeque;
use std::pin::pin;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::Notify;

/// One request to send.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Job {
    /// Position in the schedule (warm-up included); picks the body.
    pub seq: u64,
    /// When it is due; latency is measured from here.
    pub scheduled: Instant,
    /// Not sent once this has passed (its body's `tmax`, or the timeout, after `scheduled`):
    /// the answer could no longer be of use. Dropped unsent instead.
    pub send_by: Instant,
    /// Second of the measured window it belongs to; `None` during warm-up.
    pub slot: Option<u32>,
}

#[derive(Debug)]
pub(crate) struct JobQueue {
    state: Mutex<State>,
    notify: Notify,
    capacity: usize,
}

#[derive(Debug)]
struct State {
    jobs: VecDeque<Job>,
    closed: bool,
    /// Consumers parked in [`JobQueue::pop`] with nothing to take.
    idle: usize,
}

/// What [`JobQueue::push`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// An idle consumer will take it.
    Taken,
    /// Every consumer is busy: it waits for the first to come free.
    Waiting,
}

impl JobQueue {
    pub fn new(capacity: usize) -> JobQueue {
        JobQueue {
            state: Mutex::new(State {
                jobs: VecDeque::with_capacity(capacity.min(4096)),
                closed: false,
                idle: 0,
            }),
            notify: Notify::new(),
            capacity: capacity.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The critical sections cannot panic; recover rather than propagate a poison.
        telemetry::locks::lock(&self.state)
    }

    /// Enqueues without blocking, saying whether an idle consumer is there for it; gives the
    /// job back when the queue is full.
    pub fn push(&self, job: Job) -> Result<Pushed, Job> {
        let pushed = {
            let mut st = self.lock();
            if st.jobs.len() >= self.capacity {
                return Err(job);
            }
            st.jobs.push_back(job);
            if st.jobs.len() <= st.idle {
                Pushed::Taken
            } else {
                Pushed::Waiting
            }
        };
        self.notify.notify_one();
        Ok(pushed)
    }

    /// No more jobs will come; consumers drain what is left, then get `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.notify.notify_waiters();
    }

    /// The oldest job, waiting for one if needed; `None` once closed and drained.
    pub async fn pop(&self) -> Option<Job> {
        // Counted idle from the first look that finds nothing until this call ends, however
        // it ends (a dropped call included).
        let mut idle = Idle {
            queue: self,
            counted: false,
        };
        loop {
            // Register interest before looking, so a push between the look and the wait
            // is not missed.
            let mut notified = pin!(self.notify.notified());
            notified.as_mut().enable();
            {
                let mut st = self.lock();
                if let Some(job) = st.jobs.pop_front() {
                    idle.uncount(&mut st);
                    let more = !st.jobs.is_empty();
                    drop(st);
                    if more {
                        // Pass the baton: `notify_one` wakes one waiter per push, and this
                        // consumer may have absorbed a wake-up meant for another job.
                        self.notify.notify_one();
                    }
                    return Some(job);
                }
                if st.closed {
                    idle.uncount(&mut st);
                    return None;
                }
                if !idle.counted {
                    st.idle += 1;
                    idle.counted = true;
                }
            }
            notified.await;
        }
    }
}

/// A consumer's place in [`State::idle`] while it waits in [`JobQueue::pop`].
struct Idle<'q> {
    queue: &'q JobQueue,
    counted: bool,
}

impl Idle<'_> {
    fn uncount(&mut self, st: &mut State) {
        if std::mem::take(&mut self.counted) {
            st.idle -= 1;
        }
    }
}

impl Drop for Idle<'_> {
    fn drop(&mut self) {
        if self.counted {
            let mut st = self.queue.lock();
            self.uncount(&mut st);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;

    fn job(seq: u64) -> Job {
        let now = Instant::now();
        Job {
            seq,
            scheduled: now,
            send_by: now,
            slot: None,
        }
    }

    #[test]
    fn bounded_and_fifo() {
        let q = JobQueue::new(2);
        q.push(job(1)).unwrap();
        q.push(job(2)).unwrap();
        assert_eq!(q.push(job(3)).unwrap_err().seq, 3);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(q.pop().await.unwrap().seq, 1);
            assert_eq!(q.pop().await.unwrap().seq, 2);
            q.close();
            assert!(q.pop().await.is_none());
        });
    }

    #[test]
    fn a_push_says_whether_an_idle_consumer_is_there() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let q = Arc::new(JobQueue::new(10));
            // Nobody waiting: the job waits.
            assert_eq!(q.push(job(1)).unwrap(), Pushed::Waiting);
            assert_eq!(q.pop().await.unwrap().seq, 1);
            // Two consumers park; the first two jobs are taken, the third waits.
            let consumers: Vec<_> = (0..2)
                .map(|_| {
                    let q = Arc::clone(&q);
                    tokio::spawn(async move { q.pop().await.map(|j| j.seq) })
                })
                .collect();
            while q.lock().idle < 2 {
                tokio::task::yield_now().await;
            }
            assert_eq!(q.push(job(2)).unwrap(), Pushed::Taken);
            assert_eq!(q.push(job(3)).unwrap(), Pushed::Taken);
            assert_eq!(q.push(job(4)).unwrap(), Pushed::Waiting);
            let mut got: Vec<u64> = Vec::new();
            for c in consumers {
                got.extend(c.await.unwrap());
            }
            got.sort_unstable();
            assert_eq!(got, [2, 3]);
            assert_eq!(q.lock().idle, 0);
            // A consumer dropped while parked gives its place back.
            let parked = {
                let q = Arc::clone(&q);
                tokio::spawn(async move {
                    q.pop().await;
                    q.pop().await
                })
            };
            while q.lock().idle < 1 {
                tokio::task::yield_now().await;
            }
            parked.abort();
            let _ = parked.await;
            assert_eq!(q.lock().idle, 0);
        });
    }

    #[test]
    fn every_job_reaches_one_consumer() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        let q = Arc::new(JobQueue::new(100_000));
        let total: u64 = rt.block_on(async {
            let mut handles = Vec::new();
            for _ in 0..8 {
                let q = Arc::clone(&q);
                handles.push(tokio::spawn(async move {
                    let mut sum = 0u64;
                    while let Some(j) = q.pop().await {
                        sum += j.seq;
                        tokio::task::yield_now().await;
                    }
                    sum
                }));
            }
            let producer = {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    for i in 1..=50_000u64 {
                        q.push(job(i)).unwrap();
                    }
                    q.close();
                })
            };
            let mut total = 0;
            for h in handles {
                total += h.await.unwrap();
            }
            producer.join().unwrap();
            total
        });
        assert_eq!(total, 50_000 * 50_001 / 2);
    }
}
