//! Every catalogue generation pkg still serves, through `jbuild build`:
//! `data.pkg` (JSON, pkg 2.x) and `packagesite.pkg`, `packagesite.tzst`
//! and `packagesite.txz` (one compact manifest a line), tar compressed
//! with zstd or xz, package checksums as SHA-256 hex and pkg 2.8's `2$`
//! BLAKE2b-512 (in the catalogue and the package's manifest).

use std::fs;

use crate::support::common::{jbuild, ok};
use crate::support::pkgrepo::image::{freebsd_tree, packages};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing, SumStyle};

use super::{serve, sqlite};

#[test]
fn each_catalogue_generation_and_checksum_form_builds() {
    let cases = [
        ("data.pkg", Layout::DataPkg, SumStyle::Sha256Hex),
        ("data.pkg", Layout::DataPkg, SumStyle::Blake2b),
        ("packagesite.pkg", Layout::PackagesitePkg, SumStyle::Blake2b),
        (
            "packagesite.tzst",
            Layout::PackagesiteTzst,
            SumStyle::Sha256Hex,
        ),
        (
            "packagesite.txz",
            Layout::PackagesiteTxz,
            SumStyle::Sha256Hex,
        ),
        ("packagesite.txz", Layout::PackagesiteTxz, SumStyle::Blake2b),
    ];
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    for (i, (_, layout, sums)) in cases.iter().enumerate() {
        let mut pkgs = packages();
        for p in &mut pkgs {
            p.contents.as_mut().unwrap().sums = *sums;
        }
        let mut spec = RepoSpec::new(*layout, pkgs);
        spec.sums = *sums;
        spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
        spec.write(&www.join(format!("{i}/FreeBSD:14:amd64/latest")));
    }
    let server = serve(www);
    let root = t.path().join("root");
    for (i, (archive, layout, sums)) in cases.iter().enumerate() {
        let what = format!("{layout:?} with {sums:?} sums");
        let url = format!("http://127.0.0.1:{}/{i}/${{ABI}}/latest", server.port);
        let ctx = t.path().join(format!("case-{i}"));
        freebsd_tree(&ctx.join("tree"), "amd64", &url, &key);
        fs::write(
            ctx.join("Jailfile"),
            "FROM scratch\nCOPY tree/ /\nPKG --no-bootstrap other\n",
        )
        .unwrap();
        let tag = format!("gen:{i}");
        ok(jbuild(&root)
            .args(["build", "-q", "-t", &tag, "--platform", "freebsd/amd64"])
            .arg(&ctx));
        let asked: Vec<String> = server
            .requests()
            .iter()
            .map(|r| r.path.replace("%3A", ":"))
            .collect();
        let want = format!("/{i}/FreeBSD:14:amd64/latest/{archive}");
        assert!(asked.contains(&want), "{what}: {want} in {asked:?}");
        let (_, rootfs) = crate::support::common::export_unpacked(&root, &tag, t.path());
        let db = rootfs.join("var/db/pkg/local.sqlite");
        assert_eq!(
            sqlite(&db, "SELECT name, version FROM packages ORDER BY name"),
            "libfoo|1.0\nother|0.5\n",
            "{what}"
        );
        assert_eq!(
            fs::read(rootfs.join("usr/local/bin/other")).unwrap(),
            b"other\n",
            "{what}"
        );
        let sums_kept = sqlite(
            &db,
            "SELECT sha256 FROM files WHERE path = '/usr/local/bin/other'",
        );
        let prefix = match sums {
            SumStyle::Sha256Hex => "1$",
            SumStyle::Blake2b => "2$",
        };
        assert!(sums_kept.starts_with(prefix), "{what}: {sums_kept}");
    }
}

/// pkg's older meta: without `meta.conf`, `meta.txz` (a tar, xz, holding
/// `meta` and its signature members) says how the catalogue is packed
/// (`packagesite.txz` here, which pkg's defaults would not find), and is
/// refused when its `meta` was changed after signing; over file:// (the
/// files read where they are) and http:// (fetched).
#[test]
fn meta_txz_is_read_where_a_repository_has_no_meta_conf() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    for (name, tamper) in [("good", false), ("tampered", true)] {
        let mut spec = RepoSpec::new(Layout::PackagesiteTxz, packages());
        spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
        spec.meta_txz = true;
        spec.tamper_meta = tamper;
        spec.write(&www.join(name).join("FreeBSD:14:amd64/latest"));
    }
    assert!(!www.join("good/FreeBSD:14:amd64/latest/meta.conf").exists());
    let server = serve(www.clone());
    let root = t.path().join("root");
    let cases = [
        (
            format!("http://127.0.0.1:{}/good/${{ABI}}/latest", server.port),
            0,
        ),
        (format!("file://{}/good/${{ABI}}/latest", www.display()), 0),
        (
            format!("http://127.0.0.1:{}/tampered/${{ABI}}/latest", server.port),
            1,
        ),
    ];
    for (i, (url, code)) in cases.iter().enumerate() {
        let ctx = t.path().join(format!("meta-{i}"));
        freebsd_tree(&ctx.join("tree"), "amd64", url, &key);
        fs::write(
            ctx.join("Jailfile"),
            "FROM scratch\nCOPY tree/ /\nPKG --no-bootstrap other\n",
        )
        .unwrap();
        let tag = format!("meta:{i}");
        let out = crate::support::common::run(
            jbuild(&root)
                .args(["build", "-q", "-t", &tag, "--platform", "freebsd/amd64"])
                .arg(&ctx),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "case {i}: {err}");
        if *code == 1 {
            assert!(
                err.contains("repository `FreeBSD`") && err.contains("does not match"),
                "case {i}: {err}"
            );
            continue;
        }
        let (_, rootfs) = crate::support::common::export_unpacked(&root, &tag, t.path());
        let db = rootfs.join("var/db/pkg/local.sqlite");
        assert_eq!(
            sqlite(&db, "SELECT name, version FROM packages ORDER BY name"),
            "libfoo|1.0\nother|0.5\n",
            "case {i}"
        );
    }
    let asked: Vec<String> = server
        .requests()
        .iter()
        .map(|r| r.path.replace("%3A", ":"))
        .collect();
    for file in ["meta.conf", "meta.txz", "packagesite.txz"] {
        let want = format!("/good/FreeBSD:14:amd64/latest/{file}");
        assert!(asked.contains(&want), "{want} in {asked:?}");
    }
}
