//! FreeBSD release bootstrap: `FROM freebsd:<release>` as a base layer made
//! from the release's distribution sets (`base.txz`, and `lib32.txz` or
//! others when asked for), downloaded from a mirror and checked against
//! the release's `MANIFEST` before a byte of them is used.
//!
//! The path, for `FROM freebsd:14.3-RELEASE` on amd64:
//!
//! 1. **MANIFEST.** `<mirror>/amd64/14.3-RELEASE/MANIFEST` (from the cache
//!    when an earlier build verified a set against it). When the host has
//!    a trusted copy — `<manifests>/amd64/14.3-RELEASE/MANIFEST`, as the
//!    `freebsd-release-manifests` package installs under
//!    `/usr/local/share/freebsd-release-manifests` — the mirror's must
//!    agree with it for every set used, or the build stops.
//! 2. **Key.** The base's identity is the release, the platform and the
//!    sha256 of every set, in order: the same release gives the same
//!    snapshot, a re-rolled one (new sha256) a new snapshot and a new
//!    cache for every step on it. Planning needs only the MANIFEST.
//! 3. **Sets.** When the base snapshot does not exist yet, each set is
//!    taken from the cache (`<root>/cache/freebsd/<arch>/<release>/`) or
//!    downloaded: streamed to a temporary file, hashed, compared with the
//!    MANIFEST, fsynced and renamed. A mismatch stores nothing.
//! 4. **Extract.** Each set is xz-decoded and applied with the layer
//!    applier ([`crate::layer::apply`](mod@crate::layer::apply)), as hostile: no path leaves the
//!    root, hard links stay inside it, file flags (`schg`, ...) are set on
//!    FreeBSD. Setuid files are expected (`su`, `passwd`), so they are
//!    kept; device nodes are not (a release has none: `/dev` is devfs).
//!
//! Steps 3 and 4 overlap for a set that is not cached
//! ([`Release::fetch_into`]): the download (with its sha256 and the
//! temporary file), the xz decoder (multithreaded where the set's blocks
//! allow it, `release::xz`) and the extraction run at once, joined by bounded
//! pipes, as `curl | xz -d | tar -x` would run; the extraction goes into a
//! snapshot that is committed only after the whole file matched the
//! MANIFEST, and thrown away otherwise.
//!
//! Mirror layout: `<mirror>/<dir>/<release>/{MANIFEST,<set>.txz}` where
//! `<dir>` is `amd64`, `i386`, `arm64/aarch64`, `riscv/riscv64` or
//! `powerpc/powerpc64`, as on download.freebsd.org.

pub(crate) mod fetch;
pub mod manifest;
pub mod pkgbase;
mod xz;

use crate::blame::Blame;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{FreeBsdSettings, Paths};
use crate::digest::Digest;
use crate::image::Platform;
use crate::layer::apply::{apply, ApplyOptions};
use crate::report::{ProgressReader, Reporter};
use crate::snapshot::flush::Flusher;
use crate::transport::http::Http;
pub use manifest::{Manifest, ManifestEntry};
pub use pkgbase::{BaseChoice, BaseMethod, PkgBase, PkgbaseSource};

pub const DEFAULT_MIRROR: &str = "https://download.freebsd.org/releases";
pub const DEFAULT_MANIFESTS: &str = "/usr/local/share/freebsd-release-manifests";

/// The uncompressed-tar media type the applier takes for an xz-decoded set.
const TAR: &str = "application/vnd.oci.image.layer.v1.tar";

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error(transparent)]
    Http(#[from] crate::transport::http::HttpError),
    #[error("{what} does not match the release's MANIFEST: expected {expected}, got {got}; nothing was stored (a broken mirror or a tampered file: try another mirror with --mirror)")]
    Mismatch {
        what: String,
        expected: Digest,
        got: Digest,
    },
    #[error("{0}")]
    Invalid(String),
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("extracting {set}: {message}")]
    Extract { set: String, message: String },
    /// pkg(8) was asked for and cannot run on this host (see [`pkgbase`]).
    #[error("FROM freebsd:{release}: [pkg] installer = \"pkg\" installs pkgbase bases with pkg(8) on the host, and pkg(8) runs on FreeBSD, not on {host}; remove that setting to install it with jbuild's own installer, name a pkg(8) that runs here with [freebsd] pkg, or build on FreeBSD")]
    NoPkg { release: String, host: &'static str },
    #[error("`{command}` failed ({how})")]
    Pkg { command: String, how: String },
    #[error("cannot run {} as pkg(8) (check [freebsd] pkg)", program.display())]
    PkgSpawn {
        program: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl ReleaseError {
    fn io(path: &Path) -> impl FnOnce(io::Error) -> ReleaseError + '_ {
        move |source| ReleaseError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl Blame for ReleaseError {
    /// Whether the user can fix it (exit code 1): the release name, the
    /// platform, the sets asked for, the mirror (unreachable, broken, or
    /// serving sets that do not match or are refused), a host without
    /// pkg(8) for a pkgbase base, a pkg that fails (the repository, its
    /// signatures, a set it does not have) or cannot be started. A file of the
    /// release cache that cannot be read or written is the system's fault.
    fn is_user_error(&self) -> bool {
        match self {
            ReleaseError::Http(e) => e.is_user_error(),
            ReleaseError::Mismatch { .. }
            | ReleaseError::Invalid(_)
            | ReleaseError::Extract { .. }
            | ReleaseError::NoPkg { .. }
            | ReleaseError::Pkg { .. }
            | ReleaseError::PkgSpawn { .. } => true,
            ReleaseError::Io { .. } => false,
        }
    }
}

/// Where releases come from and where verified sets are kept.
#[derive(Debug, Clone)]
pub struct ReleaseSource {
    /// Base URL holding `amd64/`, `arm64/`, ... (no trailing `/` needed).
    pub mirror: String,
    /// Trusted local MANIFESTs (`<dir>/<arch dir>/<release>/MANIFEST`);
    /// checked when present.
    pub manifests: PathBuf,
    /// Verified MANIFESTs and sets.
    pub cache: PathBuf,
    /// Sets beyond `base` (`lib32`, `src`, ...), in extraction order;
    /// for a pkgbase base, sets installed after the configured ones.
    pub extra_sets: Vec<String>,
    /// Distribution sets or pkgbase (`--freebsd-base`, `[freebsd] base`).
    pub base: BaseChoice,
    /// Where pkgbase bases come from.
    pub pkgbase: PkgbaseSource,
    /// What MANIFESTs and sets are downloaded with: by default the
    /// configuration's timeouts and `certs.d`; a command gives its own
    /// (`--cert-dir`, `--tls-verify`) with [`ReleaseSource::with_http`].
    pub http: Arc<Http>,
}

impl ReleaseSource {
    /// The host's source: `settings` (the `[freebsd]` section), the cache
    /// under the jbuild root.
    pub fn new(paths: &Paths, settings: &FreeBsdSettings) -> ReleaseSource {
        ReleaseSource {
            mirror: settings
                .mirror
                .clone()
                .unwrap_or_else(|| DEFAULT_MIRROR.to_string()),
            manifests: settings
                .manifests_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_MANIFESTS)),
            cache: paths.root().join("cache").join("freebsd"),
            extra_sets: Vec::new(),
            base: settings.base.unwrap_or_default(),
            pkgbase: PkgbaseSource {
                url: settings.pkgbase_url.clone(),
                sets: settings
                    .pkgbase_sets
                    .clone()
                    .unwrap_or_else(|| vec![pkgbase::DEFAULT_SET.to_string()]),
                keys_dir: settings
                    .pkg_keys_dir
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(pkgbase::DEFAULT_KEYS_DIR)),
                pkg: settings.pkg.clone(),
                use_pkg: false,
            },
            http: Arc::new(Http::default()),
        }
    }

    /// Downloads made with `http`.
    pub fn with_http(mut self, http: Arc<Http>) -> ReleaseSource {
        self.http = http;
        self
    }

    /// How `release`'s base is made here.
    pub fn method(&self, release: &str) -> Result<BaseMethod, ReleaseError> {
        self.base.method_for(release)
    }

    /// The pkgbase base of `release` on `platform`: the configured sets,
    /// then `extra_sets`. Runs and downloads nothing.
    /// `use_pkg`: `[pkg] installer = "pkg"` (see [`PkgbaseSource::use_pkg`]).
    pub fn resolve_pkgbase(
        &self,
        release: &str,
        platform: &Platform,
        use_pkg: bool,
    ) -> Result<PkgBase, ReleaseError> {
        let mut source = self.pkgbase.clone();
        source.use_pkg |= use_pkg;
        for s in &self.extra_sets {
            if !source.sets.contains(s) {
                source.sets.push(s.clone());
            }
        }
        source.resolve(release, platform)
    }

    /// Reads the release's MANIFEST and picks the sets to use. Downloads
    /// at most the MANIFEST.
    pub fn resolve(&self, release: &str, platform: &Platform) -> Result<Release, ReleaseError> {
        if platform.os != "freebsd" {
            return Err(ReleaseError::Invalid(format!(
                "FROM freebsd:{release} makes a FreeBSD root, but the platform is {platform}; use --platform freebsd/<arch>"
            )));
        }
        let arch_dir = arch_dir(&platform.architecture)?;
        let base_url = format!("{}/{arch_dir}/{release}", self.mirror.trim_end_matches('/'));
        let cache_dir = self.cache.join(arch_dir.replace('/', "-")).join(release);
        let cached = cache_dir.join("MANIFEST");
        let (text, from_cache) = match fs::read_to_string(&cached) {
            Ok(t) => (t, true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (
                fetch::get_text(&self.http, &format!("{base_url}/MANIFEST"))?,
                false,
            ),
            Err(e) => return Err(ReleaseError::io(&cached)(e)),
        };
        let what = if from_cache {
            cached.display().to_string()
        } else {
            format!("{base_url}/MANIFEST")
        };
        let manifest = Manifest::parse(&text, &what).map_err(ReleaseError::Invalid)?;
        let trusted_path = self.manifests.join(arch_dir).join(release).join("MANIFEST");
        let trusted = match fs::read_to_string(&trusted_path) {
            Ok(t) => Some(
                Manifest::parse(&t, &trusted_path.display().to_string())
                    .map_err(ReleaseError::Invalid)?,
            ),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(ReleaseError::io(&trusted_path)(e)),
        };

        let mut names = vec!["base".to_string()];
        for s in &self.extra_sets {
            if !names.contains(s) {
                names.push(s.clone());
            }
        }
        let mut sets = Vec::new();
        for name in names {
            let file = format!("{name}.txz");
            let entry = manifest.get(&file).ok_or_else(|| {
                let known: Vec<&str> = manifest
                    .entries
                    .keys()
                    .filter_map(|k| k.strip_suffix(".txz"))
                    .collect();
                ReleaseError::Invalid(format!(
                    "{what} has no set `{name}`; this release has: {}",
                    known.join(", ")
                ))
            })?;
            if let Some(t) = &trusted {
                match t.get(&file) {
                    Some(te) if te.sha256 == entry.sha256 => {}
                    Some(te) => {
                        return Err(ReleaseError::Mismatch {
                            what: format!(
                                "{file} in {what} (checked against {})",
                                trusted_path.display()
                            ),
                            expected: te.sha256.clone(),
                            got: entry.sha256.clone(),
                        })
                    }
                    None => {
                        return Err(ReleaseError::Invalid(format!(
                            "the trusted {} does not list {file}, which {what} does",
                            trusted_path.display()
                        )))
                    }
                }
            }
            sets.push(ReleaseSet {
                name,
                url: format!("{base_url}/{file}"),
                path: cache_dir.join(&file),
                sha256: entry.sha256.clone(),
            });
        }
        Ok(Release {
            name: release.to_string(),
            arch_dir: arch_dir.to_string(),
            sets,
            manifest_text: (!from_cache).then_some(text),
            manifest_cache: cached,
            trusted: trusted.is_some(),
            http: self.http.clone(),
        })
    }
}

/// One distribution set of a resolved release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseSet {
    pub name: String,
    pub url: String,
    /// Where the verified file is (or will be) cached.
    pub path: PathBuf,
    pub sha256: Digest,
}

/// A release whose MANIFEST has been read: the sets a base is made of.
#[derive(Debug, Clone)]
pub struct Release {
    pub name: String,
    pub arch_dir: String,
    pub sets: Vec<ReleaseSet>,
    /// A freshly downloaded MANIFEST, cached once a set verified against it.
    manifest_text: Option<String>,
    manifest_cache: PathBuf,
    /// Whether a trusted local MANIFEST confirmed the sets.
    pub trusted: bool,
    /// What the sets are downloaded with (the source's).
    http: Arc<Http>,
}

/// What [`Release::fetch_into`] downloaded, for messages and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchStats {
    pub downloaded: Vec<String>,
    pub bytes: u64,
}

impl Release {
    /// Fills `root` with every set, in order, and caches the sets the cache
    /// lacks. A cached set is extracted from the cache; a missing one is
    /// extracted as it downloads (see the module's documentation) and
    /// cached once its whole sha256 matched the MANIFEST. On an error
    /// `root` holds part of a release or of a tampered set: the caller
    /// throws it away (it is an active snapshot, never committed on
    /// error), and the cache holds only verified files.
    pub fn fetch_into(
        &self,
        root: &Path,
        reporter: &dyn Reporter,
    ) -> Result<FetchStats, ReleaseError> {
        let mut stats = FetchStats::default();
        for set in &self.sets {
            if set.path.is_file() {
                self.extract_cached(set, root, reporter)?;
                continue;
            }
            // The applier reads (here: xz-decodes) on this thread and
            // extracts on another; the download runs on a third.
            let (size, applied) = fetch::download_streaming(
                &self.http,
                &set.url,
                &set.path,
                &set.sha256,
                reporter,
                |txz| apply_set(&set.name, xz::decoder(txz), root),
            )?;
            applied?;
            stats.bytes += size;
            stats.downloaded.push(set.name.clone());
        }
        self.keep_manifest()?;
        Ok(stats)
    }

    /// Caches a freshly downloaded MANIFEST, once a set verified against it.
    fn keep_manifest(&self) -> Result<(), ReleaseError> {
        if let Some(text) = &self.manifest_text {
            if !self.manifest_cache.is_file() {
                fetch::write_atomic(&self.manifest_cache, text.as_bytes())?;
            }
        }
        Ok(())
    }

    /// Extracts the cached, verified `set` into `root`.
    fn extract_cached(
        &self,
        set: &ReleaseSet,
        root: &Path,
        reporter: &dyn Reporter,
    ) -> Result<(), ReleaseError> {
        let f = fs::File::open(&set.path).map_err(ReleaseError::io(&set.path))?;
        let size = f.metadata().map_err(ReleaseError::io(&set.path))?.len();
        let id = format!("extract-{}", set.name);
        reporter.transfer_start(&id, &format!("extracting {}.txz", set.name), Some(size));
        let counted = ProgressReader::new(f, reporter, &id);
        let applied = apply_set(&set.name, xz::decoder(counted), root);
        reporter.transfer_done(&id, false);
        applied
    }
}

/// Applies the tar of the set `name` (from `tar`, the set's xz decoder)
/// to `root`, as hostile (setuid kept).
fn apply_set(name: &str, tar: io::Result<impl io::Read>, root: &Path) -> Result<(), ReleaseError> {
    // A set is a whole base: its snapshot is synced as soon as it is
    // extracted (the commit's `syncfs`, which makes it durable), so the
    // disk writes it while it is extracted: the root's filesystem is
    // synced every 250 ms on a thread of its own (`Flusher`), as a pull's
    // layers and a PKG step's packages are. Not file by file
    // (`start_writeback`): a base's tens of thousands of small files were
    // as many small writes for the disk. Its tar is checked by the set's
    // sha256 (the download), and the layer's diff ID is the export's, so
    // the tar is not hashed here.
    let opts = ApplyOptions {
        allow_setuid: true,
        start_writeback: false,
        diff_id: false,
        ..ApplyOptions::default()
    };
    let failed = |message: String| ReleaseError::Extract {
        set: format!("{name}.txz"),
        message,
    };
    let tar = tar.map_err(|e| failed(format!("cannot start the xz decoder: {e}")))?;
    let _flusher = Flusher::start(root);
    apply(tar, TAR, root, &opts)
        .map(drop)
        .map_err(|e| failed(e.to_string()))
}

/// The directory under a release mirror for an OCI architecture.
pub fn arch_dir(arch: &str) -> Result<&'static str, ReleaseError> {
    Ok(match arch {
        "amd64" => "amd64",
        "386" | "i386" => "i386",
        "arm64" | "aarch64" => "arm64/aarch64",
        "riscv64" => "riscv/riscv64",
        "ppc64" | "powerpc64" => "powerpc/powerpc64",
        "ppc64le" | "powerpc64le" => "powerpc/powerpc64le",
        "arm" | "armv7" => "arm/armv7",
        other => {
            return Err(ReleaseError::Invalid(format!(
                "FreeBSD releases are not published for the architecture `{other}`; use amd64, arm64, 386, riscv64, ppc64 or armv7"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architecture_directories_follow_the_mirror() {
        assert_eq!(arch_dir("amd64").unwrap(), "amd64");
        assert_eq!(arch_dir("arm64").unwrap(), "arm64/aarch64");
        assert!(arch_dir("s390x").unwrap_err().to_string().contains("s390x"));
    }

    #[test]
    fn settings_choose_mirror_and_manifests() {
        let paths = Paths::at(PathBuf::from("/j"));
        let s = ReleaseSource::new(&paths, &FreeBsdSettings::default());
        assert_eq!(s.mirror, DEFAULT_MIRROR);
        assert_eq!(s.manifests, PathBuf::from(DEFAULT_MANIFESTS));
        assert_eq!(s.cache, PathBuf::from("/j/cache/freebsd"));
        assert_eq!(s.base, BaseChoice::Auto);
        assert_eq!(s.pkgbase, PkgbaseSource::default());
        let set = FreeBsdSettings {
            mirror: Some("http://m".into()),
            manifests_dir: Some("/m".into()),
            base: Some(BaseChoice::Pkgbase),
            pkgbase_sets: Some(vec!["base-jail".into()]),
            pkg_keys_dir: Some("/k".into()),
            pkg: Some("/p".into()),
            pkgbase_url: Some("file:///r".into()),
            ..Default::default()
        };
        let s = ReleaseSource::new(&paths, &set);
        assert_eq!(
            (s.mirror.as_str(), s.manifests.as_path()),
            ("http://m", Path::new("/m"))
        );
        assert_eq!(s.method("15.0-RELEASE").unwrap(), BaseMethod::Pkgbase);
        assert_eq!(
            s.pkgbase,
            PkgbaseSource {
                url: Some("file:///r".into()),
                sets: vec!["base-jail".into()],
                keys_dir: "/k".into(),
                pkg: Some("/p".into()),
                use_pkg: false,
            }
        );
        // --sets adds to the configured pkgbase sets.
        let mut s = s;
        s.extra_sets = vec!["lib32".into(), "base-jail".into()];
        let b = s
            .resolve_pkgbase(
                "15.0-RELEASE",
                &Platform::parse("freebsd/amd64").unwrap(),
                false,
            )
            .unwrap();
        assert_eq!(b.packages, ["FreeBSD-set-base-jail", "FreeBSD-set-lib32"]);
        assert_eq!(b.url, "file:///r");
    }
}
