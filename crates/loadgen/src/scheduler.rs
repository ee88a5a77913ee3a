//! The scheduler task: waits for each due instant of the schedule, hands the request to the
//! connection workers (opening one more when none is free, up to the cap: [`Pool`]), and tells
//! the collector how many requests each measured second issued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::sync::mpsc;

use crate::collect::{Event, Sample};
use crate::pool::{Pool, PoolEnd};
use crate::queue::{Job, Pushed};
use crate::report::{Outcome, new_histogram};
use crate::schedule::Segments;
use crate::timer::Timer;
use crate::worker::Shared;

/// The scheduler's frame of reference: when the run started, how long the warm-up lasts and
/// how many seconds the measured window has.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub start: Instant,
    pub warmup: Duration,
    pub seconds: u32,
}

/// Runs `schedule` to its end, then closes the queue. Returns how late, in µs, each measured
/// request was handed over compared with its due instant (the generator's own lag), and what
/// the pool did.
pub(crate) async fn drive(
    schedule: Segments,
    clock: Clock,
    shared: Arc<Shared>,
    mut pool: Pool,
    events: mpsc::UnboundedSender<Event>,
) -> std::io::Result<(Histogram<u64>, PoolEnd)> {
    let queue = &shared.queue;
    let progress = &shared.progress;
    let mut timer = Timer::new()?;
    let mut lag = new_histogram();
    let Clock {
        start,
        warmup,
        seconds,
    } = clock;
    let mut second = 0u32;
    let mut measuring = false;
    let mut in_second = 0u64;
    for (seq, offset) in (0u64..).zip(schedule) {
        let due = start + offset;
        timer.sleep_until(due).await?;
        let slot = offset
            .checked_sub(warmup)
            .map(|o| (o.as_secs() as u32).min(seconds - 1));
        if let Some(s) = slot {
            if !measuring {
                measuring = true;
                progress.set_measuring();
            }
            close_seconds(&events, &mut second, &mut in_second, s);
            in_second += 1;
        }
        let late = Instant::now().saturating_duration_since(due);
        if slot.is_some() {
            lag.saturating_record(u64::try_from(late.as_micros()).unwrap_or(u64::MAX));
        }
        let job = Job {
            seq,
            scheduled: due,
            send_by: shared.send_by(seq, due),
            slot,
        };
        progress.add_issued(1);
        match queue.push(job) {
            Ok(Pushed::Taken) => {}
            Ok(Pushed::Waiting) => pool.short_of_one(late, seq + 1, slot.is_some()),
            Err(job) => {
                let sample = Sample {
                    slot: job.slot,
                    scheduled: job.scheduled,
                    ended: Instant::now(),
                    outcome: Outcome::Dropped,
                    service: None,
                    check: None,
                };
                let _ = events.send(Event::Done(sample));
            }
        }
    }
    close_seconds(&events, &mut second, &mut in_second, seconds);
    queue.close();
    Ok((lag, pool.finish()))
}

/// Tells the collector how many requests each measured second before `until` issued, starting
/// with the current `second` (which issued `in_second`); seconds without requests report 0.
fn close_seconds(
    events: &mpsc::UnboundedSender<Event>,
    second: &mut u32,
    in_second: &mut u64,
    until: u32,
) {
    while *second < until {
        let _ = events.send(Event::Scheduled {
            second: *second,
            count: *in_second,
        });
        *second += 1;
        *in_second = 0;
    }
}
