//! The build arguments BuildKit predefines for every build: the platform
//! the image is for (`TARGETPLATFORM`, `TARGETOS`, `TARGETARCH`,
//! `TARGETVARIANT`) and the platform of the machine building it
//! (`BUILDPLATFORM`, `BUILDOS`, `BUILDARCH`, `BUILDVARIANT`). They are
//! global ARGs: usable in FROM lines, and inside a stage once `ARG NAME`
//! declares them there, as in a Dockerfile.

use std::collections::BTreeMap;

use crate::image::Platform;

/// The predefined arguments for a build for `target` (`--platform`, or the
/// default: FreeBSD on this machine's architecture, what jbuild builds
/// when nothing else says).
pub(super) fn predefined(target: Option<&Platform>) -> BTreeMap<String, String> {
    let target = target.cloned().unwrap_or_else(Platform::default_for_host);
    let build = Platform {
        os: std::env::consts::OS.to_string(),
        architecture: crate::config::host_architecture().to_string(),
        variant: None,
    };
    let mut args = BTreeMap::new();
    for (prefix, p) in [("TARGET", &target), ("BUILD", &build)] {
        args.insert(format!("{prefix}PLATFORM"), p.to_string());
        args.insert(format!("{prefix}OS"), p.os.clone());
        args.insert(format!("{prefix}ARCH"), p.architecture.clone());
        args.insert(
            format!("{prefix}VARIANT"),
            p.variant.clone().unwrap_or_default(),
        );
    }
    args
}

#[cfg(test)]
mod tests {
    #[test]
    fn target_and_build_platforms() {
        let arm = crate::image::Platform::parse("freebsd/arm64/v8").unwrap();
        let a = super::predefined(Some(&arm));
        assert_eq!(a["TARGETPLATFORM"], "freebsd/arm64/v8");
        assert_eq!(a["TARGETOS"], "freebsd");
        assert_eq!(a["TARGETARCH"], "arm64");
        assert_eq!(a["TARGETVARIANT"], "v8");
        assert_eq!(a["BUILDOS"], std::env::consts::OS);
        assert_eq!(a["BUILDVARIANT"], "");
        assert_eq!(a.len(), 8);
    }
}
