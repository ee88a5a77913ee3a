//! The fleet's Ed25519 keys against OpenSSL, the reference an operator would use instead:
//! a key `openssl genpkey` made signs pushes, `openssl pkey -pubout` of a key `gavel config
//! keygen` made is the same public key gavel writes, and a signature OpenSSL made verifies
//! with the trusted keys (and fails when one byte changes).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use fleet::{SigningKey, TrustedKeys};
use testkit::TempDir;

fn openssl(args: &[&str], dir: &Path) -> Vec<u8> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (apt-get install -y openssl): {e}"));
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn keys_and_signatures_agree_with_openssl() {
    let dir = TempDir::new("fleet-openssl");
    let at = dir.path();

    // OpenSSL's key (PKCS#8 v1) signs here; its public key, as OpenSSL writes it, is trusted.
    openssl(&["genpkey", "-algorithm", "ed25519", "-out", "ops.pem"], at);
    let theirs = SigningKey::load(&dir.join("ops.pem")).unwrap();
    let their_public = openssl(&["pkey", "-in", "ops.pem", "-pubout"], at);
    assert_eq!(String::from_utf8_lossy(&their_public), theirs.public_pem());
    let trusted = TrustedKeys::from_pem(&their_public, "openssl").unwrap();
    assert!(trusted.verify(theirs.id(), b"doc", &theirs.sign(b"doc")));

    // Our key (PKCS#8 v2), read by OpenSSL: the same public key.
    let (ours, private) = SigningKey::generate().unwrap();
    dir.file("ours.pem", &private);
    let public = openssl(&["pkey", "-in", "ours.pem", "-pubout"], at);
    assert_eq!(String::from_utf8_lossy(&public), ours.public_pem());

    // A signature OpenSSL makes with our key verifies here; a changed message does not.
    dir.file("message", "gavel-fleet-v1\nbucket\nkey\n7\nt\ndocument");
    let signature = openssl(
        &[
            "pkeyutl", "-sign", "-inkey", "ours.pem", "-rawin", "-in", "message",
        ],
        at,
    );
    assert_eq!(signature.len(), 64);
    let trusted = TrustedKeys::from_pem(ours.public_pem().as_bytes(), "ours").unwrap();
    let message = b"gavel-fleet-v1\nbucket\nkey\n7\nt\ndocument";
    assert!(trusted.verify(ours.id(), message, &signature));
    assert_eq!(
        ours.sign(message).to_vec(),
        signature,
        "Ed25519 is deterministic"
    );
    assert!(!trusted.verify(
        ours.id(),
        b"gavel-fleet-v1\nbucket\nkey\n8\nt\ndocument",
        &signature
    ));
}
