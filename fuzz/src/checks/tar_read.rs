//! The hostile-tar reader alone (`layer::TarReader`), on arbitrary bytes.
//!
//! The first byte selects: bit 0 set keeps the bytes as they are; clear,
//! the header checksums are rewritten first (`fix_checksums`) so mutations
//! reach past them. Properties: no panic; every entry's content reads to
//! exactly its `size` bytes or fails as truncated; the reader never
//! returns more entries than the stream has header blocks; extended
//! header data stays within the reader's 1 MiB limit.

use std::io::Read;

use jbuild::layer::header::BLOCK;
use jbuild::layer::{LayerError, TarReader};

/// The target's property checks on one input (see the module docs).
pub fn check_tar_read(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let mut tar = rest.to_vec();
    if selector & 1 == 0 {
        super::fix_checksums(&mut tar);
    }
    let blocks = tar.len() / BLOCK;
    let mut reader = TarReader::new(&tar[..]);
    let mut entries = 0usize;
    let mut buf = [0u8; 4096];
    loop {
        match reader.next() {
            Ok(None) => break,
            Ok(Some(h)) => {
                entries += 1;
                assert!(entries <= blocks, "more entries than header blocks");
                assert!(
                    h.path.len() <= (1 << 20) + 256,
                    "path longer than the limit"
                );
                assert!(h.linkname.len() <= (1 << 20) + 256);
                let mut got = 0u64;
                let mut content = reader.content();
                let result = loop {
                    match content.read(&mut buf) {
                        Ok(0) => break Ok(()),
                        Ok(n) => got += n as u64,
                        Err(e) => break Err(e),
                    }
                };
                match result {
                    Ok(()) => assert_eq!(got, h.size, "content length differs from size"),
                    Err(e) => {
                        assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
                        assert!(got < h.size);
                        let err = reader.truncated(e, &h.path);
                        assert!(matches!(err, LayerError::Truncated(_)));
                        break;
                    }
                }
            }
            Err(e) => {
                assert!(!e.to_string().is_empty());
                break;
            }
        }
    }
}
