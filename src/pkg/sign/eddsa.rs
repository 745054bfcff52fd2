//! `$PKGSIGN:eddsa$` signatures (and `ecc`, the same signer under its
//! older name), as pkg's ECC signer makes and checks them
//! (`libpkg/pkgsign_ecc.c`: both names select libecc's EDDSA25519 with
//! SHA-512 on the curve WEI25519):
//!
//! - the signature is pure Ed25519 (RFC 8032) over the same message as
//!   `ecdsa`: the 64 hex characters of the catalogue member's SHA-256 in
//!   `fingerprints` mode, its raw BLAKE2b-512 in `pubkey` mode;
//! - its 64 bytes are written as a DER `ECDSA-Sig-Value`: each 32-byte
//!   half an INTEGER, leading zero bytes dropped and a zero put in front
//!   of a high bit (pkg's `ecc_write_signature`);
//! - the key is pkg's own DER container (`pkg key -t eddsa --public`),
//!   read by [`container`], whose point is on WEI25519 and is mapped to
//!   Ed25519's Edwards form by [`super::wei25519`]. pkg reads no other
//!   form of an `eddsa` key (not OpenSSL's Ed25519 SubjectPublicKeyInfo),
//!   and neither does jbuild.
//!
//! Verification is ed25519-dalek's `verify_strict`: a key or `R` of small
//! order is refused, which no key pkg generates can have.

use ed25519_dalek::{Signature, VerifyingKey};
use k256::pkcs8::der::asn1::{AnyRef, BitStringRef, UintRef, Utf8StringRef};
use k256::pkcs8::der::{Decode, Reader, SliceReader, Tag, Tagged};
use k256::pkcs8::spki::{ObjectIdentifier, SubjectPublicKeyInfoRef};

use super::wei25519;

/// An Ed25519 public key read from pkg's container.
#[derive(Clone)]
pub struct EdKey(VerifyingKey);

impl std::fmt::Debug for EdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EdKey({})", hex::encode(self.0.as_bytes()))
    }
}

/// pkg's key container, `PkgPublicKeyInfo` in `libpkg/pkgsign_ecc.c`:
/// `SEQUENCE { UTF8String "pkg", INTEGER 1, UTF8String "ecc",
/// UTF8String <curve>, BOOLEAN <public>, BIT STRING 00 04 ‖ x ‖ y }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// libecc's name of the curve (`WEI25519`, `SECP256K1`, …).
    pub curve: String,
    /// The point's coordinates, `x ‖ y`, big-endian.
    pub point: Vec<u8>,
}

/// Whether `bytes` look like pkg's container rather than a
/// SubjectPublicKeyInfo: its first element is a string, not a sequence
/// (how pkg itself tells them apart).
pub fn is_container(bytes: &[u8]) -> bool {
    AnyRef::from_der(bytes)
        .ok()
        .filter(|seq| seq.tag() == Tag::Sequence)
        .and_then(|seq| SliceReader::new(seq.value()).ok()?.peek_tag().ok())
        == Some(Tag::Utf8String)
}

/// Reads pkg's public key container as `pkg` does (`ecc_read_pkgkey`:
/// application `pkg`, version 1, signer `ecc`, `public` true, an
/// uncompressed point), or says what is wrong.
pub fn container(bytes: &[u8]) -> Result<Container, String> {
    let bad = |what: &str| format!("pkg's key container, but {what}");
    let parsed = SliceReader::new(bytes).and_then(|mut r| {
        let c = r.sequence(|r| {
            let app: Utf8StringRef<'_> = r.decode()?;
            let version: UintRef<'_> = r.decode()?;
            let signer: Utf8StringRef<'_> = r.decode()?;
            let curve: Utf8StringRef<'_> = r.decode()?;
            // libder writes TRUE as 01, which strict DER would refuse.
            let public: AnyRef<'_> = r.decode()?;
            let key: BitStringRef<'_> = r.decode()?;
            Ok((
                app.as_str().to_string(),
                version.as_bytes().to_vec(),
                signer.as_str().to_string(),
                curve.as_str().to_string(),
                (public.tag(), public.value().to_vec()),
                key.as_bytes().map(<[u8]>::to_vec),
            ))
        })?;
        r.finish(c)
    });
    let (app, version, signer, curve, (tag, public), key) =
        parsed.map_err(|e| bad(&format!("not in its form ({e})")))?;
    if app != "pkg" || signer != "ecc" {
        return Err(bad(&format!("of `{app}`/`{signer}`, not `pkg`/`ecc`")));
    }
    if version != [1] {
        return Err(bad("of a version other than 1"));
    }
    if tag != Tag::Boolean || public.len() != 1 || public[0] == 0 {
        return Err(bad("not marked public (a private key?)"));
    }
    let point = match key.as_deref() {
        Some([0x04, point @ ..]) if !point.is_empty() => point.to_vec(),
        _ => return Err(bad("its point is not uncompressed")),
    };
    Ok(Container { curve, point })
}

/// Whether `bytes` are an Ed25519 key in OpenSSL's form (a
/// SubjectPublicKeyInfo naming id-Ed25519, in DER or PEM), which pkg does
/// not read: said by name, as the mistake it likely is.
pub fn is_openssl_form(bytes: &[u8]) -> bool {
    const ID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");
    let der = match pem::parse(bytes) {
        Ok(p) => p.into_contents(),
        Err(_) => bytes.to_vec(),
    };
    SubjectPublicKeyInfoRef::from_der(&der).is_ok_and(|k| k.algorithm.oid == ID_ED25519)
}

/// An `eddsa` public key as pkg reads it (see the module docs), or why not.
pub fn parse(bytes: &[u8]) -> Result<EdKey, String> {
    if !is_container(bytes) {
        return Err(if is_openssl_form(bytes) {
            "an Ed25519 key in OpenSSL's form (SubjectPublicKeyInfo); pkg reads `eddsa` keys \
             only in its own container (`pkg key -t eddsa --public`)"
                .into()
        } else {
            "not pkg's key container, the only form pkg reads an `eddsa` key in".into()
        });
    }
    let c = container(bytes)?;
    if c.curve != "WEI25519" {
        return Err(format!(
            "a key on {}; pkg's `eddsa` signs on WEI25519 only",
            c.curve
        ));
    }
    let ed = wei25519::to_ed25519(&c.point).map_err(|e| format!("its point is refused: {e}"))?;
    VerifyingKey::from_bytes(&ed)
        .map(EdKey)
        .map_err(|e| format!("its point is refused by Ed25519: {e}"))
}

/// The 64 signature bytes of a DER `ECDSA-Sig-Value` as pkg writes an
/// EdDSA one (`ecc_extract_signature`: each half padded back to 32 bytes).
fn raw_signature(der: &[u8]) -> Option<[u8; 64]> {
    let (r, s) = SliceReader::new(der)
        .and_then(|mut rd| {
            let rs = rd.sequence(|rd| {
                let r: UintRef<'_> = rd.decode()?;
                let s: UintRef<'_> = rd.decode()?;
                Ok((r.as_bytes().to_vec(), s.as_bytes().to_vec()))
            })?;
            rd.finish(rs)
        })
        .ok()?;
    if r.len() > 32 || s.len() > 32 {
        return None;
    }
    let mut out = [0u8; 64];
    out[32 - r.len()..32].copy_from_slice(&r);
    out[64 - s.len()..].copy_from_slice(&s);
    Some(out)
}

/// Whether `sig` (DER, as above) is `key`'s Ed25519 signature of `message`.
pub fn verify(key: &EdKey, message: &[u8], sig: &[u8]) -> bool {
    raw_signature(sig).is_some_and(|raw| {
        key.0
            .verify_strict(message, &Signature::from_bytes(&raw))
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_halves_are_padded_back_to_32_bytes() {
        // r = 00 00 7f …, s = 80 …: pkg drops r's zeros and puts one before s.
        let mut r = [0x11u8; 32];
        r[0] = 0;
        r[1] = 0;
        r[2] = 0x7f;
        let s = [0x80u8; 32];
        let mut der = vec![0x30, 2 + 30 + 2 + 33, 0x02, 30];
        der.extend_from_slice(&r[2..]);
        der.extend_from_slice(&[0x02, 33, 0]);
        der.extend_from_slice(&s);
        let raw = raw_signature(&der).unwrap();
        assert_eq!(&raw[..32], &r);
        assert_eq!(&raw[32..], &s);
        // A half longer than 32 bytes is no EdDSA signature.
        let mut long = vec![0x30, 2 + 33 + 2 + 1, 0x02, 33, 0x01];
        long.extend_from_slice(&[0; 32]);
        long.extend_from_slice(&[0x02, 1, 1]);
        assert!(raw_signature(&long).is_none());
    }
}
