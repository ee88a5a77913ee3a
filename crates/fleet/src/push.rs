//! What an operator does to the bucket (`gavel config push|show`): put a signed document, read
//! the latest revision. Validation is the caller's: this module signs and carries bytes.

use async_nats::jetstream::kv::Operation;
use bytes::Bytes;
use units::Timestamp;

use crate::config::{FleetSection, check_bucket, check_key};
use crate::connect::{FleetError, Patience, connect, open, open_or_create};
use crate::keys::SigningKey;
use crate::signed::{MAX_SERIAL_AHEAD_MS, Place, envelope, seal};
use crate::version::digest;

/// Largest value pushed, the signed envelope included: NATS's default `max_payload` (1 MiB).
/// A server configured for more still refuses anything past this here, so every node of a
/// default fleet can read it.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The latest revision of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub revision: u64,
    /// `sha256:<hex>` of the document (of the whole value when it is not a signed document);
    /// `None` when the latest revision removed the key.
    pub digest: Option<String>,
    /// The document's size.
    pub bytes: usize,
    /// The serial and the signing key's id the value claims, not verified here (`show` holds
    /// no trusted keys: the nodes verify); `None` for a value that is not a signed document.
    pub signed: Option<(u64, String)>,
}

/// What a push put.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receipt {
    /// The bucket's revision of the key.
    pub revision: u64,
    /// The signed serial: nodes take it only if it is above every serial they took.
    pub serial: u64,
    /// The latest value's serial when it was more than ten minutes ahead of this clock and so
    /// passed over (a wrong clock, or a forgery's claim: nodes refuse it as `ahead`).
    pub passed_over: Option<u64>,
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

/// The serial of a push at `now_ms` after a latest signed serial of `latest`: the signing
/// clock's milliseconds, or one more than the latest when that is ahead (pushes within the same
/// millisecond, a clock behind another operator's). A latest serial more than
/// [`MAX_SERIAL_AHEAD_MS`] ahead is one every node refuses (`ahead`): it is passed over, and
/// returned second so that the caller can say so.
pub fn next_serial(latest: Option<u64>, now_ms: u64) -> (u64, Option<u64>) {
    match latest {
        Some(l) if l > now_ms.saturating_add(MAX_SERIAL_AHEAD_MS) => (now_ms, Some(l)),
        Some(l) => (now_ms.max(l.saturating_add(1)), None),
        None => (now_ms, None),
    }
}

/// Signs `document` with `signer` for this bucket and key and puts it, creating the bucket when
/// missing. Its serial is [`next_serial`] after the latest signed value of the key.
pub async fn push(
    section: &FleetSection,
    key: &str,
    document: &[u8],
    signer: &SigningKey,
) -> Result<Receipt, FleetError> {
    check_names(section, key)?;
    let too_large = |what: &str, len: usize| {
        key_error(
            section,
            key,
            format!("the {what} is {len} bytes; at most {MAX_DOCUMENT_BYTES}"),
        )
    };
    if document.len() > MAX_DOCUMENT_BYTES {
        return Err(too_large("document", document.len()));
    }
    let js = connect(section, "gavel-config-push", Patience::Once).await?;
    let store = open_or_create(&js, &section.bucket).await?;
    let place = Place {
        bucket: &section.bucket,
        key,
    };
    let entry = store
        .entry(key)
        .await
        .map_err(|e| key_error(section, key, format!("reading the latest revision: {e}")))?;
    let base = entry.as_ref().map(|e| e.revision);
    let latest = entry
        .and_then(|e| envelope(&e.value).ok())
        .filter(|e| e.bucket == place.bucket && e.key == place.key)
        .map(|e| e.serial);
    let now = Timestamp::now();
    let (serial, passed_over) = next_serial(latest, now.millis());
    let value = seal(signer, place, serial, &now.to_rfc3339(), document)
        .map_err(|e| key_error(section, key, format!("the document {e}")))?;
    if value.len() > MAX_DOCUMENT_BYTES {
        return Err(too_large("signed document", value.len()));
    }
    // A compare-and-set on the revision read: two pushes at once never both land with the same
    // serial (the second would be refused by every node as not newer).
    let raced = |e: String| {
        key_error(
            section,
            key,
            format!("put refused: {e} (another push landed meanwhile? push again)"),
        )
    };
    let revision = match base {
        Some(base) => store
            .update(key, Bytes::from(value), base)
            .await
            .map_err(|e| raced(e.to_string()))?,
        None => store
            .create(key, Bytes::from(value))
            .await
            .map_err(|e| raced(e.to_string()))?,
    };
    Ok(Receipt {
        revision,
        serial,
        passed_over,
    })
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
    Ok(entry.map(|e| {
        let signed = envelope(&e.value).ok();
        let document = signed
            .as_ref()
            .map_or(&e.value[..], |s| s.document.as_bytes());
        Shown {
            revision: e.revision,
            digest: (e.operation == Operation::Put).then(|| digest(document)),
            bytes: document.len(),
            signed: signed.map(|s| (s.serial, s.signer)),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_follow_the_clock_and_never_go_back() {
        assert_eq!(next_serial(None, 1_000), (1_000, None));
        assert_eq!(next_serial(Some(999), 1_000), (1_000, None));
        assert_eq!(
            next_serial(Some(1_000), 1_000),
            (1_001, None),
            "same millisecond"
        );
        assert_eq!(
            next_serial(Some(5_000), 1_000),
            (5_001, None),
            "a clock behind"
        );
        // A claim from far ahead (a forgery, a wrong clock): passed over, and said.
        let far = 1_000 + MAX_SERIAL_AHEAD_MS + 1;
        assert_eq!(next_serial(Some(far), 1_000), (1_000, Some(far)));
    }
}
