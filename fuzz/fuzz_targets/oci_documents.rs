//! `oci_documents`: the property checks are in `src/checks/oci_documents.rs`, shared
//! with `cargo test`'s corpus replay (`tests/it/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jbuild_fuzz::check_oci_documents(data));
