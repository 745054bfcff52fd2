//! The fuzz targets' property checks, one module per target, each a
//! `check_<target>(data)` that panics when a property fails.
//!
//! Two crates compile this directory: the fuzz crate (`src/lib.rs`, where
//! each `fuzz_targets/<target>.rs` is one `fuzz_target!` calling its
//! check), and the main crate's `tests/it/fuzz_replay.rs` (with `#[path]`),
//! which replays every committed corpus file through the same checks on
//! stable Rust. So the code here names the main crate as `jbuild::` and
//! needs nothing but the main crate's own dependencies (no libFuzzer).

mod jailfile_parse;
mod layer_apply;
mod oci_documents;
mod tar_read;
mod zfs_diff_parse;

pub use jailfile_parse::{check_jailfile_parse, include_dir};
pub use layer_apply::check_layer_apply;
pub use oci_documents::check_oci_documents;
pub use tar_read::check_tar_read;
pub use zfs_diff_parse::check_zfs_diff_parse;

use jbuild::layer::header::{self, BLOCK};

/// Rewrites the checksum of every header block of the tar stream `tar`, as
/// the reader walks it (header, content padded to a block, next header), so
/// mutations reach past the checksum check. Stops at the end-of-archive
/// marker, at a size field it cannot read, or at the end of the bytes.
pub fn fix_checksums(tar: &mut [u8]) {
    let mut at = 0usize;
    while at + BLOCK <= tar.len() {
        let block = &mut tar[at..at + BLOCK];
        if block.iter().all(|&b| b == 0) {
            return;
        }
        block[148..156].fill(b' ');
        let sum: u64 = block.iter().map(|&b| u64::from(b)).sum();
        let field = format!("{sum:06o}\0 ");
        block[148..156].copy_from_slice(field.as_bytes());
        let Some(size) = header::parse_numeric(&block[124..136]) else {
            return;
        };
        let Some(next) = usize::try_from(size)
            .ok()
            .and_then(|s| s.checked_add(header::padding(size)))
            .and_then(|s| s.checked_add(at + BLOCK))
        else {
            return;
        };
        at = next;
    }
}
