//! `zfs_diff_parse`: the property checks are in `src/checks/zfs_diff_parse.rs`, shared
//! with `cargo test`'s corpus replay (`tests/it/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jbuild_fuzz::check_zfs_diff_parse(data));
