//! What a package installs, through `jbuild build` on Linux: a package
//! with every entry type pkg installs, and a second `PKG` over a config
//! file the recipe put there (set aside as `.pkgsave`), read back from the image's layers by GNU tar
//! and `bsdtar` (types, modes, owners, link targets, file flags, mtimes)
//! and from the unpacked tree.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::support::common::{export_unpacked, jbuild, ok};
use crate::support::layer::bsdtar_mtree;
use crate::support::pkgrepo::entries::{packages, MTIME};
use crate::support::pkgrepo::image::UID;
use crate::support::pkgrepo::{Layout, RepoSpec, Signing};

use super::{amd64_base, layer_blobs, sqlite};

/// `program ARGS tar`'s standard output (it must succeed).
fn listing(program: &str, args: &[&str], tar: &Path) -> String {
    let out = Command::new(program)
        .args(args)
        .arg(tar)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// GNU tar's line for `path` (numeric owners).
fn gnu_line<'a>(list: &'a str, path: &str) -> &'a str {
    list.lines()
        .find(|l| {
            l.ends_with(&format!(" {path}"))
                || l.contains(&format!(" {path} -> "))
                || l.contains(&format!(" {path} link to "))
        })
        .unwrap_or_else(|| panic!("{path} not in\n{list}"))
}

#[test]
fn every_entry_type_reaches_the_layer_as_pkg_installs_it() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let outside = t.path().join("outside");
    let (_server, _key) = amd64_base(t.path(), &root, |dir, key| {
        let mut spec = RepoSpec::new(Layout::DataPkg, packages(&outside.display().to_string(), 1));
        spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
        spec.write(dir);
    });
    let app = t.path().join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(app.join("second.conf"), "changed by the recipe\n").unwrap();
    fs::write(
        app.join("Jailfile"),
        "FROM base:1\nPKG entries\nCOPY second.conf /usr/local/etc/second.conf\nPKG second\n",
    )
    .unwrap();
    ok(jbuild(&root)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .args(["build", "-q", "-t", "app:1"])
        .arg(&app));
    let (layout, rootfs) = export_unpacked(&root, "app:1", t.path());
    let layers = layer_blobs(&layout);
    assert_eq!(layers.len(), 4, "{layers:?}");

    // The `PKG entries` layer, by GNU tar.
    let gnu = listing("tar", &["--numeric-owner", "-tvf"], &layers[1]);
    let want = [
        ("usr/local/bin/app", "-rwxr-xr-x 0/0 "),
        ("usr/local/bin/app-su", "-rwsr-xr-x 0/0 "),
        ("usr/local/lib/libapp.so.1", "-r--r--r-- 0/0 "),
        ("usr/local/etc/app.conf", &format!("-rw-r----- 0/{UID} ")),
        ("var/db/app/state", &format!("-rw------- {UID}/{UID} ")),
        ("var/db/app/", &format!("drwxr-x--- {UID}/{UID} ")),
        ("usr/local/share/app/", "drwxr-xr-x 0/0 "),
        // A symlink's own mode is the host's (Linux has no lchmod): only
        // its type and owner are checked.
        ("usr/local/bin/app-link", "lrwx"),
    ];
    for (path, head) in want {
        let line = gnu_line(&gnu, path);
        assert!(line.starts_with(head), "{path}: {line}");
    }
    assert!(gnu_line(&gnu, "usr/local/bin/app-link").ends_with(" -> app"));
    assert!(gnu_line(&gnu, "usr/local/etc/ssl-cert.pem").ends_with(" -> /etc/ssl/cert.pem"));
    // One of the two names is a hard link to the other.
    let linked = gnu.lines().any(|l| {
        l.ends_with("usr/local/bin/app-again link to usr/local/bin/app")
            || l.ends_with("usr/local/bin/app link to usr/local/bin/app-again")
    });
    assert!(linked, "{gnu}");

    // The same layer, by bsdtar: flags, modes, owners, link targets, times.
    let m = bsdtar_mtree(&layers[1], "!all,type,mode,uid,gid,flags,link,time");
    let key = |path: &str, k: &str| {
        m.get(path)
            .unwrap_or_else(|| panic!("{path} not in {m:?}"))
            .get(k)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(key("usr/local/lib/libapp.so.1", "flags"), "schg");
    assert_eq!(key("usr/local/bin/app", "flags"), "");
    assert_eq!(key("usr/local/bin/app-su", "mode"), "4755");
    assert_eq!(key("var/db/app/state", "uid"), UID.to_string());
    assert_eq!(key("var/db/app/state", "gid"), UID.to_string());
    assert_eq!(key("usr/local/etc/app.conf", "gid"), UID.to_string());
    assert_eq!(key("var/db/app", "type"), "dir");
    assert_eq!(key("var/db/app", "mode"), "750");
    assert_eq!(key("usr/local/bin/app-link", "type"), "link");
    assert_eq!(key("usr/local/bin/app-link", "link"), "app");
    // The package says 0755; on Linux the layer says the host's 0777
    // (docs/packages.md, "A symlink's mode").
    assert_eq!(key("usr/local/bin/app-link", "mode"), "777");
    assert_eq!(key("usr/local/bin/app", "time"), format!("{MTIME}.0"));

    // The second PKG, a fresh install, set the recipe's config file aside
    // and installed the package's (pkg's `.pkgsave`, as its own
    // `config_fileexist_notinpkg` test expects).
    let last = listing("tar", &["--numeric-owner", "-tvf"], &layers[3]);
    gnu_line(&last, "usr/local/etc/second.conf.pkgsave");
    gnu_line(&last, "usr/local/etc/second.conf");
    let etc = rootfs.join("usr/local/etc");
    assert_eq!(
        fs::read_to_string(etc.join("second.conf")).unwrap(),
        "from the package\n"
    );
    assert_eq!(
        fs::read_to_string(etc.join("second.conf.pkgsave")).unwrap(),
        "changed by the recipe\n"
    );
    assert!(!etc.join("second.conf.pkgnew").exists());
    assert_eq!(
        fs::read_to_string(etc.join("app.conf")).unwrap(),
        "listen = 80\n"
    );
    assert!(!etc.join("app.conf.pkgnew").exists());
    let db = rootfs.join("var/db/pkg/local.sqlite");
    assert_eq!(
        sqlite(&db, "SELECT name FROM packages ORDER BY name"),
        "entries\npkg\nsecond\n"
    );
    assert!(!outside.exists());
    // pkg info -a and pkg check -s/-d, with pkg's own statements.
    let info = sqlite(&db, super::pkgcheck::INFO);
    let rows: Vec<Vec<&str>> = info.lines().map(|l| l.split('|').collect()).collect();
    assert_eq!(rows.len(), 3, "{info}");
    assert_eq!(
        &rows[0][1..],
        [
            "test/entries",
            "entries",
            "1.0",
            "entries for tests",
            "FreeBSD:14:amd64",
            "0",
            "0",
            "1700000000",
            "0"
        ]
    );
    // Every file of every package (app, its hard link, the symlinks, the
    // setuid file, the flagged one, app.conf, state, second.conf, pkg's)
    // has the sum recorded, and second.conf now the package's.
    let checked = super::pkgcheck::pkg_check(&db, &rootfs, &[]);
    assert_eq!(checked, 10);
}
