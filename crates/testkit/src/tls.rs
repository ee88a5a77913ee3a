//! Test certificates, made by the `openssl` command (as an operator would): a CA, and a server
//! certificate it signs for `localhost` and `127.0.0.1`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// PEM files in one directory.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// The CA certificate clients trust.
    pub ca: PathBuf,
    /// The server's certificate, signed by `ca`.
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Makes a CA named `name` and a server certificate it signs for `localhost` and `127.0.0.1`,
/// in `dir`.
///
/// # Panics
/// When `openssl` is missing or fails (the message says how to install it).
pub fn generate(dir: &Path, name: &str) -> TlsFiles {
    generate_for(dir, name, &["DNS:localhost", "IP:127.0.0.1"])
}

/// [`generate`], with the server certificate's subject alternative names given
/// (`DNS:ads.example.com`, `DNS:*.example.org`, `IP:127.0.0.1`).
///
/// # Panics
/// When `openssl` is missing or fails.
pub fn generate_for(dir: &Path, name: &str, alt_names: &[&str]) -> TlsFiles {
    let file = |ext: &str| dir.join(format!("{name}.{ext}"));
    let files = TlsFiles {
        ca: file("ca.crt"),
        cert: file("crt"),
        key: file("key"),
    };
    let ext = file("ext");
    let sans = format!("subjectAltName={}\n", alt_names.join(","));
    if let Err(e) = std::fs::write(&ext, sans) {
        panic!("cannot write {}: {e}", ext.display());
    }
    let p = |p: &Path| p.display().to_string();
    let ca_key = file("ca.key");
    let csr = file("csr");
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        &format!("/CN={name}-ca"),
        "-keyout",
        &p(&ca_key),
        "-out",
        &p(&files.ca),
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        &p(&files.key),
        "-out",
        &p(&csr),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-days",
        "2",
        "-in",
        &p(&csr),
        "-CA",
        &p(&files.ca),
        "-CAkey",
        &p(&ca_key),
        "-CAcreateserial",
        "-extfile",
        &p(&ext),
        "-out",
        &p(&files.cert),
    ]);
    files
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl").args(args).output();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "openssl {} failed: {}",
            args.first().copied().unwrap_or_default(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("openssl is not on PATH; install it with `apt-get install -y openssl`")
        }
        Err(e) => panic!("cannot run openssl: {e}"),
    }
}
