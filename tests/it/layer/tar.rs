//! The layer tar writer: determinism, entry order and encoding, checked
//! with an independent reader (the tests' own, `tests/support/tar.rs`, written
//! from the POSIX spec) and with GNU tar, gzip and zstd themselves.

use crate::support::layer as layer_support;
use crate::support::tar as tar_support;

use std::fs;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use jbuild::diff::{Change, ChangeKind};
use jbuild::digest::Digest;
use jbuild::layer::{export, export_with_workers, write_tar, Compression, LayerError, TarOptions};
use layer_support::*;
use tar_support::Entry as Listed;

const CLAMP: u64 = 1_700_000_000;
const OPTS: TarOptions = TarOptions { clamp_mtime: CLAMP };
const UNICODE: &str = "ünïcödé-日本.txt";
const NOT_UTF8: &[u8] = b"bad-\xff\xfe";

fn tar_of(root: &Path, changes: &[Change]) -> Vec<u8> {
    write_tar(root, changes, &OPTS, Vec::new()).unwrap()
}

/// A tree with one of everything the writer handles.
fn varied(root: &Path) {
    write(root, "etc/passwd", b"root:x:0:0\n");
    write(root, "empty", b"");
    mkdir(root, "empty-dir");
    chmod(&write(root, "bin/su", b"\x7fELF setuid"), 0o4755);
    write(root, "lib/libc.so.7", &vec![b'x'; 5000]);
    fs::hard_link(root.join("lib/libc.so.7"), root.join("lib/libc.so")).unwrap();
    symlink("../etc/passwd", root.join("lib/passwd-link")).unwrap();
    write(root, format!("long/{}", "n".repeat(200)), b"long name");
    write(
        root,
        format!("{}/{}", "d".repeat(120), "f".repeat(60)),
        b"prefix split",
    );
    write(root, Path::new("names").join(UNICODE), b"utf8");
    write(
        root,
        Path::new("names").join(std::ffi::OsStr::from_bytes(NOT_UTF8)),
        b"not utf8",
    );
    nix::unistd::mkfifo(
        &root.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o640),
    )
    .unwrap();
    xattr::set(
        root.join("etc/passwd"),
        "user.jbuild.test",
        b"\x00binary value",
    )
    .unwrap();
    pin_mtimes(root, 1_650_000_000);
}

/// Every entry, as the tests' own independent reader reads it.
fn list(bytes: &[u8]) -> Vec<Listed> {
    tar_support::list(bytes)
}

fn find<'a>(entries: &'a [Listed], path: &[u8]) -> &'a Listed {
    entries
        .iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("no entry {}", String::from_utf8_lossy(path)))
}

#[test]
fn same_tree_gives_same_bytes_even_rebuilt_later() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    fs::create_dir(&a).unwrap();
    varied(&a);
    let changes = diff(None, &a);
    let first = tar_of(&a, &changes);
    assert_eq!(first, tar_of(&a, &changes));

    // Built again, elsewhere, later: other inodes, ctimes and atimes.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    fs::create_dir(&b).unwrap();
    varied(&b);
    let changes_b = diff(None, &b);
    assert_eq!(changes, changes_b);
    assert_eq!(first, tar_of(&b, &changes_b));

    for c in [Compression::Gzip, Compression::Zstd, Compression::None] {
        let (la, blob_a) = export(&a, &changes, &OPTS, c, Vec::new()).unwrap();
        let (lb, blob_b) = export(&b, &changes, &OPTS, c, Vec::new()).unwrap();
        assert_eq!(la, lb, "{c}");
        assert_eq!(blob_a, blob_b, "{c}");
        assert_eq!(la.diff_id, Digest::of(&first));
        assert_eq!(la.digest, Digest::of(&blob_a));
        assert_eq!(la.size, blob_a.len() as u64);
        assert_eq!(la.media_type, c.media_type());
    }
}

#[test]
fn entries_are_encoded_as_specified() {
    let t = tempfile::tempdir().unwrap();
    varied(t.path());
    let bytes = tar_of(t.path(), &diff(None, t.path()));
    let entries = list(&bytes);

    assert!(bytes.ends_with(&[0u8; 1024]));
    assert_eq!(bytes.len() % 512, 0);
    // Never an atime or ctime record, never owner names.
    assert!(entries
        .iter()
        .all(|e| e.pax.iter().all(|(k, _)| k != "atime" && k != "ctime")));
    for block in bytes.chunks(512).filter(|b| &b[257..263] == b"ustar\0") {
        assert_eq!(&block[265..297], &[0u8; 32], "uname must be empty");
        assert_eq!(&block[100..101], b"0", "mode field has no type bits");
    }

    let su = find(&entries, b"bin/su");
    assert_eq!((su.mode, su.mtime, su.kind), (0o4755, 1_650_000_000, b'0'));
    assert!(su.pax.is_empty(), "a plain file needs no PAX header");

    let dir = find(&entries, b"empty-dir/");
    assert_eq!((dir.kind, dir.size), (b'5', 0));
    assert_eq!(find(&entries, b"empty").size, 0);
    assert_eq!(find(&entries, b"fifo").kind, b'6');

    let link = find(&entries, b"lib/passwd-link");
    assert_eq!(
        (link.kind, link.link.as_slice()),
        (b'2', &b"../etc/passwd"[..])
    );
    // Hard links: the first name (in order) is the file.
    assert_eq!(find(&entries, b"lib/libc.so").kind, b'0');
    let hard = find(&entries, b"lib/libc.so.7");
    assert_eq!(
        (hard.kind, hard.link.as_slice(), hard.size),
        (b'1', &b"lib/libc.so"[..], 0)
    );

    let long = find(&entries, format!("long/{}", "n".repeat(200)).as_bytes());
    assert_eq!(
        long.pax.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
        ["path"]
    );
    let split = find(
        &entries,
        format!("{}/{}", "d".repeat(120), "f".repeat(60)).as_bytes(),
    );
    assert!(split.pax.is_empty(), "an ASCII path that splits fits ustar");

    let uni = find(&entries, format!("names/{UNICODE}").as_bytes());
    assert_eq!(
        uni.pax.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
        ["path"]
    );
    let bad = find(&entries, &[&b"names/"[..], NOT_UTF8].concat());
    assert_eq!(
        bad.pax.iter().map(|p| p.0.as_str()).collect::<Vec<_>>(),
        ["path"]
    );

    let passwd = find(&entries, b"etc/passwd");
    assert_eq!(
        passwd.pax,
        [(
            "SCHILY.xattr.user.jbuild.test".to_string(),
            b"\x00binary value".to_vec()
        )]
    );
    assert_eq!(passwd.uid, u64::from(nix::unistd::geteuid().as_raw()));
}

#[test]
fn mtimes_are_clamped_to_whole_seconds() {
    let t = tempfile::tempdir().unwrap();
    set_mtime(&write(t.path(), "new", b"n"), 2_000_000_000, 999);
    set_mtime(&write(t.path(), "old", b"o"), 1_000_000_000, 999_999_999);
    set_mtime(&write(t.path(), "ancient", b"a"), -5, 0);
    let entries = list(&tar_of(t.path(), &diff(None, t.path())));
    assert_eq!(find(&entries, b"new").mtime, CLAMP);
    assert_eq!(find(&entries, b"old").mtime, 1_000_000_000);
    assert_eq!(find(&entries, b"ancient").mtime, 0);
}

/// Parent and child with deletions, an opaque directory and additions.
fn whiteout_pair(t: &Path) -> (PathBuf, PathBuf) {
    let (parent, child) = (t.join("parent"), t.join("child"));
    write(&parent, "a/x", b"x");
    write(&parent, "a/y", b"y");
    write(&parent, "b/k", b"k");
    write(&parent, "c", b"c");
    write(&parent, "z", b"z");
    copy_tree(&parent, &child);
    fs::remove_file(child.join("a/x")).unwrap();
    write(&child, "a/w", b"w");
    fs::remove_file(child.join("b/k")).unwrap();
    write(&child, "b/n", b"n");
    fs::remove_file(child.join("z")).unwrap();
    write(&child, "c2", b"c2");
    (parent, child)
}

#[test]
fn whiteouts_come_before_their_siblings() {
    let t = tempfile::tempdir().unwrap();
    let (parent, child) = whiteout_pair(t.path());
    let changes = diff(Some(&parent), &child);
    let entries = list(&tar_of(&child, &changes));
    let names: Vec<String> = entries
        .iter()
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect();
    assert_eq!(
        names,
        [
            ".wh.z",
            "a/",
            "a/.wh.x",
            "a/w",
            "b/",
            "b/.wh..wh..opq",
            "b/n",
            "c2"
        ]
    );
    let wh = find(&entries, b"a/.wh.x");
    assert_eq!((wh.mode, wh.uid, wh.mtime, wh.size), (0, 0, CLAMP, 0));
}

#[test]
fn parents_of_changes_are_written_even_if_unchanged() {
    let t = tempfile::tempdir().unwrap();
    let (parent, child) = (t.path().join("p"), t.path().join("c"));
    write(&parent, "usr/local/etc/app.conf", b"one");
    copy_tree(&parent, &child);
    write(&child, "usr/local/etc/app.conf", b"two");
    let changes = diff(Some(&parent), &child);
    assert_eq!(summary(&changes), ["M usr/local/etc/app.conf"]);
    let names: Vec<Vec<u8>> = list(&tar_of(&child, &changes))
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(
        names,
        [
            &b"usr/"[..],
            b"usr/local/",
            b"usr/local/etc/",
            b"usr/local/etc/app.conf"
        ]
    );
}

#[test]
fn refuses_what_a_layer_cannot_say() {
    let t = tempfile::tempdir().unwrap();
    write(t.path(), ".wh.sneaky", b"");
    let err = write_tar(t.path(), &diff(None, t.path()), &OPTS, Vec::new()).unwrap_err();
    assert!(matches!(err, LayerError::Unrepresentable { .. }), "{err}");

    write(t.path(), "b", b"");
    let unsorted = [
        Change::new("b", ChangeKind::Added),
        Change::new("a", ChangeKind::Added),
    ];
    let err = write_tar(t.path(), &unsorted, &OPTS, Vec::new()).unwrap_err();
    assert!(matches!(err, LayerError::Order { .. }), "{err}");
}

#[test]
fn sockets_are_skipped() {
    let t = tempfile::tempdir().unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(t.path().join("sock")).unwrap();
    write(t.path(), "file", b"f");
    let names: Vec<Vec<u8>> = list(&tar_of(t.path(), &diff(None, t.path())))
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(names, [b"file"]);
}

fn run(cmd: &mut Command, input: &[u8]) -> (Vec<u8>, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.stdout,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn gnu_tar_gzip_and_zstd_read_the_layers() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    varied(&root);
    let changes = diff(None, &root);
    let tar_bytes = tar_of(&root, &changes);

    let (listing, warnings) = run(
        Command::new("tar")
            .args(["-tvf", "-"])
            .env("LC_ALL", "C.UTF-8"),
        &tar_bytes,
    );
    assert_eq!(warnings, "", "GNU tar warned");
    let listing = String::from_utf8_lossy(&listing);
    assert!(listing.contains(&format!("names/{UNICODE}")), "{listing}");
    assert!(
        listing.contains("lib/libc.so.7 link to lib/libc.so"),
        "{listing}"
    );
    assert!(listing.contains(&"n".repeat(200)), "{listing}");
    assert_eq!(listing.lines().count(), list(&tar_bytes).len());

    // Unpacked by GNU tar, the layer is the tree it was made of: modes
    // (setuid too), owners, mtimes, contents, links and the xattr.
    let out = t.path().join("gnu-extracted");
    fs::create_dir(&out).unwrap();
    let (_, warnings) = run(
        Command::new("tar")
            .args([
                "--xattrs",
                "--xattrs-include=*",
                "--same-owner",
                "-xpf",
                "-",
                "-C",
            ])
            .arg(&out)
            .env("LC_ALL", "C.UTF-8"),
        &tar_bytes,
    );
    assert_eq!(warnings, "", "GNU tar warned");
    assert_same_tree(&out, &root);

    for (c, tool) in [(Compression::Gzip, "gzip"), (Compression::Zstd, "zstd")] {
        let (layer, blob) = export(&root, &changes, &OPTS, c, Vec::new()).unwrap();
        let (plain, _) = run(Command::new(tool).args(["-d", "-c"]), &blob);
        assert_eq!(Digest::of(&plain), layer.diff_id, "{tool}");
        assert_eq!(plain, tar_bytes, "{tool}");
        assert_eq!(Digest::of(&blob), layer.digest);
    }
}

#[test]
fn zstd_output_does_not_depend_on_worker_count() {
    let t = tempfile::tempdir().unwrap();
    // ~20 MiB of compressible data: several zstd jobs.
    let mut seed = 0x2545_f491_4f6c_dd1d_u64;
    for i in 0..20 {
        let mut data = Vec::with_capacity(1 << 20);
        while data.len() < 1 << 20 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            data.extend_from_slice(
                format!("line {} of file {i}: {}\n", seed % 1000, seed % 7).as_bytes(),
            );
        }
        write(t.path(), format!("f{i:02}"), &data);
    }
    let changes = diff(None, t.path());
    let blobs: Vec<Vec<u8>> = [1, 2, 4]
        .iter()
        .map(|&w| {
            export_with_workers(t.path(), &changes, &OPTS, Compression::Zstd, w, Vec::new())
                .unwrap()
                .1
        })
        .collect();
    assert_eq!(blobs[0], blobs[1]);
    assert_eq!(blobs[0], blobs[2]);
}
