//! `$PKGSIGN:ecdsa$` signatures, as pkg's ECC signer makes and checks them
//! (`libpkg/pkgsign_ecc.c`, with libecc and libder):
//!
//! - the key is an `id-ecPublicKey` SubjectPublicKeyInfo in DER (what
//!   `pkg key -t ecdsa --public` and `openssl ec -pubout -outform DER`
//!   write; pkg reads no PEM, jbuild reads it too), its point
//!   uncompressed; the curve comes from its OID, and pkg knows
//!   secp256k1, secp384r1 and secp521r1 (and the brainpool curves, which
//!   jbuild refuses by name; P-256 is not among them);
//! - the hash is SHA-256 whatever the curve (pkg's `ecc_new` sets it for
//!   `ecdsa`), the signature a DER `ECDSA-Sig-Value` (`openssl dgst
//!   -sha256 -sign`); an `s` in the upper half is as valid as its
//!   complement (libecc and OpenSSL accept both);
//! - what is signed: in `fingerprints` mode the 64 hex characters of the
//!   catalogue member's SHA-256 (as for RSA); in `pubkey` mode the raw
//!   64 bytes of its BLAKE2b-512.
//!
//! pkg also reads an `ecdsa` key from its own container (see
//! [`super::eddsa::container`]), naming the curve as libecc does:
//! `SECP256K1`, `SECP384R1`, `SECP512R1` (its name for secp521r1) are read
//! here; `WEI25519` and the brainpool curves are refused by name. pkg
//! writes its ECDSA keys as SubjectPublicKeyInfo, so such a key comes only
//! from another writer. `$PKGSIGN:eddsa$`/`ecc$` are [`super::eddsa`]'s.

use k256::ecdsa::signature::hazmat::PrehashVerifier;
use k256::pkcs8::der::Decode;
use k256::pkcs8::spki::{ObjectIdentifier, SubjectPublicKeyInfoRef};
use sha2::{Digest as _, Sha256};

const EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const SECP256K1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.10");
const SECP384R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const SECP521R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");
const PRIME256V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const BRAINPOOL: &str = "1.3.36.3.3.2.8.1.1.";

/// An ECDSA public key on a curve pkg accepts.
#[derive(Clone)]
pub enum EcKey {
    Secp256k1(k256::ecdsa::VerifyingKey),
    Secp384r1(p384::ecdsa::VerifyingKey),
    Secp521r1(p521::ecdsa::VerifyingKey),
}

impl std::fmt::Debug for EcKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EcKey({})", self.curve())
    }
}

impl EcKey {
    /// The curve's name, for messages.
    pub fn curve(&self) -> &'static str {
        match self {
            EcKey::Secp256k1(_) => "secp256k1",
            EcKey::Secp384r1(_) => "secp384r1",
            EcKey::Secp521r1(_) => "secp521r1",
        }
    }
}

/// A public key as pkg reads it (see the module docs), or why not.
pub fn parse(bytes: &[u8]) -> Result<EcKey, String> {
    let der = match pem::parse(bytes) {
        Ok(p) if p.tag() == "PUBLIC KEY" => p.into_contents(),
        Ok(p) => return Err(format!("a PEM `{}`, not a `PUBLIC KEY`", p.tag())),
        Err(_) => bytes.to_vec(),
    };
    if super::eddsa::is_container(&der) {
        return from_container(&super::eddsa::container(&der)?);
    }
    let spki = SubjectPublicKeyInfoRef::from_der(&der)
        .map_err(|_| "not a public key in DER or PEM (SubjectPublicKeyInfo)".to_string())?;
    if spki.algorithm.oid != EC_PUBLIC_KEY {
        return Err(format!(
            "a key of algorithm {}, not an elliptic-curve key",
            spki.algorithm.oid
        ));
    }
    let curve = spki
        .algorithm
        .parameters_oid()
        .map_err(|_| "an elliptic-curve key that names no curve".to_string())?;
    let point = spki.subject_public_key.raw_bytes();
    if point.first() != Some(&0x04) {
        return Err("a compressed point (pkg reads uncompressed points only)".into());
    }
    let bad = |_| "a point that is not on its curve".to_string();
    match curve {
        SECP256K1 => Ok(EcKey::Secp256k1(
            k256::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(bad)?,
        )),
        SECP384R1 => Ok(EcKey::Secp384r1(
            p384::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(bad)?,
        )),
        SECP521R1 => Ok(EcKey::Secp521r1(
            p521::ecdsa::VerifyingKey::from_sec1_bytes(point).map_err(bad)?,
        )),
        PRIME256V1 => Err(
            "a key on prime256v1 (P-256), a curve pkg does not accept (secp256k1, secp384r1, secp521r1)"
                .into(),
        ),
        c if c.to_string().starts_with(BRAINPOOL) => Err(format!(
            "a key on a brainpool curve ({c}), which pkg accepts and jbuild does not verify yet"
        )),
        c => Err(format!("a key on the curve {c}, which pkg does not accept")),
    }
}

/// An ECDSA key in pkg's container, its curve by libecc's name.
fn from_container(c: &super::eddsa::Container) -> Result<EcKey, String> {
    let point = [&[0x04], c.point.as_slice()].concat();
    let bad = |_| format!("a point that is not on {}", c.curve);
    match c.curve.as_str() {
        "SECP256K1" => Ok(EcKey::Secp256k1(
            k256::ecdsa::VerifyingKey::from_sec1_bytes(&point).map_err(bad)?,
        )),
        "SECP384R1" => Ok(EcKey::Secp384r1(
            p384::ecdsa::VerifyingKey::from_sec1_bytes(&point).map_err(bad)?,
        )),
        "SECP512R1" => Ok(EcKey::Secp521r1(
            p521::ecdsa::VerifyingKey::from_sec1_bytes(&point).map_err(bad)?,
        )),
        "WEI25519" => Err(
            "an ECDSA key on WEI25519, which pkg reads and jbuild does not verify \
             (no well-kept crate does ECDSA on that curve; pkg's own WEI25519 keys sign `eddsa`)"
                .into(),
        ),
        c if c.starts_with("BRAINPOOL") => Err(format!(
            "a key on a brainpool curve ({c}), which pkg accepts and jbuild does not verify yet"
        )),
        c => Err(format!("a key on the curve {c}, which pkg does not know")),
    }
}

/// Whether `sig` (DER) is `key`'s ECDSA signature over `message` with
/// SHA-256.
pub fn verify(key: &EcKey, message: &[u8], sig: &[u8]) -> bool {
    let digest = Sha256::digest(message);
    match key {
        EcKey::Secp256k1(k) => {
            let Ok(s) = k256::ecdsa::Signature::from_der(sig) else {
                return false;
            };
            // k256 takes only the lower `s`; the upper one is as valid.
            let s = s.normalize_s().unwrap_or(s);
            k.verify_prehash(&digest, &s).is_ok()
        }
        EcKey::Secp384r1(k) => p384::ecdsa::Signature::from_der(sig)
            .is_ok_and(|s| k.verify_prehash(&widened(&digest, 48), &s).is_ok()),
        EcKey::Secp521r1(k) => p521::ecdsa::Signature::from_der(sig)
            .is_ok_and(|s| k.verify_prehash(&widened(&digest, 66), &s).is_ok()),
    }
}

/// The 32-byte digest as the curve's field bytes, zeros in front: the
/// same integer (ECDSA takes a shorter hash whole), in the length the
/// verifier wants for a hash shorter than half the field (P-521).
fn widened(digest: &[u8], len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len - digest.len()];
    out.extend_from_slice(digest);
    out
}
