//! cosign's simple-signing payload: the JSON a signature is made over.
//!
//! ```json
//! {"critical":{"identity":{"docker-reference":"host/repo"},
//!              "image":{"docker-manifest-digest":"sha256:…"},
//!              "type":"cosign container image signature"},
//!  "optional":null}
//! ```
//!
//! The digest is what a verifier compares with the image's; the reference
//! says where it was signed (cosign does not compare it). No I/O here.

use serde::{Deserialize, Serialize};

/// The `critical.type` cosign writes and expects.
pub const SIGNATURE_TYPE: &str = "cosign container image signature";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimpleSigning {
    pub critical: Critical,
    pub optional: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Critical {
    pub identity: Identity,
    pub image: ImageClaim,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    #[serde(rename = "docker-reference")]
    pub docker_reference: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageClaim {
    #[serde(rename = "docker-manifest-digest")]
    pub docker_manifest_digest: String,
}

impl SimpleSigning {
    /// The payload for the image `digest` (`sha256:…`) of `repository`.
    pub fn new(repository: &str, digest: &str) -> SimpleSigning {
        SimpleSigning {
            critical: Critical {
                identity: Identity {
                    docker_reference: repository.to_string(),
                },
                image: ImageClaim {
                    docker_manifest_digest: digest.to_string(),
                },
                kind: SIGNATURE_TYPE.to_string(),
            },
            optional: None,
        }
    }

    /// The bytes signed (cosign's field order, no spaces).
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("the payload always serialises")
    }

    pub fn parse(bytes: &[u8]) -> Result<SimpleSigning, serde_json::Error> {
        serde_json::from_slice(bytes)
    }

    /// The image digest the payload vouches for.
    pub fn digest(&self) -> &str {
        &self.critical.image.docker_manifest_digest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_is_byte_for_byte_what_cosign_writes() {
        let p = SimpleSigning::new("127.0.0.1:5000/app", "sha256:abc");
        assert_eq!(
            String::from_utf8(p.to_bytes()).unwrap(),
            r#"{"critical":{"identity":{"docker-reference":"127.0.0.1:5000/app"},"image":{"docker-manifest-digest":"sha256:abc"},"type":"cosign container image signature"},"optional":null}"#
        );
        assert_eq!(SimpleSigning::parse(&p.to_bytes()).unwrap(), p);
    }
}
