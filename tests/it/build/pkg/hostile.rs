//! Hostile packages through `jbuild build`: a path out of the root, a
//! symlink out with a file written through it, and a decompression bomb
//! (over `[layers] max_size`) are refused as a hostile layer is: exit 1,
//! naming the package and what it tried, nothing written outside the
//! root and nothing stored.

use std::fs;

use crate::support::common::{jbuild, run};
use crate::support::pkgrepo::entries::packages;
use crate::support::pkgrepo::{Layout, RepoSpec, Signing};

use super::{amd64_base, stored};

#[test]
fn hostile_packages_are_refused_and_nothing_is_stored() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let outside = t.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    let (_server, _key) = amd64_base(t.path(), &root, |dir, key| {
        let mut spec = RepoSpec::new(
            Layout::DataPkg,
            packages(&outside.display().to_string(), 4 << 20),
        );
        spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
        spec.write(dir);
    });
    let config = t.path().join("jbuild.toml");
    fs::write(&config, "[layers]\nmax_size = 1048576\n").unwrap();
    let before = stored(&root);
    for (name, says) in [
        ("escape", "is not an absolute path inside the root"),
        ("linkout", "a symlink this same layer created"),
        ("bomb", "more than the 1 MiB"),
    ] {
        let app = t.path().join(name);
        fs::create_dir_all(&app).unwrap();
        fs::write(
            app.join("Jailfile"),
            format!("FROM base:1\nPKG --no-bootstrap {name}\n"),
        )
        .unwrap();
        let out = run(jbuild(&root)
            .env("JBUILD_CONFIG", &config)
            .args(["build", "-q", "-t", "evil:1"])
            .arg(&app));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains(&format!("{name}-1.0")) && err.contains(says),
            "{name}: {err}"
        );
        assert!(
            fs::read_dir(&outside).unwrap().next().is_none(),
            "{name}: something was written outside the root"
        );
        assert!(!std::path::Path::new("/tmp/escaped-by-a-package").exists());
        assert_eq!(stored(&root), before, "{name}: something was stored");
    }
}
