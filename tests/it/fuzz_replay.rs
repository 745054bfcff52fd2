//! Every committed fuzz corpus file, replayed through its target's
//! property checks on stable Rust: what the fuzzers once found interesting
//! keeps being checked by `cargo test`, without nightly or cargo-fuzz.
//!
//! The checks are the fuzz crate's own (`fuzz/src/checks/`, compiled here
//! with `#[path]`; the fuzz targets are one line calling them), so a
//! property cannot drift between fuzzing and testing. Each target is one
//! test; a failing input is named by its corpus file, with the check's
//! message, and all failures of a target are listed together.
//!
//! Bounded: every file of every corpus is replayed (no sampling); in a
//! debug build on a busy two-core machine the five corpora take well under
//! a minute together. `layer_apply` writes each input's tree to a fresh
//! directory under `/dev/shm` that is removed after the input, whatever
//! happened, so at most one input's tree (within `layer::Limits`) is
//! there at a time per running test.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[path = "../../fuzz/src/checks/mod.rs"]
mod checks;

/// The corpus files of `target`, sorted by name so runs are comparable.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus {} cannot be read: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Replays the whole corpus of `target` through `check`; fails listing
/// every file whose check panicked, or if fewer than `at_least` files were
/// replayed (a corpus lost or emptied by mistake is not a pass).
fn replay(target: &str, at_least: usize, check: fn(&[u8])) {
    let files = corpus(target);
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&data))) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            failed.push(format!("{}: {message}", file.display()));
        }
    }
    eprintln!("{target}: replayed {} corpus files", files.len());
    assert!(
        failed.is_empty(),
        "{target}: {} of {} corpus files fail their property checks:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
    assert!(
        files.len() >= at_least,
        "{target}: only {} corpus files replayed, at least {at_least} expected \
         (fuzz/corpus/{target}/ is committed; was it emptied?)",
        files.len()
    );
}

#[test]
fn jailfile_parse_corpus() {
    replay("jailfile_parse", 3000, checks::check_jailfile_parse);
    std::fs::remove_dir_all(checks::include_dir()).unwrap();
}

#[test]
fn layer_apply_corpus() {
    replay("layer_apply", 500, checks::check_layer_apply);
}

#[test]
fn oci_documents_corpus() {
    replay("oci_documents", 6000, checks::check_oci_documents);
}

#[test]
fn tar_read_corpus() {
    replay("tar_read", 350, checks::check_tar_read);
}

#[test]
fn zfs_diff_parse_corpus() {
    replay("zfs_diff_parse", 450, checks::check_zfs_diff_parse);
}
