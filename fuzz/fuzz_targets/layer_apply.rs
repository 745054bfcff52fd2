//! `layer_apply`: the property checks are in `src/checks/layer_apply.rs`, shared
//! with `cargo test`'s corpus replay (`tests/it/fuzz_replay.rs`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jbuild_fuzz::check_layer_apply(data));
