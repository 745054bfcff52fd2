//! The pull policy: which images `jbuild pull`, a build's FROM and
//! `jbuild create` accept from a registry, decided before anything is
//! stored.
//!
//! The rules are containers-policy.json(5)'s, the file podman, skopeo and
//! buildah read: a `default` list of requirements and, per transport, lists
//! for *scopes*. For a `docker://host/ns/repo:tag` image the most specific
//! scope that exists wins:
//!
//! ```text
//! host/ns/repo:tag (or @digest)  host/ns/repo  host/ns  host  *.sub.domain  *.domain  ""  default
//! ```
//!
//! Every requirement of the chosen list must hold: `insecureAcceptAnything`
//! holds always, `reject` never, `sigstoreSigned` when a cosign signature of
//! the image's digest verifies with one of its keys and names what
//! `signedIdentity` asks. A policy is read from `--signature-policy FILE`,
//! else the configuration file's `[trust]`, else
//! `$HOME/.config/containers/policy.json` (not for root), else
//! `/etc/containers/policy.json`; with none of them every image is
//! accepted. Anything the file says that jbuild does not check (an unknown
//! type or field, GPG's `signedBy`, Fulcio) is refused with the file's name,
//! never ignored. See docs/policy.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use oci_spec::image::Descriptor;
use serde_json::{Map, Value};

use super::{verify_signatures, Place, PublicKey, RegistryPlace, TrustError};
use crate::config::{Settings, TrustSettings};
use crate::digest::Digest;
use crate::image::pull::{FetchError, ImageSource};
use crate::image::Platform;
use crate::report::Reporter;
use crate::store::Store;
use crate::transport::{RegistryPuller, RegistryRef};

/// The system-wide policy file podman reads.
pub const SYSTEM_POLICY: &str = "/etc/containers/policy.json";

/// The largest policy file read (real ones are a few KiB).
pub const MAX_POLICY: u64 = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{}: cannot read the policy", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: {what}; see containers-policy.json(5) and docs/policy.md")]
    Invalid { origin: String, what: String },
    #[error("{origin}: the key of scope `{scope}` cannot be used")]
    Key {
        origin: String,
        scope: String,
        #[source]
        source: TrustError,
    },
    #[error(
        "{image} is refused by the policy {origin}, scope `{scope}`, requirement {requirement}: \
         {reason}; nothing was stored"
    )]
    Refused {
        image: String,
        origin: String,
        scope: String,
        requirement: String,
        reason: String,
    },
    #[error("cannot check {image} against the policy {origin}")]
    Check {
        image: String,
        origin: String,
        #[source]
        source: TrustError,
    },
}

impl PolicyError {
    /// Whether the user can fix it: a policy or key they wrote, an image
    /// the policy refuses; a registry's fault is the registry error's call.
    pub fn is_user_error(&self) -> bool {
        match self {
            PolicyError::Check { source, .. } => source.is_user_error(),
            _ => true,
        }
    }
}

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
    fn name(&self) -> &'static str {
        match self {
            Requirement::InsecureAcceptAnything => "insecureAcceptAnything",
            Requirement::Reject => "reject",
            Requirement::SigstoreSigned { .. } => "sigstoreSigned",
        }
    }
}

/// A pull policy: where it was read, its default and the `docker`
/// transport's scopes (other transports' are checked and kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The file (or `FILE [trust]`) it came from, for messages.
    pub origin: String,
    pub default: Vec<Requirement>,
    pub transports: BTreeMap<String, BTreeMap<String, Vec<Requirement>>>,
}

/// The scope chosen for an image and its requirements.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule<'a> {
    /// The scope as written, `""` for the transport's default, `default`
    /// for the policy's.
    pub scope: String,
    pub requirements: &'a [Requirement],
}

impl Policy {
    /// The policy to use: `explicit` (`--signature-policy`), else
    /// `[trust]` of `settings`, else containers' files; `None` when there
    /// is none (every image is accepted).
    pub fn find(
        explicit: Option<&Path>,
        settings: &Settings,
    ) -> Result<Option<Policy>, PolicyError> {
        if let Some(path) = explicit {
            return Policy::read(path).map(Some);
        }
        if let Some(trust) = &settings.trust {
            let origin = match &settings.source {
                Some(p) => format!("{} [trust]", p.display()),
                None => "[trust]".to_string(),
            };
            return Policy::from_settings(&origin, trust).map(Some);
        }
        let mut candidates = Vec::new();
        // podman reads the user's file only for users other than root.
        if !is_root() {
            if let Some(home) = std::env::var_os("HOME") {
                candidates.push(PathBuf::from(home).join(".config/containers/policy.json"));
            }
        }
        candidates.push(PathBuf::from(SYSTEM_POLICY));
        for path in candidates {
            if path.exists() {
                return Policy::read(&path).map(Some);
            }
        }
        Ok(None)
    }

    /// A containers-policy.json file.
    pub fn read(path: &Path) -> Result<Policy, PolicyError> {
        // A policy is a few KiB; a larger file is not one.
        let read = || -> std::io::Result<Vec<u8>> {
            use std::io::Read;
            let mut bytes = Vec::new();
            std::fs::File::open(path)?
                .take(MAX_POLICY + 1)
                .read_to_end(&mut bytes)?;
            Ok(bytes)
        };
        let bytes = read().map_err(|source| PolicyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        if bytes.len() as u64 > MAX_POLICY {
            return Err(PolicyError::Invalid {
                origin: path.display().to_string(),
                what: format!("more than {MAX_POLICY} bytes: not a policy"),
            });
        }
        Policy::parse(&path.display().to_string(), &bytes)
    }

    /// Parses policy.json's bytes; `origin` names them in errors.
    pub fn parse(origin: &str, bytes: &[u8]) -> Result<Policy, PolicyError> {
        let invalid = |what: String| PolicyError::Invalid {
            origin: origin.to_string(),
            what,
        };
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| invalid(format!("not JSON ({e})")))?;
        let top = object(&value, "the policy").map_err(invalid)?;
        only(top, &["default", "transports"], "the policy").map_err(invalid)?;
        let default = requirements(
            top.get("default")
                .ok_or_else(|| invalid("there is no `default` list of requirements".into()))?,
            "`default`",
        )
        .map_err(invalid)?;
        let mut transports = BTreeMap::new();
        if let Some(t) = top.get("transports") {
            for (transport, scopes) in object(t, "`transports`").map_err(invalid)? {
                let mut out = BTreeMap::new();
                let at = format!("`transports.{transport}`");
                for (scope, list) in object(scopes, &at).map_err(invalid)? {
                    if transport == "docker" {
                        check_scope(scope).map_err(invalid)?;
                    }
                    let at = format!("scope `{scope}` of {at}");
                    out.insert(scope.clone(), requirements(list, &at).map_err(invalid)?);
                }
                transports.insert(transport.clone(), out);
            }
        }
        Ok(Policy {
            origin: origin.to_string(),
            default,
            transports,
        })
    }

    /// The configuration file's `[trust]` as a policy.
    pub fn from_settings(origin: &str, trust: &TrustSettings) -> Result<Policy, PolicyError> {
        let invalid = |what: String| PolicyError::Invalid {
            origin: origin.to_string(),
            what,
        };
        let one = |require: &str, key: &Option<PathBuf>, identity: Option<&str>, at: &str| {
            let mut m = Map::new();
            m.insert("type".into(), require.into());
            if let Some(k) = key {
                m.insert("keyPath".into(), k.display().to_string().into());
            }
            // cosign and `jbuild sign` name the repository alone, which
            // policy.json's default identity refuses for a tag: `[trust]`
            // accepts them unless told otherwise.
            let identity = match (identity, require) {
                (None, "sigstoreSigned") => Some("matchRepository"),
                (i, _) => i,
            };
            if let Some(i) = identity {
                m.insert("signedIdentity".into(), serde_json::json!({ "type": i }));
            }
            requirements(&Value::Array(vec![Value::Object(m)]), at)
        };
        let default = one(
            trust.default.as_deref().unwrap_or("insecureAcceptAnything"),
            &trust.key,
            None,
            "`default`",
        )
        .map_err(invalid)?;
        let mut scopes = BTreeMap::new();
        for s in &trust.scope {
            if s.name.is_empty() || s.require.is_empty() {
                return Err(invalid(
                    "a [[trust.scope]] needs `name` and `require` (an empty name would be every registry: use `default`)".into(),
                ));
            }
            check_scope(&s.name).map_err(invalid)?;
            let at = format!("[[trust.scope]] `{}`", s.name);
            let list = one(&s.require, &s.key, s.identity.as_deref(), &at).map_err(invalid)?;
            if scopes.insert(s.name.clone(), list).is_some() {
                return Err(invalid(format!("scope `{}` is given twice", s.name)));
            }
        }
        Ok(Policy {
            origin: origin.to_string(),
            default,
            transports: BTreeMap::from([("docker".to_string(), scopes)]),
        })
    }

    /// The rule for a registry image: its most specific scope.
    pub fn rule(&self, image: &RegistryRef) -> Rule<'_> {
        let scopes = self.transports.get("docker");
        for scope in scopes_of(image) {
            if let Some(list) = scopes.and_then(|s| s.get(&scope)) {
                return Rule {
                    scope,
                    requirements: list,
                };
            }
        }
        Rule {
            scope: "default".into(),
            requirements: &self.default,
        }
    }

    /// Checks the registry image `image` against the policy; on success,
    /// the digest the decision was taken for (pull that, not the tag,
    /// which may have moved since).
    pub fn check(
        &self,
        image: &RegistryRef,
        options: &crate::transport::RegistryOptions,
    ) -> Result<Option<Digest>, PolicyError> {
        let rule = self.rule(image);
        let refused = |requirement: &str, reason: String| PolicyError::Refused {
            image: image.to_string(),
            origin: self.origin.clone(),
            scope: rule.scope.clone(),
            requirement: requirement.to_string(),
            reason,
        };
        let check = |source: TrustError| PolicyError::Check {
            image: image.to_string(),
            origin: self.origin.clone(),
            source,
        };
        let mut pinned = None;
        for req in rule.requirements {
            match req {
                Requirement::InsecureAcceptAnything => {}
                Requirement::Reject => {
                    return Err(refused(
                        req.name(),
                        "the policy rejects these images".into(),
                    ))
                }
                Requirement::SigstoreSigned { keys, identity } => {
                    // The digest is resolved once and the signatures are
                    // checked for it, then that digest is what is pulled:
                    // a tag moved in between changes nothing. For an
                    // index this is the index's digest, as `cosign verify`
                    // of a multi-arch tag checks (and `cosign sign` signs).
                    let digest = match pinned.clone() {
                        Some(d) => d,
                        None => RegistryPlace::new(image.clone(), options.clone())
                            .subject_digest()
                            .map_err(check)?,
                    };
                    let at = RegistryRef {
                        tag: None,
                        digest: Some(digest.clone()),
                        ..image.clone()
                    };
                    let place = RegistryPlace::new(at, options.clone());
                    let mut reasons = Vec::new();
                    let mut accepted = false;
                    for key in keys {
                        let public = self.key(key, &rule.scope)?;
                        match verify_signatures(&place, &public) {
                            Ok(good) => {
                                for v in &good {
                                    if identity_matches(identity, image, &v.docker_reference) {
                                        accepted = true;
                                    } else {
                                        reasons.push(identity_refused(
                                            identity,
                                            image,
                                            &v.docker_reference,
                                        ));
                                    }
                                }
                            }
                            Err(e) if e.is_user_error() => reasons.push(e.to_string()),
                            Err(e) => return Err(check(e)),
                        }
                        if accepted {
                            break;
                        }
                    }
                    if !accepted {
                        return Err(refused(req.name(), reasons.join("; ")));
                    }
                    pinned = Some(digest);
                }
            }
        }
        Ok(pinned)
    }

    fn key(&self, key: &KeySource, scope: &str) -> Result<PublicKey, PolicyError> {
        let err = |source| PolicyError::Key {
            origin: self.origin.clone(),
            scope: scope.to_string(),
            source,
        };
        match key {
            KeySource::Path(p) => super::read_public_key(p).map_err(err),
            KeySource::Data(pem) => PublicKey::from_pem(pem).map_err(|source| {
                err(TrustError::Key {
                    path: PathBuf::from("keyData"),
                    source,
                })
            }),
        }
    }
}

fn is_root() -> bool {
    #[cfg(unix)]
    {
        nix::unistd::geteuid().is_root()
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// The scopes that may apply to `image`, most specific first (without
/// `""`'s fallback to the policy default).
fn scopes_of(image: &RegistryRef) -> Vec<String> {
    let mut out = Vec::new();
    let name = image.name();
    if let Some(d) = &image.digest {
        out.push(format!("{name}@{d}"));
    }
    if let Some(t) = &image.tag {
        out.push(format!("{name}:{t}"));
    }
    let mut path = name.as_str();
    loop {
        out.push(path.to_string());
        match path.rsplit_once('/') {
            Some((parent, _)) => path = parent,
            None => break,
        }
    }
    // Wildcards match subdomains of the host (not the host itself),
    // without its port.
    let host = image.registry.split(':').next().unwrap_or_default();
    let mut rest = host;
    while let Some((_, parent)) = rest.split_once('.') {
        out.push(format!("*.{parent}"));
        rest = parent;
    }
    out.push(String::new());
    out
}

/// Whether a scope of `transports.docker` is one policy.json allows.
fn check_scope(scope: &str) -> Result<(), String> {
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

/// Why a verified signature naming `signed` does not do for `image`.
fn identity_refused(identity: &SignedIdentity, image: &RegistryRef, signed: &str) -> String {
    let hint = if *identity == SignedIdentity::MatchRepoDigestOrExact && signed == image.name() {
        // cosign and `jbuild sign` name the repository alone.
        ": a signature naming only the repository (as cosign and `jbuild sign` write) \
         is accepted for a pull by digest, or with \"signedIdentity\": {\"type\": \"matchRepository\"}"
    } else {
        ""
    };
    format!(
        "a signature names `{signed}`, which signedIdentity {} does not accept for {image}{hint}",
        identity.name()
    )
}

/// Whether a signature naming `signed` is accepted for `image`.
fn identity_matches(identity: &SignedIdentity, image: &RegistryRef, signed: &str) -> bool {
    let Ok(s) = RegistryRef::parse(signed) else {
        return false;
    };
    let signed_tagged =
        signed.contains('@') || signed.rsplit('/').next().is_some_and(|l| l.contains(':'));
    let exact = || signed_tagged && s.to_string() == image.to_string();
    match identity {
        SignedIdentity::MatchRepository => s.name() == image.name(),
        SignedIdentity::MatchExact => exact(),
        SignedIdentity::MatchRepoDigestOrExact => {
            if image.tag.is_none() && image.digest.is_some() {
                s.name() == image.name()
            } else {
                exact()
            }
        }
        SignedIdentity::ExactReference(r) => {
            RegistryRef::parse(r).is_ok_and(|r| signed_tagged && r.to_string() == s.to_string())
        }
        SignedIdentity::ExactRepository(r) => {
            RegistryRef::parse(r).is_ok_and(|r| r.name() == s.name())
        }
    }
}

fn object<'a>(v: &'a Value, at: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{at} is not a JSON object"))
}

fn only(m: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), String> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(format!(
            "{at} has the field `{k}`, which jbuild does not know (known: {}); remove it",
            allowed.join(", ")
        )),
        None => Ok(()),
    }
}

fn string<'a>(m: &'a Map<String, Value>, field: &str, at: &str) -> Result<Option<&'a str>, String> {
    match m.get(field) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("{at}: `{field}` is not a string")),
    }
}

/// A list of requirements (never empty: policy.json says so).
fn requirements(v: &Value, at: &str) -> Result<Vec<Requirement>, String> {
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

fn requirement(v: &Value, at: &str) -> Result<Requirement, String> {
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

fn sigstore(m: &Map<String, Value>, at: &str) -> Result<Requirement, String> {
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

fn signed_identity(v: &Value, at: &str) -> Result<SignedIdentity, String> {
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

/// The registry as an image source, behind the pull policy: the image is
/// checked before anything is copied, and the digest checked is the one
/// fetched. The policy is found and read when an image is fetched (a
/// build whose FROM images are all in the store reads none).
pub struct Guarded {
    pub puller: RegistryPuller,
    /// `--signature-policy`.
    pub explicit: Option<PathBuf>,
    /// The configuration, for its `[trust]`.
    pub settings: Settings,
}

impl Guarded {
    /// `puller` behind the policy [`Policy::find`] chooses.
    pub fn new(puller: RegistryPuller, explicit: Option<&Path>, settings: &Settings) -> Guarded {
        Guarded {
            puller,
            explicit: explicit.map(Path::to_path_buf),
            settings: settings.clone(),
        }
    }
}

impl ImageSource for Guarded {
    fn name(&self, reference: &str) -> Option<String> {
        self.puller.name(reference)
    }

    fn fetch(
        &self,
        store: &Store,
        reference: &str,
        platform: &Platform,
        reporter: &dyn Reporter,
    ) -> Result<Descriptor, FetchError> {
        let refused = |e: PolicyError| FetchError {
            user: e.is_user_error(),
            source: Box::new(e),
        };
        let policy = Policy::find(self.explicit.as_deref(), &self.settings).map_err(refused)?;
        let Some(policy) = policy else {
            return self.puller.fetch(store, reference, platform, reporter);
        };
        let image = RegistryRef::parse(reference).map_err(|e| FetchError {
            user: true,
            source: Box::new(e),
        })?;
        match policy
            .check(&image, &self.puller.options)
            .map_err(refused)?
        {
            Some(digest) => {
                let at = format!("{}@{digest}", image.name());
                self.puller.fetch(store, &at, platform, reporter)
            }
            None => self.puller.fetch(store, reference, platform, reporter),
        }
    }
}

#[cfg(test)]
mod tests;
