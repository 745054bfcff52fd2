//! pkg's `.pkgsave` through the `jbuild` binary on Linux: a package
//! installed (not upgraded) over files the image already has that no
//! package owns — put there by a `COPY` — sets each aside as
//! `<path>.pkgsave` and installs its own in place, a `@config` file too
//! (pkg's `config_fileexist_notinpkg` case: `attempt_to_merge` marks it
//! `MERGE_NOT_LOCAL`, `backup_file_if_needed` renames it); a file that
//! already has the package's content is left as it is, with no
//! `.pkgsave`. Read from the exported tree.
#![cfg(target_os = "linux")]

use std::fs;

use super::pkg::{said, serve};
use crate::support::common::{export_unpacked, jbuild, run};
use crate::support::pkgrepo::image::{freebsd_tree, with};
use crate::support::pkgrepo::pkgfile::{config, file};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};

#[test]
fn pkg_sets_aside_what_no_package_owned_as_pkgsave_on_a_fresh_install() {
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    let key = Key::new(t, "repo");
    let www = t.join("www");
    let items = vec![
        config("/usr/local/etc/cfg.conf", 0o644, "wheel", b"package\n"),
        file("/usr/local/bin/cfg", 0o755, b"new tool"),
        file("/usr/local/share/cfg/same", 0o644, b"same\n"),
    ];
    let mut spec = RepoSpec::new(Layout::DataPkg, vec![with("cfg", "1", &[], items, vec![])]);
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.write(&www.join("repo"));
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/repo", server.port);
    let app = t.join("app");
    freebsd_tree(&app.join("tree"), "amd64", &url, &key);
    let mine = app.join("mine");
    for (path, content) in [
        ("usr/local/etc/cfg.conf", "mine\n"),
        ("usr/local/bin/cfg", "old tool"),
        ("usr/local/share/cfg/same", "same\n"),
    ] {
        fs::create_dir_all(mine.join(path).parent().unwrap()).unwrap();
        fs::write(mine.join(path), content).unwrap();
    }
    fs::write(
        app.join("Jailfile"),
        "FROM scratch\nCOPY tree/ /\nCOPY mine/ /\nPKG --no-bootstrap cfg\n",
    )
    .unwrap();
    let root = t.join("root");
    let out = run(jbuild(&root)
        .args([
            "--json",
            "build",
            "-t",
            "app:1",
            "--platform",
            "freebsd/amd64",
        ])
        .arg(&app));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said(&stdout).contains("cfg-1: installed"), "{stdout}");
    let (_, rootfs) = export_unpacked(&root, "app:1", t);
    let read = |p: &str| fs::read_to_string(rootfs.join(p)).ok();
    assert_eq!(read("usr/local/etc/cfg.conf").as_deref(), Some("package\n"));
    assert_eq!(
        read("usr/local/etc/cfg.conf.pkgsave").as_deref(),
        Some("mine\n")
    );
    assert_eq!(read("usr/local/etc/cfg.conf.pkgnew"), None);
    assert_eq!(read("usr/local/bin/cfg").as_deref(), Some("new tool"));
    assert_eq!(
        read("usr/local/bin/cfg.pkgsave").as_deref(),
        Some("old tool")
    );
    assert_eq!(read("usr/local/share/cfg/same").as_deref(), Some("same\n"));
    assert_eq!(read("usr/local/share/cfg/same.pkgsave"), None);
}
