//! Tells the binary which commit and which compiler built it, for `gavel_build_info`: the
//! environment variables `GAVEL_GIT_SHA` and `GAVEL_RUSTC`. Each is left out when it cannot be
//! learnt (git missing, not a checkout, an odd compiler): a build never fails for them.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(sha) = git(&["rev-parse", "--short=12", "HEAD"]) {
        println!("cargo:rustc-env=GAVEL_GIT_SHA={sha}");
        // Run again when HEAD moves: its file (a checkout of another branch) and the file of
        // the branch it names (a commit), or the packed refs when that branch has no file.
        // Only files that exist: a missing one would rerun this script on every build.
        let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let loose = git(&["rev-parse", "--git-path", &branch]);
            let exists = loose
                .as_deref()
                .is_some_and(|p| std::path::Path::new(p).exists());
            watched.push(if exists {
                loose
            } else {
                git(&["rev-parse", "--git-path", "packed-refs"])
            });
        }
        for path in watched.into_iter().flatten() {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    if let Some(version) = rustc_version() {
        println!("cargo:rustc-env=GAVEL_RUSTC={version}");
    }
}

/// A git command's one line of output, if git ran and succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let line = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!line.is_empty() && !line.contains('\n')).then_some(line)
}

/// `1.88.0` of `rustc 1.88.0 (6b00bc388 2025-06-23)`, from the compiler cargo builds with.
fn rustc_version() -> Option<String> {
    let rustc = std::env::var_os("RUSTC")?;
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace().nth(1).map(str::to_owned)
}
