//! The applier against crafted, hostile tar streams. Every test runs in an
//! arena: the root, and beside it a sentinel directory and file that must
//! come out untouched whatever the layer says.

use crate::support::layer as layer_support;

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::lane::{self, Lane};
use jbuild::digest::Digest;
use jbuild::layer::{apply, ApplyOptions, ApplyStats, EntryProblem, LayerError, MEDIA_TYPE_TAR};
use layer_support::*;

struct Arena {
    _t: tempfile::TempDir,
    top: PathBuf,
    root: PathBuf,
    sentinel: PathBuf,
    before: Vec<(PathBuf, Vec<u8>)>,
}

impl Arena {
    fn new() -> Arena {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().to_path_buf();
        let root = mkdir(&top, "root");
        let sentinel = mkdir(&top, "sentinel");
        write(&sentinel, "keep", b"precious");
        write(&top, "outside", b"outside");
        let mut a = Arena {
            _t: t,
            top,
            root,
            sentinel,
            before: Vec::new(),
        };
        a.before = a.outside_state();
        a
    }

    /// Every path outside the root, with its content.
    fn outside_state(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.top.clone()];
        while let Some(dir) = stack.pop() {
            for e in fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p == self.root {
                    continue;
                }
                let m = fs::symlink_metadata(&p).unwrap();
                if m.is_dir() {
                    stack.push(p.clone());
                }
                let content = if m.is_file() {
                    fs::read(&p).unwrap()
                } else {
                    Vec::new()
                };
                out.push((p, content));
            }
        }
        out.sort();
        out
    }

    fn apply_with(&self, tar: &[u8], opts: &ApplyOptions) -> Result<ApplyStats, LayerError> {
        let r = apply(tar, MEDIA_TYPE_TAR, &self.root, opts);
        assert_eq!(
            self.outside_state(),
            self.before,
            "something outside the root changed"
        );
        r
    }

    fn apply(&self, tar: &[u8]) -> Result<ApplyStats, LayerError> {
        self.apply_with(
            tar,
            &ApplyOptions {
                allow_devices: false,
                allow_setuid: false,
                same_owner: false,
                start_writeback: false,
                diff_id: true,
            },
        )
    }
}

fn problem(r: Result<ApplyStats, LayerError>) -> EntryProblem {
    match r {
        Err(LayerError::Entry { problem, .. }) => problem,
        other => panic!("expected an entry error, got {other:?}"),
    }
}

#[test]
fn dot_dot_escape_is_refused() {
    let a = Arena::new();
    let tar = RawTar::default().file(b"../escape", b"x").finish();
    let err = a.apply(&tar).unwrap_err();
    assert!(err.to_string().contains("`../escape`"), "{err}");
    assert!(matches!(problem(Err(err)), EntryProblem::Escapes));
    let tar = RawTar::default().file(b"a/../../escape", b"x").finish();
    assert!(matches!(problem(a.apply(&tar)), EntryProblem::Escapes));
}

#[test]
fn absolute_path_is_refused() {
    let a = Arena::new();
    let tar = RawTar::default().file(b"/etc/x", b"x").finish();
    assert!(matches!(problem(a.apply(&tar)), EntryProblem::Absolute));
}

#[test]
fn symlinked_directories_resolve_inside_the_root() {
    // Symlinks of lower layers are followed as the jail would see them.
    let a = Arena::new();
    symlink("/etc", a.root.join("evil")).unwrap();
    symlink(&a.sentinel, a.root.join("evil2")).unwrap();
    symlink("../sentinel", a.root.join("evil3")).unwrap();
    let tar = RawTar::default()
        .file(b"evil/passwd", b"owned")
        .file(b"evil2/keep", b"owned")
        .file(b"evil3/keep", b"owned")
        .finish();
    a.apply(&tar).unwrap();
    assert_eq!(fs::read(a.root.join("etc/passwd")).unwrap(), b"owned");
    let inside = a
        .root
        .join(a.sentinel.strip_prefix("/").unwrap())
        .join("keep");
    assert_eq!(fs::read(inside).unwrap(), b"owned");
    assert_eq!(fs::read(a.root.join("sentinel/keep")).unwrap(), b"owned");
}

#[test]
fn writing_through_a_symlink_of_the_same_layer_is_refused() {
    let a = Arena::new();
    let abs = a.sentinel.as_os_str().as_encoded_bytes().to_vec();
    for tar in [
        RawTar::default()
            .symlink(b"evil", &abs)
            .file(b"evil/keep", b"owned"),
        RawTar::default()
            .symlink(b"evil", b"../sentinel")
            .dir(b"evil/sub/"),
        RawTar::default()
            .symlink(b"l1", b"l2")
            .symlink(b"l2", &abs)
            .file(b"l1/keep", b"owned"),
        RawTar::default()
            .symlink(b"evil", &abs)
            .file(b"evil/.wh.keep", b""),
    ] {
        let err = a.apply(&tar.finish()).unwrap_err();
        assert!(
            err.to_string().contains("a symlink this same layer"),
            "{err}"
        );
        assert!(matches!(problem(Err(err)), EntryProblem::ThroughSymlink(_)));
    }
}

#[test]
fn a_directory_this_layer_filled_is_not_replaced_by_a_symlink_out() {
    // `p/d/` gets its mode at the end: were `p` a symlink out by then, the
    // mode would land outside. Replacing `p` is refused (and `finish` checks).
    let mut a = Arena::new();
    mkdir(&a.sentinel, "d");
    a.before = a.outside_state();
    let abs = a.sentinel.as_os_str().as_encoded_bytes().to_vec();
    let tar = RawTar::default()
        .entry(RawEntry {
            name: b"p/d/",
            typeflag: b'5',
            mode: 0o777,
            ..Default::default()
        })
        .symlink(b"p", &abs)
        .finish();
    let err = a.apply(&tar).unwrap_err();
    assert!(matches!(problem(Err(err)), EntryProblem::ReplacesOwn));
    let mode = fs::metadata(a.sentinel.join("d")).unwrap().mode() & 0o7777;
    assert_ne!(mode, 0o777, "the mode was set outside the root");
}

#[test]
fn duplicate_entries_are_refused_but_directories_merge() {
    let a = Arena::new();
    for tar in [
        RawTar::default().file(b"f", b"1").file(b"./f", b"2"),
        RawTar::default().file(b"f", b"1").symlink(b"f", b"/etc"),
        RawTar::default().dir(b"d/").file(b"d", b"x"),
        RawTar::default().file(b"f", b"1").hard_link(b"f", b"f"),
    ] {
        let err = a.apply(&tar.finish()).unwrap_err();
        assert!(err.to_string().contains("appears twice"), "{err}");
    }
    a.apply(&RawTar::default().dir(b"d/").dir(b"./d/").finish())
        .unwrap();
}

#[test]
fn an_entry_replaces_a_symlink_instead_of_writing_through_it() {
    let a = Arena::new();
    symlink(a.sentinel.join("keep"), a.root.join("link")).unwrap();
    a.apply(&RawTar::default().file(b"link", b"new").finish())
        .unwrap();
    assert!(fs::symlink_metadata(a.root.join("link")).unwrap().is_file());
}

#[test]
fn hard_links_out_of_the_root_are_refused() {
    let a = Arena::new();
    let tar = RawTar::default().hard_link(b"h", b"../../outside").finish();
    assert!(matches!(
        problem(a.apply(&tar)),
        EntryProblem::LinkEscapes(_)
    ));
    let tar = RawTar::default().hard_link(b"h", b"/outside").finish();
    assert!(matches!(
        problem(a.apply(&tar)),
        EntryProblem::LinkEscapes(_)
    ));
    // Through a symlink of this layer: refused.
    let abs = a.top.as_os_str().as_encoded_bytes().to_vec();
    let tar = RawTar::default()
        .symlink(b"up", &abs)
        .hard_link(b"h", b"up/outside")
        .finish();
    assert!(matches!(
        problem(a.apply(&tar)),
        EntryProblem::ThroughSymlink(_)
    ));
    // Through a lower layer's: resolved inside the root, where there is nothing.
    fs::remove_file(a.root.join("up")).unwrap();
    symlink(&a.top, a.root.join("up")).unwrap();
    let tar = RawTar::default().hard_link(b"h", b"up/outside").finish();
    assert!(matches!(
        problem(a.apply(&tar)),
        EntryProblem::LinkMissing(_)
    ));
    fs::remove_file(a.root.join("up")).unwrap();
    let tar = RawTar::default().dir(b"d/").hard_link(b"h", b"d").finish();
    assert!(matches!(problem(a.apply(&tar)), EntryProblem::LinkToDir(_)));
}

#[test]
fn hard_links_inside_the_root_work() {
    let a = Arena::new();
    let tar = RawTar::default()
        .file(b"f", b"data")
        .hard_link(b"sub/g", b"./f")
        .finish();
    a.apply(&tar).unwrap();
    let (f, g) = (
        fs::metadata(a.root.join("f")).unwrap(),
        fs::metadata(a.root.join("sub/g")).unwrap(),
    );
    assert_eq!((f.ino(), f.nlink()), (g.ino(), 2));
}

#[test]
fn whiteouts_cannot_escape() {
    let a = Arena::new();
    for name in [&b".wh..."[..], b"sub/.wh...", b".wh..", b".wh."] {
        let tar = RawTar::default().file(name, b"").finish();
        assert!(
            matches!(problem(a.apply(&tar)), EntryProblem::BadWhiteout),
            "{}",
            String::from_utf8_lossy(name)
        );
    }
    let tar = RawTar::default().file(b"../.wh.outside", b"").finish();
    assert!(matches!(problem(a.apply(&tar)), EntryProblem::Escapes));
    // Through lower layers' symlinks, whiteouts and opaque markers act
    // inside the root.
    symlink(&a.top, a.root.join("up")).unwrap();
    symlink("..", a.root.join("up2")).unwrap();
    let tar = RawTar::default()
        .file(b"up/.wh.sentinel", b"")
        .file(b"up/sentinel/.wh..wh..opq", b"")
        .file(b"up2/.wh.outside", b"")
        .finish();
    a.apply(&tar).unwrap();
    // A whiteout name is no directory.
    let tar = RawTar::default().file(b".wh.d/f", b"").finish();
    assert!(matches!(problem(a.apply(&tar)), EntryProblem::WhiteoutDir));
}

#[test]
fn devices_need_permission() {
    let a = Arena::new();
    let dev = |t| {
        RawTar::default()
            .entry(RawEntry {
                name: b"null",
                typeflag: t,
                devmajor: 1,
                devminor: 3,
                ..Default::default()
            })
            .finish()
    };
    assert!(matches!(problem(a.apply(&dev(b'3'))), EntryProblem::Device));
    assert!(matches!(problem(a.apply(&dev(b'4'))), EntryProblem::Device));
    assert!(!a.root.join("null").exists());
    // A FIFO is not a device.
    a.apply(
        &RawTar::default()
            .entry(RawEntry {
                name: b"fifo",
                typeflag: b'6',
                ..Default::default()
            })
            .finish(),
    )
    .unwrap();
    if lane::need(Lane::Root) {
        let opts = ApplyOptions {
            allow_devices: true,
            allow_setuid: false,
            same_owner: true,
            start_writeback: false,
            diff_id: true,
        };
        a.apply_with(&dev(b'3'), &opts).unwrap();
        assert_eq!(
            fs::symlink_metadata(a.root.join("null")).unwrap().rdev(),
            jbuild::diff::meta::make_dev(1, 3)
        );
    }
}

#[test]
fn setuid_needs_permission() {
    let a = Arena::new();
    let su = |mode| {
        RawTar::default()
            .entry(RawEntry {
                name: b"su",
                mode,
                content: b"x",
                ..Default::default()
            })
            .finish()
    };
    let err = a.apply(&su(0o4755)).unwrap_err();
    assert!(err.to_string().contains("setuid"), "{err}");
    assert!(matches!(
        problem(a.apply(&su(0o2755))),
        EntryProblem::Setuid(_)
    ));
    assert!(!a.root.join("su").exists());
    let opts = ApplyOptions {
        allow_devices: false,
        allow_setuid: true,
        same_owner: false,
        start_writeback: false,
        diff_id: true,
    };
    a.apply_with(&su(0o4755), &opts).unwrap();
    assert_eq!(
        fs::metadata(a.root.join("su")).unwrap().mode() & 0o7777,
        0o4755
    );
    // setgid on a directory only picks the group of new files.
    a.apply(
        &RawTar::default()
            .entry(RawEntry {
                name: b"shared/",
                typeflag: b'5',
                mode: 0o2775,
                ..Default::default()
            })
            .finish(),
    )
    .unwrap();
}

#[test]
fn truncated_streams_are_errors() {
    let a = Arena::new();
    let full = RawTar::default()
        .file(b"big", &vec![7u8; 5000])
        .file(b"next", b"n")
        .finish();
    for cut in [0, 100, 512, 3000, 512 * 11, full.len() - 1024] {
        let r = a.apply(&full[..cut]);
        assert!(
            matches!(r, Err(LayerError::Truncated(_))),
            "cut at {cut}: {r:?}"
        );
    }
    assert!(a.apply(&full).is_ok());
}

#[test]
fn bad_checksum_is_an_error() {
    let a = Arena::new();
    let mut tar = RawTar::default()
        .file(b"ok", b"1")
        .file(b"tampered", b"2")
        .finish();
    tar[1024] ^= 0x01;
    assert!(matches!(
        a.apply(&tar),
        Err(LayerError::Malformed { offset: 1024, .. })
    ));
}

#[test]
fn oversized_extended_headers_are_refused_without_reading_them() {
    let a = Arena::new();
    let mut h = RawTar::header(&RawEntry {
        name: b"PaxHeaders/x",
        typeflag: b'x',
        ..Default::default()
    });
    h[124..136].copy_from_slice(b"77777777777\0");
    h[148..156].fill(b' ');
    let sum: u64 = h.iter().map(|&c| c as u64).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    assert!(matches!(a.apply(&h), Err(LayerError::Malformed { .. })));
}

#[test]
fn a_file_replaces_a_directory_and_a_directory_merges() {
    let a = Arena::new();
    write(&a.root, "x/deep/file", b"lower");
    write(&a.root, "d/lower", b"lower");
    let tar = RawTar::default()
        .file(b"x", b"now a file")
        .dir(b"d/")
        .file(b"d/upper", b"u")
        .finish();
    a.apply(&tar).unwrap();
    assert_eq!(fs::read(a.root.join("x")).unwrap(), b"now a file");
    assert!(a.root.join("d/lower").exists() && a.root.join("d/upper").exists());
}

#[test]
fn whiteouts_and_opaque_markers_spare_this_layers_own_entries() {
    let a = Arena::new();
    write(&a.root, "d/old", b"lower");
    write(&a.root, "d/sub/old", b"lower");
    write(&a.root, "e/gone", b"lower");
    let tar = RawTar::default()
        .file(b"d/new", b"upper")
        .file(b"d/sub/new", b"upper")
        .file(b"d/.wh.new", b"")
        .file(b"d/.wh..wh..opq", b"")
        .file(b"e/.wh.gone", b"")
        .file(b"e/.wh..wh.plnk", b"")
        .file(b"f/sub/new", b"upper")
        .file(b"f/.wh.sub", b"")
        .finish();
    write(&a.root, "f/sub/old", b"lower");
    a.apply(&tar).unwrap();
    let mut left: Vec<String> = scan(&a.root)
        .keys()
        .map(|p| p.display().to_string())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "d",
            "d/new",
            "d/sub",
            "d/sub/new",
            "e",
            "f",
            "f/sub",
            "f/sub/new"
        ]
    );
}

#[test]
fn long_names_from_gnu_and_pax_headers_and_symlink_loops() {
    let a = Arena::new();
    let long = format!("{}/{}", "p".repeat(150), "q".repeat(150));
    let tar = RawTar::default()
        .gnu_long_name(long.as_bytes())
        .file(b"truncated-gnu-name", b"gnu")
        .pax(&[
            ("path", "pax-\u{fc}-name".as_bytes()),
            ("mtime", b"1234567890.5"),
            ("SCHILY.xattr.user.k", b"v\nv"),
        ])
        .file(b"ustar-name", b"pax")
        .finish();
    a.apply(&tar).unwrap();
    assert_eq!(fs::read(a.root.join(&long)).unwrap(), b"gnu");
    let p = a.root.join("pax-\u{fc}-name");
    assert_eq!(fs::read(&p).unwrap(), b"pax");
    assert_eq!(fs::metadata(&p).unwrap().mtime(), 1_234_567_890);
    assert_eq!(xattr::get(&p, "user.k").unwrap().unwrap(), b"v\nv");

    symlink("l2", a.root.join("l1")).unwrap();
    symlink("l1", a.root.join("l2")).unwrap();
    let tar = RawTar::default().file(b"l1/x", b"x").finish();
    assert!(matches!(problem(a.apply(&tar)), EntryProblem::Fs(_)));
    let tar = RawTar::default()
        .pax(&[("path", b"nul\0byte")])
        .file(b"x", b"")
        .finish();
    assert!(a.apply(&tar).is_err());
}

/// A layer applied without hashing (`diff_id` off: the release bootstrap,
/// whose sets are checked by their own sha256) gives the same tree, and no
/// diff ID rather than a wrong one.
#[test]
fn a_layer_applied_without_its_diff_id_gives_the_same_tree_and_none() {
    let tar = RawTar::default()
        .file(b"etc/motd", b"hello")
        .file(b"bin/sh", b"#!")
        .finish();
    let (a, b) = (Arena::new(), Arena::new());
    let off = ApplyOptions {
        diff_id: false,
        same_owner: false,
        ..ApplyOptions::default()
    };
    let hashed = a
        .apply_with(
            &tar,
            &ApplyOptions {
                same_owner: false,
                ..ApplyOptions::default()
            },
        )
        .unwrap();
    let unhashed = b.apply_with(&tar, &off).unwrap();
    assert_eq!(hashed.diff_id, Some(Digest::of(&tar)));
    assert_eq!(unhashed.diff_id, None);
    assert_eq!(
        (unhashed.entries, unhashed.bytes),
        (hashed.entries, hashed.bytes)
    );
    for f in ["etc/motd", "bin/sh"] {
        assert_eq!(
            fs::read(a.root.join(f)).unwrap(),
            fs::read(b.root.join(f)).unwrap()
        );
    }
}

#[test]
fn archives_from_gnu_tar_apply_and_hash_whole() {
    let a = Arena::new();
    let src = mkdir(&a.top, "src");
    write(
        &src,
        format!("{}/{}", "l".repeat(120), "m".repeat(120)),
        b"long",
    );
    write(&src, "plain", b"plain");
    for format in ["gnu", "posix"] {
        let out = a.top.join(format!("{format}.tar"));
        let st = Command::new("tar")
            .args(["--format", format, "-cf"])
            .arg(&out)
            .arg("-C")
            .arg(&src)
            .arg(".")
            .status()
            .unwrap();
        assert!(st.success());
        let bytes = fs::read(&out).unwrap();
        fs::remove_file(&out).unwrap();
        let stats = apply(
            &bytes[..],
            MEDIA_TYPE_TAR,
            &a.root,
            &ApplyOptions::default(),
        )
        .unwrap();
        // GNU tar pads to 10 KiB records: the diff ID covers the padding.
        assert_eq!(stats.diff_id, Some(Digest::of(&bytes)), "{format}");
        assert_eq!(
            fs::read(
                a.root
                    .join(format!("{}/{}", "l".repeat(120), "m".repeat(120)))
            )
            .unwrap(),
            b"long"
        );
    }
}

#[test]
fn unknown_media_types_are_refused() {
    let a = Arena::new();
    let r = apply(
        &b""[..],
        "application/vnd.oci.image.layer.v1.tar+lz4",
        &a.root,
        &ApplyOptions::default(),
    );
    assert!(matches!(r, Err(LayerError::MediaType(_))));
    let r = apply(
        &b""[..],
        MEDIA_TYPE_TAR,
        Path::new("/nonexistent-root"),
        &ApplyOptions::default(),
    );
    assert!(matches!(r, Err(LayerError::Fs { .. })));
}

#[test]
fn limits_stop_a_layer_before_it_costs_more() {
    use jbuild::layer::{apply_with_limits, Limits};
    let a = Arena::new();
    let opts = ApplyOptions {
        allow_devices: false,
        allow_setuid: false,
        same_owner: false,
        start_writeback: false,
        diff_id: true,
    };
    let limits = Limits {
        max_size: 64 << 10,
        max_entries: 3,
        max_header: 512,
        max_path: 16,
    };
    let try_with = |tar: &[u8]| apply_with_limits(tar, MEDIA_TYPE_TAR, &a.root, &opts, &limits);
    // The header says 100 KiB; what follows is cut short, so only the
    // declared size can be what stops it.
    let mut tar = RawTar::default().file(b"big", &vec![1u8; 100 << 10]).bytes;
    tar.truncate(4096);
    let err = try_with(&tar).unwrap_err();
    assert!(
        matches!(problem(Err(err)), EntryProblem::TooLarge { .. }),
        "a declared size past the limit is refused before it is written"
    );
    assert!(!a.root.join("big").exists());
    // Trailing bytes count too: the whole stream is capped.
    let mut tar = RawTar::default().file(b"f", b"x").finish();
    tar.extend(vec![0u8; 100 << 10]);
    let err = try_with(&tar).unwrap_err();
    assert!(
        matches!(
            err,
            LayerError::Limit {
                key: "max_size",
                ..
            }
        ),
        "{err}"
    );
    let mut many = RawTar::default();
    for i in 0..4 {
        many = many.file(format!(".wh.x{i}").as_bytes(), b"");
    }
    let err = try_with(&many.finish()).unwrap_err();
    assert!(
        matches!(
            err,
            LayerError::Limit {
                key: "max_entries",
                ..
            }
        ),
        "{err}"
    );
    let tar = RawTar::default()
        .file(b"a-very-long-name-indeed", b"")
        .finish();
    assert!(matches!(
        problem(try_with(&tar)),
        EntryProblem::PathTooLong { len: 23, max: 16 }
    ));
    let tar = RawTar::default()
        .pax(&[("comment", &[b'c'; 600])])
        .file(b"f", b"")
        .finish();
    assert!(matches!(try_with(&tar), Err(LayerError::Malformed { .. })));
    // Exactly at the limits is fine.
    let exact = RawTar::default().file(b"sixteen-bytes-ok", b"").finish();
    try_with(&exact).unwrap();
}
