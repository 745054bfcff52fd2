//! Catalogue signatures, made by the `openssl` program, checked before the
//! catalogue is read: both modes, and each way one fails.

use jbuild::blame::Blame;
use std::path::{Path, PathBuf};

use jbuild::pkg::repository::RepoError;
use jbuild::pkg::sign::SignError;

use super::catalogue::load;
use crate::support::pkgrepo::{conf, pkg, Key, Layout, RepoSpec, Signing};

pub fn spec(signing: Signing) -> RepoSpec {
    let mut s = RepoSpec::new(Layout::DataPkg, vec![pkg("app", "1.0", &[])]);
    s.signing = signing;
    s
}

pub fn sign_err(r: Result<jbuild::pkg::repository::Repository, RepoError>) -> SignError {
    match r {
        Err(RepoError::Sign(e)) => {
            assert!(e.is_user_error(), "{e}");
            e
        }
        Err(e) => panic!("not a signature error: {e}"),
        Ok(_) => panic!("the catalogue was accepted"),
    }
}

pub fn pubkey_conf(dir: &Path, key: &Key) -> String {
    conf(
        "signed",
        dir,
        &format!(
            "signature_type: \"pubkey\", pubkey: \"{}\"",
            key.public.display()
        ),
    )
}

#[test]
fn pubkey_mode_accepts_its_key_and_refuses_the_rest() {
    let t = tempfile::tempdir().unwrap();
    let (key, other) = (Key::new(t.path(), "repo"), Key::new(t.path(), "other"));
    let dir = t.path().join("repo");

    spec(Signing::Pubkey(key.clone())).write(&dir);
    let r = load(&pubkey_conf(&dir, &key), t.path()).unwrap();
    assert_eq!(r.packages[0].name, "app");

    let mut s = spec(Signing::Pubkey(key.clone()));
    s.sig_type = Some("rsa".into());
    s.write(&dir);
    load(&pubkey_conf(&dir, &key), t.path()).unwrap();

    // Signed by another key than the configured one.
    let e = sign_err(load(&pubkey_conf(&dir, &other), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{e}");
    assert!(e.to_string().contains("`signed`"), "{e}");

    // Changed after signing.
    let mut s = spec(Signing::Pubkey(key.clone()));
    s.tamper = true;
    s.write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{e}");

    // Not signed at all.
    spec(Signing::None).write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
    assert!(matches!(e, SignError::Missing { .. }), "{e}");
}

/// pkg accepts signatures of pkg built before OpenSSL 3 with a `pubkey`,
/// and only the current form from a fingerprint-trusted signer.
#[test]
fn the_legacy_signature_form_is_accepted_in_pubkey_mode_only() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let dir = t.path().join("repo");
    let mut s = spec(Signing::Pubkey(key.clone()));
    s.legacy = true;
    s.write(&dir);
    load(&pubkey_conf(&dir, &key), t.path()).unwrap();

    let keys = t.path().join("keys");
    key.trust_in(&keys.join("trusted"), "k");
    let mut s = spec(Signing::Fingerprints(vec![("repo".into(), key.clone())]));
    s.legacy = true;
    s.write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{e}");
}

pub fn fp_conf(dir: &Path, keys: &Path) -> String {
    conf(
        "FreeBSD",
        dir,
        &format!(
            "signature_type: \"fingerprints\", fingerprints: \"{}\"",
            keys.display()
        ),
    )
}

#[test]
fn fingerprints_mode_needs_a_trusted_signer_and_refuses_a_revoked_one() {
    let t = tempfile::tempdir().unwrap();
    let (good, stranger) = (Key::new(t.path(), "good"), Key::new(t.path(), "stranger"));
    let keys = t.path().join("keys");
    good.trust_in(&keys.join("trusted"), "pkg.example.2026");
    let dir = t.path().join("repo");

    // A trusted signer and an unknown one beside it: accepted.
    spec(Signing::Fingerprints(vec![
        ("good".into(), good.clone()),
        ("stranger".into(), stranger.clone()),
    ]))
    .write(&dir);
    load(&fp_conf(&dir, &keys), t.path()).unwrap();

    // Only an unknown signer.
    spec(Signing::Fingerprints(vec![(
        "stranger".into(),
        stranger.clone(),
    )]))
    .write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::NoTrustedKey { .. }), "{e}");
    assert!(e.to_string().contains(&stranger.fingerprint()), "{e}");

    // Changed after signing.
    let mut s = spec(Signing::Fingerprints(vec![("good".into(), good.clone())]));
    s.tamper = true;
    s.write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{e}");

    // Not signed.
    spec(Signing::None).write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::Missing { .. }), "{e}");

    // The trusted key revoked: refused even though it is also trusted.
    spec(Signing::Fingerprints(vec![("good".into(), good.clone())])).write(&dir);
    good.trust_in(&keys.join("revoked"), "pkg.example.2026");
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::Revoked { .. }), "{e}");
    assert!(e.to_string().contains("revoked/pkg.example.2026"), "{e}");
}

/// A key `good` trusted in `keys/trusted`, and where the repository goes.
fn trusted() -> (tempfile::TempDir, Key, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let good = Key::new(t.path(), "good");
    let keys = t.path().join("keys");
    good.trust_in(&keys.join("trusted"), "k");
    let dir = t.path().join("repo");
    (t, good, keys, dir)
}

#[test]
fn signature_entries_are_bounded() {
    let (t, good, keys, dir) = trusted();

    let mut s = spec(Signing::Fingerprints(vec![("good".into(), good.clone())]));
    s.extra_sigs = 7;
    s.write(&dir);
    let e = load(&fp_conf(&dir, &keys), t.path()).unwrap_err();
    assert!(
        e.to_string().contains("more than 8 signature entries"),
        "{e}"
    );
}

#[test]
fn key_files_are_bounded() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("repo");
    spec(Signing::None).write(&dir);
    let big = t.path().join("big.pem");
    std::fs::write(&big, vec![b'A'; 64 * 1024 + 1]).unwrap();
    let text = conf(
        "r",
        &dir,
        &format!("signature_type: pubkey, pubkey: \"{}\"", big.display()),
    );
    let e = sign_err(load(&text, t.path()));
    assert!(e.to_string().contains("larger than 65536 bytes"), "{e}");
}

#[test]
fn fingerprint_directories_are_bounded() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("repo");
    spec(Signing::None).write(&dir);
    let keys = t.path().join("keys");
    let key = Key::new(t.path(), "k");
    for i in 0..=256 {
        key.trust_in(&keys.join("trusted"), &format!("k{i}"));
    }
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(e.to_string().contains("more than 256 files"), "{e}");
}

/// A type pkg does not have is refused by name; an `ecdsa` or `eddsa`
/// head on an RSA key names what the key is not.
#[test]
fn unknown_signature_types_and_heads_of_another_type_are_refused() {
    let (t, good, keys, dir) = trusted();
    let mut s = spec(Signing::Fingerprints(vec![("good".into(), good.clone())]));
    s.sig_type = Some("gost".into());
    s.write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("`gost`"), "{e}");

    for (kind, says) in [
        ("ecdsa", "not an elliptic-curve key"),
        ("eddsa", "not pkg's key container"),
        ("ecc", "not pkg's key container"),
    ] {
        let mut s = spec(Signing::Fingerprints(vec![("good".into(), good.clone())]));
        s.sig_type = Some(kind.into());
        s.write(&dir);
        let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
        assert!(matches!(e, SignError::BadKey { .. }), "{kind}: {e}");
        assert!(e.to_string().contains(says), "{kind}: {e}");
    }
}

/// Key directories named by an image's configuration are read inside the
/// image, as `pkg --rootdir` reads them: a `trusted` symlink to a host
/// directory trusts nothing.
#[test]
fn an_images_key_directory_cannot_lead_to_the_hosts() {
    use jbuild::pkg::{repo_conf, repository, sign::Trust};
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "good");
    let dir = t.path().join("repo");
    spec(Signing::Fingerprints(vec![("good".into(), key.clone())])).write(&dir);
    let host_keys = t.path().join("host-trusted");
    key.trust_in(&host_keys, "good");
    let root = t.path().join("root");
    std::fs::create_dir_all(root.join("usr/share/keys/pkg")).unwrap();
    std::os::unix::fs::symlink(&host_keys, root.join("usr/share/keys/pkg/trusted")).unwrap();
    let text = fp_conf(&dir, Path::new("/usr/share/keys/pkg"));
    let texts = vec![(root.join("etc/pkg/FreeBSD.conf"), text)];
    let conf = repo_conf::from_texts(&texts, &super::catalogue::abi())
        .unwrap()
        .remove(0);
    let trust = Trust::of_repo(&conf, Some(&root)).unwrap();
    let e = sign_err(repository::load(&conf, &trust, t.path()));
    assert!(matches!(e, SignError::NoTrustedKey { .. }), "{e}");

    // The same key trusted inside the image is trusted.
    std::fs::remove_file(root.join("usr/share/keys/pkg/trusted")).unwrap();
    key.trust_in(&root.join("usr/share/keys/pkg/trusted"), "good");
    let trust = Trust::of_repo(&conf, Some(&root)).unwrap();
    repository::load(&conf, &trust, t.path()).unwrap();
}
