//! Helpers shared by Gavel's tests and benches, and nothing else: a production crate never
//! depends on this one (`.ci/layering.py` checks it), so test-only code never becomes public
//! API of a server.
//!
//! - [`redis`]: a real `redis-server` on a free loopback port, killed on drop (no mocks: the
//!   ledger's correctness is in its Lua scripts, so tests run them on Redis itself).
//! - [`redis_cluster`]: a real Redis Cluster (primaries and replicas on free loopback ports),
//!   with the faults the ledger must survive: a primary killed and failed over, a slot
//!   migrated, a node paused or restarted empty.
//! - [`nats`]: a real `nats-server -js` on a free loopback port with its store in a temporary
//!   directory, killed on drop, restartable on the same port and store (the journal's NATS
//!   sink is proven against a server that crashes).
//! - [`http`]: a raw HTTP/1.1 client over a fresh loopback connection, for the tests that must
//!   control every byte (malformed framing, smuggling) or read the answer as the wire has it.
//! - [`secrets`]: a notice key and an admin token for test servers, and the config lines for them.
//! - [`temp`]: a fresh temporary directory, removed on drop.
//! - [`time`]: waiting for a condition, bounded, instead of a fixed sleep.
//! - [`tls`]: a CA and a server certificate for `127.0.0.1`, made by the `openssl` command.
//! - [`synth`]: seeded synthetic campaigns and bid requests shaped like a real DSP's book, for
//!   the index's and the ranking's tests and the matching bench.
//!
//! Helpers panic on setup failures (a port that cannot be bound, a file that cannot be
//! written): a test whose setup fails must fail, never pass by skipping.

pub mod http;
pub mod nats;
pub mod redis;
pub mod redis_cluster;
pub mod secrets;
pub mod synth;
pub mod temp;
pub mod time;
pub mod tls;

pub use nats::NatsServer;
pub use redis::{RedisOptions, RedisServer, free_port};
pub use redis_cluster::RedisCluster;
pub use temp::TempDir;
