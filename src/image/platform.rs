//! Platforms: what an image runs on (`os/architecture[/variant]`), and
//! choosing one manifest of an image index by platform, as `docker pull`
//! does: the OS and architecture must match; a variant asked for must
//! match too, and without one the entry with no variant is preferred.

use oci_spec::image::{Descriptor, ImageIndex};

/// An OCI platform: `os/architecture[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    /// The default for images jbuild builds: FreeBSD on this host's
    /// architecture (jbuild makes jail templates; a Linux root says so
    /// with `--platform linux/amd64`).
    pub fn default_for_host() -> Platform {
        Platform {
            os: "freebsd".into(),
            architecture: crate::config::host_architecture().into(),
            variant: None,
        }
    }

    pub fn parse(s: &str) -> Result<Platform, BadPlatform> {
        let parts: Vec<&str> = s.split('/').collect();
        let valid = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        match parts.as_slice() {
            [os, arch] if valid(os) && valid(arch) => Ok(Platform {
                os: os.to_lowercase(),
                architecture: normalize_arch(arch),
                variant: None,
            }),
            [os, arch, variant] if valid(os) && valid(arch) && valid(variant) => Ok(Platform {
                os: os.to_lowercase(),
                architecture: normalize_arch(arch),
                variant: Some(variant.to_lowercase()),
            }),
            _ => Err(BadPlatform(s.to_string())),
        }
    }
}

fn normalize_arch(a: &str) -> String {
    match a.to_lowercase().as_str() {
        "x86_64" | "x86-64" => "amd64".into(),
        "aarch64" => "arm64".into(),
        other => other.to_string(),
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// An index has no manifest for the platform asked for.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the image has no manifest for {want}; it has: {have} (choose one with --platform)")]
pub struct NoSuchPlatform {
    pub want: Platform,
    /// The platforms the index has, sorted, or a phrase saying it names none.
    pub have: String,
}

impl crate::blame::Blame for NoSuchPlatform {
    /// The platform the user asked for.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A `--platform` or `FROM --platform` value that is not `os/arch[/variant]`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("platform `{0}` is not of the form os/arch[/variant], e.g. freebsd/amd64")]
pub struct BadPlatform(pub String);

impl crate::blame::Blame for BadPlatform {
    /// A value the user wrote.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The manifest of `index` for `want`, or an error listing the platforms
/// the index has.
pub fn select(index: &ImageIndex, want: &Platform) -> Result<Descriptor, NoSuchPlatform> {
    let candidates: Vec<(&Descriptor, Platform)> = index
        .manifests()
        .iter()
        .filter_map(|d| {
            let p = d.platform().as_ref()?;
            let os = p.os().to_string();
            let arch = p.architecture().to_string();
            let variant = p.variant().clone();
            // Parse through `Platform` so `x86_64` and `amd64` compare equal.
            let mut parsed = Platform::parse(&format!("{os}/{arch}")).ok()?;
            parsed.variant = variant.map(|v| v.to_lowercase());
            Some((d, parsed))
        })
        .collect();
    let matching = candidates.iter().filter(|(_, p)| {
        p.os == want.os
            && p.architecture == want.architecture
            && (want.variant.is_none() || p.variant == want.variant)
    });
    let best = matching
        .clone()
        .find(|(_, p)| p.variant.is_none())
        .or_else(|| matching.clone().next());
    match best {
        Some((d, _)) => Ok((*d).clone()),
        None => {
            let mut have: Vec<String> = candidates.iter().map(|(_, p)| p.to_string()).collect();
            have.sort();
            have.dedup();
            let have = if have.is_empty() {
                "none that say their platform".to_string()
            } else {
                have.join(", ")
            };
            Err(NoSuchPlatform {
                want: want.clone(),
                have,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::image::{Arch, ImageIndexBuilder, MediaType, Os, PlatformBuilder};

    fn entry(os: Os, arch: Arch, variant: Option<&str>, n: u8) -> Descriptor {
        let mut p = PlatformBuilder::default().os(os).architecture(arch);
        if let Some(v) = variant {
            p = p.variant(v.to_string());
        }
        let mut d = Descriptor::new(
            MediaType::ImageManifest,
            10,
            crate::store::oci_digest(&crate::digest::Digest::of(&[n])),
        );
        d.set_platform(Some(p.build().unwrap()));
        d
    }

    fn index(entries: Vec<Descriptor>) -> ImageIndex {
        ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(entries)
            .build()
            .unwrap()
    }

    #[test]
    fn selects_by_os_arch_and_variant() {
        let idx = index(vec![
            entry(Os::Linux, Arch::Amd64, None, 1),
            entry(Os::FreeBSD, Arch::ARM64, Some("v8"), 2),
            entry(Os::FreeBSD, Arch::Amd64, None, 3),
            entry(Os::FreeBSD, Arch::ARM64, None, 4),
        ]);
        let p = |s| Platform::parse(s).unwrap();
        let pick = |s| select(&idx, &p(s)).unwrap().digest().clone();
        assert_eq!(pick("freebsd/amd64"), idx.manifests()[2].digest().clone());
        assert_eq!(pick("freebsd/x86_64"), idx.manifests()[2].digest().clone());
        assert_eq!(pick("linux/amd64"), idx.manifests()[0].digest().clone());
        // Without a variant the plain entry wins; with one, only it.
        assert_eq!(pick("freebsd/arm64"), idx.manifests()[3].digest().clone());
        assert_eq!(
            pick("freebsd/arm64/v8"),
            idx.manifests()[1].digest().clone()
        );
    }

    #[test]
    fn no_match_lists_what_there_is() {
        let idx = index(vec![
            entry(Os::Linux, Arch::Amd64, None, 1),
            entry(Os::Linux, Arch::ARM64, Some("v8"), 2),
        ]);
        let err = select(&idx, &Platform::parse("freebsd/amd64").unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("freebsd/amd64"), "{err}");
        assert!(err.contains("linux/amd64, linux/arm64/v8"), "{err}");
        let err = select(&index(vec![]), &Platform::parse("linux/amd64").unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("none"), "{err}");
    }
}
