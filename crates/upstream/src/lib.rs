//! Gavel's outbound HTTP/1.1 client, what the exchange calls bidders, fetches markup and fires
//! notices with. Below the exchange, with no knowledge of auctions:
//!
//! - [`conn_pool`]: the one connection pool (permits, idle list with age and liveness) under
//!   the bidder pools, the notice client, the ledger's Redis client and the edge's origins.
//! - [`endpoint`]: an upstream URL taken apart once (`Endpoint`), its host looked up.
//! - [`pool`]: one keep-alive pool per upstream, a hard connection cap (no queue: full means
//!   refused at once), calls driven by the caller's task, late answers drained aside.
//! - [`h1`]: the lean HTTP/1.1 client under both: one request at a time on a kept-alive
//!   stream, request head encoded once, `Content-Length`, chunked and close-delimited answers.
//! - [`gzip`]: pure: request bodies compressed once, gzip answers inflated within a bound.
//! - [`notice_client`]: kept-alive, pipelined GETs to checked addresses only.
//! - [`outbound`]: pure: which URLs an upstream may name (its hosts and ports) and which
//!   addresses are never called unless allowed (loopback, private, link-local, ...).
//! - [`stream`]: the one byte stream of every outbound connection (plain TCP or TLS), also
//!   under the ledger's Redis connections and the load generator.
//! - [`tls`]: rustls client side: the system's roots or a CA file, server names.

pub mod conn_pool;
pub mod endpoint;
pub mod gzip;
pub mod h1;
pub mod notice_client;
pub mod outbound;
pub mod pool;
pub mod stream;
pub mod tls;

pub use endpoint::{Endpoint, EndpointTls, parse_endpoint, resolve};
pub use settings_section::UpstreamSection;

mod settings_section;
