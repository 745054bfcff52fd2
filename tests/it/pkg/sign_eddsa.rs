//! `$PKGSIGN:eddsa$` (and `ecc`, pkg's other name for the same signer)
//! catalogues: Ed25519 keys and signatures made by the `openssl` program,
//! the public key in pkg's own container on WEI25519 (written by the
//! test's `pkgrepo::eddsa`), checked in both modes and refused each way one
//! fails, as the ECDSA ones in `sign_ecc.rs`.

use std::fs;
use std::process::Command;

use jbuild::pkg::sign::SignError;

use super::catalogue::load;
use super::sign::{fp_conf, pubkey_conf, sign_err, spec};
use crate::support::pkgrepo::eddsa::{container, weierstrass};
use crate::support::pkgrepo::{Key, Signing};

/// The test writer's own map, checked against libecc's constants: Ed25519's
/// base point is WEI25519's generator (`wei25519_gx`, `wei25519_gy`).
#[test]
fn the_writers_map_takes_ed25519s_base_point_to_wei25519s_generator() {
    let mut base = [0x66u8; 32];
    base[0] = 0x58;
    assert_eq!(
        hex::encode(weierstrass(&base)),
        "2aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaad245a\
         20ae19a1b8a086b4e01edd2c7748d14c923d4d7e6d7c61b229e9c5a27eced3d9"
    );
}

#[test]
fn eddsa_pubkey_mode_accepts_its_key_and_refuses_the_rest() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::eddsa(t.path(), "repo");
    let other = Key::eddsa(t.path(), "other");
    let dir = t.path().join("repo");
    for head in ["eddsa", "ecc"] {
        // Signed over the member's BLAKE2b-512, as pkg's ECC signer does.
        let mut s = spec(Signing::Pubkey(key.clone()));
        s.sig_type = Some(head.into());
        s.write(&dir);
        let r = load(&pubkey_conf(&dir, &key), t.path()).unwrap_or_else(|e| panic!("{head}: {e}"));
        assert_eq!(r.packages[0].name, "app");

        let e = sign_err(load(&pubkey_conf(&dir, &other), t.path()));
        assert!(matches!(e, SignError::BadSignature { .. }), "{head}: {e}");
        assert!(e.to_string().contains("`signed`"), "{e}");

        s.tamper = true;
        s.write(&dir);
        let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
        assert!(matches!(e, SignError::BadSignature { .. }), "{head}: {e}");
    }
    // The fingerprints form (over the SHA-256 hex) in a `signature` member.
    let mut s = spec(Signing::Pubkey(key.clone()));
    s.ecdsa_over_hex = true;
    s.write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
    assert!(matches!(e, SignError::BadSignature { .. }), "{e}");

    spec(Signing::None).write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
    assert!(matches!(e, SignError::Missing { .. }), "{e}");
}

#[test]
fn eddsa_fingerprints_need_a_trusted_signer_and_refuse_a_revoked_one() {
    for pub_head in [false, true] {
        super::sign_ecc::fingerprints_need_a_trusted_signer("eddsa", pub_head, &Key::eddsa);
    }
}

/// A key of one type for a signature of the other, in both modes.
#[test]
fn a_key_of_the_other_type_is_refused_naming_both() {
    let t = tempfile::tempdir().unwrap();
    let (ed, rsa, ec) = (
        Key::eddsa(t.path(), "ed"),
        Key::new(t.path(), "rsa"),
        Key::ecdsa(t.path(), "ec", "secp256k1"),
    );
    let dir = t.path().join("repo");
    spec(Signing::Pubkey(rsa.clone())).write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &ed), t.path()));
    assert!(matches!(e, SignError::BadKey { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("signed with `rsa`, and the key is an EdDSA key"),
        "{e}"
    );
    spec(Signing::Pubkey(ed.clone())).write(&dir);
    let e = sign_err(load(&pubkey_conf(&dir, &ec), t.path()));
    assert!(
        e.to_string()
            .contains("signed with `eddsa`, and the key is an ECDSA key on secp256k1"),
        "{e}"
    );

    // Fingerprints: an `ecdsa` head over the Ed25519 key's container, an
    // `eddsa` head over an ECDSA key.
    let keys = t.path().join("keys");
    for (key, head, says) in [
        (&ed, "ecdsa", "an ECDSA key on WEI25519"),
        (&ec, "eddsa", "not pkg's key container"),
    ] {
        key.trust_in(&keys.join("trusted"), head);
        let mut s = spec(Signing::Fingerprints(vec![("k".into(), key.clone())]));
        s.sig_type = Some(head.into());
        s.write(&dir);
        let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
        assert!(matches!(e, SignError::BadKey { .. }), "{head}: {e}");
        assert!(e.to_string().contains(says), "{head}: {e}");
    }
}

/// pkg reads `eddsa` keys only in its container, on WEI25519, as a point
/// of the curve: OpenSSL's own form of the key, another curve, a point off
/// the curve are each refused naming what.
#[test]
fn eddsa_keys_pkg_would_not_read_are_refused_naming_why() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::eddsa(t.path(), "k");
    let good_container = fs::read(&key.public).unwrap();
    let dir = t.path().join("repo");
    let mut openssl_form = Command::new("openssl");
    openssl_form
        .args(["pkey", "-pubout", "-outform", "DER", "-in"])
        .arg(&key.private);
    let spki = openssl_form.output().unwrap().stdout;
    let point = &good_container[good_container.len() - 64..];
    let mut off = point.to_vec();
    off[63] ^= 1;
    for (public, says) in [
        (spki, "OpenSSL's form"),
        (container("SECP256K1", point), "SECP256K1"),
        (container("WEI25519", &off), "not on WEI25519"),
    ] {
        fs::write(&key.public, &public).unwrap();
        let keys = t.path().join("keys");
        key.trust_in(&keys.join("trusted"), "k");
        spec(Signing::Fingerprints(vec![("k".into(), key.clone())])).write(&dir);
        let e = sign_err(load(&fp_conf(&dir, &keys), t.path()));
        assert!(matches!(e, SignError::BadKey { .. }), "{says}: {e}");
        assert!(e.to_string().contains(says), "{e}");
        let e = sign_err(load(&pubkey_conf(&dir, &key), t.path()));
        assert!(matches!(e, SignError::BadKey { .. }), "{says}: {e}");
        assert!(e.to_string().contains(says), "{e}");
    }
}

/// pkg reads an `ecdsa` key from its container too, naming the curve as
/// libecc does (`SECP512R1` is its name for secp521r1).
#[test]
fn ecdsa_keys_in_pkgs_container_are_read() {
    for (curve, libecc) in [("secp256k1", "SECP256K1"), ("secp521r1", "SECP512R1")] {
        let t = tempfile::tempdir().unwrap();
        let key = Key::ecdsa(t.path(), "k", curve);
        let spki = fs::read(&key.public).unwrap();
        // The SubjectPublicKeyInfo ends with the uncompressed point.
        let len = if curve == "secp256k1" { 64 } else { 132 };
        fs::write(&key.public, container(libecc, &spki[spki.len() - len..])).unwrap();
        let keys = t.path().join("keys");
        key.trust_in(&keys.join("trusted"), "k");
        let dir = t.path().join("repo");
        spec(Signing::Fingerprints(vec![("k".into(), key.clone())])).write(&dir);
        load(&fp_conf(&dir, &keys), t.path()).unwrap_or_else(|e| panic!("{curve}: {e}"));
        spec(Signing::Pubkey(key.clone())).write(&dir);
        load(&pubkey_conf(&dir, &key), t.path()).unwrap_or_else(|e| panic!("{curve}: {e}"));
    }
}
