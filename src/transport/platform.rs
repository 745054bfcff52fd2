//! Choosing one manifest of an image index by platform, as `docker pull`
//! does: the OS and architecture must match; a variant asked for must
//! match too, and without one the entry with no variant is preferred.

use oci_spec::image::{Descriptor, ImageIndex};

use crate::plan::state::Platform;

/// The manifest of `index` for `want`, or a message listing the platforms
/// the index has.
pub fn select(index: &ImageIndex, want: &Platform) -> Result<Descriptor, String> {
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
            Err(format!(
                "the image has no manifest for {want}; it has: {have} (choose one with --platform)"
            ))
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
        let err = select(&idx, &Platform::parse("freebsd/amd64").unwrap()).unwrap_err();
        assert!(err.contains("freebsd/amd64"), "{err}");
        assert!(err.contains("linux/amd64, linux/arm64/v8"), "{err}");
        let err = select(&index(vec![]), &Platform::parse("linux/amd64").unwrap()).unwrap_err();
        assert!(err.contains("none"), "{err}");
    }
}
