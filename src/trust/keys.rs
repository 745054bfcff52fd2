//! Key pairs as cosign writes and reads them: ECDSA P-256.
//!
//! A private key travels as cosign's *encrypted* PEM (`ENCRYPTED SIGSTORE
//! PRIVATE KEY`, or `ENCRYPTED COSIGN PRIVATE KEY` from cosign before 2.0):
//! JSON holding a scrypt key derivation (`N`, `r`, `p`, `salt`), a NaCl
//! secretbox `nonce` and the `ciphertext` of the PKCS#8 DER key — the
//! format of go-securesystemslib's `encrypted` package. Plain PKCS#8
//! (`PRIVATE KEY`) and SEC1 (`EC PRIVATE KEY`) PEM are read too. A public
//! key is a PEM `PUBLIC KEY` (SubjectPublicKeyInfo).
//!
//! No I/O here: bytes in, bytes out. The key material and the password are
//! never formatted: [`SigningKey`]'s `Debug` is `<redacted>`, and errors
//! name what failed, never what was read.

use std::fmt;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::XSalsa20Poly1305;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding,
};
use rand_core::{OsRng, RngCore};
use serde::{Deserialize, Serialize};

/// The PEM label cosign 2 writes its private keys under.
pub const ENCRYPTED_LABEL: &str = "ENCRYPTED SIGSTORE PRIVATE KEY";
/// The label cosign before 2.0 wrote; still read.
const LEGACY_LABELS: &[&str] = &["ENCRYPTED COSIGN PRIVATE KEY"];

/// scrypt's cost as go-securesystemslib chooses it (N = 2^15, r 8, p 1).
const SCRYPT_LOG_N: u8 = 15;
const SCRYPT_R: u32 = 8;
const SCRYPT_P: u32 = 1;
/// The most costly scrypt a key file may ask for (N = 2^20: ~1 GiB at
/// r 8), so a hostile key file cannot take all memory.
const SCRYPT_MAX_LOG_N: u8 = 20;

/// What went wrong with a key; never the key's bytes or the password.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("not a PEM file")]
    NotPem,
    #[error("a PEM `{0}` block is not a key jbuild reads: use a cosign key (`jbuild generate-key-pair` or `cosign generate-key-pair`), a PKCS#8 `PRIVATE KEY` or an `EC PRIVATE KEY`")]
    UnknownLabel(String),
    #[error("the key is not an ECDSA P-256 key ({0})")]
    NotP256(&'static str),
    #[error("the encrypted key is damaged: {0}")]
    Damaged(&'static str),
    #[error("the password does not open the key (or the key is damaged)")]
    WrongPassword,
    #[error("the key asks for scrypt N = 2^{0}, more than the 2^{SCRYPT_MAX_LOG_N} jbuild allows")]
    TooCostly(u8),
}

impl crate::blame::Blame for KeyError {
    /// The key or password the user gave.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A private key that signs. Its `Debug` prints nothing of the key.
#[derive(Clone)]
pub struct SigningKey(p256::ecdsa::SigningKey);

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

/// A public key that checks signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey(VerifyingKey);

impl SigningKey {
    /// A new random key.
    pub fn generate() -> SigningKey {
        SigningKey(p256::ecdsa::SigningKey::random(&mut OsRng))
    }

    /// The ASN.1 DER ECDSA-P256-SHA256 signature of `message`, as cosign
    /// writes it.
    pub fn sign(&self, message: &[u8]) -> Vec<u8> {
        let sig: Signature = self.0.sign(message);
        sig.to_der().as_bytes().to_vec()
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(*self.0.verifying_key())
    }

    /// cosign's encrypted PEM of this key under `password` (may be empty,
    /// as cosign allows).
    pub fn to_encrypted_pem(&self, password: &[u8]) -> Result<String, KeyError> {
        let der = self
            .0
            .to_pkcs8_der()
            .map_err(|_| KeyError::Damaged("cannot encode the key"))?;
        let mut salt = [0u8; 32];
        OsRng.fill_bytes(&mut salt);
        let mut nonce = [0u8; 24];
        OsRng.fill_bytes(&mut nonce);
        let key = derive(password, &salt, SCRYPT_LOG_N, SCRYPT_R, SCRYPT_P)?;
        let ciphertext = XSalsa20Poly1305::new(&key.into())
            .encrypt(&nonce.into(), der.as_bytes())
            .map_err(|_| KeyError::Damaged("cannot encrypt"))?;
        let doc = Encrypted {
            kdf: Kdf {
                name: "scrypt".into(),
                params: ScryptParams {
                    n: 1u64 << SCRYPT_LOG_N,
                    r: SCRYPT_R,
                    p: SCRYPT_P,
                },
                salt: B64.encode(salt),
            },
            cipher: Cipher {
                name: "nacl/secretbox".into(),
                nonce: B64.encode(nonce),
            },
            ciphertext: B64.encode(ciphertext),
        };
        let json = serde_json::to_vec(&doc).map_err(|_| KeyError::Damaged("cannot encode"))?;
        Ok(pem::encode_config(
            &pem::Pem::new(ENCRYPTED_LABEL, json),
            pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
        ))
    }

    /// A private key from PEM text: cosign's encrypted form (opened with
    /// `password`), or plain PKCS#8 / SEC1 (the password is not asked for).
    pub fn from_pem(
        text: &[u8],
        password: impl FnOnce() -> Vec<u8>,
    ) -> Result<SigningKey, KeyError> {
        let block = pem::parse(text).map_err(|_| KeyError::NotPem)?;
        let label = block.tag();
        if label == ENCRYPTED_LABEL || LEGACY_LABELS.contains(&label) {
            let der = decrypt(block.contents(), &password())?;
            return p256::ecdsa::SigningKey::from_pkcs8_der(&der)
                .map(SigningKey)
                .map_err(|_| KeyError::NotP256("PKCS#8 inside the encrypted key"));
        }
        match label {
            "PRIVATE KEY" => p256::ecdsa::SigningKey::from_pkcs8_der(block.contents())
                .map(SigningKey)
                .map_err(|_| KeyError::NotP256("PKCS#8")),
            "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(block.contents())
                .map(|k| SigningKey(k.into()))
                .map_err(|_| KeyError::NotP256("SEC1")),
            other => Err(KeyError::UnknownLabel(other.to_string())),
        }
    }

    /// Whether `text` is a key that needs a password to open.
    pub fn needs_password(text: &[u8]) -> bool {
        pem::parse(text)
            .is_ok_and(|b| b.tag() == ENCRYPTED_LABEL || LEGACY_LABELS.contains(&b.tag()))
    }
}

impl PublicKey {
    /// A public key from PEM (`PUBLIC KEY`, SubjectPublicKeyInfo).
    pub fn from_pem(text: &[u8]) -> Result<PublicKey, KeyError> {
        let block = pem::parse(text).map_err(|_| KeyError::NotPem)?;
        if block.tag() != "PUBLIC KEY" {
            return Err(KeyError::UnknownLabel(block.tag().to_string()));
        }
        VerifyingKey::from_public_key_der(block.contents())
            .map(PublicKey)
            .map_err(|_| KeyError::NotP256("SubjectPublicKeyInfo"))
    }

    pub fn to_pem(&self) -> String {
        self.0
            .to_public_key_pem(LineEnding::LF)
            .expect("a P-256 public key always encodes")
    }

    /// Whether `signature` (ASN.1 DER, or the 64-byte r‖s form) is this
    /// key's ECDSA-P256-SHA256 signature of `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        let sig = match Signature::from_der(signature) {
            Ok(s) => s,
            Err(_) => match Signature::from_slice(signature) {
                Ok(s) => s,
                Err(_) => return false,
            },
        };
        self.0.verify(message, &sig).is_ok()
    }
}

#[derive(Serialize, Deserialize)]
struct Encrypted {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(Serialize, Deserialize)]
struct Kdf {
    name: String,
    params: ScryptParams,
    salt: String,
}

#[derive(Serialize, Deserialize)]
struct ScryptParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(Serialize, Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

fn derive(password: &[u8], salt: &[u8], log_n: u8, r: u32, p: u32) -> Result<[u8; 32], KeyError> {
    let params = scrypt::Params::new(log_n, r, p, 32)
        .map_err(|_| KeyError::Damaged("scrypt parameters out of range"))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password, salt, &params, &mut key)
        .map_err(|_| KeyError::Damaged("scrypt parameters out of range"))?;
    Ok(key)
}

fn decrypt(json: &[u8], password: &[u8]) -> Result<Vec<u8>, KeyError> {
    let doc: Encrypted = serde_json::from_slice(json)
        .map_err(|_| KeyError::Damaged("not the JSON cosign writes"))?;
    if doc.kdf.name != "scrypt" {
        return Err(KeyError::Damaged("the key derivation is not scrypt"));
    }
    if doc.cipher.name != "nacl/secretbox" {
        return Err(KeyError::Damaged("the cipher is not nacl/secretbox"));
    }
    let n = doc.kdf.params.n;
    if n < 2 || !n.is_power_of_two() {
        return Err(KeyError::Damaged("scrypt N is not a power of two"));
    }
    let log_n = n.trailing_zeros() as u8;
    if log_n > SCRYPT_MAX_LOG_N {
        return Err(KeyError::TooCostly(log_n));
    }
    let salt = B64
        .decode(&doc.kdf.salt)
        .map_err(|_| KeyError::Damaged("the salt is not base64"))?;
    let nonce: [u8; 24] = B64
        .decode(&doc.cipher.nonce)
        .ok()
        .and_then(|n| n.try_into().ok())
        .ok_or(KeyError::Damaged("the nonce is not 24 bytes of base64"))?;
    let ciphertext = B64
        .decode(&doc.ciphertext)
        .map_err(|_| KeyError::Damaged("the ciphertext is not base64"))?;
    let key = derive(password, &salt, log_n, doc.kdf.params.r, doc.kdf.params.p)?;
    XSalsa20Poly1305::new(&key.into())
        .decrypt(&nonce.into(), ciphertext.as_slice())
        .map_err(|_| KeyError::WrongPassword)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encrypted_key_round_trips_and_refuses_another_password() {
        let key = SigningKey::generate();
        let pem = key.to_encrypted_pem(b"hunter2").unwrap();
        assert!(pem.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
        assert!(SigningKey::needs_password(pem.as_bytes()));
        let back = SigningKey::from_pem(pem.as_bytes(), || b"hunter2".to_vec()).unwrap();
        assert_eq!(back.public(), key.public());
        let wrong = SigningKey::from_pem(pem.as_bytes(), || b"hunter3".to_vec()).unwrap_err();
        assert!(matches!(wrong, KeyError::WrongPassword), "{wrong}");
    }

    #[test]
    fn signatures_verify_with_the_public_pem_and_not_after_a_change() {
        let key = SigningKey::generate();
        let public = PublicKey::from_pem(key.public().to_pem().as_bytes()).unwrap();
        let sig = key.sign(b"payload");
        assert!(public.verify(b"payload", &sig));
        assert!(!public.verify(b"payloaD", &sig));
        assert!(!SigningKey::generate().public().verify(b"payload", &sig));
    }

    #[test]
    fn plain_pkcs8_keys_are_read_without_a_password() {
        let key = SigningKey::generate();
        let pem = key.0.to_pkcs8_pem(LineEnding::LF).unwrap();
        let back = SigningKey::from_pem(pem.as_bytes(), || panic!("no password asked")).unwrap();
        assert_eq!(back.public(), key.public());
    }

    #[test]
    fn a_costly_key_file_is_refused_before_scrypt_runs() {
        let key = SigningKey::generate();
        let pem = key.to_encrypted_pem(b"").unwrap();
        let block = pem::parse(pem.as_bytes()).unwrap();
        let text = String::from_utf8(block.contents().to_vec())
            .unwrap()
            .replace("\"N\":32768", "\"N\":1073741824");
        let bad = pem::encode(&pem::Pem::new(ENCRYPTED_LABEL, text.into_bytes()));
        let err = SigningKey::from_pem(bad.as_bytes(), Vec::new).unwrap_err();
        assert!(matches!(err, KeyError::TooCostly(30)), "{err}");
    }
}
