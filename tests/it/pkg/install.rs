//! Installing packages into a root through the library, as pkg 2.x
//! extracts them: packages written by the tests' own writer
//! (`tests/support/pkgrepo/pkgfile.rs`), served over `file://`, resolved,
//! fetched and installed into a temporary root whose accounts name users
//! the host does not have; the tree is checked entry by entry.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use jbuild::blame::Blame;
use jbuild::fsutil::flags::FileFlags;
use jbuild::layer::{fflags, write_tar_with_flags, Limits, TarOptions};
use jbuild::pkg::extract::{install, ExtractError, Installed, NoHooks, Options, PackageFile};
use jbuild::pkg::fetch::{fetch_all, Cache};
use jbuild::pkg::resolve::resolve;
use jbuild::transport::http::Http;
use serde_json::json;

use super::catalogue::load;
use crate::support::layer as layer_support;
use crate::support::pkgrepo::entries::every_entry_items;
use crate::support::pkgrepo::pkgfile::{self, file, owned, raw, Item, Packing, Raw};
use crate::support::pkgrepo::{conf, pkg, Layout, RepoSpec, SumStyle, TestPkg};
use crate::support::tar;

/// A user and group the host does not have, with numbers of their own.
const USER: &str = "jbpkgd";
const UID: u32 = 4711;
const GID: u32 = 4712;
const MTIME: u64 = 1_700_000_000;

/// File flags kept in a table, as FreeBSD keeps them on the inode: what
/// the installer sets through the seam, and what the layer writer reads.
#[derive(Debug, Default)]
struct Recorded(Mutex<BTreeMap<PathBuf, u32>>);

impl FileFlags for Recorded {
    fn get(&self, path: &Path, _seen: u32) -> io::Result<u32> {
        Ok(self.0.lock().unwrap().get(path).copied().unwrap_or(0))
    }
    fn set(&self, path: &Path, flags: u32) -> io::Result<()> {
        self.0.lock().unwrap().insert(path.to_path_buf(), flags);
        Ok(())
    }
}

/// An image root with its own accounts.
fn image_root(t: &Path) -> PathBuf {
    let root = t.join("root");
    fs::create_dir_all(root.join("etc")).unwrap();
    fs::write(
        root.join("etc/master.passwd"),
        format!(
            "root:*:0:0::0:0:Charlie &:/root:/bin/sh\n\
             {USER}:*:{UID}:{GID}::0:0:a daemon:/nonexistent:/usr/sbin/nologin\n"
        ),
    )
    .unwrap();
    fs::write(
        root.join("etc/group"),
        format!("wheel:*:0:root\n{USER}:*:{GID}:\n"),
    )
    .unwrap();
    root
}

/// A package with every entry type pkg installs.
fn every_entry_type(sums: SumStyle, packing: Packing, objects: bool) -> pkgfile::Contents {
    pkgfile::Contents {
        items: every_entry_items(USER),
        packing,
        objects,
        sums,
        mtime: MTIME,
        ..pkgfile::Contents::default()
    }
}

fn with(name: &str, deps: &[&str], contents: pkgfile::Contents) -> TestPkg {
    let mut p = pkg(name, "1.0", deps);
    p.contents = Some(contents);
    p
}

/// Serves `packages` over file://, resolves `request`, fetches and
/// installs the closure into `root`.
fn install_from_repo(
    t: &Path,
    root: &Path,
    packages: Vec<TestPkg>,
    sums: SumStyle,
    request: &str,
    opts: &Options,
    flags: &dyn FileFlags,
) -> Result<Vec<Installed>, ExtractError> {
    let dir = t.join("repo");
    let mut spec = RepoSpec::new(Layout::DataPkg, packages);
    spec.sums = sums;
    spec.write(&dir);
    let repos = [load(&conf("test", &dir, ""), t).unwrap()];
    let closure = resolve(&repos, &[request.to_string()]).unwrap();
    let fetched = fetch_all(&closure, &Cache::new(t.join("cache")), &Http::default(), 2).unwrap();
    let files: Vec<PackageFile> = fetched.iter().map(PackageFile::from).collect();
    install(root, &files, &BTreeMap::new(), opts, flags, &mut NoHooks)
}

fn meta(p: &Path) -> fs::Metadata {
    fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn every_entry_type_installs_with_the_images_owners_modes_links_and_flags() {
    need!(Root);
    let t = tempfile::tempdir().unwrap();
    let root = image_root(t.path());
    let flags = Recorded::default();
    let opts = Options {
        clamp_mtime: Some(MTIME - 100),
        ..Options::default()
    };
    let installed = install_from_repo(
        t.path(),
        &root,
        vec![
            with(
                "app",
                &["dep"],
                every_entry_type(SumStyle::Blake2b, Packing::Zstd, true),
            ),
            pkg("dep", "2.0", &[]),
        ],
        SumStyle::Blake2b,
        "app",
        &opts,
        &flags,
    )
    .unwrap();
    let names: Vec<_> = installed.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["dep", "app"], "dependencies first");
    let app = &installed[1];
    assert!(app.warnings.is_empty(), "{:?}", app.warnings);
    assert_eq!(
        fs::read_to_string(root.join("usr/local/share/dep/file")).unwrap(),
        "hi\n"
    );
    // A regular file: content, mode, owner root, mtime clamped.
    let bin = meta(&root.join("usr/local/bin/app"));
    assert_eq!(bin.mode() & 0o7777, 0o755);
    assert_eq!((bin.uid(), bin.gid()), (0, 0));
    assert_eq!(bin.mtime(), (MTIME - 100) as i64);
    // Owned by a name the host lacks: the image's numbers, not 1001/1002
    // (the tar's) nor root.
    let state = meta(&root.join("var/db/app/state"));
    assert_eq!((state.uid(), state.gid()), (UID, GID));
    assert_eq!(state.mode() & 0o7777, 0o600);
    let dir = meta(&root.join("var/db/app"));
    assert!(dir.is_dir());
    assert_eq!(
        (dir.uid(), dir.gid(), dir.mode() & 0o7777),
        (UID, GID, 0o750)
    );
    let conf = meta(&root.join("usr/local/etc/app.conf"));
    assert_eq!(
        (conf.uid(), conf.gid(), conf.mode() & 0o7777),
        (0, GID, 0o640)
    );
    // Hard link: one inode; symlinks as written, an absolute one kept.
    assert_eq!(meta(&root.join("usr/local/bin/app-again")).ino(), bin.ino());
    assert_eq!(
        fs::read_link(root.join("usr/local/bin/app-link")).unwrap(),
        Path::new("app")
    );
    assert_eq!(
        fs::read_link(root.join("usr/local/etc/ssl-cert.pem")).unwrap(),
        Path::new("/etc/ssl/cert.pem")
    );
    // setuid kept.
    assert_eq!(
        meta(&root.join("usr/local/bin/app-su"))
            .permissions()
            .mode()
            & 0o7777,
        0o4755
    );
    // Flags: set through the seam, reported, and written into the layer.
    let lib = root.join("usr/local/lib/libapp.so.1");
    assert_eq!(flags.get(&lib, 0).unwrap(), fflags::SF_IMMUTABLE);
    assert_eq!(
        app.flags,
        BTreeMap::from([(
            "/usr/local/lib/libapp.so.1".to_string(),
            fflags::SF_IMMUTABLE
        )])
    );
    let changes = layer_support::diff(None, &root);
    let layer = write_tar_with_flags(
        &root,
        &changes,
        &TarOptions { clamp_mtime: MTIME },
        &flags,
        Vec::new(),
    )
    .unwrap();
    let entries = tar::list(&layer);
    let lib_entry = entries
        .iter()
        .find(|e| e.path == b"usr/local/lib/libapp.so.1")
        .expect("the library is in the layer");
    assert!(
        lib_entry
            .pax
            .iter()
            .any(|(k, v)| k == "SCHILY.fflags" && v == b"schg"),
        "{:?}",
        lib_entry.pax
    );
    let state_entry = entries
        .iter()
        .find(|e| e.path == b"var/db/app/state")
        .unwrap();
    assert_eq!((state_entry.uid, state_entry.gid), (UID as u64, GID as u64));
    // The config file's content, for the database.
    assert_eq!(app.config.len(), 1);
    assert_eq!(app.config[0].path, "/usr/local/etc/app.conf");
    assert_eq!(app.config[0].content, b"listen = 80\n");
    assert!(!app.config[0].pkgnew);
}

#[test]
fn each_packing_and_manifest_form_installs() {
    need!(Root);
    for (packing, objects, sums) in [
        (Packing::Xz, false, SumStyle::Sha256Hex),
        (Packing::Gzip, true, SumStyle::Sha256Hex),
        (Packing::Zstd, false, SumStyle::Blake2b),
    ] {
        let t = tempfile::tempdir().unwrap();
        let root = image_root(t.path());
        let opts = Options::default();
        let got = install_from_repo(
            t.path(),
            &root,
            vec![with("app", &[], every_entry_type(sums, packing, objects))],
            sums,
            "app",
            &opts,
            &Recorded::default(),
        )
        .unwrap_or_else(|e| panic!("{packing:?} {objects} {sums:?}: {e}"));
        assert_eq!(got[0].name, "app");
        assert_eq!(
            fs::read(root.join("usr/local/bin/app-again")).unwrap(),
            b"#!/bin/sh\necho app\n"
        );
        // The owner's name from the tar header alone (pkg up to 2.3 has
        // no owners in its manifest): still the image's numbers.
        let state = meta(&root.join("var/db/app/state"));
        assert_eq!(
            (state.uid(), state.gid()),
            (UID, GID),
            "{packing:?} {objects}"
        );
    }
}

/// Installs one package file made from `contents` straight into `root`.
fn install_one(
    t: &Path,
    root: &Path,
    name: &str,
    contents: &pkgfile::Contents,
    opts: &Options,
) -> Result<Vec<Installed>, ExtractError> {
    let path = t.join(format!("{name}.pkg"));
    pkgfile::write(
        &path,
        &json!({"name": name, "origin": format!("test/{name}"), "version": "1.0",
                "prefix": "/usr/local", "abi": "FreeBSD:14:amd64"}),
        contents,
    );
    install(
        root,
        &[PackageFile {
            label: format!("{name}-1.0"),
            path,
        }],
        &BTreeMap::new(),
        opts,
        &Recorded::default(),
        &mut NoHooks,
    )
}

fn unowned() -> Options {
    Options {
        same_owner: false,
        ..Options::default()
    }
}

#[test]
fn a_locally_changed_config_file_stays_and_the_packages_goes_beside_it() {
    let t = tempfile::tempdir().unwrap();
    let root = image_root(t.path());
    fs::create_dir_all(root.join("usr/local/etc")).unwrap();
    fs::write(root.join("usr/local/etc/app.conf"), "listen = 8080\n").unwrap();
    fs::write(root.join("usr/local/etc/same.conf"), "same\n").unwrap();
    let conf = |path: &str, content: &[u8]| Item::File {
        path: path.into(),
        mode: 0o644,
        uname: "root".into(),
        gname: "wheel".into(),
        content: content.to_vec(),
        flags: None,
        config: true,
    };
    let contents = pkgfile::Contents {
        items: vec![
            conf("/usr/local/etc/app.conf", b"listen = 80\n"),
            conf("/usr/local/etc/same.conf", b"same\n"),
            conf("/usr/local/etc/new.conf", b"new\n"),
        ],
        ..pkgfile::Contents::default()
    };
    // An upgrade of `app` (on a fresh install the image's files would be
    // set aside as `.pkgsave`: `build::pkg_save`).
    let opts = Options {
        upgrading: ["app".to_string()].into(),
        ..unowned()
    };
    let got = install_one(t.path(), &root, "app", &contents, &opts).unwrap();
    let etc = root.join("usr/local/etc");
    assert_eq!(
        fs::read_to_string(etc.join("app.conf")).unwrap(),
        "listen = 8080\n"
    );
    assert_eq!(
        fs::read_to_string(etc.join("app.conf.pkgnew")).unwrap(),
        "listen = 80\n"
    );
    assert_eq!(fs::read_to_string(etc.join("same.conf")).unwrap(), "same\n");
    assert!(!etc.join("same.conf.pkgnew").exists());
    assert_eq!(fs::read_to_string(etc.join("new.conf")).unwrap(), "new\n");
    let pkgnew: Vec<_> = got[0]
        .config
        .iter()
        .map(|c| (c.path.as_str(), c.pkgnew))
        .collect();
    assert_eq!(
        pkgnew,
        [
            ("/usr/local/etc/app.conf", true),
            ("/usr/local/etc/same.conf", false),
            ("/usr/local/etc/new.conf", false)
        ]
    );
}

#[test]
fn content_that_does_not_match_the_manifest_is_refused() {
    for sums in [SumStyle::Sha256Hex, SumStyle::Blake2b] {
        let t = tempfile::tempdir().unwrap();
        let root = image_root(t.path());
        let contents = pkgfile::Contents {
            items: vec![file("/usr/local/bin/app", 0o755, b"real\n")],
            wrong_sum: Some("/usr/local/bin/app".into()),
            sums,
            ..pkgfile::Contents::default()
        };
        let e = install_one(t.path(), &root, "app", &contents, &unowned()).unwrap_err();
        assert!(matches!(e, ExtractError::Content { .. }), "{e:?}");
        assert!(e.is_user_error());
        let text = e.to_string();
        assert!(
            text.contains("app-1.0") && text.contains("/usr/local/bin/app"),
            "{text}"
        );
    }
}

#[test]
fn a_path_two_packages_install_is_refused_naming_both_before_anything_is_written() {
    let t = tempfile::tempdir().unwrap();
    let root = image_root(t.path());
    let one = |name: &str| {
        with(
            name,
            &[],
            pkgfile::Contents {
                items: vec![
                    file(&format!("/usr/local/share/{name}"), 0o644, b"x\n"),
                    file("/usr/local/bin/tool", 0o755, name.as_bytes()),
                ],
                ..pkgfile::Contents::default()
            },
        )
    };
    let mut top = pkg("top", "1", &["left", "right"]);
    top.contents = Some(pkgfile::Contents {
        items: vec![file("/usr/local/share/top", 0o644, b"top\n")],
        ..pkgfile::Contents::default()
    });
    let e = install_from_repo(
        t.path(),
        &root,
        vec![top, one("left"), one("right")],
        SumStyle::Sha256Hex,
        "top",
        &unowned(),
        &Recorded::default(),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ExtractError::Conflict { .. }), "{e:?}");
    assert!(
        text.contains("/usr/local/bin/tool")
            && text.contains("left-1.0")
            && text.contains("right-1.0"),
        "{text}"
    );
    assert!(!root.join("usr").exists(), "nothing was written");
    // And a package already in the image owning the path.
    let t = tempfile::tempdir().unwrap();
    let root = image_root(t.path());
    let path = t.path().join("left.pkg");
    pkgfile::write(
        &path,
        &json!({"name": "left", "origin": "test/left", "version": "1.0", "prefix": "/usr/local"}),
        &pkgfile::Contents {
            items: vec![file("/usr/local/bin/tool", 0o755, b"x")],
            ..pkgfile::Contents::default()
        },
    );
    let owned = BTreeMap::from([("/usr/local/bin/tool".to_string(), "old-2".to_string())]);
    let e = install(
        &root,
        &[PackageFile {
            label: "left-1.0".into(),
            path,
        }],
        &owned,
        &unowned(),
        &Recorded::default(),
        &mut NoHooks,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("old-2") && e.to_string().contains("left-1.0"),
        "{e}"
    );
}

#[test]
fn a_name_the_image_lacks_is_roots_with_one_warning_a_package() {
    need!(Root);
    let t = tempfile::tempdir().unwrap();
    let root = image_root(t.path());
    let contents = pkgfile::Contents {
        items: vec![
            owned("/usr/local/bin/x", 0o755, "nosuchuser", USER, b"x"),
            owned("/usr/local/bin/y", 0o755, "nosuchuser", USER, b"y"),
        ],
        ..pkgfile::Contents::default()
    };
    let got = install_one(t.path(), &root, "x", &contents, &Options::default()).unwrap();
    let m = meta(&root.join("usr/local/bin/x"));
    assert_eq!((m.uid(), m.gid()), (0, GID));
    // One warning for the package, not one a file.
    assert_eq!(got[0].warnings.len(), 1, "{:?}", got[0].warnings);
    assert!(
        got[0].warnings[0].contains("user `nosuchuser` (2 entries, the first `/usr/local/bin/x`)"),
        "{:?}",
        got[0].warnings
    );
}

/// What a hostile package holds, the limits, and what its refusal says.
type Case = (&'static str, Vec<Item>, Vec<Raw>, Limits, &'static str);

#[test]
fn hostile_packages_are_refused_as_hostile_layers_are() {
    let t = tempfile::tempdir().unwrap();
    let outside = t.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let cases: Vec<Case> = vec![
        (
            "a path out of the root",
            vec![],
            vec![raw("/../../outside/escaped", b'0', "", b"x")],
            Limits::default(),
            "is not an absolute path inside the root",
        ),
        (
            "a symlink out, then a file through it",
            vec![Item::Symlink {
                path: "/usr/local/evil".into(),
                target: outside.display().to_string(),
            }],
            vec![raw("/usr/local/evil/written", b'0', "", b"x")],
            Limits::default(),
            "a symlink this same layer created",
        ),
        (
            "a hard link out of the root",
            vec![],
            vec![raw(
                "/usr/local/passwd",
                b'1',
                "/../../../../etc/passwd",
                b"",
            )],
            Limits::default(),
            "which is outside the root",
        ),
        (
            "a device",
            vec![],
            vec![raw("/usr/local/disk", b'3', "", b"")],
            Limits::default(),
            "is a device node",
        ),
        (
            "a file the manifest does not list",
            vec![],
            vec![Raw {
                unlisted: true,
                ..raw("/usr/local/bin/extra", b'0', "", b"x")
            }],
            Limits::default(),
            "not in its manifest",
        ),
        (
            "more bytes than allowed (a bomb)",
            vec![file("/usr/local/zeros", 0o644, &vec![0u8; 4 << 20])],
            vec![],
            Limits {
                max_size: 1 << 20,
                ..Limits::default()
            },
            "more than the 1 MiB",
        ),
    ];
    for (what, items, raws, limits, expect) in cases {
        let t = tempfile::tempdir().unwrap();
        let root = image_root(t.path());
        let contents = pkgfile::Contents {
            items,
            raw: raws,
            ..pkgfile::Contents::default()
        };
        let opts = Options {
            same_owner: false,
            limits,
            ..Options::default()
        };
        let e = install_one(t.path(), &root, "evil", &contents, &opts).unwrap_err();
        assert!(
            matches!(
                e,
                ExtractError::Hostile { .. }
                    | ExtractError::NotInManifest { .. }
                    | ExtractError::BadManifest { .. }
            ),
            "{what}: {e:?}"
        );
        assert!(e.is_user_error(), "{what}: {e:?}");
        let chain = jbuild::report::error_chain(&e);
        assert!(
            chain.contains("evil-1.0") && chain.contains(expect),
            "{what}: {chain}"
        );
        assert!(
            fs::read_dir(&outside).unwrap().next().is_none(),
            "{what}: something was written outside the root"
        );
    }
}

#[test]
fn a_package_file_that_is_not_what_its_catalogue_says_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let root = image_root(t.path());
    let path = t.path().join("p.pkg");
    pkgfile::write(
        &path,
        &json!({"name": "evil", "origin": "test/evil", "version": "6.6", "prefix": "/usr/local"}),
        &pkgfile::Contents {
            items: vec![file("/usr/local/bin/sudo", 0o4755, b"x")],
            ..pkgfile::Contents::default()
        },
    );
    let e = install(
        &root,
        &[PackageFile {
            label: "nice-1.0".into(),
            path,
        }],
        &BTreeMap::new(),
        &unowned(),
        &Recorded::default(),
        &mut NoHooks,
    )
    .unwrap_err();
    assert!(e.is_user_error());
    let text = e.to_string();
    assert!(
        text.contains("nice-1.0") && text.contains("evil-6.6"),
        "{text}"
    );
    assert!(!root.join("usr").exists());
}
