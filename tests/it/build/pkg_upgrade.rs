//! `PKG` over a package the image already has, through the `jbuild`
//! binary on Linux, as pkg(8) decides it (`pkg_jobs_need_upgrade`) and
//! does it (`pkg_add_upgrade`): an older version, asked for or a
//! dependency, is replaced by the repository's newer one (its files the
//! new one lacks removed, a configuration file the user changed kept with
//! the new one beside it as `.pkgnew`, one left as installed replaced, the
//! database's rows those of the new version, Lua scripts run with
//! `pkg_upgrade` true, `upgrade` messages shown, the old version's
//! pre-deinstall Lua script run, a configuration file changed on other
//! lines than the new version's merged); an installed version newer than
//! the repository's is kept, and said; the same version is reinstalled
//! when its options differ, and an old version's pre-deinstall shell
//! script runs with `PKG_UPGRADE=true`. The catalogue changes
//! between two builds; the tree is read after export, `local.sqlite` with
//! the `sqlite3` program, the upgrade step's layer with GNU tar.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::pkg::{build_json, last_layer_listing, said, serve, sqlite};
use crate::support::common::{export_unpacked, jbuild, ok};
use crate::support::limits::Server;
use crate::support::pkgrepo::image::{freebsd_tree, with};
use crate::support::pkgrepo::pkgfile::{config, file};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing, TestPkg};

/// merge.conf as libfoo-1 installs it, as the recipe changes it (its
/// first line), and as libfoo-2 has it (its last line).
const MERGE_1: &str = "one = 1\ntwo = 2\nthree = 3\n";
const MERGE_MINE: &str = "one = mine\ntwo = 2\nthree = 3\n";
const MERGE_2: &str = "one = 1\ntwo = 2\nthree = 33\n";

/// libfoo at `version` (1 or 2): what each installs differs; its
/// options are `SSL: on`.
fn libfoo(version: &str) -> TestPkg {
    let v = version.as_bytes();
    let mut items = vec![
        file(&format!("/usr/local/lib/libfoo.so.{version}"), 0o644, v),
        config(
            "/usr/local/etc/foo.conf",
            0o644,
            "wheel",
            &[b"a = ", v, b"\n"].concat(),
        ),
        config(
            "/usr/local/etc/bar.conf",
            0o644,
            "wheel",
            &[b"b = ", v, b"\n"].concat(),
        ),
        config(
            "/usr/local/etc/merge.conf",
            0o644,
            "wheel",
            if version == "1" { MERGE_1 } else { MERGE_2 }.as_bytes(),
        ),
        file("/usr/local/share/foo/same", 0o644, &[b"same ", v].concat()),
    ];
    items.push(if version == "1" {
        file("/usr/local/share/foo/old", 0o644, b"old")
    } else {
        file("/usr/local/share/foo/new", 0o644, b"new")
    });
    // Each version says which it is from every Lua script it has; the
    // pre-deinstall one also whether its library is still there.
    let deinstall = format!(
        "pkg.print_msg(\"libfoo {version} pre-deinstall upgrade=\" .. tostring(pkg_upgrade) \
         .. \" lib=\" .. tostring(pkg.stat(pkg.prefixed_path(\"lib/libfoo.so.{version}\")) ~= nil))"
    );
    let mut p = with(
        "libfoo",
        version,
        &[],
        items,
        vec![
            (
                "lua_scripts",
                json!({
                    "post-install": ["pkg.print_msg(\"libfoo upgrade=\" .. tostring(pkg_upgrade))"],
                    "pre-deinstall": [deinstall],
                    "post-deinstall": [format!("pkg.print_msg(\"libfoo {version} post-deinstall\")")],
                }),
            ),
            (
                "messages",
                json!([
                    {"message": "libfoo installed", "type": "install"},
                    {"message": "libfoo upgraded", "type": "upgrade"}
                ]),
            ),
        ],
    );
    p.compact_extra = vec![("options".into(), json!({"SSL": "on"}))];
    p
}

/// `tool` at `version`, with a pre-deinstall shell script.
fn tool(version: &str) -> TestPkg {
    with(
        "tool",
        version,
        &[],
        vec![file("/usr/local/bin/tool", 0o755, version.as_bytes())],
        vec![(
            "scripts",
            json!({"pre-deinstall": "echo bye upgrade=${PKG_UPGRADE}"}),
        )],
    )
}

/// (Re)writes the repository under `dir`: `pkg`, `app` (depending on
/// libfoo) and `packages`.
fn repo(dir: &Path, key: &Key, packages: Vec<TestPkg>) {
    let _ = fs::remove_dir_all(dir);
    let mut all = vec![
        with(
            "pkg",
            "2.1.2",
            &[],
            vec![file("/usr/local/sbin/pkg", 0o755, b"pkg")],
            vec![],
        ),
        with(
            "app",
            "1",
            &["libfoo"],
            vec![file("/usr/local/bin/app", 0o755, b"app")],
            vec![],
        ),
    ];
    all.extend(packages);
    let mut spec = RepoSpec::new(Layout::DataPkg, all);
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
/// then changed by the recipe, merge.conf's first line too (bar.conf left
/// as installed).
fn setup(t: &Path) -> Setup {
    let key = Key::new(t, "repo");
    let www = t.join("www");
    let repo_dir = www.join("repo");
    repo(&repo_dir, &key, vec![libfoo("1"), tool("1")]);
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/repo", server.port);
    let base = t.join("base");
    freebsd_tree(&base.join("tree"), "amd64", &url, &key);
    fs::write(base.join("foo.conf"), "a = mine\n").unwrap();
    fs::write(base.join("merge.conf"), MERGE_MINE).unwrap();
    fs::write(
        base.join("Jailfile"),
        "FROM scratch\nCOPY tree/ /\nPKG libfoo\nCOPY foo.conf /usr/local/etc/foo.conf\n\
         COPY merge.conf /usr/local/etc/merge.conf\n",
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

/// Writes `recipe` in a directory of its own.
fn recipe(s: &Setup, tag: &str, recipe: &str) -> PathBuf {
    let dir = s.t.join(tag.replace(':', "-"));
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("Jailfile"), recipe).unwrap();
    dir
}

/// Builds `recipe` as `tag`: the steps' output lines.
fn build(s: &Setup, tag: &str, text: &str) -> String {
    said(&build_json(&s.root, &recipe(s, tag, text), tag))
}

/// `old:1`, then the repository at libfoo-2 and `recipe` built as
/// `tag`, which upgrades libfoo: the setup and what the build said.
fn upgraded(t: &Path, tag: &str, text: &str) -> (Setup, String) {
    let s = setup(t);
    repo(&s.repo, &s.key, vec![libfoo("2"), tool("1")]);
    let said = build(&s, tag, text);
    assert!(said.contains("libfoo-1: upgrading to 2"), "{said}");
    (s, said)
}

#[test]
fn pkg_upgrades_an_installed_package_the_repository_has_newer() {
    let t = tempfile::tempdir().unwrap();
    let (s, said) = upgraded(t.path(), "new:1", "FROM old:1\nPKG libfoo\n");
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
        "/usr/local/etc/bar.conf\n/usr/local/etc/foo.conf\n/usr/local/etc/merge.conf\n\
         /usr/local/lib/libfoo.so.2\n/usr/local/share/foo/new\n/usr/local/share/foo/same\n"
    );
    assert_eq!(
        sqlite(&db, "SELECT path, content FROM config_files ORDER BY path"),
        format!(
            "/usr/local/etc/bar.conf|b = 2\n\n/usr/local/etc/foo.conf|a = 2\n\n\
             /usr/local/etc/merge.conf|{MERGE_2}\n"
        )
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
    repo(&s.repo, &s.key, vec![libfoo("1")]);
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
    let (s, _) = upgraded(t.path(), "app:1", "FROM old:1\nPKG app\n");
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

#[test]
fn pkg_upgrade_runs_the_old_versions_pre_deinstall_lua_script() {
    let t = tempfile::tempdir().unwrap();
    let (_, said) = upgraded(t.path(), "new:1", "FROM old:1\nPKG libfoo\n");
    // From the database, with pkg_upgrade true, while the old files are
    // there; pkg runs no post-deinstall script on an upgrade, nor the new
    // version's deinstall ones.
    assert!(
        said.contains("libfoo-1: libfoo 1 pre-deinstall upgrade=true lib=true"),
        "{said}"
    );
    assert!(!said.contains("post-deinstall"), "{said}");
    assert!(!said.contains("libfoo 2 pre-deinstall"), "{said}");
}

#[test]
fn pkg_upgrade_merges_a_config_file_changed_on_other_lines_than_the_new_versions() {
    let t = tempfile::tempdir().unwrap();
    let (s, said) = upgraded(t.path(), "new:1", "FROM old:1\nPKG libfoo\n");
    let (_, rootfs) = export_unpacked(&s.root, "new:1", t.path());
    let etc = rootfs.join("usr/local/etc");
    // The recipe's first line and libfoo-2's last, in the file.
    assert_eq!(
        fs::read_to_string(etc.join("merge.conf")).unwrap(),
        "one = mine\ntwo = 2\nthree = 33\n"
    );
    assert!(!etc.join("merge.conf.pkgnew").exists());
    // foo.conf's one line changed on both sides: no merge, said as pkg.
    assert_eq!(
        fs::read_to_string(etc.join("foo.conf")).unwrap(),
        "a = mine\n"
    );
    assert!(
        said.contains("Impossible to merge configuration file: /usr/local/etc/foo.conf"),
        "{said}"
    );
    assert!(!said.contains("configuration file: /usr/local/etc/merge.conf"));
}

#[test]
fn pkg_reinstalls_the_same_version_when_what_pkg_compares_differs() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    // libfoo-1 again, built with other options: pkg reinstalls it.
    let mut again = libfoo("1");
    again.compact_extra = vec![
        ("options".into(), json!({"SSL": "off"})),
        ("digest".into(), json!("2$2$otheroptions")),
    ];
    repo(&s.repo, &s.key, vec![again, tool("1")]);
    let said = build(&s, "re:1", "FROM old:1\nPKG libfoo\n");
    assert!(
        said.contains("libfoo-1: reinstalling (option changed: SSL (on -> off))"),
        "{said}"
    );
    assert!(
        said.contains("libfoo-1: libfoo 1 pre-deinstall upgrade=true"),
        "{said}"
    );
    assert!(said.contains("libfoo-1: installed ("), "{said}");
    let (_, rootfs) = export_unpacked(&s.root, "re:1", t.path());
    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(
            &db,
            "SELECT p.name, p.version, p.manifestdigest, o.option, po.value FROM packages p \
             JOIN pkg_option po ON po.package_id = p.id JOIN option o \
             ON o.option_id = po.option_id WHERE p.name = 'libfoo'"
        ),
        "libfoo|1|2$2$otheroptions|SSL|off\n"
    );
    assert_eq!(sqlite(&db, "PRAGMA foreign_key_check"), "");
    // The user's changes stay (the package's own content is unchanged).
    let etc = rootfs.join("usr/local/etc");
    assert_eq!(
        fs::read_to_string(etc.join("merge.conf")).unwrap(),
        MERGE_MINE
    );
    assert!(!etc.join("merge.conf.pkgnew").exists());
    assert!(rootfs.join("usr/local/lib/libfoo.so.1").exists());

    // The same catalogue again: the digests are equal, nothing to do.
    let said = build(&s, "re:2", "FROM re:1\nPKG libfoo\n");
    assert!(
        said.contains("libfoo-1 is installed already: kept"),
        "{said}"
    );
    assert!(!said.contains("reinstalling"), "{said}");
}

#[test]
fn pkg_runs_the_pre_deinstall_shell_script_of_the_version_it_replaces() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    build(&s, "tool:1", "FROM old:1\nPKG tool\n");
    repo(&s.repo, &s.key, vec![libfoo("1"), tool("2")]);
    let said = build(&s, "tool:2", "FROM tool:1\nPKG tool\n");
    // pkg_add_cleanup_old: the old version's script, with PKG_UPGRADE.
    assert!(said.contains("tool-1: bye upgrade=true"), "{said}");
    let (_, rootfs) = export_unpacked(&s.root, "tool:2", t.path());
    assert_eq!(fs::read(rootfs.join("usr/local/bin/tool")).unwrap(), b"2");
}

#[test]
fn pkg_sets_aside_the_base_systems_libraries_when_it_compares_required_ones() {
    let t = tempfile::tempdir().unwrap();
    let s = setup(t.path());
    // libfoo-1 again, now requiring a library of the base system (in
    // /lib, put there by a COPY): pkg keeps it; requiring one the base
    // lacks, pkg reinstalls it.
    let again = |lib: &str, digest: &str| {
        let mut p = libfoo("1");
        p.compact_extra = vec![
            ("options".into(), json!({"SSL": "on"})),
            ("shlibs_required".into(), json!([lib])),
            ("digest".into(), json!(digest)),
        ];
        p
    };
    repo(
        &s.repo,
        &s.key,
        vec![again("libbase.so.1", "2$2$base"), tool("1")],
    );
    let dir = recipe(
        &s,
        "base:1",
        "FROM old:1\nCOPY libbase.so.1 /lib/libbase.so.1\nPKG libfoo\n",
    );
    fs::write(dir.join("libbase.so.1"), b"ELF").unwrap();
    let said = said(&build_json(&s.root, &dir, "base:1"));
    assert!(
        said.contains("libfoo-1 is installed already: kept"),
        "{said}"
    );
    assert!(!said.contains("reinstalling"), "{said}");
    repo(
        &s.repo,
        &s.key,
        vec![again("libnotbase.so.1", "2$2$notbase"), tool("1")],
    );
    let said = super::pkg::said(&build_json(&s.root, &dir, "base:2"));
    assert!(
        said.contains(
            "libfoo-1: reinstalling (required shared library changed: libnotbase.so.1 (added))"
        ),
        "{said}"
    );
}
