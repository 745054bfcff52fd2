//! A catalogue's signatures, checked before anything in it is used
//! (`../shared/notes/pkg-anyhost.md` §1.4; pkg's `libpkg/pkg_repo.c` and
//! `libpkg/pkgsign_ossl.c`).
//!
//! What pkg signs is the catalogue member's SHA-256 as 64 lowercase hex
//! characters. The RSA signature is PKCS#1 v1.5 with SHA-256 over those 64
//! ASCII bytes (`openssl dgst -sha256 -sign`); pkg built on OpenSSL before
//! 3 signed the 64 bytes themselves in a DigestInfo naming SHA-1, which
//! pkg still accepts in `pubkey` mode only, and so does jbuild.
//!
//! - `signature_type: pubkey`: the archive's `signature` member, checked
//!   with the one key the configuration names.
//! - `signature_type: fingerprints`: `<name>.sig` and `<name>.pub` members
//!   (or a `cert` of that name in `meta.conf`). The SHA-256 of the `.pub`
//!   bytes is the key's fingerprint: one found in `<dir>/revoked` refuses
//!   the catalogue; every signer found in `<dir>/trusted` must verify, and
//!   at least one must be there.
//!
//! A `.sig` (and, from pkg's signing command, its `.pub`) may start with
//! `$PKGSIGN:<type>$`: `rsa` (or none) is RSA as above; `ecdsa`, which
//! pkg 1.21 added, is read by [`ecc`]; `eddsa` and `ecc` (one signer under
//! two names in pkg: Ed25519 with its key in pkg's own container) by
//! [`eddsa`].
//! The fingerprint is the SHA-256 of the `.pub` without that head (pkg
//! before it stripped the head hashed it whole: either matches).

pub mod ecc;
pub mod eddsa;
pub mod wei25519;

use crate::blame::Blame;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;
use rsa::{Pkcs1v15Sign, RsaPublicKey};
use sha2::{Digest as _, Sha256};

use super::catalogue::{Extracted, Meta};
use super::repo_conf::{RepoConfig, SignatureType};
use super::ucl;

/// The most fingerprint files read from one directory, and their size.
pub const MAX_FINGERPRINT_FILES: usize = 256;
const MAX_KEY_FILE: u64 = 64 * 1024;

/// What a repository's catalogue must be signed by.
#[derive(Debug, Clone)]
pub enum Trust {
    /// `signature_type: none`: nothing is checked (pkg's default).
    None,
    Pubkey {
        path: PathBuf,
        key: PublicKey,
    },
    Fingerprints {
        dir: PathBuf,
        trusted: Vec<Fingerprint>,
        revoked: Vec<Fingerprint>,
    },
}

/// The key of `signature_type: pubkey`: RSA in PEM, an ECDSA key
/// ([`ecc`]) or an EdDSA one ([`eddsa`]); which one a signature needs its
/// head says.
#[derive(Debug, Clone)]
pub enum PublicKey {
    Rsa(RsaPublicKey),
    Ecdsa(ecc::EcKey),
    Eddsa(eddsa::EdKey),
}

/// One fingerprint file: `function: "sha256"; fingerprint: "<hex>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub file: PathBuf,
    pub sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("repository `{repo}`: the catalogue is not signed, and its configuration requires a signature ({mode})")]
    Missing { repo: String, mode: &'static str },
    #[error(
        "repository `{repo}`: no signer of the catalogue is trusted (fingerprints {}; \
         trusted keys are in {}/trusted)",
        seen.join(", "), dir.display()
    )]
    NoTrustedKey {
        repo: String,
        dir: PathBuf,
        seen: Vec<String>,
    },
    #[error("repository `{repo}`: the catalogue is signed by `{signer}`, whose key (fingerprint {fingerprint}) is revoked by {}", file.display())]
    Revoked {
        repo: String,
        signer: String,
        fingerprint: String,
        file: PathBuf,
    },
    #[error("repository `{repo}`: the signature by `{signer}` does not match the catalogue: it was changed after signing, or signed with another key")]
    BadSignature { repo: String, signer: String },
    #[error("repository `{repo}`: `{signer}` signs with `{kind}`, which jbuild does not verify (it verifies `rsa`, `ecdsa` and `eddsa`/`ecc`)")]
    Unsupported {
        repo: String,
        signer: String,
        kind: String,
    },
    #[error("repository `{repo}`: the key of `{signer}` cannot be used: {reason}")]
    BadKey {
        repo: String,
        signer: String,
        reason: String,
    },
    #[error("repository `{repo}`: `{signer}.sig` has no `{signer}.pub` beside it nor a cert in meta.conf")]
    NoPublicKey { repo: String, signer: String },
    #[error("repository `{repo}`: signature_type is {mode} but no `{key}` is configured")]
    NotConfigured {
        repo: String,
        mode: &'static str,
        key: &'static str,
    },
    #[error("{}: {reason}", path.display())]
    FingerprintFile { path: PathBuf, reason: String },
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Blame for SignError {
    /// Every refusal is the repository's or its configuration's (exit 1,
    /// nothing stored); only a failing read is the machine's.
    fn is_user_error(&self) -> bool {
        !matches!(self, SignError::Read { .. })
    }
}

impl Trust {
    /// The trust a repository configuration asks for; `root` is the image
    /// the paths are in (resolved inside it, as pkg --rootdir does), or
    /// `None` for paths on the host (jbuild's own key directory).
    pub fn of_repo(repo: &RepoConfig, root: Option<&Path>) -> Result<Trust, SignError> {
        let place = |p: &str| -> Result<PathBuf, SignError> {
            match root {
                Some(r) => {
                    crate::fsutil::resolve_in_root(r, Path::new(p), true).map_err(|source| {
                        SignError::Read {
                            path: PathBuf::from(p),
                            source,
                        }
                    })
                }
                None => Ok(PathBuf::from(p)),
            }
        };
        match repo.signature_type {
            SignatureType::None => Ok(Trust::None),
            SignatureType::Pubkey => {
                let shown = repo
                    .pubkey
                    .as_deref()
                    .ok_or_else(|| SignError::NotConfigured {
                        repo: repo.name.clone(),
                        mode: "pubkey",
                        key: "pubkey",
                    })?;
                let pem = read_small(&place(shown)?, Path::new(shown))?;
                let key = any_key(&pem).map_err(|reason| SignError::BadKey {
                    repo: repo.name.clone(),
                    signer: shown.to_string(),
                    reason,
                })?;
                Ok(Trust::Pubkey {
                    path: PathBuf::from(shown),
                    key,
                })
            }
            SignatureType::Fingerprints => {
                let shown =
                    repo.fingerprints
                        .as_deref()
                        .ok_or_else(|| SignError::NotConfigured {
                            repo: repo.name.clone(),
                            mode: "fingerprints",
                            key: "fingerprints",
                        })?;
                // Each of `trusted` and `revoked` is resolved in the root on
                // its own: either may be a symlink.
                let sub = |name: &str| {
                    let shown = Path::new(shown).join(name);
                    place(&shown.to_string_lossy()).and_then(|host| fingerprints(&host, &shown))
                };
                Ok(Trust::Fingerprints {
                    dir: PathBuf::from(shown),
                    trusted: sub("trusted")?,
                    revoked: sub("revoked")?,
                })
            }
        }
    }

    /// Checks the signatures of an extracted catalogue member (see the
    /// module docs); `repo` names the repository in errors.
    pub fn verify(&self, ex: &Extracted, meta: &Meta, repo: &str) -> Result<(), SignError> {
        let hex = ex.sha256_hex.as_bytes();
        match self {
            Trust::None => Ok(()),
            Trust::Pubkey { path, key } => {
                let sig = ex.signature.as_deref().ok_or_else(|| SignError::Missing {
                    repo: repo.into(),
                    mode: "pubkey",
                })?;
                let signer = path.display().to_string();
                let (kind, sig) = split_head(sig);
                let good = match (kind.as_str(), key) {
                    ("rsa", PublicKey::Rsa(key)) => {
                        let sig = rsa_signature(sig, key);
                        verify_sha256(key, hex, sig) || verify_legacy(key, hex, sig)
                    }
                    // pkg's ECC signer signs the member's raw BLAKE2b-512 here.
                    ("ecdsa", PublicKey::Ecdsa(key)) => ecc::verify(key, &ex.blake2b, sig),
                    ("eddsa" | "ecc", PublicKey::Eddsa(key)) => {
                        eddsa::verify(key, &ex.blake2b, sig)
                    }
                    ("rsa" | "ecdsa" | "eddsa" | "ecc", key) => {
                        return Err(SignError::BadKey {
                            repo: repo.into(),
                            signer,
                            reason: format!(
                                "the catalogue is signed with `{kind}`, and the key is {}",
                                key_kind(key)
                            ),
                        })
                    }
                    _ => {
                        return Err(SignError::Unsupported {
                            repo: repo.into(),
                            signer,
                            kind,
                        })
                    }
                };
                if good {
                    Ok(())
                } else {
                    Err(SignError::BadSignature {
                        repo: repo.into(),
                        signer,
                    })
                }
            }
            Trust::Fingerprints {
                dir,
                trusted,
                revoked,
            } => {
                let signed: Vec<_> = ex.signers.iter().filter(|(_, s)| s.sig.is_some()).collect();
                if signed.is_empty() {
                    return Err(SignError::Missing {
                        repo: repo.into(),
                        mode: "fingerprints",
                    });
                }
                let (mut good, mut seen) = (0, Vec::new());
                for (name, s) in signed {
                    let whole = s
                        .public
                        .as_deref()
                        .or_else(|| meta.certs.get(name).map(Vec::as_slice))
                        .ok_or_else(|| SignError::NoPublicKey {
                            repo: repo.into(),
                            signer: name.clone(),
                        })?;
                    let (sig_kind, sig) = split_head(s.sig.as_deref().unwrap_or_default());
                    let (pub_kind, public) = split_head(whole);
                    // The `.sig`'s head says the signer; a `.pub` with a head
                    // and a bare `.sig` is the same signer.
                    let kind = if sig.len() < s.sig.as_deref().unwrap_or_default().len() {
                        sig_kind
                    } else {
                        pub_kind
                    };
                    let fp = hex::encode(Sha256::digest(public));
                    let fp_whole = hex::encode(Sha256::digest(whole));
                    let matches = |f: &&Fingerprint| f.sha256 == fp || f.sha256 == fp_whole;
                    if let Some(r) = revoked.iter().find(matches) {
                        return Err(SignError::Revoked {
                            repo: repo.into(),
                            signer: name.clone(),
                            fingerprint: fp,
                            file: r.file.clone(),
                        });
                    }
                    if !trusted.iter().any(|f| matches(&f)) {
                        seen.push(format!("{name} {fp}"));
                        continue;
                    }
                    let bad_key = |reason| SignError::BadKey {
                        repo: repo.into(),
                        signer: name.clone(),
                        reason,
                    };
                    let valid = match kind.as_str() {
                        "rsa" => {
                            let key = public_key(public).map_err(bad_key)?;
                            verify_sha256(&key, hex, rsa_signature(sig, &key))
                        }
                        "ecdsa" => ecc::verify(&ecc::parse(public).map_err(bad_key)?, hex, sig),
                        "eddsa" | "ecc" => {
                            eddsa::verify(&eddsa::parse(public).map_err(bad_key)?, hex, sig)
                        }
                        _ => {
                            return Err(SignError::Unsupported {
                                repo: repo.into(),
                                signer: name.clone(),
                                kind,
                            })
                        }
                    };
                    if !valid {
                        return Err(SignError::BadSignature {
                            repo: repo.into(),
                            signer: name.clone(),
                        });
                    }
                    good += 1;
                }
                if good == 0 {
                    return Err(SignError::NoTrustedKey {
                        repo: repo.into(),
                        dir: dir.clone(),
                        seen,
                    });
                }
                Ok(())
            }
        }
    }
}

/// A member's `$PKGSIGN:<type>$` head and what follows it; `rsa` when
/// there is none (pkg's `parse_sigtype`).
fn split_head(bytes: &[u8]) -> (String, &[u8]) {
    if let Some(rest) = bytes.strip_prefix(b"$PKGSIGN:") {
        if let Some(end) = rest.iter().take(32).position(|&b| b == b'$') {
            let kind = String::from_utf8_lossy(&rest[..end]).into_owned();
            return (kind, &rest[end + 1..]);
        }
    }
    ("rsa".into(), bytes)
}

/// The RSA signature bytes: the NUL older pkg appended taken off.
fn rsa_signature<'a>(sig: &'a [u8], key: &RsaPublicKey) -> &'a [u8] {
    use rsa::traits::PublicKeyParts;
    if sig.len() == key.size() + 1 && sig.last() == Some(&0) {
        &sig[..sig.len() - 1]
    } else {
        sig
    }
}

/// The `pubkey` file: RSA in PEM; else pkg's own container, an EdDSA
/// key on WEI25519 or an ECDSA one; else an ECDSA key in DER or PEM.
fn any_key(bytes: &[u8]) -> Result<PublicKey, String> {
    if eddsa::is_container(bytes) {
        return match eddsa::container(bytes)?.curve.as_str() {
            "WEI25519" => eddsa::parse(bytes).map(PublicKey::Eddsa),
            _ => ecc::parse(bytes).map(PublicKey::Ecdsa),
        };
    }
    if eddsa::is_openssl_form(bytes) {
        return eddsa::parse(bytes).map(PublicKey::Eddsa);
    }
    match public_key(bytes) {
        Ok(k) => Ok(PublicKey::Rsa(k)),
        Err(rsa) => ecc::parse(bytes)
            .map(PublicKey::Ecdsa)
            .map_err(|ec| format!("not an RSA key ({rsa}), and {ec}")),
    }
}

fn key_kind(key: &PublicKey) -> String {
    match key {
        PublicKey::Rsa(_) => "an RSA key".into(),
        PublicKey::Ecdsa(k) => format!("an ECDSA key on {}", k.curve()),
        PublicKey::Eddsa(_) => "an EdDSA key (Ed25519)".into(),
    }
}

fn verify_sha256(key: &RsaPublicKey, hex: &[u8], sig: &[u8]) -> bool {
    key.verify(Pkcs1v15Sign::new::<Sha256>(), &Sha256::digest(hex), sig)
        .is_ok()
}

/// The SHA-1-named DigestInfo around the 64 hex bytes, with the length
/// byte of the octet string as older OpenSSL wrote it (64) and as
/// OpenSSL 3 writes it for SHA-1 (20).
fn verify_legacy(key: &RsaPublicKey, hex: &[u8], sig: &[u8]) -> bool {
    const SHA1_OID: [u8; 11] = [
        0x30, 0x09, 0x06, 0x05, 0x2b, 0x0e, 0x03, 0x02, 0x1a, 0x05, 0x00,
    ];
    [(0x51u8, 0x40u8), (0x21, 0x14)]
        .iter()
        .any(|&(outer, inner)| {
            let mut t = vec![0x30, outer];
            t.extend_from_slice(&SHA1_OID);
            t.extend_from_slice(&[0x04, inner]);
            t.extend_from_slice(hex);
            key.verify(Pkcs1v15Sign::new_unprefixed(), &t, sig).is_ok()
        })
}

/// An RSA public key in PEM, SubjectPublicKeyInfo or PKCS#1.
fn public_key(pem: &[u8]) -> Result<RsaPublicKey, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "not text".to_string())?;
    let text = text.trim_matches(char::from(0)).trim();
    RsaPublicKey::from_public_key_pem(text)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(text))
        .map_err(|e| e.to_string())
}

fn read_small(path: &Path, shown: &Path) -> Result<Vec<u8>, SignError> {
    let f = fs::File::open(path).map_err(|source| SignError::Read {
        path: shown.to_path_buf(),
        source,
    })?;
    let mut bytes = Vec::new();
    f.take(MAX_KEY_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| SignError::Read {
            path: shown.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > MAX_KEY_FILE {
        return Err(SignError::FingerprintFile {
            path: shown.to_path_buf(),
            reason: format!("larger than {MAX_KEY_FILE} bytes"),
        });
    }
    Ok(bytes)
}

/// The fingerprint files of a directory (none if it is missing).
fn fingerprints(dir: &Path, shown: &Path) -> Result<Vec<Fingerprint>, SignError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SignError::Read {
                path: shown.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| SignError::Read {
            path: shown.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        // Regular files only: a symlink in an image's key directory is not
        // followed out of it.
        let regular = entry.file_type().is_ok_and(|t| t.is_file());
        if name.to_string_lossy().starts_with('.') || !regular {
            continue;
        }
        if out.len() >= MAX_FINGERPRINT_FILES {
            return Err(SignError::FingerprintFile {
                path: shown.to_path_buf(),
                reason: format!("more than {MAX_FINGERPRINT_FILES} files"),
            });
        }
        let file = shown.join(&name);
        let bytes = read_small(&entry.path(), &file)?;
        let bad = |reason: String| SignError::FingerprintFile {
            path: file.clone(),
            reason,
        };
        let v = ucl::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| bad(e.to_string()))?;
        let function = v.get("function").and_then(ucl::Value::as_str).unwrap_or("");
        if !function.eq_ignore_ascii_case("sha256") {
            return Err(bad(format!(
                "function `{function}`: only sha256 fingerprints exist"
            )));
        }
        let fp = v
            .get("fingerprint")
            .and_then(ucl::Value::as_str)
            .filter(|f| f.len() == 64 && f.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| bad("no `fingerprint` of 64 hex digits".into()))?;
        out.push(Fingerprint {
            file,
            sha256: fp.to_ascii_lowercase(),
        });
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(out)
}
