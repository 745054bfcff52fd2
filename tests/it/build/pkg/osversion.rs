//! pkg's `is_valid_os_version` through `jbuild build`: the image's
//! userland is FreeBSD 1403000 (the ABI note of its `/bin/sh`); a
//! repository whose packages say `FreeBSD_version` 1600000 (100000 and more
//! newer) is refused naming the repository, a package and both versions,
//! unless `IGNORE_OSVERSION` is set (the step's `ENV`, or the image's
//! pkg.conf); one whose packages say 1403500 (the same major release)
//! installs, as `pkg install -y` installs it, and that is said.

use std::fs;

use crate::support::common::{jbuild, run};
use crate::support::pkgrepo::image::{freebsd_tree, packages};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};

use super::serve;

#[test]
fn packages_for_a_newer_freebsd_are_refused_unless_ignore_osversion() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    for (name, version) in [("major", "1600000"), ("minor", "1403500")] {
        let mut spec = RepoSpec::new(Layout::DataPkg, packages());
        spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
        spec.freebsd_version = version.into();
        spec.write(&www.join(name).join("FreeBSD:14:amd64/latest"));
    }
    let server = serve(www);
    let root = t.path().join("root");
    // (repository, what the Jailfile sets before PKG, a pkg.conf, exit
    // code, what the output holds)
    let cases = [
        ("major", "", None, 1, "1600000"),
        ("major", "ENV IGNORE_OSVERSION=yes\n", None, 0, "other-0.5"),
        ("major", "", Some("IGNORE_OSVERSION: yes\n"), 0, "other-0.5"),
        (
            "major",
            "ENV IGNORE_OSVERSION=no\n",
            Some("IGNORE_OSVERSION: yes\n"),
            1,
            "1600000",
        ),
        ("minor", "", None, 0, "built for a newer FreeBSD"),
    ];
    for (i, (repo, env, pkg_conf, code, says)) in cases.iter().enumerate() {
        let url = format!("http://127.0.0.1:{}/{repo}/${{ABI}}/latest", server.port);
        let ctx = t.path().join(format!("case-{i}"));
        freebsd_tree(&ctx.join("tree"), "amd64", &url, &key);
        if let Some(text) = pkg_conf {
            fs::create_dir_all(ctx.join("tree/usr/local/etc")).unwrap();
            fs::write(ctx.join("tree/usr/local/etc/pkg.conf"), text).unwrap();
        }
        fs::write(
            ctx.join("Jailfile"),
            format!("FROM scratch\nCOPY tree/ /\n{env}PKG --no-bootstrap other\n"),
        )
        .unwrap();
        let out = run(jbuild(&root)
            .args(["--json", "build", "-t", &format!("osv:{i}")])
            .args(["--platform", "freebsd/amd64"])
            .arg(&ctx));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(*code), "case {i}: {text}");
        assert!(text.contains(says), "case {i}: {text}");
        if *code == 1 {
            for part in [
                "repository `FreeBSD`",
                "1403000",
                "package pkg-2.1.2",
                "IGNORE_OSVERSION",
            ] {
                assert!(text.contains(part), "case {i}: no {part}: {text}");
            }
        }
    }
}
