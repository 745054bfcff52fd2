//! `$PKGSIGN:eddsa$` repositories through `jbuild build`: Ed25519 keys and
//! signatures made by the `openssl` program, the public key in pkg's own
//! container (the test writer's `pkgrepo::eddsa`). Signed in `fingerprints`
//! mode (also under pkg's other name, `ecc`) and in `pubkey` mode, the
//! package installs; a tampered catalogue, a key that did not sign it, a
//! revoked key and a signature of the other type each exit 1 naming the
//! repository and what failed, with nothing stored.

use std::fs;
use std::path::Path;

use crate::support::common::export_unpacked;
use crate::support::pkgrepo::image::{freebsd_tree, packages};
use crate::support::pkgrepo::{Key, Layout, RepoSpec, Signing};

use super::{pkg_other_on, serve, sqlite, stored};

struct Keys {
    ed: Key,
    other: Key,
    rsa: Key,
}

struct Case {
    name: &'static str,
    signing: fn(&Keys) -> Signing,
    /// `$PKGSIGN:<head>$` instead of the key's own.
    head: Option<&'static str>,
    tamper: bool,
    /// The key the image trusts (fingerprints) or names (pubkey).
    trusts: fn(&Keys) -> &Key,
    pubkey: bool,
    revoked: bool,
    /// `None`: installs; else what the error says.
    says: Option<&'static str>,
}

fn fingerprints(k: &Key) -> Signing {
    Signing::Fingerprints(vec![("test".into(), k.clone())])
}

fn cases() -> Vec<Case> {
    let case = |name, signing: fn(&Keys) -> Signing, says| Case {
        name,
        signing,
        head: None,
        tamper: false,
        trusts: |k| &k.ed,
        pubkey: false,
        revoked: false,
        says,
    };
    vec![
        case("fingerprints", |k| fingerprints(&k.ed), None),
        Case {
            head: Some("ecc"),
            ..case("fingerprints-ecc", |k| fingerprints(&k.ed), None)
        },
        Case {
            pubkey: true,
            ..case("pubkey", |k| Signing::Pubkey(k.ed.clone()), None)
        },
        Case {
            tamper: true,
            ..case(
                "tampered",
                |k| fingerprints(&k.ed),
                Some("does not match the catalogue"),
            )
        },
        case(
            "unknown-key",
            |k| fingerprints(&k.other),
            Some("no signer of the catalogue is trusted"),
        ),
        Case {
            pubkey: true,
            ..case(
                "pubkey-wrong-key",
                |k| Signing::Pubkey(k.other.clone()),
                Some("does not match the catalogue"),
            )
        },
        Case {
            revoked: true,
            ..case("revoked", |k| fingerprints(&k.ed), Some("is revoked"))
        },
        Case {
            pubkey: true,
            ..case(
                "pubkey-rsa-signed",
                |k| Signing::Pubkey(k.rsa.clone()),
                Some("signed with `rsa`, and the key is an EdDSA key"),
            )
        },
        Case {
            head: Some("eddsa"),
            trusts: |k| &k.rsa,
            ..case(
                "rsa-key-eddsa-head",
                |k| fingerprints(&k.rsa),
                Some("not pkg's key container"),
            )
        },
    ]
}

/// Points the image's repository at `key` by `signature_type: pubkey`.
fn to_pubkey(tree: &Path, key: &Key) {
    fs::copy(&key.public, tree.join("usr/share/keys/repo.pub")).unwrap();
    let conf = fs::read_to_string(tree.join("etc/pkg/FreeBSD.conf")).unwrap();
    let conf = conf.replace("\"fingerprints\"", "\"pubkey\"").replace(
        "fingerprints: \"/usr/share/keys/pkg\"",
        "pubkey: \"/usr/share/keys/repo.pub\"",
    );
    fs::write(tree.join("etc/pkg/FreeBSD.conf"), conf).unwrap();
}

#[test]
fn eddsa_repositories_install_in_both_modes_and_each_failure_exits_1() {
    let t = tempfile::tempdir().unwrap();
    let keys = Keys {
        ed: Key::eddsa(t.path(), "ed"),
        other: Key::eddsa(t.path(), "other"),
        rsa: Key::new(t.path(), "rsa"),
    };
    let www = t.path().join("www");
    let cases = cases();
    for c in &cases {
        let mut spec = RepoSpec::new(Layout::DataPkg, packages());
        spec.signing = (c.signing)(&keys);
        spec.sig_type = c.head.map(str::to_string);
        spec.tamper = c.tamper;
        spec.write(&www.join(c.name).join("FreeBSD:14:amd64/latest"));
    }
    let server = serve(www);
    let root = t.path().join("root");
    for c in &cases {
        let url = format!(
            "http://127.0.0.1:{}/{}/${{ABI}}/latest",
            server.port, c.name
        );
        let base = t.path().join("base").join(c.name);
        let tree = base.join("tree");
        freebsd_tree(&tree, "amd64", &url, (c.trusts)(&keys));
        if c.pubkey {
            to_pubkey(&tree, (c.trusts)(&keys));
        }
        if c.revoked {
            (c.trusts)(&keys).trust_in(&tree.join("usr/share/keys/pkg/revoked"), "test");
        }
        let (out, app_tag, before) = pkg_other_on(&root, t.path(), c.name, &base);
        let err = String::from_utf8_lossy(&out.stderr);
        match c.says {
            None => {
                assert_eq!(out.status.code(), Some(0), "{}: {err}", c.name);
                let (_, rootfs) = export_unpacked(&root, &app_tag, t.path());
                assert_eq!(
                    sqlite(
                        &rootfs.join("var/db/pkg/local.sqlite"),
                        "SELECT name, version FROM packages ORDER BY name"
                    ),
                    "libfoo|1.0\nother|0.5\n",
                    "{}",
                    c.name
                );
            }
            Some(says) => {
                assert_eq!(out.status.code(), Some(1), "{}: {err}", c.name);
                assert!(
                    err.contains("repository `FreeBSD`") && err.contains(says),
                    "{}: {err}",
                    c.name
                );
                assert_eq!(stored(&root), before, "{}: something was stored", c.name);
            }
        }
    }
}
