//! The fuzz targets' property checks (`checks/`, shared with the main
//! crate's corpus replay in `tests/it/fuzz_replay.rs`) and their helpers.

mod checks;

pub use checks::*;
