//! The pull policy: which images `jbuild pull`, a build's FROM, `jbuild
//! create docker://…` and `jbuild import` accept, decided before anything
//! is stored.
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
//! `signedIdentity` asks. Local images (`import oci:DIR`) are judged by
//! `transports.oci`'s path scopes, where only `insecureAcceptAnything`
//! holds ([`Policy::check_location`]). A policy is read from `--signature-policy FILE`,
//! else the configuration file's `[trust]`, else
//! `$XDG_CONFIG_HOME/containers/policy.json` (`~/.config`; not for
//! root), else
//! `/etc/containers/policy.json`; with none of them every image is
//! accepted. Anything the file says that jbuild does not check (an unknown
//! type or field, GPG's `signedBy`, Fulcio) is refused with the file's name,
//! never ignored. See docs/policy.md.

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci_spec::image::Descriptor;
use serde_json::{Map, Value};

use super::{verify_signatures, Place, PublicKey, RegistryPlace, TrustError};
use crate::config::{Settings, TrustSettings};
use crate::digest::Digest;
use crate::image::pull::{Arrivals, FetchError, ImageSource};
use crate::image::Platform;
use crate::report::Reporter;
use crate::store::{ImageName, Store};
use crate::transport::{Location, RegistryPuller, RegistryRef};

mod rules;

use rules::{check_path_scope, check_scope, object, only, requirements};
pub use rules::{KeySource, Requirement, SignedIdentity};

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

impl Blame for PolicyError {
    /// Whether the user can fix it: a policy or key they wrote, an image
    /// the policy refuses; a registry's fault is the registry error's call.
    fn is_user_error(&self) -> bool {
        match self {
            PolicyError::Check { source, .. } => source.is_user_error(),
            _ => true,
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
        let mut candidates = Vec::from_iter(user_policy(
            is_root(),
            std::env::var_os("XDG_CONFIG_HOME"),
            std::env::var_os("HOME"),
        ));
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
                    match transport.as_str() {
                        "docker" => check_scope(scope).map_err(invalid)?,
                        "oci" | "oci-archive" => check_path_scope(scope).map_err(invalid)?,
                        _ => {}
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
        self.rule_in("docker", scopes_of(image))
    }

    /// The rule of the first of `candidates` that `transport` has.
    fn rule_in(&self, transport: &str, candidates: Vec<String>) -> Rule<'_> {
        let scopes = self.transports.get(transport);
        for scope in candidates {
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

    /// Checks an image at a location `jbuild import` reads: `docker://REF`
    /// as [`Policy::check`] (the digest to copy is returned), and
    /// `oci:DIR[:REF]` or `oci-archive:FILE[:REF]` by the scopes of
    /// `transports.oci` (or `oci-archive`): `PATH:REF`, `PATH`, each parent
    /// directory, `""`, then `default`. Only `insecureAcceptAnything` can
    /// hold there: jbuild checks signatures in registries only.
    pub fn check_location(
        &self,
        location: &Location,
        options: &crate::transport::RegistryOptions,
    ) -> Result<Option<Digest>, PolicyError> {
        let (kind, path, reference) = match location {
            // A reference too long once normalised is the transport's to refuse.
            Location::Registry(_) => {
                return match location.registry_ref() {
                    Some(image) => self.check(&image, options),
                    None => Ok(None),
                }
            }
            Location::Layout { dir, reference } => ("oci", dir, reference),
            Location::Archive { file, reference } => ("oci-archive", file, reference),
            Location::Named(_) => return Ok(None),
        };
        let reference = reference.as_deref();
        let path = Path::new(path);
        let path = std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_path_buf());
        let rule = self.rule_in(kind, path_scopes(&path, reference));
        for req in rule.requirements {
            let reason = match req {
                Requirement::InsecureAcceptAnything => continue,
                Requirement::Reject => "the policy rejects these images".to_string(),
                Requirement::SigstoreSigned { .. } => format!(
                    "jbuild checks signatures of images in registries only: push it to a \
                     registry and sign it there, or give {} a scope in `transports.{kind}`",
                    path.display()
                ),
            };
            return Err(PolicyError::Refused {
                image: location.to_string(),
                origin: self.origin.clone(),
                scope: rule.scope.clone(),
                requirement: req.name().to_string(),
                reason,
            });
        }
        Ok(None)
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

/// The user's policy file, as podman finds it: none for root.
fn user_policy(
    root: bool,
    xdg_config_home: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
) -> Option<PathBuf> {
    if root {
        return None;
    }
    let config = xdg_config_home
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("containers/policy.json"))
}

fn is_root() -> bool {
    #[cfg(unix)]
    {
        crate::config::real_root()
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// The scopes of `transports.oci` that may apply to an image at `path`
/// (absolute), most specific first: `PATH:REF`, `PATH`, its parent
/// directories (not `/`), `""`.
fn path_scopes(path: &Path, reference: Option<&str>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(r) = reference {
        out.push(format!("{}:{r}", path.display()));
    }
    out.extend(
        path.ancestors()
            .filter(|p| p.parent().is_some())
            .map(|p| p.display().to_string()),
    );
    out.push(String::new());
    out
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
        reference: &ImageName,
        platform: &Platform,
        reporter: &dyn Reporter,
        arrivals: &Arrivals,
    ) -> Result<Descriptor, FetchError> {
        let refused = |e: PolicyError| FetchError {
            user: e.is_user_error(),
            source: Box::new(e),
        };
        let policy = Policy::find(self.explicit.as_deref(), &self.settings).map_err(refused)?;
        let Some(policy) = policy else {
            return self
                .puller
                .fetch(store, reference, platform, reporter, arrivals);
        };
        let image = RegistryRef::from_name(reference).map_err(|e| FetchError {
            user: true,
            source: Box::new(e),
        })?;
        match policy
            .check(&image, &self.puller.options)
            .map_err(refused)?
        {
            Some(digest) => {
                let at = reference.pinned(digest);
                self.puller.fetch(store, &at, platform, reporter, arrivals)
            }
            None => self
                .puller
                .fetch(store, reference, platform, reporter, arrivals),
        }
    }
}

#[cfg(test)]
mod tests;
