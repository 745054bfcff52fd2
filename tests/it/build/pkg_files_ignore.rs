//! pkg.conf's `FILES_IGNORE_GLOB` and `FILES_IGNORE_REGEX` through the
//! `jbuild` binary on Linux: from the image's `/usr/local/etc/pkg.conf`
//! (keys without case, as pkg reads them), then `[pkg]
//! files_ignore_glob` in jbuild's configuration in place of the image's
//! glob list (as pkg's environment replaces its file's). A matching file
//! is neither in the tree nor in `local.sqlite`'s `files`; the step's key
//! follows the configuration.
#![cfg(target_os = "linux")]

use std::fs;
use std::path::Path;

use super::pkg::{said, serve, sqlite};
use crate::support::common::{export_unpacked, jbuild, ok, run};
use crate::support::pkgrepo::image::{freebsd_tree, with};
use crate::support::pkgrepo::pkgfile::file;
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};

const FILES: [&str; 4] = [
    "/usr/local/bin/docs",
    "/usr/local/lib/libdocs.a",
    "/usr/local/lib/libdocs.so.1",
    "/usr/local/share/doc/docs/README",
];

/// Builds `dir` as `tag` with the configuration file `config`: the
/// files of `docs` in the image's tree, and in its database.
fn build(root: &Path, dir: &Path, tag: &str, config: &Path, t: &Path) -> (Vec<String>, String) {
    let out = run(jbuild(root)
        .env("JBUILD_CONFIG", config)
        .args(["--json", "build", "-t", tag])
        .arg(dir));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said(&stdout).contains("docs-1: installed"), "{stdout}");
    let (_, rootfs) = export_unpacked(root, tag, t);
    let tree = FILES
        .iter()
        .filter(|f| rootfs.join(&f[1..]).exists())
        .map(|f| f.to_string())
        .collect();
    let db = sqlite(
        &rootfs.join("var/db/pkg/local.sqlite"),
        "SELECT path FROM files ORDER BY path",
    );
    (tree, db)
}

#[test]
fn pkg_leaves_out_the_files_pkg_conf_says_to_ignore() {
    let t = tempfile::tempdir().unwrap();
    let t = t.path();
    let key = Key::new(t, "repo");
    let www = t.join("www");
    let items = FILES.iter().map(|f| file(f, 0o644, f.as_bytes())).collect();
    let mut spec = RepoSpec::new(Layout::DataPkg, vec![with("docs", "1", &[], items, vec![])]);
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.write(&www.join("repo"));
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/repo", server.port);
    let base = t.join("base");
    let tree = base.join("tree");
    freebsd_tree(&tree, "amd64", &url, &key);
    fs::create_dir_all(tree.join("usr/local/etc")).unwrap();
    fs::write(
        tree.join("usr/local/etc/pkg.conf"),
        "files_ignore_glob: [ \"/usr/local/share/doc/*\" ]\nFILES_IGNORE_REGEX = [ \"\\\\.a$\" ];\n",
    )
    .unwrap();
    fs::write(base.join("Jailfile"), "FROM scratch\nCOPY tree/ /\n").unwrap();
    let root = t.join("root");
    let none = t.join("none.toml");
    fs::write(&none, "").unwrap();
    ok(jbuild(&root)
        .env("JBUILD_CONFIG", &none)
        .args(["build", "-q", "-t", "base:1", "--platform", "freebsd/amd64"])
        .arg(&base));
    let app = t.join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(
        app.join("Jailfile"),
        "FROM base:1\nPKG --no-bootstrap docs\n",
    )
    .unwrap();

    let (tree, db) = build(&root, &app, "app:1", &none, t);
    assert_eq!(tree, [FILES[0], FILES[2]]);
    assert_eq!(db, format!("{}\n{}\n", FILES[0], FILES[2]));

    // jbuild's configuration names its own globs: the image's give way,
    // its regex stays; the step is built again, not taken from the cache.
    let config = t.join("config.toml");
    fs::write(
        &config,
        "[pkg]\nfiles_ignore_glob = [\"/usr/local/bin/*\"]\n",
    )
    .unwrap();
    let (tree, db) = build(&root, &app, "app:2", &config, t);
    assert_eq!(tree, [FILES[2], FILES[3]]);
    assert_eq!(db, format!("{}\n{}\n", FILES[2], FILES[3]));
}
