//! Catalogues in each generation pkg serves, read from `file://`.

use jbuild::blame::Blame;
use std::fs;
use std::io::Write;
use std::path::Path;

use jbuild::pkg::abi::Abi;
use jbuild::pkg::catalogue::{CatalogueError, Generation};
use jbuild::pkg::checksum::Checksum;
use jbuild::pkg::repo_conf;
use jbuild::pkg::repository::{self, RepoError, Repository};
use jbuild::pkg::sign::Trust;

use crate::support::pkgrepo::{pkg, Layout, RepoSpec, SumStyle};

pub fn abi() -> Abi {
    Abi {
        major: 14,
        minor: 3,
        arch: "amd64".into(),
        osversion: 1_403_000,
    }
}

/// Reads the repository `name` of the configuration `text` (host paths).
pub fn load(text: &str, work: &Path) -> Result<Repository, RepoError> {
    let texts = vec![(work.join("repo.conf"), text.to_string())];
    let conf = repo_conf::from_texts(&texts, &abi()).unwrap().remove(0);
    let trust = Trust::of_repo(&conf, None)?;
    repository::load(&conf, &trust, work)
}

fn chain() -> Vec<crate::support::pkgrepo::TestPkg> {
    vec![
        pkg("app", "2.1_3,1", &["libfoo"]),
        pkg("libfoo", "1.0", &[]),
    ]
}

#[test]
fn every_catalogue_generation_reads_the_same_packages() {
    for layout in [
        Layout::DataPkg,
        Layout::PackagesitePkg,
        Layout::PackagesiteTzst,
        Layout::PackagesiteTxz,
    ] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("repo");
        RepoSpec::new(layout, chain()).write(&dir);
        let r = load(&crate::support::pkgrepo::conf("test", &dir, ""), t.path())
            .unwrap_or_else(|e| panic!("{layout:?}: {e}"));
        let want = if layout == Layout::DataPkg {
            Generation::Data
        } else {
            Generation::Packagesite
        };
        assert_eq!(r.generation, want, "{layout:?}");
        let names: Vec<_> = r
            .packages
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str()))
            .collect();
        assert_eq!(names, [("app", "2.1_3,1"), ("libfoo", "1.0")], "{layout:?}");
        let app = &r.packages[0];
        assert_eq!(app.deps["libfoo"].origin, "test/libfoo");
        assert_eq!(app.repopath, "All/app-2.1_3,1.pkg");
        assert_eq!(app.abi, "FreeBSD:14:amd64");
        assert_eq!(r.catalogue_sha256.len(), 64);
    }
}

#[test]
fn data_pkg_is_preferred_over_packagesite() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("repo");
    RepoSpec::new(Layout::PackagesitePkg, vec![pkg("old", "1", &[])]).write(&dir);
    RepoSpec::new(Layout::DataPkg, vec![pkg("new", "1", &[])]).write(&dir);
    let r = load(&crate::support::pkgrepo::conf("test", &dir, ""), t.path()).unwrap();
    assert_eq!(r.archive, "data.pkg");
    assert_eq!(r.packages[0].name, "new");
}

#[test]
fn package_sums_in_both_forms_match_the_package_files() {
    for style in [SumStyle::Sha256Hex, SumStyle::Blake2b] {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("repo");
        let mut spec = RepoSpec::new(Layout::DataPkg, chain());
        spec.sums = style;
        spec.write(&dir);
        let r = load(&crate::support::pkgrepo::conf("test", &dir, ""), t.path()).unwrap();
        for p in &r.packages {
            let sum = Checksum::parse(&p.sum).unwrap();
            let mut h = sum.hasher();
            h.write_all(&fs::read(dir.join(&p.repopath)).unwrap())
                .unwrap();
            assert!(h.matches(&sum), "{style:?} {}", p.sum);
            let mut other = sum.hasher();
            other.write_all(b"not the package").unwrap();
            assert!(!other.matches(&sum));
        }
    }
}

#[test]
fn a_missing_or_broken_catalogue_names_the_repository() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("repo");
    fs::create_dir_all(&dir).unwrap();
    let e = load(&crate::support::pkgrepo::conf("empty", &dir, ""), t.path()).unwrap_err();
    assert!(e.is_user_error());
    let s = e.to_string();
    assert!(
        s.contains("`empty`") && s.contains("data.pkg") && s.contains("packagesite.tzst"),
        "{s}"
    );

    // An archive whose member is not JSON.
    let garbage = crate::support::tar::ustar(&[("data", 0o644, b"{\"packages\": [ {\"name\": ")]);
    fs::write(
        dir.join("data.pkg"),
        crate::support::pkgrepo::compress(&garbage, "zstd"),
    )
    .unwrap();
    let e = load(&crate::support::pkgrepo::conf("empty", &dir, ""), t.path()).unwrap_err();
    assert!(
        matches!(e, RepoError::Catalogue(CatalogueError::Malformed { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("`empty`: data.pkg"), "{e}");
}

/// The size is checked before a byte is decompressed (a sparse file).
#[test]
fn catalogue_archives_are_bounded_in_size() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("repo");
    fs::create_dir_all(&dir).unwrap();
    let f = fs::File::create(dir.join("data.pkg")).unwrap();
    f.set_len((1 << 30) + 1).unwrap();
    let e = load(&crate::support::pkgrepo::conf("huge", &dir, ""), t.path()).unwrap_err();
    assert!(
        matches!(e, RepoError::Catalogue(CatalogueError::TooLarge { .. })),
        "{e}"
    );
    assert!(
        e.to_string().contains("`huge`: data.pkg: 1073741825 bytes"),
        "{e}"
    );
}

#[test]
fn catalogue_archives_are_bounded_in_entries() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("repo");
    fs::create_dir_all(&dir).unwrap();
    let names: Vec<String> = (0..70).map(|i| format!("junk{i}")).collect();
    let mut files: Vec<(&str, u32, &[u8])> = names
        .iter()
        .map(|n| (n.as_str(), 0o644, &b"x"[..]))
        .collect();
    files.push(("data", 0o644, b"{\"packages\":[]}"));
    let tar = crate::support::tar::ustar(&files);
    fs::write(
        dir.join("data.pkg"),
        crate::support::pkgrepo::compress(&tar, "xz"),
    )
    .unwrap();
    let e = load(&crate::support::pkgrepo::conf("big", &dir, ""), t.path()).unwrap_err();
    assert!(e.to_string().contains("more than 64 entries"), "{e}");
}
