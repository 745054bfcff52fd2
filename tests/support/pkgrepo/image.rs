//! A FreeBSD-shaped tree and a signed repository for installing into it:
//! what the installer tests (library and `jbuild build`) start from.
//!
//! The tree has only what jbuild's installer reads of an image: the
//! programs pkg reads the ABI from (`/bin/sh`, a FreeBSD ELF of the
//! architecture asked for, see [`super::elf`]), the accounts, and
//! `/etc/pkg/FreeBSD.conf`-style repository configuration with the
//! repository's fingerprint under `/usr/share/keys/pkg/trusted`, as
//! FreeBSD ships them.

use std::fs;
use std::path::Path;

use serde_json::json;

use super::elf::{freebsd_elf, EM_AARCH64, EM_X86_64};
use super::pkgfile::{self, file, Item};
use super::{pkg, Key, Layout, RepoSpec, Signing, TestPkg};

/// A user the host does not have, which a package's file is owned by.
pub const USER: &str = "jbappd";
pub const UID: u32 = 4821;

/// Writes a FreeBSD 14.3 userland skeleton for `arch` (`amd64`,
/// `arm64`) at `root`, its repository configuration naming `url`
/// (signature by fingerprints, the key in the image).
pub fn freebsd_tree(root: &Path, arch: &str, url: &str, key: &Key) {
    let machine = match arch {
        "arm64" => EM_AARCH64,
        _ => EM_X86_64,
    };
    for d in ["bin", "etc/pkg", "usr/share/keys/pkg/trusted", "usr/local"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(
        root.join("bin/sh"),
        freebsd_elf(machine, true, 1_403_000, "FreeBSD"),
    )
    .unwrap();
    fs::write(
        root.join("etc/master.passwd"),
        format!(
            "root:*:0:0::0:0:Charlie &:/root:/bin/sh\n\
             {USER}:*:{UID}:{UID}::0:0:a daemon:/nonexistent:/usr/sbin/nologin\n"
        ),
    )
    .unwrap();
    fs::write(
        root.join("etc/group"),
        format!("wheel:*:0:root\n{USER}:*:{UID}:\n"),
    )
    .unwrap();
    fs::write(
        root.join("etc/pkg/FreeBSD.conf"),
        format!(
            "FreeBSD: {{\n  url: \"{url}\",\n  mirror_type: \"none\",\n  \
             signature_type: \"fingerprints\",\n  fingerprints: \"/usr/share/keys/pkg\",\n  \
             enabled: yes\n}}\n"
        ),
    )
    .unwrap();
    key.trust_in(&root.join("usr/share/keys/pkg/trusted"), "test");
}

/// A package installing `items`, with `extra` keys in its `+MANIFEST`.
pub fn with(
    name: &str,
    version: &str,
    deps: &[&str],
    items: Vec<Item>,
    extra: Vec<(&str, serde_json::Value)>,
) -> TestPkg {
    let mut p = pkg(name, version, deps);
    p.contents = Some(pkgfile::Contents {
        items,
        manifest_extra: extra.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        ..pkgfile::Contents::default()
    });
    p
}

/// The Lua of pkg's `@sample` keyword for `etc/app.conf.sample`: the
/// sample copied to `etc/app.conf` unless one is there.
pub const SAMPLE_LUA: &str = "local sample = pkg.prefixed_path(\"etc/app.conf.sample\")\n\
     local target = pkg.prefixed_path(\"etc/app.conf\")\n\
     if not pkg.stat(target) then pkg.copy(sample, target) end\n\
     pkg.print_msg(\"app: sample installed\")\n";

/// The repository the installer tests use: `pkg` (what bootstrap
/// installs), `app` depending on `libfoo`, `libfoo`, `other` depending on
/// `libfoo`, and `scripted` with a post-install shell script.
pub fn packages() -> Vec<TestPkg> {
    let owned = Item::File {
        path: "/usr/local/share/app/data".into(),
        mode: 0o640,
        uname: USER.into(),
        gname: USER.into(),
        content: b"app data\n".to_vec(),
        flags: None,
        config: false,
    };
    vec![
        with(
            "pkg",
            "2.1.2",
            &[],
            vec![file("/usr/local/sbin/pkg", 0o755, b"#!/bin/sh\n# pkg\n")],
            vec![],
        ),
        with(
            "libfoo",
            "1.0",
            &[],
            vec![file("/usr/local/lib/libfoo.so.1", 0o644, b"libfoo\n")],
            vec![],
        ),
        with(
            "app",
            "2.1_3,1",
            &["libfoo"],
            vec![
                file("/usr/local/bin/app", 0o755, b"#!/bin/sh\necho app\n"),
                file("/usr/local/etc/app.conf.sample", 0o644, b"port = 80\n"),
                owned,
                Item::Symlink {
                    path: "/usr/local/bin/app-link".into(),
                    target: "app".into(),
                },
            ],
            vec![
                ("lua_scripts", json!({"post-install": [SAMPLE_LUA]})),
                ("messages", json!([{"message": "app says thanks"}])),
            ],
        ),
        with(
            "other",
            "0.5",
            &["libfoo"],
            vec![file("/usr/local/bin/other", 0o755, b"other\n")],
            vec![],
        ),
        with(
            "scripted",
            "1.0",
            &[],
            vec![file("/usr/local/bin/scripted", 0o755, b"s\n")],
            vec![("scripts", json!({"post-install": "echo hi"}))],
        ),
    ]
}

/// Writes the test repository into `dir`, signed by `key` (fingerprints).
pub fn write_repo(dir: &Path, key: &Key, tamper: bool) {
    let mut spec = RepoSpec::new(Layout::DataPkg, packages());
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.tamper = tamper;
    spec.write(dir);
}
