//! The applier reads and decompresses a layer on one thread and extracts
//! it on another, joined by a bounded pipe (`gzip -dc | tar -x` as
//! threads): reading runs ahead of the extraction instead of waiting for
//! it. Shown with a seam that holds the extraction at its first entry
//! (the `FileFlags` it is given, asked about a directory the layer merges
//! into) until the source has been read to its end: a one-thread applier
//! can never get there, and the hold gives up (after a bounded wait)
//! saying so.

use crate::support::layer::{compressed, RawTar};

use std::fs;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use jbuild::digest::Digest;
use jbuild::fsutil::flags::FileFlags;
use jbuild::layer::{apply_with_flags, ApplyOptions, Compression, Limits};

/// Whether the source has been read to its end, and whether the
/// extraction saw that while it was held.
#[derive(Debug, Default)]
struct Seen {
    source_ended: bool,
    held_until_end: Option<bool>,
}

#[derive(Debug, Default)]
struct Shared {
    seen: Mutex<Seen>,
    changed: Condvar,
}

/// The layer's bytes, noting when they have all been read.
struct Source {
    bytes: io::Cursor<Vec<u8>>,
    shared: Arc<Shared>,
}

impl Read for Source {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.bytes.read(buf)?;
        if n == 0 && !buf.is_empty() {
            self.shared.seen.lock().unwrap().source_ended = true;
            self.shared.changed.notify_all();
        }
        Ok(n)
    }
}

/// File flags that hold the first question (the applier asks before it
/// merges into a directory that is there) until the source has ended, or
/// 30 s have passed.
#[derive(Debug)]
struct HoldFirst(Arc<Shared>);

impl FileFlags for HoldFirst {
    fn get(&self, _: &Path, _: u32) -> io::Result<u32> {
        let seen = self.0.seen.lock().unwrap();
        if seen.held_until_end.is_none() {
            let (mut seen, _) = self
                .0
                .changed
                .wait_timeout_while(seen, Duration::from_secs(30), |s| !s.source_ended)
                .unwrap();
            seen.held_until_end = Some(seen.source_ended);
        }
        Ok(0)
    }

    fn set(&self, _: &Path, _: u32) -> io::Result<()> {
        Ok(())
    }
}

/// A layer: the directory `d`, then `d/big`, 400 KiB that do not compress.
/// Sized between the two designs' read-ahead: more than one thread's
/// buffers take in before the first entry (256 KiB of source), less than
/// the pipe holds (16 chunks: the gzip decoder hands on about 31 KiB a
/// read, and each read is sent at once).
fn layer() -> (Vec<u8>, Vec<u8>) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let big: Vec<u8> = (0..400 << 10)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let tar = RawTar::default().dir(b"d/").file(b"d/big", &big).finish();
    (tar, big)
}

#[test]
fn reading_and_decompressing_run_ahead_of_the_extraction() {
    let (tar, big) = layer();
    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        // Already there, so the applier merges into it and asks its flags.
        fs::create_dir(root.join("d")).unwrap();
        let shared = Arc::new(Shared::default());
        let source = Source {
            bytes: io::Cursor::new(compressed(&tar, compression)),
            shared: shared.clone(),
        };
        let flags = HoldFirst(shared.clone());
        let opts = ApplyOptions::default();
        let stats = apply_with_flags(
            source,
            compression.media_type(),
            root,
            &opts,
            &Limits::default(),
            &flags,
        )
        .unwrap();
        let seen = shared.seen.lock().unwrap();
        assert_eq!(
            seen.held_until_end,
            Some(true),
            "{compression:?}: while the extraction was held at its first entry, \
             the source was not read to its end"
        );
        assert_eq!(stats.diff_id, Some(Digest::of(&tar)), "{compression:?}");
        assert_eq!(stats.entries, 2, "{compression:?}");
        assert!(
            fs::read(root.join("d/big")).unwrap() == big,
            "{compression:?}"
        );
    }
}
