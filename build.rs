//! Records what `jbuild --version` says beyond the crate's version: the
//! commit it was built from (`unknown` outside a git checkout, e.g. from a
//! release tarball) and the target triple.

use std::process::Command;

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=JBUILD_BUILD_TARGET={target}");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=JBUILD_BUILD_COMMIT={commit}");
    // Run again when HEAD moves (a commit, a checkout), not on every edit.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            let common =
                git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]).unwrap_or(dir);
            // A packed ref has no file of its own: watch packed-refs then.
            let loose = std::path::Path::new(&common).join(&r);
            if loose.exists() {
                println!("cargo:rerun-if-changed={}", loose.display());
            } else {
                println!("cargo:rerun-if-changed={common}/packed-refs");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}
