//! `PKG` over a package the image already has, through the `jbuild`
//! binary on Linux, as pkg(8) decides it (`pkg_jobs_need_upgrade`) and
//! does it (`pkg_add_upgrade`): an older version, asked for or a
//! dependency, is replaced by the repository's newer one (its files the
//! new one lacks removed, a configuration file the user changed kept with
//! the new one beside it as `.pkgnew`, one left as installed replaced, the
//! database's rows those of the new version, Lua scripts run with
//! `pkg_upgrade` true, `upgrade` messages shown); an installed version
//! newer than the repository's is kept, and said. The catalogue changes
//! between two builds; the tree is read after export, `local.sqlite` with
//! the `sqlite3` program, the upgrade step's layer with GNU tar.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::pkg::{last_layer_listing, serve, sqlite};
use crate::support::common::{export_unpacked, jbuild, ok, run};
use crate::support::limits::Server;
use crate::support::pkgrepo::image::{freebsd_tree, with};
use crate::support::pkgrepo::pkgfile::{file, Item};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing, TestPkg};

fn config(path: &str, content: &[u8]) -> Item {
    let Item::File {
        path,
        mode,
        uname,
        gname,
        content,
        flags,
        ..
    } = file(path, 0o644, content)
    else {
        unreachable!()
    };
    Item::File {
        path,
        mode,
        uname,
        gname,
        content,
        flags,
        config: true,
    }
}

/// libfoo at `version` (1 or 2): what each installs differs.
fn libfoo(version: &str) -> TestPkg {
    let v = version.as_bytes();
    let mut items = vec![
        file(&format!("/usr/local/lib/libfoo.so.{version}"), 0o644, v),
        config("/usr/local/etc/foo.conf", &[b"a = ", v, b"\n"].concat()),
        config("/usr/local/etc/bar.conf", &[b"b = ", v, b"\n"].concat()),
        file("/usr/local/share/foo/same", 0o644, &[b"same ", v].concat()),
    ];
    items.push(if version == "1" {
        file("/usr/local/share/foo/old", 0o644, b"old")
    } else {
        file("/usr/local/share/foo/new", 0o644, b"new")
    });
    with(
        "libfoo",
        version,
        &[],
        items,
        vec![
            (
                "lua_scripts",
                json!({"post-install": ["pkg.print_msg(\"libfoo upgrade=\" .. tostring(pkg_upgrade))"]}),
            ),
            (
                "messages",
                json!([
                    {"message": "libfoo installed", "type": "install"},
                    {"message": "libfoo upgraded", "type": "upgrade"}
                ]),
            ),
        ],
    )
}

/// (Re)writes the repository under `dir` with libfoo at `version`.
fn repo(dir: &Path, key: &Key, version: &str) {
    let _ = fs::remove_dir_all(dir);
    let packages = vec![
        with(
            "pkg",
            "2.1.2",
            &[],
            vec![file("/usr/local/sbin/pkg", 0o755, b"pkg")],
            vec![],
        ),
        libfoo(version),
        with(
            "app",
            "1",
            &["libfoo"],
            vec![file("/usr/local/bin/app", 0o755, b"app")],
            vec![],
        ),
    ];
    let mut spec = RepoSpec::new(Layout::DataPkg, packages);
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.write(dir);
}

struct Setup {
    _server: Server,
    root: PathBuf,
    repo: PathBuf,
    key: Key,
    t: PathBuf,
}

/// `old:1`: a base with libfoo-1 installed by a PKG step, its foo.conf
/// then changed by the recipe (bar.conf left as installed).
fn setup(t: &Path) -> Setup {
    let key = Key::new(t, "repo");
    let www = t.join("www");
    let repo_dir = www.join("repo");
    repo(&repo_dir, &key, "1");
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/repo", server.port);
    let base = t.join("base");
    freebsd_tree(&base.join("tree"), "amd64", &url, &key);
    fs::write(base.join("foo.conf"), "a = mine\n").unwrap();
    fs::write(
        base.join("Jailfile"),
        "FROM scratch\nCOPY tree/ /\nPKG libfoo\nCOPY foo.conf /usr/local/etc/foo.conf\n",
    )
    .unwrap();
    let root = t.join("root");
    ok(jbuild(&root)
        .args(["build", "-q", "-t", "old:1", "--platform", "freebsd/amd64"])
        .arg(&base));
    Setup {
        _server: server,
        root,
        repo: repo_dir,
        key,
        t: t.to_path_buf(),
    }
}

/// Builds `recipe` as `tag`: the step's output lines.
fn build(s: &Setup, tag: &str, recipe: &str) -> String {
    let dir = s.t.join(tag.replace(':', "-"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("Jailfile"), recipe).unwrap();
    let out = run(jbuild(&s.root)
        .args(["--json", "build", "-t", tag])
        .arg(&dir));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "output")
        .map(|e| e["line"].as_str().unwrap_or_default().to_string() + "\n")
        .collect()
}

#[test]
fn pkg_upgrades_an_installed_package_the_repository_has_newer() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    repo(&s.repo, &s.key, "2");
    let said = build(&s, "new:1", "FROM old:1\nPKG libfoo\n");
    assert!(said.contains("libfoo-1: upgrading to 2"), "{said}");
    assert!(said.contains("libfoo upgrade=true"), "{said}");
    assert!(said.contains("libfoo upgraded"), "{said}");
    assert!(!said.contains("libfoo installed"), "{said}");

    let (layout, rootfs) = export_unpacked(&s.root, "new:1", t.path());
    let etc = rootfs.join("usr/local/etc");
    // Changed by the recipe: kept, the new one beside it.
    assert_eq!(
        fs::read_to_string(etc.join("foo.conf")).unwrap(),
        "a = mine\n"
    );
    assert_eq!(
        fs::read_to_string(etc.join("foo.conf.pkgnew")).unwrap(),
        "a = 2\n"
    );
    // As installed: replaced.
    assert_eq!(fs::read_to_string(etc.join("bar.conf")).unwrap(), "b = 2\n");
    assert!(!etc.join("bar.conf.pkgnew").exists());
    let lib = rootfs.join("usr/local/lib");
    assert!(!lib.join("libfoo.so.1").exists());
    assert_eq!(fs::read(lib.join("libfoo.so.2")).unwrap(), b"2");
    let share = rootfs.join("usr/local/share/foo");
    assert!(!share.join("old").exists());
    assert_eq!(fs::read(share.join("new")).unwrap(), b"new");
    assert_eq!(fs::read(share.join("same")).unwrap(), b"same 2");

    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(
            &db,
            "SELECT name, version, automatic FROM packages ORDER BY name"
        ),
        "libfoo|2|0\npkg|2.1.2|0\n"
    );
    assert_eq!(
        sqlite(
            &db,
            "SELECT f.path FROM files f JOIN packages p ON p.id = f.package_id \
             WHERE p.name = 'libfoo' ORDER BY f.path"
        ),
        "/usr/local/etc/bar.conf\n/usr/local/etc/foo.conf\n/usr/local/lib/libfoo.so.2\n\
         /usr/local/share/foo/new\n/usr/local/share/foo/same\n"
    );
    assert_eq!(
        sqlite(&db, "SELECT path, content FROM config_files ORDER BY path"),
        "/usr/local/etc/bar.conf|b = 2\n\n/usr/local/etc/foo.conf|a = 2\n\n"
    );
    assert_eq!(sqlite(&db, "PRAGMA foreign_key_check"), "");
    assert_eq!(sqlite(&db, "PRAGMA integrity_check"), "ok\n");

    let listing = last_layer_listing(&layout);
    // A removed file is a whiteout; usr/local/lib lost every name it had
    // (libfoo.so.1 alone), which the layer says with an opaque marker.
    for wh in ["usr/local/lib/.wh..wh..opq", "usr/local/share/foo/.wh.old"] {
        assert!(
            listing.lines().any(|l| l.ends_with(&format!(" {wh}"))),
            "{wh}:\n{listing}"
        );
    }
    for there in [
        "usr/local/lib/libfoo.so.2",
        "usr/local/share/foo/new",
        "usr/local/etc/foo.conf.pkgnew",
        "var/db/pkg/local.sqlite",
    ] {
        assert!(
            listing.lines().any(|l| l.ends_with(&format!(" {there}"))),
            "{there}:\n{listing}"
        );
    }

    // The repository goes back to libfoo-1: the image's newer one is kept,
    // and said.
    repo(&s.repo, &s.key, "1");
    let said = build(&s, "back:1", "FROM new:1\nPKG libfoo\n");
    assert!(
        said.contains("libfoo-2 is installed, newer than the repository's 1"),
        "{said}"
    );
    assert!(!said.contains("upgrading"), "{said}");
}

#[test]
fn pkg_upgrades_an_installed_dependency_the_repository_has_newer() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    repo(&s.repo, &s.key, "2");
    let said = build(&s, "app:1", "FROM old:1\nPKG app\n");
    assert!(said.contains("libfoo-1: upgrading to 2"), "{said}");
    let (_, rootfs) = export_unpacked(&s.root, "app:1", t.path());
    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(
            &db,
            "SELECT name, version, automatic FROM packages ORDER BY name"
        ),
        "app|1|0\nlibfoo|2|0\npkg|2.1.2|0\n"
    );
    assert_eq!(
        sqlite(&db, "SELECT name, version FROM deps ORDER BY name"),
        "libfoo|2\n"
    );
    assert!(!rootfs.join("usr/local/lib/libfoo.so.1").exists());
    assert!(rootfs.join("usr/local/lib/libfoo.so.2").exists());
    assert!(rootfs.join("usr/local/bin/app").exists());
}
