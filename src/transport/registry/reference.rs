//! Registry references with docker's rules.
//!
//! The grammar is [`ImageName`]'s; what is added here is docker's
//! normalisation: no registry means Docker Hub (`docker.io`), a Docker Hub
//! name of one component lives under `library/`, `index.docker.io` is
//! `docker.io`, and no tag (and no digest) means `latest`. So `alpine` is
//! `docker.io/library/alpine:latest`, and `localhost:5000/web:1.0` stays as
//! it is. A `docker://` prefix (skopeo's and podman's spelling) is accepted.

use std::fmt;
use std::net::IpAddr;

use crate::digest::Digest;
use crate::store::name::{DEFAULT_TAG, MAX_NAME_LEN};
use crate::store::{ImageName, NameError};

pub use crate::store::name::DOCKER_HUB;

/// A fully qualified registry reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryRef {
    /// `host[:port]`, as written (`docker.io` for Docker Hub).
    pub registry: String,
    pub repository: String,
    /// The tag; `None` when the reference is a digest alone.
    pub tag: Option<String>,
    pub digest: Option<Digest>,
}

impl RegistryRef {
    /// Parses `[docker://]NAME[:TAG][@DIGEST]` and normalises it.
    pub fn parse(s: &str) -> Result<RegistryRef, NameError> {
        RegistryRef::from_name(&ImageName::parse(docker_name(s).unwrap_or(s))?)
    }

    /// The normalised reference of a parsed image name.
    pub fn from_name(name: &ImageName) -> Result<RegistryRef, NameError> {
        let registry = name.docker_registry();
        let repository = name.docker_repository();
        // Docker checks the length of the normalised name, so must we: else
        // a name this long is accepted and its own spelling is not.
        let len = registry.len() + 1 + repository.len();
        if len > MAX_NAME_LEN {
            return Err(NameError::TooLong {
                name: format!("{registry}/{repository}"),
                len,
            });
        }
        let digest = name.digest().cloned();
        let tag = match (name.has_tag(), &digest) {
            (true, _) => Some(name.tag().to_string()),
            (false, Some(_)) => None,
            (false, None) => Some(DEFAULT_TAG.to_string()),
        };
        Ok(RegistryRef {
            registry: registry.to_string(),
            repository,
            tag,
            digest,
        })
    }

    /// What to ask the registry for: the digest when there is one (it is
    /// exact), else the tag.
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => DEFAULT_TAG.to_string(),
        }
    }

    /// `registry/repository`, without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The same repository, another tag or digest.
    pub fn with_reference(&self, reference: &str) -> RegistryRef {
        let mut r = self.clone();
        match reference.parse::<Digest>() {
            Ok(d) => {
                r.digest = Some(d);
                r.tag = None;
            }
            Err(_) => {
                r.digest = None;
                r.tag = Some(reference.to_string());
            }
        }
        r
    }
}

impl fmt::Display for RegistryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

/// The NAME of `docker://NAME`, skopeo's spelling of a registry location:
/// the one place that spelling is read ([`crate::transport::Location`]
/// parses with it).
pub fn docker_name(s: &str) -> Option<&str> {
    s.strip_prefix("docker://")
}

/// Where HTTP requests for `registry` go: Docker Hub's API host is not
/// its name (docker's rule).
pub fn api_host(registry: &str) -> &str {
    if registry == DOCKER_HUB {
        "index.docker.io"
    } else {
        registry
    }
}

/// Whether `registry` (`host[:port]`) is this machine: `localhost`,
/// `127.0.0.0/8` or `::1`, where plain HTTP is allowed without asking.
pub fn is_loopback(registry: &str) -> bool {
    let host = host_of(registry);
    host == "localhost"
        || host
            .parse::<IpAddr>()
            .is_ok_and(|ip: IpAddr| ip.is_loopback())
}

/// The host part of `host[:port]` (brackets of an IPv6 address removed).
pub fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        RegistryRef::parse(s).unwrap().to_string()
    }

    /// Found by `fuzz/` (oci_documents): a Docker Hub name short enough as
    /// written but over 255 characters once `docker.io/` is put in front
    /// was accepted, and its normalised spelling then was not.
    #[test]
    fn the_normalised_name_is_held_to_the_length_limit() {
        let fuzzed = "index/docker.cker.io/ldockocker.cker.i/docker.cker.io/ldockocker.cker.io/library/aribrarary/aribrary/argino/library/arrary/architenger.cker.io/lry/architenger.cker.io/library/aribrary/argino/library/arrary/architenger.cker.io/library/aribrary/arginxst";
        assert!(ImageName::parse(fuzzed).is_ok());
        assert!(matches!(
            RegistryRef::parse(fuzzed),
            Err(NameError::TooLong { len: 261, .. })
        ));
        let short = "a".repeat(237);
        assert_eq!(norm(&short).len(), 255 + ":latest".len());
        let long = "a".repeat(238);
        assert!(matches!(
            RegistryRef::parse(&long),
            Err(NameError::TooLong { len: 256, .. })
        ));
    }

    #[test]
    fn docker_hub_defaults() {
        assert_eq!(norm("alpine"), "docker.io/library/alpine:latest");
        assert_eq!(norm("alpine:3.20"), "docker.io/library/alpine:3.20");
        assert_eq!(norm("bitnami/nginx"), "docker.io/bitnami/nginx:latest");
        assert_eq!(norm("docker.io/alpine"), "docker.io/library/alpine:latest");
        assert_eq!(
            norm("index.docker.io/library/alpine:1"),
            "docker.io/library/alpine:1"
        );
        assert_eq!(norm("docker://alpine"), "docker.io/library/alpine:latest");
        assert_eq!(api_host("docker.io"), "index.docker.io");
    }

    #[test]
    fn registries_ports_and_digests() {
        assert_eq!(norm("localhost:5000/web:1.0"), "localhost:5000/web:1.0");
        // `localhost` alone before a slash is a registry, not a namespace.
        let r = RegistryRef::parse("localhost/web").unwrap();
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("localhost", "web")
        );
        // A first component without `.`/`:` is a Docker Hub namespace.
        let r = RegistryRef::parse("jails/base:14.1").unwrap();
        assert_eq!(r.registry, "docker.io");
        assert_eq!(r.repository, "jails/base");
        let d = format!("sha256:{}", "a".repeat(64));
        let r = RegistryRef::parse(&format!("ghcr.io/o/img@{d}")).unwrap();
        assert_eq!(r.tag, None);
        assert_eq!(r.reference(), d);
        assert_eq!(r.to_string(), format!("ghcr.io/o/img@{d}"));
        let r = RegistryRef::parse(&format!("127.0.0.1:5000/a/b:t@{d}")).unwrap();
        assert_eq!(r.tag.as_deref(), Some("t"));
        assert_eq!(r.reference(), d, "a digest wins over a tag");
        assert_eq!(r.with_reference("v2").to_string(), "127.0.0.1:5000/a/b:v2");
    }

    #[test]
    fn bad_references_are_refused() {
        for bad in [
            "",
            "Alpine",
            "a//b",
            "host:port/x",
            "a:b:c",
            "x@sha256:12",
            "docker://",
            "-a",
        ] {
            assert!(RegistryRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loopback_registries() {
        for r in [
            "localhost",
            "localhost:5000",
            "127.0.0.1:80",
            "127.9.9.9",
            "[::1]:5000",
        ] {
            assert!(is_loopback(r), "{r}");
        }
        for r in [
            "registry.lan:5000",
            "10.0.0.1:5000",
            "localhost.evil.com",
            "[::2]",
        ] {
            assert!(!is_loopback(r), "{r}");
        }
    }
}
