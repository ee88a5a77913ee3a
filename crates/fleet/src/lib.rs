//! Configuration pushed to a fleet: a NATS JetStream key-value bucket that every exchange (its
//! bidder roster and seller list) or every bidder (its campaign set) follows, and the push
//! that writes it (`gavel config push`).
//!
//! Why NATS KV: the journal already speaks NATS; a key's revisions number every push (the
//! version a node serves, for free), the bucket keeps a history, and a watch pushes each change
//! to every node; config traffic stays off the budget Redis. This crate carries bytes and
//! revisions: what a document means, and whether it is valid, is the server's
//! (`exchange::fleet_doc`, `bidder::fleet_doc`), through the reload path it already has.
//!
//! Nothing NATS carries is trusted for what it is: a document is taken only when signed with
//! the operator's Ed25519 key for this bucket and key, and newer than the last one taken
//! ([`signed`]); NATS itself is reached with credentials ([`config`]).
//!
//! - [`config`]: the `[fleet]` section.
//! - [`connect`]: the NATS connection (credentials, CA) and the bucket.
//! - [`keys`]: the operator's signing key and the public keys a node trusts (PEM, as OpenSSL
//!   writes them).
//! - [`signed`]: the signed document (pure): seal, open, and why a value is refused.
//! - [`follow`]: the task that checks each new revision and hands it to the server.
//! - [`push`]: `gavel config push|show`.
//! - [`version`]: which configuration a server serves (`source`, `revision`, `applied_at`).

pub mod config;
pub mod connect;
pub mod follow;
pub mod keys;
pub mod push;
pub mod signed;
pub mod version;

pub use config::FleetSection;
pub use connect::FleetError;
pub use follow::{Change, follow};
pub use keys::{SigningKey, TrustedKeys};
pub use push::{MAX_DOCUMENT_BYTES, Receipt, Shown, push, show};
pub use signed::{PushRefused, Refusal};
pub use version::{ConfigVersion, Pushed, Served, Source, digest};
