//! Notes of how large a layer blob is once uncompressed, kept in
//! `.jbuild/sizes/<hex>` (one decimal number). A note is keyed by the
//! blob's digest, so it can never describe other content; it goes with the
//! blob ([`Store::remove_blob`]). Counting the size is the caller's
//! business (the store does not decompress).

use std::path::Path;

use super::{Store, StoreError};
use crate::digest::Digest;
use crate::fsutil::write_atomic;

/// The longest note read: a decimal `u64` and a newline fit in 21 bytes.
const MAX_NOTE: u64 = 64;

impl Store {
    /// The uncompressed size noted for the blob `d`, if any.
    /// Read beneath the store like any of its files (`Store::within`):
    /// never through a symlink, never waiting on a FIFO, a few bytes at most.
    pub fn unpacked_size(&self, d: &Digest) -> Option<u64> {
        let note = Path::new(".jbuild/sizes").join(d.hex());
        let bytes = self.within().read(&note, MAX_NOTE).ok()?;
        std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
    }

    /// Notes that the blob `d` is `size` bytes once uncompressed.
    pub fn note_unpacked_size(&self, d: &Digest, size: u64) -> Result<(), StoreError> {
        let path = self.private_dir("sizes")?.join(d.hex());
        write_atomic(&path, format!("{size}\n").as_bytes())
            .map_err(|e| StoreError::io(format!("cannot write {}", path.display()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_goes_with_its_blob() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let d = Digest::of(b"layer");
        assert_eq!(s.unpacked_size(&d), None);
        s.note_unpacked_size(&d, 1536).unwrap();
        assert_eq!(s.unpacked_size(&d), Some(1536));
        s.remove_blob(&d).unwrap();
        assert_eq!(s.unpacked_size(&d), None);
    }
}
