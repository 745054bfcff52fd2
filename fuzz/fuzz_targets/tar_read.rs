//! `tar_read`: the property checks are in `src/checks/tar_read.rs`, shared
//! with `cargo test`'s corpus replay (`tests/it/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jbuild_fuzz::check_tar_read(data));
