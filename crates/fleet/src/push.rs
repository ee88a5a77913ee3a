//! What an operator does to the bucket (`gavel config push|show`): put a document, read the
//! latest revision. Validation is the caller's: this module carries bytes.

use async_nats::jetstream::kv::Operation;
use bytes::Bytes;

use crate::config::{FleetSection, check_bucket, check_key};
use crate::connect::{FleetError, Patience, connect, open, open_or_create};
use crate::version::digest;

/// Largest document pushed: NATS's default `max_payload` (1 MiB). A server configured for
/// more still refuses anything past this here, so every node of a default fleet can read it.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The latest revision of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub revision: u64,
    /// `sha256:<hex>` of the value; `None` when the latest revision removed the key.
    pub digest: Option<String>,
    pub bytes: usize,
}

fn key_error(section: &FleetSection, key: &str, reason: String) -> FleetError {
    FleetError::Key {
        bucket: section.bucket.clone(),
        key: key.to_owned(),
        reason,
    }
}

fn check_names(section: &FleetSection, key: &str) -> Result<(), FleetError> {
    check_bucket(&section.bucket).map_err(|reason| FleetError::Bucket {
        bucket: section.bucket.clone(),
        reason,
    })?;
    check_key(key).map_err(|reason| key_error(section, key, reason))
}

/// Puts `value` under `key`, creating the bucket when missing; the new revision.
pub async fn push(section: &FleetSection, key: &str, value: Bytes) -> Result<u64, FleetError> {
    check_names(section, key)?;
    if value.len() > MAX_DOCUMENT_BYTES {
        return Err(key_error(
            section,
            key,
            format!(
                "the document is {} bytes; at most {MAX_DOCUMENT_BYTES}",
                value.len()
            ),
        ));
    }
    let js = connect(section, "gavel-config-push", Patience::Once).await?;
    let store = open_or_create(&js, &section.bucket).await?;
    store
        .put(key, value)
        .await
        .map_err(|e| key_error(section, key, format!("put refused: {e}")))
}

/// The latest revision of `key`, `None` when it was never put.
pub async fn show(section: &FleetSection, key: &str) -> Result<Option<Shown>, FleetError> {
    check_names(section, key)?;
    let js = connect(section, "gavel-config-show", Patience::Once).await?;
    let store = open(&js, &section.bucket).await?;
    let entry = store
        .entry(key)
        .await
        .map_err(|e| key_error(section, key, e.to_string()))?;
    Ok(entry.map(|e| Shown {
        revision: e.revision,
        digest: (e.operation == Operation::Put).then(|| digest(&e.value)),
        bytes: e.value.len(),
    }))
}
