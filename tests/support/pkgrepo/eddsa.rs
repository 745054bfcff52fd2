//! pkg's `eddsa` keys and signatures, made from what the `openssl`
//! program makes: `openssl genpkey -algorithm ed25519` for the key,
//! `openssl pkeyutl -sign -rawin` for the 64-byte Ed25519 signature.
//!
//! pkg (`libpkg/pkgsign_ecc.c`, with libecc) keeps the public key in a
//! container of its own, with the point on libecc's short-Weierstrass form
//! of Curve25519 (WEI25519), and writes the signature as a DER
//! `ECDSA-Sig-Value`. This writer goes from Ed25519's compressed point to
//! that form by the textbook maps (Edwards → Montgomery → Weierstrass:
//! `u = (1+y)/(1−y)`, `v = α·u/x`, then `(u + A/3, v)`), with libecc's
//! choice of `α`, a square root of −486664; jbuild goes the other way.

use std::fs;
use std::path::Path;

use crypto_bigint::modular::constant_mod::{Residue, ResidueParams};
use crypto_bigint::{impl_modulus, Encoding, U256};

impl_modulus!(
    Prime,
    U256,
    "7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffed"
);
type F = Residue<Prime, { Prime::LIMBS }>;

fn f(hex: &str) -> F {
    F::new(&U256::from_be_hex(hex))
}

fn small(n: u64) -> F {
    F::new(&U256::from_u64(n))
}

fn inv(x: F) -> F {
    let (i, ok) = x.invert();
    assert!(bool::from(ok), "no inverse");
    i
}

fn odd(x: F) -> bool {
    x.retrieve().as_limbs()[0].0 & 1 == 1
}

/// The WEI25519 point `x ‖ y` (big-endian) of an Ed25519 public key
/// (RFC 8032's 32-byte encoding).
pub fn weierstrass(ed: &[u8; 32]) -> Vec<u8> {
    // Ed25519's d = −121665/121666, and √−1.
    let d = -(small(121665) * inv(small(121666)));
    let sqrt_m1 = f("2b8324804fc1df0b2b4d00993dfbd7a72f431806ad2fe478c4ee1b274a0ea0b0");
    let alpha = f("70d9120b9f5ff9442d84f723fc03b0813a5e2c2eb482e57d3391fb5500ba81e7");
    assert_eq!(alpha.square(), -small(486664), "α² = −486664");

    let mut le = *ed;
    let sign = le[31] >> 7 == 1;
    le[31] &= 0x7f;
    let y = F::new(&U256::from_le_bytes(le));
    // x² = (y² − 1)/(d·y² + 1); a root by p ≡ 5 (mod 8).
    let x2 = (y.square() - F::ONE) * inv(d * y.square() + F::ONE);
    let mut x = x2.pow(&U256::from_be_hex(
        "0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe",
    ));
    if x.square() != x2 {
        x *= sqrt_m1;
    }
    assert_eq!(x.square(), x2, "not a point of Ed25519");
    if odd(x) != sign {
        x = -x;
    }
    let u = (F::ONE + y) * inv(F::ONE - y);
    let v = alpha * u * inv(x);
    let a_over_3 = small(486662) * inv(small(3));
    [
        (u + a_over_3).retrieve().to_be_bytes(),
        v.retrieve().to_be_bytes(),
    ]
    .concat()
}

/// A DER element: tag, length (short or one-byte long form), value.
fn tlv(out: &mut Vec<u8>, tag: u8, value: &[u8]) {
    out.push(tag);
    match u8::try_from(value.len()).unwrap() {
        n @ 0..=127 => out.push(n),
        n => out.extend_from_slice(&[0x81, n]),
    }
    out.extend_from_slice(value);
}

/// pkg's public key container for a point `x ‖ y` on libecc's `curve`
/// (`WEI25519` for `eddsa`): `SEQUENCE { UTF8String "pkg", INTEGER 1,
/// UTF8String "ecc", UTF8String <curve>, BOOLEAN (01, as libder writes
/// it), BIT STRING 00 04 ‖ x ‖ y }`.
pub fn container(curve: &str, point: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    tlv(&mut body, 0x0c, b"pkg");
    tlv(&mut body, 0x02, &[1]);
    tlv(&mut body, 0x0c, b"ecc");
    tlv(&mut body, 0x0c, curve.as_bytes());
    tlv(&mut body, 0x01, &[1]);
    tlv(&mut body, 0x03, &[&[0u8, 0x04][..], point].concat());
    let mut out = Vec::new();
    tlv(&mut out, 0x30, &body);
    out
}

/// A raw signature (two halves) as pkg writes it: each half an INTEGER
/// without its leading zero bytes, a zero in front of a high bit.
pub fn der_signature(raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    for half in raw.chunks(raw.len() / 2) {
        let start = half.iter().position(|&b| b != 0).unwrap_or(half.len() - 1);
        let mut int = half[start..].to_vec();
        if int[0] & 0x80 != 0 {
            int.insert(0, 0);
        }
        body.push(0x02);
        body.push(int.len() as u8);
        body.extend(int);
    }
    [vec![0x30, body.len() as u8], body].concat()
}

/// The container of the Ed25519 key in `private` (PEM, by `openssl
/// genpkey`), written to `public`.
pub fn write_public(private: &Path, public: &Path) {
    let spki = super::run_out(
        std::process::Command::new("openssl")
            .args(["pkey", "-pubout", "-outform", "DER", "-in"])
            .arg(private),
    );
    // An Ed25519 SubjectPublicKeyInfo ends with the 32-byte point.
    let ed: [u8; 32] = spki[spki.len() - 32..].try_into().unwrap();
    fs::write(public, container("WEI25519", &weierstrass(&ed))).unwrap();
}
