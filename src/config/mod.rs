//! Where jbuild keeps its state, and the settings that do not come from the
//! command line.
//!
//! Everything lives under one root directory:
//!
//! ```text
//! $JBUILD_ROOT            (else /var/db/jbuild for root, else $XDG_DATA_HOME/jbuild)
//! ├── store/              the local image store: an OCI image layout
//! ├── snapshots/dir/      the `dir` snapshotter's trees
//! ├── cache/              content hashes of build-context files,
//! │   ├── freebsd/        verified release MANIFESTs and sets (base.txz, ...)
//! │   └── pkg/            pkg(8)'s package cache, shared by PKG steps
//! └── tmp/                scratch space for work in progress
//! ```

pub mod environment;
mod settings;
pub use settings::{
    FreeBsdBase, FreeBsdSettings, LayerSettings, PkgScripts, PkgSettings, RegistrySettings,
    Settings, SettingsError, TrustScope, TrustSettings, ZfsSettings,
};
pub use settings::{
    DEFAULT_BLOB_DEADLINE_SECS, DEFAULT_KEEP_PARTIAL_HOURS, DEFAULT_KEEP_PARTIAL_MIB,
    DEFAULT_MIN_RATE, DEFAULT_RATE_WINDOW_SECS, DEFAULT_REGISTRY_TIMEOUT_SECS,
};

use std::path::{Path, PathBuf};

/// The directories jbuild works in.
#[derive(Debug, Clone)]
pub struct Paths {
    root: PathBuf,
}

impl Paths {
    /// The root chosen from the environment: `$JBUILD_ROOT`, else
    /// `/var/db/jbuild` when running as root, else the XDG data directory.
    pub fn from_env() -> Paths {
        if let Some(root) = std::env::var_os("JBUILD_ROOT").filter(|v| !v.is_empty()) {
            return Paths::at(PathBuf::from(root));
        }
        if real_root() {
            return Paths::at(PathBuf::from("/var/db/jbuild"));
        }
        let data = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("."));
        Paths::at(data.join("jbuild"))
    }

    pub fn at(root: PathBuf) -> Paths {
        Paths { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn store(&self) -> PathBuf {
        self.root.join("store")
    }

    pub fn dir_snapshots(&self) -> PathBuf {
        self.root.join("snapshots").join("dir")
    }

    /// Where the `overlay` backend keeps its layers.
    pub fn overlay_snapshots(&self) -> PathBuf {
        self.root.join("snapshots").join("overlay")
    }

    /// Content hashes of build-context files, so a cached rebuild does not
    /// read them again (see `engine::native::hash_cache`).
    pub fn hash_cache(&self) -> PathBuf {
        self.root.join("cache").join("content-hashes")
    }

    /// `RUN --mount=type=cache` directories, one per id, kept between
    /// builds (never part of a layer; `jbuild prune --cache` clears them).
    pub fn mount_cache(&self) -> PathBuf {
        self.root.join("cache").join("mounts")
    }

    /// pkg(8)'s package cache, shared by every build's PKG steps (mounted
    /// at `/var/cache/pkg` in the step; never part of a layer): the cache
    /// mount of `/var/cache/pkg` (its id, escaped as `engine::mounts`
    /// names cache directories), so `RUN --mount=type=cache,target=/var/cache/pkg`
    /// shares it.
    pub fn pkg_cache(&self) -> PathBuf {
        self.mount_cache().join("%2Fvar%2Fcache%2Fpkg")
    }

    /// jbuild's own package cache (`pkg::fetch`): verified FreeBSD
    /// package files by checksum, shared by every build, beside the
    /// release cache (`cache/freebsd`); `jbuild prune --cache` empties it.
    pub fn package_cache(&self) -> PathBuf {
        self.root.join("cache").join("packages")
    }

    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }
}

/// The time recorded in image configs and history, and the upper bound for
/// file times in layers: `$SOURCE_DATE_EPOCH` when set (the reproducible
/// builds convention), else 0, so that the same recipe and inputs give the
/// same bytes on any day.
/// Set in the environment of the jbuild that runs in the user namespace
/// jbuild made for a non-root user (`exec::rootless`).
pub const ROOTLESS_ENV: &str = "JBUILD_ROOTLESS_NAMESPACE";

/// Whether jbuild runs as the real root: root, and not the root of the
/// user namespace jbuild made for a user (whose state, configuration and
/// policies stay the user's).
pub fn real_root() -> bool {
    nix::unistd::geteuid().is_root() && std::env::var_os(ROOTLESS_ENV).is_none()
}

/// The last second an image config's RFC 3339 `created` can name
/// (9999-12-31T23:59:59Z): four-digit years only.
pub const MAX_EPOCH: u64 = 253_402_300_799;

pub fn source_date_epoch() -> Result<u64, String> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) if !v.trim().is_empty() => {
            let secs = v.trim().parse::<u64>().map_err(|_| {
                format!("SOURCE_DATE_EPOCH=`{v}` is not a number of seconds since 1970")
            })?;
            if secs > MAX_EPOCH {
                // Milliseconds or microseconds, most likely: say so
                // rather than write a year no reader parses.
                return Err(format!(
                    "SOURCE_DATE_EPOCH=`{v}` is after the year 9999 (at most {MAX_EPOCH}): \
                     it is seconds since 1970, not milliseconds"
                ));
            }
            Ok(secs)
        }
        _ => Ok(0),
    }
}

/// `os/arch` of this host in OCI's vocabulary (`amd64`, `arm64`, ...).
pub fn host_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64",
        "riscv64" => "riscv64",
        other => other,
    }
}
