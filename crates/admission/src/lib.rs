//! Who gets in, and by when: what a Gavel server decides about a request before working on it.
//!
//! | module | what it decides |
//! | --- | --- |
//! | [`deadline`] | when a request must be answered: its `tmax` turned into an absolute deadline (pure) |
//! | [`gate`] | whether a request may start now: a bound on requests in flight, fixed or adapted, or by its deadline |
//! | [`fit`] | the `deadline` mode's arithmetic: will a request started now be answered in time (pure) |
//! | [`starter`] | the `deadline` mode's readings (queueing delay, CPU per request) and its wait for a start |
//! | [`aimd`] | the adaptive bound's arithmetic, one window of readings at a time (pure) |
//! | [`busy_streak`] | the pause check: a backlog seen on the next request |
//! | [`config`] | the `[admission]` section |
//!
//! Nothing here speaks HTTP: the edge (`crates/edge`) turns a refusal into an answer. Both
//! servers use this crate the same way, through the edge's request skeleton.
//!
//! # The deadline gate (the exchange's default)
//!
//! A request whose deadline is known before its work starts (the exchange's auction, once
//! `tmax` is decoded) is judged by that deadline ([`fit`]): started when the CPU work ahead of it
//! (requests running × CPU per request) plus its own (the bidders' typical answer, its CPU) fit
//! in the time left after the runtime's queueing delay; made to wait, using no CPU, while they
//! do not but a later start could; refused only at its latest start, or at once when not even
//! a start now would be in time. `max_in_flight` caps the requests held, waiting ones included.
//! The readings ([`starter`]) are a probe task's lateness every 2 ms and the runtime's busy time
//! per finished request, the smallest of the last four 50 ms windows.
//!
//! Why it replaced the adaptive bound as the exchange's default (issue 18): the bound follows
//! light traffic down to four times the most in flight, so the burst a 50 ms scheduler stall
//! bunches together finds it full: 36 of 45 auctions shed on an idle core with 500 ms deadlines
//! (`crates/exchange/tests/deadline_admission.rs`). And a refusal answered at once lets a client
//! that keeps its connections busy send the next request at once; waiting does not.
//!
//! # The bound on requests in flight (the bidder's default)
//!
//! A bound on requests in flight, fixed or adapted to the machine. A request over the bound is answered at once with a no-bid and costs only its read;
//! nothing waits in a queue.
//!
//! The adaptive bound follows the AIMD scheme of Netflix's concurrency-limits, driven by what the
//! server runs out of, CPU (Google's "Handling Overload"), rather than by end-to-end latency: an
//! exchange's latency is mostly its bidders' and is capped by the deadline, and a latency
//! gradient needs a no-load baseline that a server started under overload never sees. Every
//! 50 ms the controller reads three signals: how busy the runtime's workers were, how long
//! admitted requests held their place against the shortest hold seen while there was room
//! ([`aimd::Aimd`] says why both), and how late its own tick ran (a backlog, unread requests
//! included). It cuts the bound when the first two say the server is full and the bound is
//! leaned on, or when two ticks running were late (as deep as the tick is late: a tenth for a
//! few milliseconds, half for a whole window), and grows it by a tenth while traffic
//! presses on it and there is room (doubling while the runtime is half idle). A bound traffic
//! does not lean on is never cut for the busy share, so a busy moment of unrelated work sheds
//! nothing; it follows the traffic down to four times the most in flight, so that a rise in
//! traffic or a stall meets a bound that binds. The bound is fractional (3.4 admits 4 in 10 of
//! the requests that find 3 in flight), because a server whose auctions finish in a
//! millisecond or two is full at a handful in flight. The shed requests' own cost counts in the
//! busy time, so under heavy overload the bound falls until admitted work plus shedding fit.
//!
//! The limit of this design: a handler that finishes in one poll (the bidder's decision) never
//! has two requests in flight however overloaded the process is, because the excess waits in
//! socket buffers, not in the server. For it a backlog takes the bound below one place, a share
//! of the requests that find nothing in flight, which grows back only while the runtime is under
//! its busy target (its refusals keep it busy too); but the bound learns of the backlog two
//! windows late. So the gate also refuses on the request path while the runtime has run
//! `max_busy_ms` without a pause ([`crate::busy_streak`]), which sees that backlog on the next
//! request. Past what refusals alone can keep up with (a refusal still costs the HTTP read and
//! answer, a fifth to a third of a bidder's decision) no gate helps: measured in BENCHMARKS.md,
//! "Overload". Upstream throttling (the exchange's per-bidder qps cap) is what protects it there.
//!
//! A fixed bound is there for operators who know their capacity; `off` turns the gate off.

pub mod aimd;
pub mod busy_streak;
pub mod config;
pub mod deadline;
pub mod fit;
pub mod gate;
pub mod starter;

pub use config::{AdmissionConfig, Mode, NoBidStyle};
pub use deadline::{Deadline, DeadlineConfig, DeadlinePolicy, TmaxError};
pub use gate::{Admission, Ticket};
pub use starter::{Missed, Started};
