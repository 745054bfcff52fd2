//! Each signature failure through `jbuild build`: a tampered catalogue,
//! a tampered package, an unknown key, a revoked key, a missing signature
//! where one is required, a pubkey repository signed by another key, and
//! the ECDSA (`$PKGSIGN:ecdsa$`) form tampered. Each: exit 1, naming the
//! repository and what failed, and nothing stored (the store and the
//! snapshots as they were).

use std::fs;
use std::path::Path;

use crate::support::pkgrepo::image::{freebsd_tree, packages};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};

use super::{pkg_other_on, serve, stored};

/// How the repository of one case is signed and the image trusts it.
struct Case {
    name: &'static str,
    /// Signs the repository (given the trusted RSA key, another RSA key
    /// and a trusted ECDSA key).
    signing: fn(&Keys) -> Signing,
    tamper: bool,
    /// Changes a byte of `All/other-0.5.pkg` after the catalogue is
    /// written.
    tamper_package: bool,
    /// Changes the image's tree after `freebsd_tree` (trust, config).
    tree: fn(&Path, &Keys),
    says: &'static str,
}

struct Keys {
    trusted: Key,
    other: Key,
    ecdsa: Key,
}

fn fingerprints(k: &Key) -> Signing {
    Signing::Fingerprints(vec![("test".into(), k.clone())])
}

fn nothing(_: &Path, _: &Keys) {}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "tampered-catalogue",
            signing: |k| fingerprints(&k.trusted),
            tamper: true,
            tamper_package: false,
            tree: nothing,
            says: "does not match the catalogue",
        },
        Case {
            name: "tampered-package",
            signing: |k| fingerprints(&k.trusted),
            tamper: false,
            tamper_package: true,
            tree: nothing,
            says: "package `other-0.5`",
        },
        Case {
            name: "unknown-key",
            signing: |k| fingerprints(&k.other),
            tamper: false,
            tamper_package: false,
            tree: nothing,
            says: "no signer of the catalogue is trusted",
        },
        Case {
            name: "revoked-key",
            signing: |k| fingerprints(&k.trusted),
            tamper: false,
            tamper_package: false,
            tree: |tree, k| {
                k.trusted
                    .trust_in(&tree.join("usr/share/keys/pkg/revoked"), "test")
            },
            says: "is revoked",
        },
        Case {
            name: "missing-signature",
            signing: |_| Signing::None,
            tamper: false,
            tamper_package: false,
            tree: nothing,
            says: "is not signed",
        },
        Case {
            name: "pubkey-other-key",
            signing: |k| Signing::Pubkey(k.other.clone()),
            tamper: false,
            tamper_package: false,
            tree: |tree, k| {
                fs::copy(&k.trusted.public, tree.join("usr/share/keys/repo.pub")).unwrap();
                let conf = fs::read_to_string(tree.join("etc/pkg/FreeBSD.conf")).unwrap();
                let conf = conf.replace("\"fingerprints\"", "\"pubkey\"").replace(
                    "fingerprints: \"/usr/share/keys/pkg\"",
                    "pubkey: \"/usr/share/keys/repo.pub\"",
                );
                fs::write(tree.join("etc/pkg/FreeBSD.conf"), conf).unwrap();
            },
            says: "does not match the catalogue",
        },
        Case {
            name: "ecdsa-tampered",
            signing: |k| fingerprints(&k.ecdsa),
            tamper: true,
            tamper_package: false,
            tree: |tree, k| {
                k.ecdsa
                    .trust_in(&tree.join("usr/share/keys/pkg/trusted"), "test")
            },
            says: "does not match the catalogue",
        },
    ]
}

#[test]
fn each_signature_failure_exits_1_naming_the_repository_and_stores_nothing() {
    let t = tempfile::tempdir().unwrap();
    let keys = Keys {
        trusted: Key::new(t.path(), "trusted"),
        other: Key::new(t.path(), "other"),
        ecdsa: Key::ecdsa(t.path(), "ecdsa", "secp256k1"),
    };
    let www = t.path().join("www");
    let cases = cases();
    for c in &cases {
        let dir = www.join(c.name).join("FreeBSD:14:amd64/latest");
        let mut spec = RepoSpec::new(Layout::DataPkg, packages());
        spec.signing = (c.signing)(&keys);
        spec.tamper = c.tamper;
        spec.write(&dir);
        if c.tamper_package {
            let p = dir.join("All/other-0.5.pkg");
            let mut bytes = fs::read(&p).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 1;
            fs::write(&p, bytes).unwrap();
        }
    }
    let server = serve(www);
    let root = t.path().join("root");
    for c in &cases {
        let url = format!(
            "http://127.0.0.1:{}/{}/${{ABI}}/latest",
            server.port, c.name
        );
        let base = t.path().join("base").join(c.name);
        freebsd_tree(&base.join("tree"), "amd64", &url, &keys.trusted);
        (c.tree)(&base.join("tree"), &keys);
        let (out, _, before) = pkg_other_on(&root, t.path(), c.name, &base);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {err}", c.name);
        assert!(
            err.contains("repository `FreeBSD`") && err.contains(c.says),
            "{}: {err}",
            c.name
        );
        assert_eq!(stored(&root), before, "{}: something was stored", c.name);
    }
}
