//! libecc's WEI25519 — Curve25519 written as a short-Weierstrass curve,
//! `y² = x³ + a·x + b` over 2^255−19 — and the map from its points to
//! Ed25519's Edwards form, which a standard Ed25519 verifier takes.
//!
//! Why: pkg's `eddsa` keys (`libpkg/pkgsign_ecc.c`, signing with libecc's
//! EDDSA25519) hold the public point as libecc keeps it, in Weierstrass
//! coordinates, where every other Ed25519 implementation wants the 32-byte
//! compressed Edwards point. The map is libecc's own composition (its
//! `aff_pt_shortw_to_montgomery` then `aff_pt_montgomery_to_edwards`),
//! with libecc's constants for the curve:
//!
//! - Weierstrass → Montgomery: `u = x − A/3`, `v = y` (Curve25519's
//!   `A = 486662`, `B = 1`; `A/3` is libecc's `alpha_montgomery`);
//! - Montgomery → Edwards: `X = α·u/v`, `Y = (u−1)/(u+1)`, where `α` is
//!   libecc's `alpha_edwards`, a square root of −486664 (the other root
//!   would flip the sign of every X: the unit test pins which one by
//!   mapping WEI25519's generator onto Ed25519's base point).
//!
//! A point is refused, with a [`PointError`], when a coordinate is not
//! below the prime (libecc reads field elements reduced), when it is not on
//! the curve, when it is all zeros (how an affine buffer would have to
//! spell the point at infinity, which has no affine coordinates), or when
//! it is the one point of order 2 (`v = 0`), where the map has no value
//! and which no key can be.

use crypto_bigint::modular::constant_mod::{Residue, ResidueParams};
use crypto_bigint::{impl_modulus, Encoding, U256};

impl_modulus!(
    P25519,
    U256,
    "7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffed"
);

type Fe = Residue<P25519, { P25519::LIMBS }>;

const fn fe(hex: &str) -> Fe {
    Fe::new(&U256::from_be_hex(hex))
}

/// The curve's `a` and `b` (libecc's `wei25519_a`, `wei25519_b`).
const A: Fe = fe("2aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa984914a144");
const B: Fe = fe("7b425ed097b425ed097b425ed097b425ed097b425ed097b4260b5e9c7710c864");
/// `A/3` of Curve25519 (libecc's `alpha_montgomery`).
const A_OVER_3: Fe = fe("2aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaad2451");
/// libecc's `alpha_edwards`.
const ALPHA: Fe = fe("70d9120b9f5ff9442d84f723fc03b0813a5e2c2eb482e57d3391fb5500ba81e7");

/// Why a WEI25519 point is not an Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointError {
    #[error("a point of {0} bytes, where WEI25519's is 64 (x then y, 32 bytes each)")]
    Length(usize),
    #[error("its {0} coordinate is not below 2^255-19 (not a canonical field element)")]
    NotCanonical(&'static str),
    #[error("the point at infinity (all zeros)")]
    Infinity,
    #[error("a point that is not on WEI25519")]
    NotOnCurve,
    #[error("the point of order 2, which is no public key")]
    SmallOrder,
}

impl crate::blame::Blame for PointError {
    /// A key that is no point is the key's (its repository's or the
    /// configuration naming it): the user's to replace.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The compressed Ed25519 point (RFC 8032: Y little-endian, the low bit
/// of X in the top bit) of the WEI25519 point `xy` (x then y, 32 bytes
/// each, big-endian, as libecc exports an affine point).
pub fn to_ed25519(xy: &[u8]) -> Result<[u8; 32], PointError> {
    if xy.len() != 64 {
        return Err(PointError::Length(xy.len()));
    }
    if xy.iter().all(|&b| b == 0) {
        return Err(PointError::Infinity);
    }
    let coordinate = |bytes: &[u8], name| {
        let n = U256::from_be_slice(bytes);
        if n >= P25519::MODULUS {
            Err(PointError::NotCanonical(name))
        } else {
            Ok(Fe::new(&n))
        }
    };
    let x = coordinate(&xy[..32], "x")?;
    let y = coordinate(&xy[32..], "y")?;
    if y.square() != x.square() * x + A * x + B {
        return Err(PointError::NotOnCurve);
    }
    let u = x - A_OVER_3;
    let v = y;
    let (v_inv, v_ok) = v.invert();
    let (w_inv, w_ok) = (u + Fe::ONE).invert();
    // On this curve only the point (u, v) = (0, 0) fails either inverse:
    // `u = −1` would need 486660 to be a square, and it is not.
    if !bool::from(v_ok) || !bool::from(w_ok) {
        return Err(PointError::SmallOrder);
    }
    let ex = ALPHA * u * v_inv;
    let ey = (u - Fe::ONE) * w_inv;
    let mut out = ey.retrieve().to_le_bytes();
    if ex.retrieve().as_limbs()[0].0 & 1 == 1 {
        out[31] |= 0x80;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WEI25519's generator (libecc's `wei25519_gx`, `wei25519_gy`).
    const GX: &str = "2aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaad245a";
    const GY: &str = "20ae19a1b8a086b4e01edd2c7748d14c923d4d7e6d7c61b229e9c5a27eced3d9";
    /// Ed25519's base point, compressed (RFC 8032 §5.1: y = 4/5, x even).
    const ED25519_BASE: &str = "5866666666666666666666666666666666666666666666666666666666666666";

    fn point(x: &str, y: &str) -> Vec<u8> {
        [hex::decode(x).unwrap(), hex::decode(y).unwrap()].concat()
    }

    #[test]
    fn the_generator_maps_onto_ed25519s_base_point() {
        let ed = to_ed25519(&point(GX, GY)).unwrap();
        assert_eq!(hex::encode(ed), ED25519_BASE);
        // And it is a point ed25519-dalek takes.
        ed25519_dalek::VerifyingKey::from_bytes(&ed).unwrap();
    }

    #[test]
    fn a_point_off_the_curve_is_refused() {
        let mut p = point(GX, GY);
        p[63] ^= 1;
        assert_eq!(to_ed25519(&p), Err(PointError::NotOnCurve));
    }

    #[test]
    fn a_coordinate_not_below_the_prime_is_refused() {
        // gx + p: the same field element, in a non-canonical spelling.
        let gx = U256::from_be_hex(GX).wrapping_add(&P25519::MODULUS);
        let p = [gx.to_be_bytes().to_vec(), hex::decode(GY).unwrap()].concat();
        assert_eq!(to_ed25519(&p), Err(PointError::NotCanonical("x")));
        let p = point(
            GX,
            "7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffed",
        );
        assert_eq!(to_ed25519(&p), Err(PointError::NotCanonical("y")));
    }

    #[test]
    fn the_point_at_infinity_and_the_point_of_order_2_are_refused() {
        assert_eq!(to_ed25519(&[0; 64]), Err(PointError::Infinity));
        // Montgomery's (0, 0) is WEI25519's (A/3, 0): on the curve, of order 2.
        let x = A_OVER_3.retrieve().to_be_bytes();
        let p = [x.to_vec(), vec![0; 32]].concat();
        assert_eq!(to_ed25519(&p), Err(PointError::SmallOrder));
        assert_eq!(to_ed25519(&[1; 63]), Err(PointError::Length(63)));
    }
}
