//! `FROM freebsd:<release>` from the pkgbase repository: FreeBSD 15 and
//! later ship the base system as packages, and a root is made by
//! installing a set of them into an empty root, the way Bastille
//! (`bastille bootstrap --pkgbase`) and FreeBSD's own image scripts
//! (`release/scripts/make-oci-image.sh`) do it with pkg(8), instead of
//! from distribution sets.
//!
//! **Sets or packages.** [`BaseChoice`]: `auto` (the default) takes
//! distribution sets up to FreeBSD 15 — 15.0 has both, and the sets are
//! checked against the release's MANIFEST and extracted on any host —
//! and pkgbase from 16 on, where the project stops publishing sets.
//! `sets` and `pkgbase` force one; pkgbase before 15 is refused.
//!
//! **What is installed**, for `FROM freebsd:15.0-RELEASE` on amd64
//! ([`PkgbaseSource::resolve`] works it out; it runs and downloads
//! nothing):
//!
//! 1. the signing keys are put in the empty root, at
//!    `/usr/share/keys/pkgbase-15/{trusted,revoked}` (`pkg` for a
//!    `-CURRENT`/`-STABLE` root, which uses `base_latest`), from the
//!    host's `/usr/share/keys` (`[freebsd] pkg_keys_dir`), else from the
//!    fingerprints jbuild knows for that release line
//!    ([`PkgBase::place_keys`]);
//! 2. one repository configuration, `FreeBSD-base`, outside the root
//!    ([`PkgBase::repo_conf`]), with the repository's `url`,
//!    `signature_type: "fingerprints"` and `fingerprints` pointing at
//!    those keys — a catalogue or a package not signed by one of them is
//!    refused;
//! 3. the ABI is the release's and the platform's (`FreeBSD:15:amd64`,
//!    `FreeBSD:15:aarch64` for arm64), never the host's;
//! 4. `FreeBSD-set-minimal-jail` (`[freebsd] pkgbase_sets`, and the sets
//!    `--sets` adds) and its dependency closure are installed.
//!
//! **Who installs it** ([`Installer`]). By default jbuild's own installer
//! ([`crate::pkg::install`], through `engine::pkgbase`), on every host
//! and for every architecture: the repository configuration is read in
//! place of the image's `/usr/local/etc/pkg/repos`, the ABI is given
//! ([`PkgBase::version`], [`PkgBase::pkg_arch`]) since the empty root has no userland to read it
//! from, and the catalogue and packages go to a scratch directory and
//! jbuild's package cache. pkg(8) on the host installs it instead when
//! `[freebsd] pkg` names a program, or `[pkg] installer = "pkg"` is set
//! (then `pkg` on FreeBSD; elsewhere planning stops with
//! [`ReleaseError::NoPkg`]): `pkg --rootdir ROOT --repo-conf-dir CONF -o
//! ABI=… -o IGNORE_OSVERSION=yes -o ASSUME_ALWAYS_YES=yes update -r
//! FreeBSD-base`, then `install -y -r FreeBSD-base <sets>`
//! ([`PkgBase::commands`] holds them as data, so they are tested on any
//! host; [`PkgRunner`] runs them). pkg(8) leaves its catalogue and
//! packages under `var/db/pkg/repos` and `var/cache/pkg`, which never
//! reach a layer ([`crate::image::export::EXCLUDED_FROM_LAYERS`]).
//!
//! **No pkg bootstrap.** The base is the sets' closure and nothing else,
//! as `pkg --rootdir ROOT install` leaves it: the base repository does not
//! carry `pkg` (a port, published in the `FreeBSD` repository). The first
//! `PKG` step over the base installs `pkg` from the image's own
//! repository configuration, as `pkg bootstrap` would (`PKG
//! --no-bootstrap` leaves it out).
//!
//! **Key.** The base is keyed on the release, the platform, the packages,
//! the repository url, the digest of its catalogue archive (asked once,
//! by the build's fetch phase), the digest
//! of the keys and the installer ([`PkgBase::identity`]): a rebuild
//! installs again only when the repository published a new catalogue.

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::{arch_dir, ReleaseError};
use crate::digest::Digest;
use crate::exec::output::collect;
use crate::image::Platform;
use crate::report::Stream;

/// The release repository of pkgbase, as FreeBSD 15's `/etc/pkg/FreeBSD.conf`
/// names it.
pub const DEFAULT_PKGBASE_URL: &str =
    "pkg+https://pkg.FreeBSD.org/${ABI}/base_release_${VERSION_MINOR}";
/// The repository of `-CURRENT` and `-STABLE` bases.
pub const LATEST_PKGBASE_URL: &str = "pkg+https://pkg.FreeBSD.org/${ABI}/base_latest";
/// Where FreeBSD keeps pkg's signing keys.
pub const DEFAULT_KEYS_DIR: &str = "/usr/share/keys";
/// The set installed when none is configured: a basic multi-user jail.
pub const DEFAULT_SET: &str = "minimal-jail";
/// The name the repository gets in the configuration jbuild writes.
pub const REPO_NAME: &str = "FreeBSD-base";

/// The fingerprints FreeBSD publishes for pkgbase-15
/// (`share/keys/pkgbase-15/trusted` in the source tree), used when the
/// host has no `/usr/share/keys/pkgbase-15` (a FreeBSD 14 host).
const PKGBASE_15: &[(&str, &str)] = &[
    (
        "awskms-15",
        "function: \"sha256\"\nfingerprint: \"1d7b45d20fa8d6ed26f9b4a13ac81a6b5df860b9fe644d07b87e92298ba72595\"\n",
    ),
    (
        "backup-signing-15",
        "function: \"sha256\"\nfingerprint: \"56a77bdcb6c3cf7984729c6138bd5617c24aa0d466b3b604c96205b2c5629f3c\"\n",
    ),
];

/// Where a `FROM freebsd:<release>` base comes from (`--freebsd-base`,
/// `[freebsd] base`): `auto`, `sets` or `pkgbase`.
pub use crate::config::FreeBsdBase as BaseChoice;

/// How one release's base is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseMethod {
    Sets,
    Pkgbase,
}

/// The first FreeBSD version with pkgbase releases, and the first whose
/// base is pkgbase by default.
const FIRST_PKGBASE: u32 = 15;
const PKGBASE_BY_DEFAULT: u32 = 16;

/// A release name taken apart: `15.0-RELEASE-p2`, `16.0-CURRENT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseName {
    pub major: u32,
    pub minor: u32,
    /// Built from `base_release_<minor>` (RELEASE, BETA, RC) rather than
    /// `base_latest` (CURRENT, STABLE, ALPHA).
    pub release_branch: bool,
}

impl ReleaseName {
    pub fn parse(release: &str) -> Option<ReleaseName> {
        let (version, branch) = release.split_once('-')?;
        let (major, minor) = version.split_once('.')?;
        let branch = branch.split('-').next().unwrap_or("").to_ascii_uppercase();
        let release_branch = ["RELEASE", "BETA", "RC"]
            .iter()
            .any(|b| branch.starts_with(b));
        Some(ReleaseName {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
            release_branch,
        })
    }
}

impl BaseChoice {
    /// The method for `release`: see the module docs.
    pub fn method_for(self, release: &str) -> Result<BaseMethod, ReleaseError> {
        let major = ReleaseName::parse(release).map(|r| r.major);
        match self {
            BaseChoice::Sets => Ok(BaseMethod::Sets),
            BaseChoice::Auto => Ok(match major {
                Some(m) if m >= PKGBASE_BY_DEFAULT => BaseMethod::Pkgbase,
                _ => BaseMethod::Sets,
            }),
            BaseChoice::Pkgbase => match major {
                Some(m) if m >= FIRST_PKGBASE => Ok(BaseMethod::Pkgbase),
                Some(_) => Err(ReleaseError::Invalid(format!(
                    "FROM freebsd:{release}: FreeBSD has pkgbase releases from {FIRST_PKGBASE}.0 on; build this one from its distribution sets (--freebsd-base=sets)"
                ))),
                None => Err(ReleaseError::Invalid(format!(
                    "FROM freebsd:{release}: a pkgbase base needs a release name such as 15.0-RELEASE or 16.0-CURRENT"
                ))),
            },
        }
    }
}

/// Where pkgbase bases come from (the `[freebsd]` settings and flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkgbaseSource {
    /// The repository url; `${ABI}`, `${VERSION_MAJOR}` and
    /// `${VERSION_MINOR}` are filled in. `None`: [`DEFAULT_PKGBASE_URL`],
    /// or [`LATEST_PKGBASE_URL`] for a `-CURRENT`/`-STABLE` name.
    pub url: Option<String>,
    /// The sets to install, without `FreeBSD-set-` (`minimal-jail`,
    /// `base-jail`, `lib32`, ...), in order.
    pub sets: Vec<String>,
    /// Holds `pkgbase-<major>/` and `pkg/` key directories.
    pub keys_dir: PathBuf,
    /// The program to run as pkg(8) on the host (`[freebsd] pkg`); when
    /// set, it installs the base.
    pub pkg: Option<PathBuf>,
    /// `[pkg] installer = "pkg"`: pkg(8) on the host installs the base
    /// ([`PkgbaseSource::pkg`], else `pkg` on a FreeBSD host, and none
    /// elsewhere) rather than jbuild's own installer.
    pub use_pkg: bool,
}

impl Default for PkgbaseSource {
    fn default() -> Self {
        PkgbaseSource {
            url: None,
            sets: vec![DEFAULT_SET.to_string()],
            keys_dir: PathBuf::from(DEFAULT_KEYS_DIR),
            pkg: None,
            use_pkg: false,
        }
    }
}

/// The signing keys of a repository, as they are put in the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The directory under `/usr/share/keys`: `pkgbase-15`, `pkg`.
    pub name: String,
    /// `trusted/<file>` and `revoked/<file>` with their contents, sorted.
    pub files: Vec<(String, Vec<u8>)>,
    /// Where they were read from, for messages (`built in` for jbuild's own).
    pub origin: String,
}

impl Keys {
    /// The path pkg reads them at, inside the root.
    pub fn in_root(&self) -> String {
        format!("{DEFAULT_KEYS_DIR}/{}", self.name)
    }

    pub fn digest(&self) -> Digest {
        let mut e = Vec::new();
        for (name, content) in &self.files {
            e.extend_from_slice(format!("{} {}\n", name, Digest::of(content)).as_bytes());
        }
        Digest::of(&e)
    }
}

/// A pkgbase base resolved for one release and platform: what will be
/// installed from where, checked with which keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkgBase {
    pub release: String,
    /// `FreeBSD:15:amd64`
    pub abi: String,
    /// The repository, variables filled in.
    pub url: String,
    /// `FreeBSD-set-minimal-jail`, ...
    pub packages: Vec<String>,
    pub keys: Keys,
    /// Who installs it.
    pub installer: Installer,
}

/// Who installs a pkgbase base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installer {
    /// jbuild's own installer ([`crate::pkg::install`]), on any host.
    Jbuild,
    /// This program, run as pkg(8) on the host.
    Pkg(PathBuf),
}

impl std::fmt::Display for Installer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Installer::Jbuild => f.write_str("jbuild's installer"),
            Installer::Pkg(p) => write!(f, "{} (pkg(8))", p.display()),
        }
    }
}

impl PkgbaseSource {
    /// What `FROM freebsd:<release>` installs on `platform`, or why it
    /// cannot be installed here. Reads the keys; runs and downloads nothing.
    pub fn resolve(&self, release: &str, platform: &Platform) -> Result<PkgBase, ReleaseError> {
        if platform.os != "freebsd" {
            return Err(ReleaseError::Invalid(format!(
                "FROM freebsd:{release} makes a FreeBSD root, but the platform is {platform}; use --platform freebsd/<arch>"
            )));
        }
        let name = ReleaseName::parse(release).ok_or_else(|| {
            ReleaseError::Invalid(format!(
                "FROM freebsd:{release}: a pkgbase base needs a release name such as 15.0-RELEASE or 16.0-CURRENT"
            ))
        })?;
        BaseChoice::Pkgbase.method_for(release)?;
        let installer = self.installer(release)?;
        let arch = arch_dir(&platform.architecture)?;
        let arch = arch.rsplit('/').next().unwrap_or(arch);
        let abi = format!("FreeBSD:{}:{arch}", name.major);
        let template = self.url.as_deref().unwrap_or(if name.release_branch {
            DEFAULT_PKGBASE_URL
        } else {
            LATEST_PKGBASE_URL
        });
        let url = template
            .replace("${ABI}", &abi)
            .replace("${VERSION_MAJOR}", &name.major.to_string())
            .replace("${VERSION_MINOR}", &name.minor.to_string());
        if self.sets.is_empty() {
            return Err(ReleaseError::Invalid(
                "[freebsd] pkgbase_sets is empty: name at least one set, e.g. [\"minimal-jail\"]"
                    .into(),
            ));
        }
        let packages = self
            .sets
            .iter()
            .map(|s| format!("FreeBSD-set-{s}"))
            .collect();
        // Release repositories are signed with the release line's keys,
        // base_latest with the ports keys (as Bastille and FreeBSD do).
        let keys_name = if name.release_branch {
            format!("pkgbase-{}", name.major)
        } else {
            "pkg".to_string()
        };
        let keys = self.keys(&keys_name, release)?;
        Ok(PkgBase {
            release: release.to_string(),
            abi,
            url,
            packages,
            keys,
            installer,
        })
    }

    /// Who installs the base: pkg(8) when it is configured, jbuild
    /// otherwise (or why this host has no pkg(8) to run).
    fn installer(&self, release: &str) -> Result<Installer, ReleaseError> {
        match &self.pkg {
            Some(p) => Ok(Installer::Pkg(p.clone())),
            None if !self.use_pkg => Ok(Installer::Jbuild),
            None if cfg!(target_os = "freebsd") => Ok(Installer::Pkg(PathBuf::from("pkg"))),
            None => Err(ReleaseError::NoPkg {
                release: release.to_string(),
                host: std::env::consts::OS,
            }),
        }
    }

    fn keys(&self, name: &str, release: &str) -> Result<Keys, ReleaseError> {
        let dir = self.keys_dir.join(name);
        let mut files = Vec::new();
        for sub in ["trusted", "revoked"] {
            let d = dir.join(sub);
            let entries = match fs::read_dir(&d) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(ReleaseError::io(&d)(e)),
            };
            for entry in entries {
                let entry = entry.map_err(ReleaseError::io(&d))?;
                let path = entry.path();
                if !path.is_file() {
                    continue;
                }
                let content = fs::read(&path).map_err(ReleaseError::io(&path))?;
                let file = entry.file_name().to_string_lossy().into_owned();
                files.push((format!("{sub}/{file}"), content));
            }
        }
        files.sort();
        if files.iter().any(|(n, _)| n.starts_with("trusted/")) {
            return Ok(Keys {
                name: name.to_string(),
                files,
                origin: dir.display().to_string(),
            });
        }
        if name == "pkgbase-15" {
            return Ok(Keys {
                name: name.to_string(),
                files: PKGBASE_15
                    .iter()
                    .map(|(n, c)| (format!("trusted/{n}"), c.as_bytes().to_vec()))
                    .collect(),
                origin: "built in".into(),
            });
        }
        Err(ReleaseError::Invalid(format!(
            "FROM freebsd:{release}: no signing keys for its pkgbase repository: {} has no trusted keys; install them there (a FreeBSD host of that version ships them) or set [freebsd] pkg_keys_dir to a directory holding {name}/trusted",
            dir.display()
        )))
    }
}

/// Where pkg's output lines go, as they come.
pub type Output<'a> = &'a mut (dyn FnMut(Stream, &[u8]) + Send);

/// Runs pkg(8) on the host. The real one is [`HostPkg`]; tests record.
pub trait PkgRunner {
    /// Runs `argv` to the end, passing each output line to `out`. An
    /// `Err` is a program that could not be started; a program that ran
    /// and failed is `Ok(Some(how it ended, its last lines of stderr))`.
    fn run(&self, argv: &[String], out: Output<'_>) -> io::Result<Option<String>>;
}

/// `std::process::Command`, no shell, with an environment of `PATH` and
/// the proxy variables only, so no `ABI`, `REPOS_DIR` or `PKG_DBDIR` of
/// the caller's changes what pkg does. Output lines are passed on as they
/// come (an install downloads for minutes).
#[derive(Debug, Default)]
pub struct HostPkg;

const PASSED_ENV: &[&str] = &[
    "PATH",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CA_CERT_FILE",
    "SSL_CA_CERT_PATH",
];

/// Lines of pkg's stderr kept for the error message.
const TAIL: usize = 5;

impl PkgRunner for HostPkg {
    fn run(&self, argv: &[String], out: Output<'_>) -> io::Result<Option<String>> {
        use std::process::{Command, Stdio};
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).env_clear();
        for name in PASSED_ENV {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let (stdout, stderr) = stdout.zip(stderr).expect("both piped");
        let mut tail: VecDeque<String> = VecDeque::new();
        let mut sink = |stream: Stream, line: &[u8]| {
            if stream == Stream::Stderr {
                tail.push_back(String::from_utf8_lossy(line).into_owned());
                if tail.len() > TAIL {
                    tail.pop_front();
                }
            }
            out(stream, line);
        };
        let status = collect(stdout, stderr, &mut sink, move || child.wait(), |_| {})??;
        if status.success() {
            return Ok(None);
        }
        let tail: Vec<String> = tail.into();
        Ok(Some(format!("{status}: {}", tail.join(" / "))))
    }
}

impl PkgBase {
    /// The repository configuration pkg reads (`--repo-conf-dir`).
    pub fn repo_conf(&self) -> String {
        let mirror = if self.url.starts_with("pkg+") {
            "  mirror_type: \"srv\",\n"
        } else {
            ""
        };
        format!(
            "{REPO_NAME}: {{\n  url: \"{}\",\n{mirror}  signature_type: \"fingerprints\",\n  fingerprints: \"{}\",\n  enabled: yes\n}}\n",
            self.url,
            self.keys.in_root()
        )
    }

    /// The command lines pkg(8) (`program`) runs, in order: the
    /// catalogue, then the sets.
    pub fn commands(&self, program: &Path, root: &Path, conf_dir: &Path) -> Vec<Vec<String>> {
        let global = |cmd: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = vec![
                program.display().to_string(),
                "--rootdir".into(),
                root.display().to_string(),
                "--repo-conf-dir".into(),
                conf_dir.display().to_string(),
            ];
            for opt in [
                format!("ABI={}", self.abi),
                "IGNORE_OSVERSION=yes".into(),
                "ASSUME_ALWAYS_YES=yes".into(),
            ] {
                v.push("-o".into());
                v.push(opt);
            }
            v.extend(cmd.iter().map(|s| s.to_string()));
            v
        };
        let mut install = global(&["install", "-y", "-r", REPO_NAME]);
        install.extend(self.packages.iter().cloned());
        vec![global(&["update", "-r", REPO_NAME]), install]
    }

    /// What the base is keyed on besides the release, the platform and
    /// the packages; `catalogue` is the catalogue's identity. pkg(8) and
    /// jbuild's installer leave different databases: each has its key.
    pub fn identity(&self, catalogue: &str) -> String {
        let by = match self.installer {
            Installer::Jbuild => "jbuild",
            Installer::Pkg(_) => "pkg",
        };
        format!(
            "url {}; catalogue {catalogue}; keys {} {}; installer {by}",
            self.url,
            self.keys.name,
            self.keys.digest()
        )
    }

    /// The release's major and minor version (`15.0-RELEASE`: 15, 0), of
    /// which jbuild's installer makes the ABI packages are chosen by (an
    /// empty root has no userland to read it from).
    pub fn version(&self) -> (u32, u32) {
        ReleaseName::parse(&self.release).map_or((0, 0), |n| (n.major, n.minor))
    }

    /// pkg's name of the platform's architecture (`aarch64` for arm64),
    /// the last part of [`PkgBase::abi`].
    pub fn pkg_arch(&self) -> &str {
        self.abi.rsplit(':').next().unwrap_or_default()
    }

    /// Puts the signing keys in the empty `root`, where the repository
    /// configuration's `fingerprints` names them (inside the root, as
    /// `pkg --rootdir` and jbuild's installer both read them).
    pub fn place_keys(&self, root: &Path) -> Result<(), ReleaseError> {
        let keys = root.join(self.keys.in_root().trim_start_matches('/'));
        for sub in ["trusted", "revoked"] {
            let d = keys.join(sub);
            fs::create_dir_all(&d).map_err(ReleaseError::io(&d))?;
        }
        for (name, content) in &self.keys.files {
            let p = keys.join(name);
            fs::write(&p, content).map_err(ReleaseError::io(&p))?;
        }
        Ok(())
    }

    /// A directory, outside the root, holding the one repository
    /// configuration ([`PkgBase::repo_conf`]); removed when dropped.
    pub fn conf_dir(&self) -> Result<tempfile::TempDir, ReleaseError> {
        let conf = tempfile::Builder::new()
            .prefix("jbuild-pkgbase-")
            .tempdir()
            .map_err(ReleaseError::io(Path::new(
                "pkgbase repository configuration",
            )))?;
        let conf_file = conf.path().join(format!("{REPO_NAME}.conf"));
        fs::write(&conf_file, self.repo_conf()).map_err(ReleaseError::io(&conf_file))?;
        Ok(conf)
    }

    /// Installs the base into the empty `root` with pkg(8), `program`
    /// (see the module docs for the order). `out` gets pkg's output lines.
    pub fn install(
        &self,
        program: &Path,
        root: &Path,
        runner: &dyn PkgRunner,
        out: Output<'_>,
    ) -> Result<(), ReleaseError> {
        self.place_keys(root)?;
        let conf = self.conf_dir()?;
        for argv in self.commands(program, root, conf.path()) {
            let shown = argv.join(" ");
            match runner.run(&argv, out) {
                Ok(None) => {}
                Ok(Some(how)) => {
                    return Err(ReleaseError::Pkg {
                        command: shown,
                        how,
                    })
                }
                Err(source) => {
                    return Err(ReleaseError::PkgSpawn {
                        program: program.to_path_buf(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
