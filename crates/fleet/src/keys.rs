//! The operator's Ed25519 keys for fleet documents: the private key `gavel config push` signs
//! with, and the public keys a node trusts (several at once while keys rotate).
//!
//! Files are PEM, as OpenSSL writes them, so either tool makes them:
//!
//! | file | PEM block | made by |
//! | --- | --- | --- |
//! | signing key (the operator's, `chmod 600`) | `PRIVATE KEY` (PKCS#8 v1 or v2) | `gavel config keygen`, or `openssl genpkey -algorithm ed25519` |
//! | trusted keys (every node's `fleet.trusted_keys_file`) | one `PUBLIC KEY` (SubjectPublicKeyInfo) per key | `gavel config keygen` (the `.pub` file), or `openssl pkey -in KEY -pubout` |
//!
//! A key is named by its id, `ed25519:` and the first 16 hex digits of the SHA-256 of its 32
//! public bytes: logs, `gavel config show` and refusals name keys by it, never by their bytes.
//! Signing and verifying are `ring`'s, already in the tree for TLS.

use std::fmt::Write as _;
use std::path::Path;

use ring::rand::SystemRandom;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{PrivatePkcs8KeyDer, SubjectPublicKeyInfoDer};
use sha2::{Digest as _, Sha256};

/// Most keys a trusted keys file may hold: a few rotate at once; more is a mistake.
pub const MAX_TRUSTED_KEYS: usize = 16;
/// Largest key file read (a PEM key is a few hundred bytes).
pub const MAX_KEY_FILE_BYTES: usize = 64 * 1024;

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the algorithm `1.3.101.112`
/// and a bit string of 32 bytes, which follow.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// The DER of an Ed25519 private key in PKCS#8 v1 (RFC 8410) before its 32 secret bytes: what
/// OpenSSL writes and reads. (ring makes v2 keys, whose public key field OpenSSL 3 refuses.)
const PKCS8_V1_PREFIX: [u8; 16] = [
    0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// The DER of ring's PKCS#8 v2 Ed25519 key before its 32 secret bytes.
const PKCS8_V2_PREFIX: [u8; 16] = [
    0x30, 0x51, 0x02, 0x01, 0x01, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
];

/// Why a key file could not be used. Messages name the file, never a key's bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    Read(String),
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

fn invalid(what: &str, reason: impl Into<String>) -> KeyError {
    KeyError::Invalid {
        what: what.to_owned(),
        reason: reason.into(),
    }
}

/// `ed25519:` and 16 hex digits of the SHA-256 of the public key's 32 bytes.
pub fn key_id(public: &[u8]) -> String {
    let hash = Sha256::digest(public);
    let mut id = String::with_capacity(24);
    id.push_str("ed25519:");
    for b in hash.iter().take(8) {
        let _ = write!(id, "{b:02x}");
    }
    id
}

/// PEM text of `der` under `label`, 64 characters a line (RFC 7468).
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    let _ = writeln!(out, "-----END {label}-----");
    out
}

/// A public key as a `PUBLIC KEY` PEM block.
pub fn public_pem(public: &[u8; 32]) -> String {
    let mut der = SPKI_PREFIX.to_vec();
    der.extend_from_slice(public);
    pem("PUBLIC KEY", &der)
}

/// The private key documents are signed with.
pub struct SigningKey {
    pair: Ed25519KeyPair,
    id: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("id", &self.id).finish()
    }
}

impl SigningKey {
    /// A new key and its `PRIVATE KEY` PEM (PKCS#8 v1, as OpenSSL writes it), from the
    /// system's randomness.
    pub fn generate() -> Result<(SigningKey, String), KeyError> {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| KeyError::Read("no randomness to make a key with".to_owned()))?;
        let seed = pkcs8
            .as_ref()
            .strip_prefix(&PKCS8_V2_PREFIX[..])
            .and_then(|rest| rest.get(..32))
            .ok_or_else(|| KeyError::Read("ring made a key of an unknown shape".to_owned()))?;
        let mut v1 = PKCS8_V1_PREFIX.to_vec();
        v1.extend_from_slice(seed);
        let text = pem("PRIVATE KEY", &v1);
        let key = SigningKey::from_pem(text.as_bytes(), "the new key")?;
        Ok((key, text))
    }

    /// The key in a `PRIVATE KEY` PEM block; `what` names it in errors.
    pub fn from_pem(text: &[u8], what: &str) -> Result<SigningKey, KeyError> {
        let der = PrivatePkcs8KeyDer::from_pem_slice(text).map_err(|e| {
            invalid(
                what,
                format!("no PKCS#8 PRIVATE KEY block ({e}); make one with `gavel config keygen`"),
            )
        })?;
        // `maybe_unchecked` reads the v1 PKCS#8 that OpenSSL writes (no public key inside)
        // as well as v2.
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(der.secret_pkcs8_der())
            .map_err(|e| invalid(what, format!("not an Ed25519 private key: {e}")))?;
        let id = key_id(pair.public_key().as_ref());
        Ok(SigningKey { pair, id })
    }

    /// The key in the file at `path` (warned about on stderr when every user may read it).
    pub fn load(path: &Path) -> Result<SigningKey, KeyError> {
        let text = read(path)?;
        if settings::readable_by_others(path) {
            eprintln!(
                "warning: the signing key {} is readable by every user; chmod 600 it",
                path.display()
            );
        }
        SigningKey::from_pem(&text, &path.display().to_string())
    }

    /// Its id (`ed25519:...`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Its public key as a `PUBLIC KEY` PEM block, for nodes' trusted keys files.
    pub fn public_pem(&self) -> String {
        let mut public = [0u8; 32];
        public.copy_from_slice(self.pair.public_key().as_ref());
        public_pem(&public)
    }

    /// The 64-byte signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.pair.sign(message).as_ref());
        out
    }
}

/// The public keys a node accepts documents from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys {
    keys: Vec<(String, [u8; 32])>,
}

impl TrustedKeys {
    /// Every `PUBLIC KEY` block of `text` (other blocks and text around them are ignored);
    /// at least one, at most [`MAX_TRUSTED_KEYS`], each Ed25519. `what` names the file.
    pub fn from_pem(text: &[u8], what: &str) -> Result<TrustedKeys, KeyError> {
        let mut keys = Vec::new();
        for block in SubjectPublicKeyInfoDer::pem_slice_iter(text) {
            let spki = block.map_err(|e| invalid(what, format!("a malformed PEM block: {e}")))?;
            let der: &[u8] = spki.as_ref();
            let raw = der
                .strip_prefix(&SPKI_PREFIX[..])
                .and_then(|raw| <[u8; 32]>::try_from(raw).ok())
                .ok_or_else(|| {
                    invalid(
                        what,
                        format!("public key {} is not an Ed25519 key", keys.len() + 1),
                    )
                })?;
            let id = key_id(&raw);
            if !keys.iter().any(|(known, _)| *known == id) {
                keys.push((id, raw));
            }
        }
        if keys.is_empty() {
            return Err(invalid(
                what,
                "holds no PUBLIC KEY block; add the .pub file `gavel config keygen` wrote",
            ));
        }
        if keys.len() > MAX_TRUSTED_KEYS {
            return Err(invalid(
                what,
                format!("holds {} keys; at most {MAX_TRUSTED_KEYS}", keys.len()),
            ));
        }
        Ok(TrustedKeys { keys })
    }

    /// The keys in the file at `path`. Blocking (reads a small file).
    pub fn load(path: &Path) -> Result<TrustedKeys, KeyError> {
        TrustedKeys::from_pem(&read(path)?, &path.display().to_string())
    }

    /// The ids of the keys, in the file's order.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|(id, _)| id.as_str()).collect()
    }

    /// Whether a key of this id is trusted.
    pub fn knows(&self, id: &str) -> bool {
        self.keys.iter().any(|(known, _)| known == id)
    }

    /// Whether `signature` over `message` was made by the trusted key `id`. False for a key
    /// not trusted.
    pub fn verify(&self, id: &str, message: &[u8], signature: &[u8]) -> bool {
        self.keys
            .iter()
            .find(|(known, _)| known == id)
            .is_some_and(|(_, raw)| {
                UnparsedPublicKey::new(&ED25519, raw)
                    .verify(message, signature)
                    .is_ok()
            })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, KeyError> {
    settings::read_bounded_bytes(path, MAX_KEY_FILE_BYTES)
        .map_err(|e| KeyError::Read(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8032, section 7.1, test 1: the private key, its public key, and the signature of
    /// the empty message. The private key in PKCS#8 v1 (as OpenSSL writes it) is the fixed
    /// prefix of RFC 8410 followed by the 32 secret bytes.
    const RFC8032_SECRET: &str = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
    const RFC8032_PUBLIC: &str = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
    const RFC8032_SIGNATURE: &str = "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155\
                                     5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_default())
            .collect()
    }

    fn rfc_key() -> SigningKey {
        let mut der = PKCS8_V1_PREFIX.to_vec();
        der.extend(unhex(RFC8032_SECRET));
        SigningKey::from_pem(pem("PRIVATE KEY", &der).as_bytes(), "rfc")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_rfc_8032_vector_signs_and_verifies() {
        let key = rfc_key();
        assert_eq!(key.sign(b"").to_vec(), unhex(RFC8032_SIGNATURE));
        let public = key.public_pem();
        let trusted = TrustedKeys::from_pem(public.as_bytes(), "pub").unwrap_or_default();
        assert_eq!(trusted.ids(), [key.id()]);
        assert_eq!(key.id(), key_id(&unhex(RFC8032_PUBLIC)));
        assert!(trusted.verify(key.id(), b"", &unhex(RFC8032_SIGNATURE)));
        let mut forged = unhex(RFC8032_SIGNATURE);
        forged[0] ^= 1;
        assert!(!trusted.verify(key.id(), b"", &forged));
        assert!(!trusted.verify(key.id(), b"x", &unhex(RFC8032_SIGNATURE)));
        assert!(!trusted.verify("ed25519:0000000000000000", b"", &unhex(RFC8032_SIGNATURE)));
    }

    #[test]
    fn generated_keys_round_trip_and_several_are_trusted_at_once() {
        let (a, a_pem) = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        let (b, _) = SigningKey::generate().unwrap_or_else(|e| panic!("{e}"));
        let again = SigningKey::from_pem(a_pem.as_bytes(), "a").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(again.id(), a.id());
        let both = format!("# rotating\n{}{}", a.public_pem(), b.public_pem());
        let trusted = TrustedKeys::from_pem(both.as_bytes(), "both").unwrap_or_default();
        assert_eq!(trusted.ids(), [a.id(), b.id()]);
        let sig = b.sign(b"doc");
        assert!(trusted.verify(b.id(), b"doc", &sig));
        assert!(!trusted.verify(a.id(), b"doc", &sig), "not a's signature");
    }

    #[test]
    fn files_without_keys_or_with_other_keys_are_refused_naming_them() {
        let refuse = |text: &str| {
            TrustedKeys::from_pem(text.as_bytes(), "keys.pub")
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        assert!(refuse("").contains("holds no PUBLIC KEY"));
        // A P-256 public key: a PUBLIC KEY block of another algorithm.
        let p256 = pem("PUBLIC KEY", &[0x30, 0x59, 0x30, 0x13, 0x06, 0x07]);
        let e = refuse(&p256);
        assert!(
            e.starts_with("keys.pub") && e.contains("not an Ed25519"),
            "{e}"
        );
        let e = SigningKey::from_pem(b"nothing", "ops.key")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("ops.key") && e.contains("PRIVATE KEY"), "{e}");
        let many: String = (0..=MAX_TRUSTED_KEYS)
            .map(|_| {
                SigningKey::generate()
                    .map(|(k, _)| k.public_pem())
                    .unwrap_or_default()
            })
            .collect();
        assert!(refuse(&many).contains("at most"));
    }
}
