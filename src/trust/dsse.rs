//! DSSE envelopes and in-toto statements: how cosign signs attestations.
//!
//! An *attestation* is an in-toto [`Statement`] — "these subjects (name +
//! digest) have this predicate (a JSON document of type
//! `predicateType`)" — wrapped in a DSSE [`Envelope`]: the statement as
//! base64 `payload`, its `payloadType` (`application/vnd.in-toto+json`),
//! and signatures over the *pre-authentication encoding* ([`pae`]) of
//! both, so a signature cannot be moved to another payload type. No I/O.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::keys::{PublicKey, SigningKey};

/// The payload type of an in-toto statement in a DSSE envelope.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// in-toto Statement v0.1 (what cosign 2 writes) and v1.
pub const STATEMENT_V01: &str = "https://in-toto.io/Statement/v0.1";
pub const STATEMENT_V1: &str = "https://in-toto.io/Statement/v1";

/// SLSA provenance predicate types, and the short names cosign's
/// `--type` takes for them.
pub const PREDICATE_TYPES: &[(&str, &str)] = &[
    ("slsaprovenance", "https://slsa.dev/provenance/v0.2"),
    ("slsaprovenance02", "https://slsa.dev/provenance/v0.2"),
    ("slsaprovenance1", "https://slsa.dev/provenance/v1"),
    ("spdxjson", "https://spdx.dev/Document"),
    ("cyclonedx", "https://cyclonedx.org/bom"),
    ("custom", "https://cosign.sigstore.dev/attestation/v1"),
];

/// The predicate type cosign's `--type NAME` means (a URI is itself).
pub fn predicate_type(name: &str) -> &str {
    PREDICATE_TYPES
        .iter()
        .find(|(short, _)| *short == name)
        .map(|(_, uri)| *uri)
        .unwrap_or(name)
}

/// DSSE's pre-authentication encoding: what is really signed.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// base64 of the payload.
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    #[serde(default)]
    pub keyid: String,
    /// base64 of the DER signature of [`pae`].
    pub sig: String,
}

/// Why an envelope is refused.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("the envelope is not DSSE JSON")]
    NotJson(#[source] serde_json::Error),
    #[error("the envelope's payload is not base64")]
    NotBase64,
    #[error("the envelope's payload type is `{0}`, not `{IN_TOTO_PAYLOAD_TYPE}`")]
    PayloadType(String),
    #[error("no signature in the envelope is the key's")]
    BadSignature,
    #[error("the envelope's payload is not an in-toto statement")]
    NotStatement(#[source] serde_json::Error),
}

impl crate::blame::Blame for EnvelopeError {
    /// An attestation that does not verify: the image's, or the key the
    /// user gave.
    fn is_user_error(&self) -> bool {
        true
    }
}

impl Envelope {
    /// Signs `payload` of `payload_type` with `key`.
    pub fn sign(payload_type: &str, payload: &[u8], key: &SigningKey) -> Envelope {
        Envelope {
            payload_type: payload_type.to_string(),
            payload: B64.encode(payload),
            signatures: vec![EnvelopeSignature {
                keyid: String::new(),
                sig: B64.encode(key.sign(&pae(payload_type, payload))),
            }],
        }
    }

    /// `payload` of `payload_type` with no signature: read by what checks
    /// it another way (`jbuild verify` rebuilds), refused by every
    /// verifier (cosign's `verify-attestation`, [`Envelope::verify`]).
    pub fn unsigned(payload_type: &str, payload: &[u8]) -> Envelope {
        Envelope {
            payload_type: payload_type.to_string(),
            payload: B64.encode(payload),
            signatures: Vec::new(),
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<Envelope, EnvelopeError> {
        serde_json::from_slice(bytes).map_err(EnvelopeError::NotJson)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an envelope always serialises")
    }

    /// The payload, if one of the signatures is `key`'s.
    pub fn verify(&self, key: &PublicKey) -> Result<Vec<u8>, EnvelopeError> {
        let payload = B64
            .decode(&self.payload)
            .map_err(|_| EnvelopeError::NotBase64)?;
        let message = pae(&self.payload_type, &payload);
        let good = self.signatures.iter().any(|s| {
            B64.decode(&s.sig)
                .is_ok_and(|sig| key.verify(&message, &sig))
        });
        if good {
            Ok(payload)
        } else {
            Err(EnvelopeError::BadSignature)
        }
    }

    /// The in-toto statement inside, if the envelope is `key`'s.
    pub fn verify_statement(&self, key: &PublicKey) -> Result<Statement, EnvelopeError> {
        self.statement(Some(key))
    }

    /// The in-toto statement inside: checked against `key` when given,
    /// else read as it is (for what the caller checks some other way).
    pub fn statement(&self, key: Option<&PublicKey>) -> Result<Statement, EnvelopeError> {
        if self.payload_type != IN_TOTO_PAYLOAD_TYPE {
            return Err(EnvelopeError::PayloadType(self.payload_type.clone()));
        }
        let payload = match key {
            Some(key) => self.verify(key)?,
            None => B64
                .decode(&self.payload)
                .map_err(|_| EnvelopeError::NotBase64)?,
        };
        serde_json::from_slice(&payload).map_err(EnvelopeError::NotStatement)
    }
}

/// An in-toto statement: subjects and one predicate about them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Statement {
    #[serde(rename = "_type")]
    pub kind: String,
    #[serde(rename = "predicateType")]
    pub predicate_type: String,
    pub subject: Vec<Subject>,
    pub predicate: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subject {
    pub name: String,
    /// Algorithm → hex (`{"sha256": "…"}`).
    pub digest: std::collections::BTreeMap<String, String>,
}

impl Statement {
    /// A v0.1 statement (what cosign writes) about one subject: `name`
    /// and its `digest` (`sha256:…`).
    pub fn new(
        name: &str,
        digest: &str,
        predicate_type: &str,
        predicate: serde_json::Value,
    ) -> Statement {
        Statement::with_version(STATEMENT_V01, name, digest, predicate_type, predicate)
    }

    /// A statement of version `kind` ([`STATEMENT_V01`] or [`STATEMENT_V1`]).
    pub fn with_version(
        kind: &str,
        name: &str,
        digest: &str,
        predicate_type: &str,
        predicate: serde_json::Value,
    ) -> Statement {
        let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        Statement {
            kind: kind.to_string(),
            predicate_type: predicate_type.to_string(),
            subject: vec![Subject {
                name: name.to_string(),
                digest: [(alg.to_string(), hex.to_string())].into(),
            }],
            predicate,
        }
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a statement always serialises")
    }

    /// Whether one subject is the image `digest` (`sha256:…`).
    pub fn names_digest(&self, digest: &str) -> bool {
        let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        self.subject
            .iter()
            .any(|s| s.digest.get(alg).is_some_and(|h| h == hex))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_is_the_dsse_spec_example() {
        // The DSSE protocol document's test vector.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn an_unsigned_statement_is_read_but_never_verified() {
        let key = SigningKey::generate();
        let st = Statement::new("r/app", "sha256:ab", "https://x/p", serde_json::json!({}));
        let env =
            Envelope::parse(&Envelope::unsigned(IN_TOTO_PAYLOAD_TYPE, &st.to_bytes()).to_bytes())
                .unwrap();
        assert!(env.signatures.is_empty());
        assert_eq!(env.statement(None).unwrap(), st);
        assert!(matches!(
            env.verify_statement(&key.public()),
            Err(EnvelopeError::BadSignature)
        ));
    }

    #[test]
    fn a_signed_statement_verifies_and_a_changed_one_does_not() {
        let key = SigningKey::generate();
        let st = Statement::new(
            "r/app",
            "sha256:ab",
            predicate_type("slsaprovenance"),
            serde_json::json!({"builder": {"id": "jbuild"}}),
        );
        let env = Envelope::sign(IN_TOTO_PAYLOAD_TYPE, &st.to_bytes(), &key);
        let back = Envelope::parse(&env.to_bytes()).unwrap();
        let got = back.verify_statement(&key.public()).unwrap();
        assert_eq!(got, st);
        assert!(got.names_digest("sha256:ab"));
        assert!(!got.names_digest("sha256:cd"));

        let mut changed = back.clone();
        changed.payload = B64.encode(st.to_bytes().repeat(2));
        assert!(matches!(
            changed.verify_statement(&key.public()),
            Err(EnvelopeError::BadSignature)
        ));
        let mut retyped = back;
        retyped.payload_type = "text/plain".into();
        assert!(matches!(
            retyped.verify_statement(&key.public()),
            Err(EnvelopeError::PayloadType(_))
        ));
        assert!(matches!(
            env.verify(&SigningKey::generate().public()),
            Err(EnvelopeError::BadSignature)
        ));
    }
}
