//! Image names as people type them: `[registry[:port]/]path[:tag][@digest]`.
//!
//! The grammar is docker's (`distribution/reference`): path components are
//! lowercase alphanumerics joined by `.`, `_`, `__` or runs of `-`; a tag is
//! `[\w][\w.-]{0,127}`; the first component is a registry only when it looks
//! like a host (has a `.` or a `:`, is `localhost`, or has an uppercase
//! letter) and more components follow.
//!
//! Parsing keeps a name as it was written: `alpine` stays `alpine`, and a
//! build tagged `web:1.0` is stored as `web:1.0`. Docker's normalisation
//! (`alpine` is `docker.io/library/alpine:latest`) is a separate view over
//! these fields ([`ImageName::docker_tagged`]): the registry transport
//! fetches by it, and the store compares names by it, so `alpine` finds
//! what `jbuild pull alpine` stored.

use std::fmt;

use crate::digest::{Digest, DigestError};

/// Docker Hub, the registry of a name that names none.
pub const DOCKER_HUB: &str = "docker.io";

/// The tag a name gets when none is written.
pub const DEFAULT_TAG: &str = "latest";

/// docker's limit on `[registry/]repository`.
pub const MAX_NAME_LEN: usize = 255;
const MAX_TAG_LEN: usize = 128;

/// A parsed, valid image name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageName {
    registry: Option<String>,
    repository: String,
    /// `None` when the user wrote no tag (the tag is then [`DEFAULT_TAG`]).
    tag: Option<String>,
    digest: Option<Digest>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("an image name cannot be empty")]
    Empty,
    #[error(
        "image name `{name}` is too long ({len} characters; at most {MAX_NAME_LEN} before the tag)"
    )]
    TooLong { name: String, len: usize },
    #[error("image name `{0}`: repository names must be lowercase")]
    Uppercase(String),
    #[error(
        "image name `{name}`: `{component}` is not a valid path component \
         (lowercase letters and digits, separated by `.`, `_`, `__` or dashes)"
    )]
    Component { name: String, component: String },
    #[error("image name `{name}`: `{registry}` is not a valid registry host[:port]")]
    Registry { name: String, registry: String },
    #[error("image name `{name}`: `{tag}` is not a valid tag (1 to 128 of A-Z a-z 0-9 _ . -, not starting with . or -)")]
    Tag { name: String, tag: String },
    /// `user:password@host/...`: the name is not repeated (it holds a
    /// password).
    #[error(
        "an image reference cannot hold a user name and password (`user:password@host/...`); \
         sign in with `jbuild login HOST` (or docker/podman login) and name the image without them"
    )]
    Credentials,
    #[error("image name `{name}`: bad digest")]
    Digest {
        name: String,
        #[source]
        source: DigestError,
    },
}

impl crate::blame::Blame for NameError {
    /// An image name the user wrote.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// Whether `s` looks like a reference with URL userinfo in front,
/// `[docker://]user[:password]@host/...`: an `@` with a `/` after it (in a
/// real reference the `@` only comes before the digest, which has none).
pub fn has_userinfo(s: &str) -> bool {
    s.find('@').is_some_and(|at| s[at..].contains('/'))
}

/// The user name and password of a reference written
/// `[docker://]user:password@host/...` (or behind any other `scheme://`),
/// so they can be kept out of output.
pub fn userinfo(s: &str) -> Option<(&str, &str)> {
    let s = s.split_once("://").map_or(s, |(_, rest)| rest);
    if !has_userinfo(s) {
        return None;
    }
    let at = s.find('@')?;
    s[..at].split_once(':')
}

impl ImageName {
    pub fn parse(s: &str) -> Result<ImageName, NameError> {
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        if has_userinfo(s) {
            return Err(NameError::Credentials);
        }
        let (rest, digest) = match s.split_once('@') {
            Some((rest, d)) => {
                let digest = d.parse().map_err(|source| NameError::Digest {
                    name: s.to_string(),
                    source,
                })?;
                (rest, Some(digest))
            }
            None => (s, None),
        };
        // A `:` after the last `/` starts the tag; one before it is a port.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].find(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(tag) = tag {
            if !valid_tag(tag) {
                return Err(NameError::Tag {
                    name: s.to_string(),
                    tag: tag.to_string(),
                });
            }
        }
        if name.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong {
                name: s.to_string(),
                len: name.len(),
            });
        }
        let (registry, repository) = split_registry(name);
        if let Some(registry) = registry {
            if !valid_registry(registry) {
                return Err(NameError::Registry {
                    name: s.to_string(),
                    registry: registry.to_string(),
                });
            }
        }
        for component in repository.split('/') {
            if !valid_component(component) {
                if valid_component(&component.to_ascii_lowercase()) {
                    return Err(NameError::Uppercase(s.to_string()));
                }
                return Err(NameError::Component {
                    name: s.to_string(),
                    component: component.to_string(),
                });
            }
        }
        Ok(ImageName {
            registry: registry.map(str::to_string),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// The registry host (with port), if the name has one.
    pub fn registry(&self) -> Option<&str> {
        self.registry.as_deref()
    }

    /// The path within the registry (`library/alpine`, `jails/base`).
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, [`DEFAULT_TAG`] if none was written.
    pub fn tag(&self) -> &str {
        self.tag.as_deref().unwrap_or(DEFAULT_TAG)
    }

    /// Whether the user wrote a tag.
    pub fn has_tag(&self) -> bool {
        self.tag.is_some()
    }

    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `[registry/]repository`, without tag or digest.
    pub fn name(&self) -> String {
        match &self.registry {
            Some(r) => format!("{r}/{}", self.repository),
            None => self.repository.clone(),
        }
    }

    /// The same name with another tag (and no digest).
    pub fn with_tag(&self, tag: &str) -> Result<ImageName, NameError> {
        if !valid_tag(tag) {
            return Err(NameError::Tag {
                name: self.name(),
                tag: tag.to_string(),
            });
        }
        Ok(ImageName {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        })
    }

    /// `[registry/]repository:tag`, the tag always written out: how a tagged
    /// image is named in the store's `index.json`.
    pub fn tagged(&self) -> String {
        format!("{}:{}", self.name(), self.tag())
    }

    /// The registry as docker resolves it: [`DOCKER_HUB`] when the name has
    /// none (or spells Docker Hub `index.docker.io` or
    /// `registry-1.docker.io`), else the name's own.
    pub fn docker_registry(&self) -> &str {
        match self.registry() {
            None | Some("index.docker.io") | Some("registry-1.docker.io") => DOCKER_HUB,
            Some(r) => r,
        }
    }

    /// The repository as docker resolves it: a one-component name on Docker
    /// Hub lives under `library/` (`alpine` is `library/alpine`).
    pub fn docker_repository(&self) -> String {
        if self.docker_registry() == DOCKER_HUB && !self.repository.contains('/') {
            format!("library/{}", self.repository)
        } else {
            self.repository.clone()
        }
    }

    /// `registry/repository:tag` as docker resolves the name: `alpine`,
    /// `library/alpine` and `docker.io/library/alpine:latest` all give
    /// `docker.io/library/alpine:latest`; `localhost/x` and `host:5000/x`
    /// keep their registry. Two names that give the same string are the
    /// same name.
    pub fn docker_tagged(&self) -> String {
        format!(
            "{}/{}:{}",
            self.docker_registry(),
            self.docker_repository(),
            self.tag()
        )
    }
}

impl ImageName {
    /// The same repository pinned by `digest` alone (no tag): what a
    /// pull policy that checked a tag's signatures fetches.
    pub fn pinned(&self, digest: Digest) -> ImageName {
        ImageName {
            tag: None,
            digest: Some(digest),
            ..self.clone()
        }
    }
}

impl fmt::Display for ImageName {
    /// The normalised form: the tag is always written unless the name is
    /// pinned by a digest alone.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())?;
        if self.tag.is_some() || self.digest.is_none() {
            write!(f, ":{}", self.tag())?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ImageName {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ImageName::parse(s)
    }
}

/// docker's `splitDockerDomain`, without the default domain.
fn split_registry(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    }
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*`
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if b.is_empty() || !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        if !(sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-')) {
            return false;
        }
    }
    true
}

/// `host(.host)*(:port)?` with host labels of letters, digits and inner
/// dashes, or a bracketed IPv6 address.
fn valid_registry(r: &str) -> bool {
    let (host, port) = match r.rsplit_once(':') {
        Some((h, p))
            if !h.ends_with(':')
                && (h.starts_with('[') == h.ends_with(']'))
                && !p.contains(']') =>
        {
            (h, Some(p))
        }
        _ => (r, None),
    };
    if let Some(port) = port {
        if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return !v6.is_empty() && v6.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
    }
    !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(t: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    !t.is_empty()
        && t.len() <= MAX_TAG_LEN
        && word(t.as_bytes()[0])
        && t.bytes().all(|b| word(b) || b == b'.' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_resolves_short_names_to_docker_hub() {
        let d = |s: &str| ImageName::parse(s).unwrap().docker_tagged();
        for hub in [
            "alpine",
            "alpine:latest",
            "library/alpine",
            "docker.io/alpine",
            "index.docker.io/library/alpine:latest",
        ] {
            assert_eq!(d(hub), "docker.io/library/alpine:latest", "{hub}");
        }
        assert_eq!(d("user/app"), "docker.io/user/app:latest");
        assert_eq!(d("localhost/x"), "localhost/x:latest");
        assert_eq!(d("host:5000/x:1"), "host:5000/x:1");
        assert_eq!(d("ghcr.io/a/b:2"), "ghcr.io/a/b:2");
    }

    #[test]
    fn credentials_in_a_reference_are_refused_unrepeated() {
        let e = ImageName::parse("me:s3cret@reg.lan:5000/app:1").unwrap_err();
        assert_eq!(e, NameError::Credentials);
        assert!(!e.to_string().contains("s3cret"));
        assert_eq!(
            userinfo("docker://me:s3cret@reg.lan/app"),
            Some(("me", "s3cret"))
        );
        // A digest's `@` is not userinfo.
        let d = format!("reg.lan/app@sha256:{}", "a".repeat(64));
        assert!(!has_userinfo(&d) && ImageName::parse(&d).is_ok());
        assert!(!has_userinfo(&format!("alpine@sha256:{}", "a".repeat(64))));
    }

    fn p(s: &str) -> ImageName {
        ImageName::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn splits_registry_repository_tag_digest() {
        let n = p("localhost:5000/jails/base:14.1-RELEASE");
        assert_eq!(n.registry(), Some("localhost:5000"));
        assert_eq!(n.repository(), "jails/base");
        assert_eq!(n.tag(), "14.1-RELEASE");
        assert_eq!(n.to_string(), "localhost:5000/jails/base:14.1-RELEASE");

        let n = p("jails/base");
        assert_eq!(
            (n.registry(), n.repository(), n.tag(), n.has_tag()),
            (None, "jails/base", "latest", false)
        );
        assert_eq!(n.to_string(), "jails/base:latest");

        let d = Digest::of(b"x");
        let n = p(&format!("ghcr.io/a/b@{d}"));
        assert_eq!(n.digest(), Some(&d));
        assert_eq!(n.to_string(), format!("ghcr.io/a/b@{d}"));
        let n = p(&format!("a:v1@{d}"));
        assert_eq!(n.to_string(), format!("a:v1@{d}"));
        assert_eq!(n.tagged(), "a:v1");

        assert_eq!(p("localhost/x").registry(), Some("localhost"));
        assert_eq!(p("Example.COM/x").registry(), Some("Example.COM"));
        assert_eq!(p("[::1]:5000/x:y").registry(), Some("[::1]:5000"));
        assert_eq!(p("x/a__b.c--d/e_f:_T.9-x").repository(), "x/a__b.c--d/e_f");
    }

    #[test]
    fn refuses_bad_names_clearly() {
        assert_eq!(ImageName::parse(""), Err(NameError::Empty));
        assert!(matches!(
            ImageName::parse("Alpine"),
            Err(NameError::Uppercase(_))
        ));
        assert!(matches!(
            ImageName::parse("a/B"),
            Err(NameError::Uppercase(_))
        ));
        for bad in [
            "a..b", "a___b", "-a", "a-", "a/", "/a", "a//b", "a b", "a._b",
        ] {
            assert!(
                matches!(ImageName::parse(bad), Err(NameError::Component { .. })),
                "{bad}"
            );
        }
        for bad in [
            "a:",
            "a:.x",
            "a:-x",
            &format!("a:{}", "t".repeat(129)),
            "a:x/y:z",
        ] {
            assert!(ImageName::parse(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            ImageName::parse("a:x$"),
            Err(NameError::Tag { .. })
        ));
        assert!(matches!(
            ImageName::parse("a@sha256:12"),
            Err(NameError::Digest { .. })
        ));
        assert!(matches!(
            ImageName::parse("-bad.host/x"),
            Err(NameError::Registry { .. })
        ));
        assert!(matches!(
            ImageName::parse("host.x:port/x"),
            Err(NameError::Registry { .. })
        ));
        let long = format!("a/{}", "b".repeat(300));
        assert!(matches!(
            ImageName::parse(&long),
            Err(NameError::TooLong { .. })
        ));
        let msg = ImageName::parse("a..b").unwrap_err().to_string();
        assert!(msg.contains("`a..b`"), "{msg}");
    }

    #[test]
    fn with_tag_replaces_tag_and_digest() {
        let n = p(&format!("a/b:1@{}", Digest::of(b"")));
        assert_eq!(n.with_tag("2").unwrap().to_string(), "a/b:2");
        assert!(n.with_tag("bad tag").is_err());
    }
}
