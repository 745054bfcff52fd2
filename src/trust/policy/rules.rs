//! The requirements of a pull policy, and reading them as
//! containers-policy.json(5) writes them: every field is checked, and
//! what jbuild does not check (GPG's `signedBy`, Fulcio, Rekor,
//! `remapIdentity`, an unknown type or field) is refused with where it is
//! and what to write instead. Errors are strings the caller prefixes with
//! the policy's origin.

use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{Map, Value};

use crate::transport::RegistryRef;

/// A public key, as the policy gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    Path(PathBuf),
    /// The PEM's bytes (`keyData` is their base64).
    Data(Vec<u8>),
}

/// What a signature's `docker-reference` must name (`signedIdentity`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignedIdentity {
    /// The image's repository when it is pulled by digest, else exactly
    /// the image's reference with its tag (the default).
    MatchRepoDigestOrExact,
    /// The image's repository, any tag.
    MatchRepository,
    /// Exactly the image's reference (tag or digest).
    MatchExact,
    /// Exactly this reference, whatever the image's.
    ExactReference(String),
    /// This repository, whatever the image's.
    ExactRepository(String),
}

impl SignedIdentity {
    /// Its `type` in policy.json.
    pub fn name(&self) -> &'static str {
        match self {
            SignedIdentity::MatchRepoDigestOrExact => "matchRepoDigestOrExact",
            SignedIdentity::MatchRepository => "matchRepository",
            SignedIdentity::MatchExact => "matchExact",
            SignedIdentity::ExactReference(_) => "exactReference",
            SignedIdentity::ExactRepository(_) => "exactRepository",
        }
    }
}

/// One requirement of a scope's list.
#[derive(Debug, Clone, PartialEq)]
pub enum Requirement {
    InsecureAcceptAnything,
    Reject,
    SigstoreSigned {
        keys: Vec<KeySource>,
        identity: SignedIdentity,
    },
}

impl Requirement {
    /// Its `type` in policy.json.
    pub fn name(&self) -> &'static str {
        match self {
            Requirement::InsecureAcceptAnything => "insecureAcceptAnything",
            Requirement::Reject => "reject",
            Requirement::SigstoreSigned { .. } => "sigstoreSigned",
        }
    }
}

/// Whether a scope of `transports.oci` (or `oci-archive`) is one
/// policy.json allows: `""`, or an absolute path other than `/`.
pub(super) fn check_path_scope(scope: &str) -> Result<(), String> {
    if scope.is_empty() || (scope.starts_with('/') && scope != "/") {
        return Ok(());
    }
    Err(format!(
        "scope `{scope}` is not an absolute path (`/` itself is written `\"\"`)"
    ))
}

/// Whether a scope of `transports.docker` is one policy.json allows.
pub(super) fn check_scope(scope: &str) -> Result<(), String> {
    if scope.is_empty() {
        return Ok(());
    }
    if let Some(domain) = scope.strip_prefix("*.") {
        if domain.is_empty() || domain.contains(['/', ':', '*', '@']) {
            return Err(format!(
                "scope `{scope}`: a wildcard is `*.domain`, with no port, path or second `*`"
            ));
        }
        return Ok(());
    }
    if scope.contains('*') || scope.starts_with("docker://") || scope.ends_with('/') {
        return Err(format!(
            "scope `{scope}` is not `host[:port][/namespace…][/repo][:tag|@digest]` or `*.domain`"
        ));
    }
    if scope.contains('/') || scope.contains('@') {
        // A repository scope must be a normalised name with its host.
        let r = RegistryRef::parse(scope).map_err(|e| format!("scope `{scope}`: {e}"))?;
        if !scope.starts_with(&r.registry) {
            return Err(format!(
                "scope `{scope}` does not start with a registry host: write it fully, e.g. `docker.io/{scope}`"
            ));
        }
    }
    Ok(())
}

pub(super) fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{at} is not a JSON object"))
}

pub(super) fn only(m: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), String> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{at} has the field `{k}`, which jbuild does not know (known: {}); remove it",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

pub(super) fn string<'a>(
    m: &'a Map<String, Value>,
    field: &str,
    at: &str,
) -> Result<Option<&'a str>, String> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{at}: `{field}` is not a string")),
    }
}

/// A list of requirements (never empty: policy.json says so).
pub(super) fn requirements(v: &Value, at: &str) -> Result<Vec<Requirement>, String> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("{at} is not a list of requirements"))?;
    if list.is_empty() {
        return Err(format!(
            "{at} is an empty list: write [{{\"type\": \"reject\"}}] or [{{\"type\": \"insecureAcceptAnything\"}}]"
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, r)| requirement(r, &format!("requirement {} of {at}", i + 1)))
        .collect()
}

pub(super) fn requirement(v: &Value, at: &str) -> Result<Requirement, String> {
    let m = object(v, at)?;
    let kind = string(m, "type", at)?.ok_or_else(|| format!("{at} has no `type`"))?;
    match kind {
        "insecureAcceptAnything" => {
            only(m, &["type"], at)?;
            Ok(Requirement::InsecureAcceptAnything)
        }
        "reject" => {
            only(m, &["type"], at)?;
            Ok(Requirement::Reject)
        }
        "signedBy" => Err(format!(
            "{at} is `signedBy` (GPG signatures), which jbuild does not check: \
             sign with cosign or `jbuild sign` and require `sigstoreSigned`"
        )),
        "sigstoreSigned" => sigstore(m, at),
        other => Err(format!(
            "{at} has the type `{other}`, which jbuild does not know \
             (known: insecureAcceptAnything, reject, sigstoreSigned)"
        )),
    }
}

pub(super) fn sigstore(m: &Map<String, Value>, at: &str) -> Result<Requirement, String> {
    if let Some(k) = [
        "fulcio",
        "pki",
        "rekorPublicKeyPath",
        "rekorPublicKeyPaths",
        "rekorPublicKeyData",
        "rekorPublicKeyDatas",
    ]
    .iter()
    .find(|k| m.contains_key(**k))
    {
        return Err(format!(
            "{at} uses `{k}`, which jbuild does not check (keys only, no Fulcio or Rekor): use keyPath"
        ));
    }
    only(
        m,
        &[
            "type",
            "keyPath",
            "keyPaths",
            "keyData",
            "keyDatas",
            "signedIdentity",
        ],
        at,
    )?;
    let mut keys = Vec::new();
    let given: Vec<&str> = ["keyPath", "keyPaths", "keyData", "keyDatas"]
        .into_iter()
        .filter(|k| m.contains_key(*k))
        .collect();
    if given.len() != 1 {
        return Err(format!(
            "{at} must have exactly one of keyPath, keyPaths, keyData, keyDatas (it has {})",
            if given.is_empty() {
                "none".to_string()
            } else {
                given.join(", ")
            }
        ));
    }
    let strings = |field: &str| -> Result<Vec<String>, String> {
        match m.get(field) {
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{at}: `{field}` holds a non-string"))
                })
                .collect(),
            _ => Err(format!(
                "{at}: `{field}` is not a string or a non-empty list of strings"
            )),
        }
    };
    for field in &given {
        for s in strings(field)? {
            if field.starts_with("keyPath") {
                if !Path::new(&s).is_absolute() {
                    return Err(format!("{at}: `{field}` `{s}` is not an absolute path"));
                }
                keys.push(KeySource::Path(PathBuf::from(s)));
            } else {
                let pem = B64
                    .decode(s.trim())
                    .map_err(|_| format!("{at}: `{field}` is not base64 (of a PEM public key)"))?;
                keys.push(KeySource::Data(pem));
            }
        }
    }
    let identity = match m.get("signedIdentity") {
        None => SignedIdentity::MatchRepoDigestOrExact,
        Some(v) => signed_identity(v, &format!("`signedIdentity` of {at}"))?,
    };
    Ok(Requirement::SigstoreSigned { keys, identity })
}

pub(super) fn signed_identity(v: &Value, at: &str) -> Result<SignedIdentity, String> {
    let m = object(v, at)?;
    let kind = string(m, "type", at)?.ok_or_else(|| format!("{at} has no `type`"))?;
    let field = |name: &str| -> Result<String, String> {
        only(m, &["type", name], at)?;
        let s = string(m, name, at)?.ok_or_else(|| format!("{at} ({kind}) has no `{name}`"))?;
        RegistryRef::parse(s).map_err(|e| format!("{at}: `{name}` `{s}`: {e}"))?;
        Ok(s.to_string())
    };
    match kind {
        "matchRepoDigestOrExact" | "matchRepository" | "matchExact" => {
            only(m, &["type"], at)?;
            Ok(match kind {
                "matchRepository" => SignedIdentity::MatchRepository,
                "matchExact" => SignedIdentity::MatchExact,
                _ => SignedIdentity::MatchRepoDigestOrExact,
            })
        }
        "exactReference" => Ok(SignedIdentity::ExactReference(field("dockerReference")?)),
        "exactRepository" => Ok(SignedIdentity::ExactRepository(field("dockerRepository")?)),
        "remapIdentity" => Err(format!(
            "{at} is `remapIdentity`, which jbuild does not support: use matchRepository or exactRepository"
        )),
        other => Err(format!(
            "{at} has the type `{other}`, which jbuild does not know (known: matchRepoDigestOrExact, \
             matchRepository, matchExact, exactReference, exactRepository)"
        )),
    }
}
