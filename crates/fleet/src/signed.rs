//! A signed fleet document: what `gavel config push` puts in the bucket, and what a node
//! accepts from it. NATS carries it; only the operator's Ed25519 key makes it.
//!
//! The value is one JSON object (readable with `nats kv get`):
//!
//! | member | meaning |
//! | --- | --- |
//! | `gavel_fleet` | the format, `1` |
//! | `bucket`, `key` | where it was pushed: a document copied to another key or bucket is refused |
//! | `serial` | the signer's order of pushes (milliseconds since the Unix epoch at signing, or one more than the previous push): a node refuses a serial not above the newest it has taken, so an older document put again is refused |
//! | `signed_at` | RFC 3339 time of signing, shown, not trusted for order |
//! | `signer` | the signing key's id (`ed25519:...`, [`crate::keys::key_id`]) |
//! | `signature` | base64 of the Ed25519 signature of the message below |
//! | `document` | the roster or campaign set, as text |
//!
//! The signed message is `gavel-fleet-v1`, then bucket, key, serial, `signed_at` and the
//! document, each after a newline (names and times hold none; the document is last, so no two
//! different documents share a message).
//!
//! Pure: bytes and keys in, a document or the reason for refusing it out.

use std::collections::HashMap;

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::keys::{SigningKey, TrustedKeys};

/// The format version this build writes and reads.
pub const FORMAT: u32 = 1;
/// The domain of the signed message: a signature made for anything else never verifies here.
const DOMAIN: &str = "gavel-fleet-v1";
/// Longest `signed_at` accepted.
const MAX_TIME_CHARS: usize = 40;
/// How far ahead of the reader's clock a serial may be (the signer's clock is a little ahead,
/// or several pushes came within a millisecond): past it, a node refuses the document and a
/// push stops, since such a serial would make every later push look stale.
pub const MAX_SERIAL_AHEAD_MS: u64 = 10 * 60 * 1000;
/// Longest text of a refusal's cause kept (a malformed envelope's parser message can quote it).
const MAX_CAUSE_CHARS: usize = 160;

/// Where a document belongs: the bucket and key it is pushed to and followed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place<'a> {
    pub bucket: &'a str,
    pub key: &'a str,
}

/// A document as signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub gavel_fleet: u32,
    pub bucket: String,
    pub key: String,
    pub serial: u64,
    pub signed_at: String,
    pub signer: String,
    pub signature: String,
    pub document: String,
}

/// A document whose signature verified with a trusted key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    pub serial: u64,
    pub signer: String,
    pub signed_at: String,
    /// The roster or campaign set, as pushed.
    pub document: Bytes,
}

/// Why a value of the bucket is not taken. Each has a bounded label for metrics.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("not a signed fleet document (push it with `gavel config push --signing-key`)")]
    Unsigned,
    #[error("a signed fleet document, but malformed: {0}")]
    Malformed(String),
    #[error("signed for bucket {bucket:?} key {key:?}, not this one")]
    Elsewhere { bucket: String, key: String },
    #[error("signed by {0}, a key this node does not trust (fleet.trusted_keys_file)")]
    UnknownSigner(String),
    #[error("its signature does not verify with {0}: the document was changed or forged")]
    BadSignature(String),
    #[error("serial {serial} is not newer than serial {newest}, which this node already took")]
    Stale { serial: u64, newest: u64 },
    #[error(
        "serial {serial} is more than ten minutes ahead of this node's clock ({now_ms}): a clock \
         that signs from the future would make every later push look stale"
    )]
    Ahead { serial: u64, now_ms: u64 },
    #[error(
        "the key was deleted or purged, which no signature vouches for; the document in force stays (push the lists to serve instead)"
    )]
    Removed,
    #[error("the trusted keys cannot be read: {0}")]
    NoTrustedKeys(String),
}

telemetry::labelled_counters! {
    /// Why a pushed revision did not serve: the `reason` of `*_config_push_refused_total`.
    PushRefused {
        Unsigned => "unsigned",
        Malformed => "malformed",
        WrongKey => "wrong_key",
        UnknownSigner => "unknown_signer",
        BadSignature => "bad_signature",
        Stale => "stale",
        Ahead => "ahead",
        Removed => "removed",
        NoTrustedKeys => "no_trusted_keys",
        Invalid => "invalid",
    }
}

impl Refusal {
    /// The metric label's value.
    pub fn reason(&self) -> PushRefused {
        match self {
            Refusal::Unsigned => PushRefused::Unsigned,
            Refusal::Malformed(_) => PushRefused::Malformed,
            Refusal::Elsewhere { .. } => PushRefused::WrongKey,
            Refusal::UnknownSigner(_) => PushRefused::UnknownSigner,
            Refusal::BadSignature(_) => PushRefused::BadSignature,
            Refusal::Stale { .. } => PushRefused::Stale,
            Refusal::Ahead { .. } => PushRefused::Ahead,
            Refusal::Removed => PushRefused::Removed,
            Refusal::NoTrustedKeys(_) => PushRefused::NoTrustedKeys,
        }
    }
}

/// The bytes that are signed.
fn message(place: Place<'_>, serial: u64, signed_at: &str, document: &[u8]) -> Vec<u8> {
    let head = format!(
        "{DOMAIN}\n{}\n{}\n{serial}\n{signed_at}\n",
        place.bucket, place.key
    );
    let mut out = Vec::with_capacity(head.len() + document.len());
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(document);
    out
}

/// The document signed for `place` with `serial`, as the bucket's value. The document must be
/// UTF-8 (both kinds of document are text).
pub fn seal(
    key: &SigningKey,
    place: Place<'_>,
    serial: u64,
    signed_at: &str,
    document: &[u8],
) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(document).map_err(|e| format!("is not UTF-8 text: {e}"))?;
    if signed_at.len() > MAX_TIME_CHARS || signed_at.contains('\n') {
        return Err(format!("signing time {signed_at:?} is not a time"));
    }
    let signature = key.sign(&message(place, serial, signed_at, document));
    let envelope = Envelope {
        gavel_fleet: FORMAT,
        bucket: place.bucket.to_owned(),
        key: place.key.to_owned(),
        serial,
        signed_at: signed_at.to_owned(),
        signer: key.id().to_owned(),
        signature: base64::engine::general_purpose::STANDARD.encode(signature),
        document: text.to_owned(),
    };
    serde_json::to_vec(&envelope).map_err(|e| e.to_string())
}

/// The envelope in `value`, not verified: what `gavel config show` and the push's choice of the
/// next serial read. `Err(Unsigned)` when the value is not an envelope at all.
pub fn envelope(value: &[u8]) -> Result<Envelope, Refusal> {
    // An object, not the array form serde would also read a struct from: a campaign set is an
    // array and must read as what it is, unsigned.
    if value.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Refusal::Unsigned);
    }
    match serde_json::from_slice::<Envelope>(value) {
        Ok(e) if e.gavel_fleet == FORMAT && !is_key_id(&e.signer) => Err(Refusal::Malformed(
            "signer is not a key id (ed25519: and 16 hex digits)".to_owned(),
        )),
        Ok(e) if e.gavel_fleet == FORMAT => Ok(e),
        Ok(e) => Err(Refusal::Malformed(format!(
            "format {} (this build reads {FORMAT})",
            e.gavel_fleet
        ))),
        Err(e) => {
            // Whatever the rest is, does it claim to be a signed document?
            let members = serde_json::from_slice::<HashMap<String, serde::de::IgnoredAny>>(value);
            match members {
                Ok(m) if m.contains_key("gavel_fleet") => Err(Refusal::Malformed(cause(&e))),
                _ => Err(Refusal::Unsigned),
            }
        }
    }
}

/// Whether `id` is a key id as [`crate::keys::key_id`] makes them: nothing else is printed or
/// logged as a signer.
fn is_key_id(id: &str) -> bool {
    id.strip_prefix("ed25519:").is_some_and(|hex| {
        hex.len() == 16
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A parser's message about a forged value, short and printable: it may quote the value.
fn cause(e: &serde_json::Error) -> String {
    e.to_string()
        .chars()
        .take(MAX_CAUSE_CHARS)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// The document in `value` if it was signed for `place` by a key in `trusted`.
pub fn open(value: &[u8], place: Place<'_>, trusted: &TrustedKeys) -> Result<Opened, Refusal> {
    let e = envelope(value)?;
    if e.bucket != place.bucket || e.key != place.key {
        return Err(Refusal::Elsewhere {
            bucket: e.bucket,
            key: e.key,
        });
    }
    if !trusted.knows(&e.signer) {
        return Err(Refusal::UnknownSigner(e.signer));
    }
    let signature = base64::engine::general_purpose::STANDARD
        .decode(e.signature.as_bytes())
        .map_err(|_| Refusal::BadSignature(e.signer.clone()))?;
    if e.signed_at.len() > MAX_TIME_CHARS || e.signed_at.contains('\n') {
        return Err(Refusal::Malformed("signed_at is not a time".to_owned()));
    }
    let signed = message(place, e.serial, &e.signed_at, e.document.as_bytes());
    if !trusted.verify(&e.signer, &signed, &signature) {
        return Err(Refusal::BadSignature(e.signer));
    }
    Ok(Opened {
        serial: e.serial,
        signer: e.signer,
        signed_at: e.signed_at,
        document: Bytes::from(e.document),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: Place<'static> = Place {
        bucket: "gavel-config",
        key: "exchange.roster",
    };

    fn key() -> SigningKey {
        SigningKey::generate()
            .map(|(k, _)| k)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn trust(keys: &[&SigningKey]) -> TrustedKeys {
        let text: String = keys.iter().map(|k| k.public_pem()).collect();
        TrustedKeys::from_pem(text.as_bytes(), "t").unwrap_or_default()
    }

    fn sealed(k: &SigningKey, place: Place<'_>, serial: u64, doc: &str) -> Vec<u8> {
        seal(k, place, serial, "2026-11-28T10:00:00Z", doc.as_bytes()).unwrap_or_default()
    }

    #[test]
    fn a_sealed_document_opens_with_its_serial_and_signer() {
        let k = key();
        let value = sealed(&k, HERE, 7, "[[bidders]]\nname = \"a\"\n");
        let opened = open(&value, HERE, &trust(&[&k])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(opened.serial, 7);
        assert_eq!(opened.signer, k.id());
        assert_eq!(&opened.document[..], b"[[bidders]]\nname = \"a\"\n");
        assert_eq!(envelope(&value).map(|e| e.serial), Ok(7));
    }

    #[test]
    fn every_tampering_is_refused_by_name() {
        let k = key();
        let stranger = key();
        let trusted = trust(&[&k]);
        let value = sealed(&k, HERE, 7, "doc");
        let edit = |f: &dyn Fn(&mut Envelope)| {
            let mut e = envelope(&value).unwrap_or_else(|e| panic!("{e}"));
            f(&mut e);
            serde_json::to_vec(&e).unwrap_or_default()
        };
        let refused = |v: &[u8]| {
            open(v, HERE, &trusted)
                .map(|_| ())
                .unwrap_err()
                .reason()
                .label()
        };
        assert_eq!(refused(b"[[bidders]]\nname = \"evil\"\n"), "unsigned");
        assert_eq!(refused(b"{\"campaign\": []}"), "unsigned");
        assert_eq!(
            refused(b"[{\"id\": \"c\", \"budget\": {\"total\": 1}}]"),
            "unsigned"
        );
        assert_eq!(refused(b" [\"gavel_fleet\"]"), "unsigned");
        assert_eq!(refused(b""), "unsigned");
        assert_eq!(refused(b"{\"gavel_fleet\": 1}"), "malformed");
        assert_eq!(refused(&edit(&|e| e.gavel_fleet = 2)), "malformed");
        // A signer that is not a key id is never printed or looked up.
        assert_eq!(
            refused(&edit(&|e| e.signer = "ed25519:\u{1b}[2J".into())),
            "malformed"
        );
        let huge = format!(
            "{{\"gavel_fleet\": 1, \"bucket\": {}}}",
            "9".repeat(100_000)
        );
        let e = open(huge.as_bytes(), HERE, &trusted)
            .map(|_| ())
            .unwrap_err();
        assert!(e.to_string().len() < 400, "{e}");
        assert_eq!(refused(&edit(&|e| e.document.push('x'))), "bad_signature");
        assert_eq!(refused(&edit(&|e| e.serial += 1)), "bad_signature");
        assert_eq!(
            refused(&edit(&|e| e.signed_at = "2030-01-01T00:00:00Z".into())),
            "bad_signature"
        );
        assert_eq!(
            refused(&edit(&|e| e.signature = "!!".into())),
            "bad_signature"
        );
        assert_eq!(
            refused(&edit(&|e| e.key = "bidder.campaigns".into())),
            "wrong_key"
        );
        assert_eq!(refused(&edit(&|e| e.bucket = "other".into())), "wrong_key");
        // Copied whole to another key: its own place no longer matches.
        let elsewhere = Place {
            key: "exchange.roster.eu",
            ..HERE
        };
        assert_eq!(
            open(&value, elsewhere, &trusted)
                .map(|_| ())
                .unwrap_err()
                .reason()
                .label(),
            "wrong_key"
        );
        // A stranger's key, under its own id or claiming the trusted key's.
        assert_eq!(
            refused(&sealed(&stranger, HERE, 8, "doc")),
            "unknown_signer"
        );
        let claimed = {
            let mut e =
                envelope(&sealed(&stranger, HERE, 8, "doc")).unwrap_or_else(|e| panic!("{e}"));
            e.signer = k.id().to_owned();
            serde_json::to_vec(&e).unwrap_or_default()
        };
        assert_eq!(refused(&claimed), "bad_signature");
        // Another field than the format knows.
        let mut extra: serde_json::Value = serde_json::from_slice(&value).unwrap_or_default();
        extra["trusted"] = true.into();
        assert_eq!(
            refused(&serde_json::to_vec(&extra).unwrap_or_default()),
            "malformed"
        );
    }

    #[test]
    fn non_text_documents_are_not_sealed() {
        let e = seal(&key(), HERE, 1, "t", &[0xff, 0xfe]).unwrap_err();
        assert!(e.contains("UTF-8"), "{e}");
        assert!(seal(&key(), HERE, 1, "a\nb", b"x").is_err());
    }
}
