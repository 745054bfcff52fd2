//! `layer::apply` on arbitrary layer tars, into a fresh directory on tmpfs
//! per input.
//!
//! The first byte selects: bits 0–1 the stream (0 the tar as it is, 1 the
//! tar gzipped here, 2 zstd-compressed here, 3 the bytes given raw to the
//! gzip (bit 2 clear) or zstd (bit 2 set) decompressor); bit 3 keeps the
//! header checksums as they are (else they are rewritten so mutations get
//! past them); bit 4 `allow_setuid`; bit 5 `same_owner`; bit 6
//! `start_writeback`; bit 7 turns `diff_id` off. Devices are never
//! allowed (a device node of the real disk on tmpfs is not a risk worth a
//! fuzz run).
//!
//! Each input gets `<tmp>/root`, holding a small lower layer with symlinks
//! that point out of it (`up` → `../..`, `abs` → `/`, `out` →
//! `<tmp>/outside`), and `<tmp>/outside`, a file with known content.
//! Properties: `apply` returns Ok or a `LayerError` (never a panic); after
//! it `<tmp>` holds only `root` and `outside`, and `outside` is unchanged;
//! on success the diff ID is the sha256 of the tar stream.

use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::Path;

use jbuild::digest::Digest;
use jbuild::layer::{
    apply, ApplyOptions, MEDIA_TYPE_TAR, MEDIA_TYPE_TAR_GZIP, MEDIA_TYPE_TAR_ZSTD,
};

const OUTSIDE: &[u8] = b"outside the root\n";

fn lower(tmp: &Path) {
    let root = tmp.join("root");
    fs::create_dir_all(root.join("etc/rc.d")).unwrap();
    fs::create_dir_all(root.join("usr/local/bin")).unwrap();
    fs::write(root.join("etc/passwd"), b"root:*:0:0::/root:/bin/sh\n").unwrap();
    fs::write(root.join("etc/rc.d/sshd"), b"#!/bin/sh\n").unwrap();
    fs::hard_link(root.join("etc/passwd"), root.join("etc/passwd.hard")).unwrap();
    symlink("../..", root.join("up")).unwrap();
    symlink("/", root.join("abs")).unwrap();
    symlink(tmp.join("outside"), root.join("out")).unwrap();
    symlink("../../..", root.join("usr/local/bin/esc")).unwrap();
    fs::write(tmp.join("outside"), OUTSIDE).unwrap();
}

/// The target's property checks on one input (see the module docs).
pub fn check_layer_apply(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let mut tar = rest.to_vec();
    if sel & 8 == 0 {
        super::fix_checksums(&mut tar);
    }
    let (media_type, stream) = match sel & 3 {
        0 => (MEDIA_TYPE_TAR, tar.clone()),
        1 => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(&tar).unwrap();
            (MEDIA_TYPE_TAR_GZIP, gz.finish().unwrap())
        }
        2 => (MEDIA_TYPE_TAR_ZSTD, zstd::encode_all(&tar[..], 1).unwrap()),
        _ if sel & 4 == 0 => (MEDIA_TYPE_TAR_GZIP, rest.to_vec()),
        _ => (MEDIA_TYPE_TAR_ZSTD, rest.to_vec()),
    };
    let tmp = tempfile::Builder::new()
        .prefix("jbuild-fuzz-")
        .tempdir_in("/dev/shm")
        .unwrap();
    lower(tmp.path());
    let opts = ApplyOptions {
        allow_devices: false,
        allow_setuid: sel & 0x10 != 0,
        same_owner: sel & 0x20 != 0,
        start_writeback: sel & 0x40 != 0,
        diff_id: sel & 0x80 == 0,
    };
    let result = apply(&stream[..], media_type, &tmp.path().join("root"), &opts);
    let mut names: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["outside", "root"],
        "something was written outside the root"
    );
    assert_eq!(fs::read(tmp.path().join("outside")).unwrap(), OUTSIDE);
    let meta = fs::symlink_metadata(tmp.path().join("outside")).unwrap();
    assert!(meta.is_file(), "outside was replaced");
    match result {
        Ok(stats) if sel & 3 != 3 => {
            assert_eq!(stats.diff_id, (sel & 0x80 == 0).then(|| Digest::of(&tar)))
        }
        Ok(_) => {}
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}
