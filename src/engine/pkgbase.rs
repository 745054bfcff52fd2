//! `FROM freebsd:<release>` from the pkgbase repository by jbuild's own
//! installer ([`crate::pkg::install`]), on any host and for any
//! architecture: what `release::pkgbase` resolved (the repository, the
//! sets, the keys) installed into the base's empty root.
//!
//! The root starts empty but for the signing keys, placed where pkg(8)
//! would have them ([`PkgBase::place_keys`]). The one repository,
//! `FreeBSD-base` (`url`, `signature_type: "fingerprints"`, the keys'
//! directory), is written outside the root and read in place of the
//! image's `/usr/local/etc/pkg/repos`; the empty root has no `/etc/pkg`
//! of its own, so it is the only repository. The ABI is the release's
//! and the platform's (`pkg_abi`): the root has no userland
//! to read it from, and the host's never counts.
//!
//! **No pkg bootstrap.** The sets are installed and nothing else: the
//! base repository does not carry `pkg` (it is a port, in the `FreeBSD`
//! repository), and `pkg --rootdir ROOT install` on a FreeBSD host does
//! not add it either. The base has pkg's bootstrap program and its
//! repository configuration where its sets ship them; the first `PKG`
//! step over it installs `pkg` from that configuration, as `pkg
//! bootstrap` would (`PKG --no-bootstrap` to leave it out).
//!
//! The catalogue is the one the fetch phase fetched for the base's key
//! and kept in the package cache ([`crate::engine::freebsd`]'s
//! `pkgbase_catalogue`): the install reads it through [`Sources::kept`]
//! (re-hashed, its signature checked here) instead of asking the
//! repository again. The catalogue and the packages stay out of the root
//! (jbuild's package cache, a scratch directory), so neither `var/db/pkg/repos`
//! nor `var/cache/pkg` is written; both are kept out of layers anyway
//! ([`crate::image::export::EXCLUDED_FROM_LAYERS`]). Its output and
//! `--json` `package` events are a PKG step's, as the FROM step's.

use std::path::Path;

use super::error::BuildError;
use super::pkg::{reported, scratch, JOBS};
use super::run::Run;
use crate::fsutil::flags::FileFlags;
use crate::pkg::abi::Abi;
use crate::pkg::install::{self, Request};
use crate::pkg::repository::Sources;
use crate::release::PkgBase;
use crate::report::StepInfo;

impl Run<'_, '_> {
    /// Installs `base` into the empty `root` (see the module docs); a
    /// method, so that the build loop reaches it without naming this file.
    pub(super) fn install_pkgbase(
        &self,
        base: &PkgBase,
        platform_arch: &str,
        root: &Path,
        info: &StepInfo,
        file_flags: &dyn FileFlags,
    ) -> Result<(), BuildError> {
        let run = self;
        base.place_keys(root)?;
        let conf = base.conf_dir()?;
        let (work, cache) = scratch(run)?;
        let env = run.env;
        let resolver = env.freebsd.pkg_resolver();
        let kept = run.inputs.catalogues.borrow();
        let req = Request {
            root,
            packages: &base.packages,
            platform_arch,
            repos_dir: Some(conf.path()),
            cache: &cache,
            http: &env.freebsd.http,
            jobs: JOBS,
            work: work.path(),
            time: i64::try_from(run.opts.epoch).unwrap_or(i64::MAX),
            clamp_mtime: Some(run.opts.epoch),
            bootstrap: false,
            limits: env.layer_policy.limits,
            file_flags,
            sources: Sources {
                resolver: Some(&resolver),
                kept: Some(&kept),
            },
            // The ABI's OSVERSION is the release's x.y000 (no userland yet);
            // its packages carry the patch level: ignored, as FreeBSD's own
            // pkgbase tooling runs pkg with IGNORE_OSVERSION=yes.
            ignore_osversion: Some("yes"),
            pkg_conf: &env.freebsd.pkg_conf,
            scripts: crate::pkg::install::Scripts::Refuse,
        };
        // The disk writes the base's files while they are installed, as for a
        // step (the commit's sync then finds little to do).
        let flusher = crate::snapshot::flush::Flusher::start(root);
        let installed = reported(run, info, root, |events| {
            install::install_for(&req, pkg_abi(base), events)
        });
        drop(flusher);
        installed
    }
}

/// The ABI the packages are chosen by: the release's version and the
/// platform's architecture (an empty root has no userland to read it
/// from), `__FreeBSD_version` as freebsd-version(1) gives a release's.
fn pkg_abi(base: &PkgBase) -> Abi {
    let (major, minor) = base.version();
    Abi {
        major,
        minor,
        arch: base.pkg_arch().to_string(),
        osversion: major * 100_000 + minor * 1_000,
    }
}
