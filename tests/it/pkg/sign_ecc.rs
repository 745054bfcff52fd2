//! `$PKGSIGN:ecdsa$` catalogues, signed by the `openssl` program on each
//! curve pkg accepts, checked in both modes and refused each way one
//! fails, as the RSA ones in `sign.rs`.

use std::path::Path;

use jbuild::pkg::sign::SignError;

use super::catalogue::load;
use super::sign::{fp_conf, pubkey_conf, sign_err, spec};
use crate::support::pkgrepo::{Key, Signing};

const CURVES: [&str; 3] = ["secp256k1", "secp384r1", "secp521r1"];

#[test]
fn ecdsa_pubkey_mode_accepts_its_key_and_refuses_the_rest() {
    for curve in CURVES {
        let t = tempfile::tempdir().unwrap();
        let key = Key::ecdsa(t.path(), "repo", curve);
        let other = Key::ecdsa(t.path(), "other", curve);
        let dir = t.path().join("repo");

        // Signed over the member's BLAKE2b-512, as pkg's ECC signer does.
        spec(Signing::Pubkey(key.clone())).write(&dir);
        let r = load(&pubkey_conf(&dir, &key), t.path()).unwrap_or_else(|e| panic!("{curve}: {e}"));
        assert_eq!(r.packages[0].name, "app");

        let e = sign_err(load(&pubkey_conf(&dir, &other), t.path()));
        assert!(matches!(e, SignError::BadSignature { .. }), "{curve}: {e}");
        assert!(e.to_string().contains("`signed`"), "{e}");

        let mut s = spec(Signing::Pubkey(key.clone()));
        s.tamper = true;
        s.write(&dir);
        let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
        assert!(matches!(e, SignError::BadSignature { .. }), "{curve}: {e}");

        spec(Signing::None).write(&dir);
        let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
        assert!(matches!(e, SignError::Missing { .. }), "{curve}: {e}");
    }
}

/// What pkg signs differs by mode: the SHA-256 hex for fingerprints, so a
/// signature made over it does not pass as a pubkey one; and an RSA
/// catalogue does not pass with an ECDSA key.
#[test]
fn ecdsa_pubkey_mode_checks_what_pkg_signs_and_with_which_key() {
    let t = tempfile::tempdir().unwrap();
    let (ec, rsa) = (
        Key::ecdsa(t.path(), "ec", "secp256k1"),
        Key::new(t.path(), "rsa"),
    );
    let dir = t.path().join("repo");
    spec(Signing::Pubkey(rsa.clone())).write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &ec), t.path()));
    assert!(matches!(e, SignError::BadKey { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("signed with `rsa`, and the key is an ECDSA key on secp256k1"),
        "{e}"
    );

    // The fingerprints form (over the hex) in a `signature` member.
    let mut s = spec(Signing::Pubkey(ec.clone()));
    s.ecdsa_over_hex = true;
    s.write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &ec), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{e}");
}

#[test]
fn ecdsa_fingerprints_need_a_trusted_signer_and_refuse_a_revoked_one() {
    for (curve, pub_head) in [
        ("secp256k1", false),
        ("secp384r1", true),
        ("secp521r1", true),
    ] {
        fingerprints_need_a_trusted_signer(curve, pub_head, &|dir, name| {
            Key::ecdsa(dir, name, curve)
        });
    }
}

/// `fingerprints` mode with keys `make` makes (`what` names them in
/// failures): a trusted signer beside a stranger passes; the stranger
/// alone, a tampered catalogue, the stranger's signature under the good
/// key's name, no signature and a revoked key each fail as they should.
/// Shared by the ECDSA and EdDSA tests (`sign_eddsa.rs`).
pub(super) fn fingerprints_need_a_trusted_signer(
    what: &str,
    pub_head: bool,
    make: &dyn Fn(&Path, &str) -> Key,
) {
    let t = tempfile::tempdir().unwrap();
    let good = make(t.path(), "good");
    let stranger = make(t.path(), "stranger");
    let keys = t.path().join("keys");
    good.trust_in(&keys.join("trusted"), "pkg.example");
    let dir = t.path().join("repo");
    let with = |signers: Vec<(&str, &Key)>| {
        let mut s = spec(Signing::Fingerprints(
            signers
                .into_iter()
                .map(|(n, k)| (n.to_string(), k.clone()))
                .collect(),
        ));
        s.pub_head = pub_head;
        s
    };

    with(vec![("good", &good), ("stranger", &stranger)]).write(&dir);
    load(&fp_conf(&dir, &keys), t.path()).unwrap_or_else(|e| panic!("{what}: {e}"));

    with(vec![("stranger", &stranger)]).write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::NoTrustedKey { .. }), "{what}: {e}");
    assert!(e.to_string().contains(&stranger.fingerprint()), "{e}");

    let mut s = with(vec![("good", &good)]);
    s.tamper = true;
    s.write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{what}: {e}");
    assert!(e.to_string().contains("`FreeBSD`"), "{e}");

    // Signed by the stranger's key under the good one's name and key.
    let mut s = with(vec![("good", &good)]);
    s.write(&dir);
    load(&fp_conf(&dir, &keys), t.path()).unwrap();
    s.signing = Signing::Fingerprints(vec![(
        "good".into(),
        Key {
            private: stranger.private.clone(),
            public: good.public.clone(),
            curve: good.curve.clone(),
        },
    )]);
    s.write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{what}: {e}");

    spec(Signing::None).write(&dir);
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::Missing { .. }), "{what}: {e}");

    with(vec![("good", &good)]).write(&dir);
    good.trust_in(&keys.join("revoked"), "pkg.example");
    let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
    assert!(matches!(e, SignError::Revoked { .. }), "{what}: {e}");
}

/// Curves pkg does not accept (P-256), and those it accepts that jbuild
/// does not verify (brainpool), are refused naming the curve.
#[test]
fn keys_on_other_curves_are_refused_naming_the_curve() {
    for (curve, says) in [("prime256v1", "P-256"), ("brainpoolP256r1", "brainpool")] {
        let t = tempfile::tempdir().unwrap();
        let key = Key::ecdsa(t.path(), "k", curve);
        let keys = t.path().join("keys");
        key.trust_in(&keys.join("trusted"), "k");
        let dir = t.path().join("repo");
        spec(Signing::Fingerprints(vec![("k".into(), key.clone())])).write(&dir);
        let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
        assert!(matches!(e, SignError::BadKey { .. }), "{curve}: {e}");
        assert!(e.to_string().contains(says), "{e}");

        let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
        assert!(matches!(e, SignError::BadKey { .. }), "{curve}: {e}");
        assert!(e.to_string().contains(says), "{e}");
    }
}
