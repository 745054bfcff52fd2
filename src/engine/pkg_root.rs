//! What a PKG step's key holds of the root it runs on
//! ([`crate::plan::PkgRoot`]): the answer the build loop gives the planner
//! when it reaches the step, read from the step's parent snapshot.
//!
//! pkg(8) — and jbuild's installer, which reads what pkg reads — installs
//! from the repositories the *root* names: `/etc/pkg/*.conf`, then
//! `/usr/local/etc/pkg/repos/*.conf` (the `--pkg-repos` directory in its
//! place), with `${ABI}` from the root's userland. Any earlier step may
//! have set them (a base image's layers, a COPY, a RUN, a stage copied
//! from), so they are read here, from the parent snapshot itself (a
//! `Snapshotter::view`, the same on the dir, overlay and ZFS backends),
//! and never guessed in the fetch phase. The answer holds:
//!
//! - the root's ABI and OSVERSION ([`crate::pkg::abi::of_root`]; when the
//!   root's programs do not say, a `FROM freebsd:<release>` stage's
//!   release does, as for pkg(8) run in the jail);
//! - each enabled repository as configured: name, url (`${ABI}`
//!   expanded), priority, `mirror_type`, `signature_type`,
//!   `fingerprints`, `pubkey`;
//! - unless `--pkg-offline`, the SHA-256 of each one's catalogue archive,
//!   fetched as the step reads it (`FreeBsdEnv::fetch_catalogue`: pkg's
//!   order of archives, SRV mirrors for `mirror_type: srv`) — never an
//!   `ETag`. The archive is kept ([`Kept`], in the package cache by its
//!   digest) and the step's install reads that same archive
//!   (`pkg::repository::Sources::kept`): the catalogue keyed is the one
//!   installed from. One build asks each url once, whatever the number of
//!   steps and platforms.
//!
//! The trust a repository names (its fingerprints or key) decides only
//! whether the step succeeds, not what it installs, so it is not keyed.

use std::path::Path;

use super::freebsd::{FreeBsdEnv, PkgRepoError};
use crate::blame::Blame;
use crate::pkg::abi::{self, Abi, AbiError};
use crate::pkg::repo_conf::{self, MirrorType, RepoConfError, SignatureType};
use crate::pkg::repository_files::Kept;
use crate::plan::key::KeyEncoder;
use crate::plan::FreeBsdVersion;

/// Why what a PKG step's root names cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PkgRootError {
    #[error(
        "PKG installs into a FreeBSD root, and this step's is empty (FROM scratch with \
         nothing before it): start FROM a FreeBSD image or `freebsd:<release>`, or COPY a \
         FreeBSD tree in first"
    )]
    EmptyRoot,
    #[error(transparent)]
    Abi(#[from] AbiError),
    #[error(transparent)]
    Conf(#[from] RepoConfError),
    #[error(transparent)]
    Repository(#[from] PkgRepoError),
}

impl Blame for PkgRootError {
    fn is_user_error(&self) -> bool {
        match self {
            PkgRootError::EmptyRoot => true,
            PkgRootError::Abi(e) => e.is_user_error(),
            PkgRootError::Conf(e) => e.is_user_error(),
            PkgRootError::Repository(e) => e.is_user_error(),
        }
    }
}

impl FreeBsdEnv {
    /// What a PKG step for the OCI architecture `arch` finds in `root`
    /// (see the module docs; `None`: the step has no parent, its root is
    /// empty), the catalogues fetched kept in `kept`; `release`: the
    /// stage's FreeBSD version when a `FROM freebsd:<release>` says it.
    pub fn pkg_root(
        &self,
        root: Option<&Path>,
        arch: &str,
        release: Option<&FreeBsdVersion>,
        kept: &mut Kept,
    ) -> Result<String, PkgRootError> {
        let root = root.ok_or(PkgRootError::EmptyRoot)?;
        let abi = match abi::of_root(root, arch) {
            Ok(abi) => abi,
            Err(e) => match release.and_then(|r| release_abi(r, arch)) {
                Some(abi) if e.is_user_error() => abi,
                _ => return Err(e.into()),
            },
        };
        if let Some(dir) = &self.pkg_repos_dir {
            // A missing directory would read as one with no files.
            std::fs::read_dir(dir).map_err(|source| PkgRepoError::ReadDir {
                dir: dir.clone(),
                source,
            })?;
        }
        let repos = repo_conf::load_root_with(root, &abi, self.pkg_repos_dir.as_deref())?;
        let mut e = KeyEncoder::new();
        e.str("abi", &abi.to_string())
            .str("osversion", &abi.osversion.to_string());
        let enabled: Vec<_> = repos.iter().filter(|r| r.enabled).collect();
        e.str("repo.count", &enabled.len().to_string());
        let mut shown = Vec::new();
        for conf in enabled {
            let url = conf.url.as_deref().unwrap_or_default();
            e.str("repo.name", &conf.name)
                .str("repo.url", url)
                .str("repo.priority", &conf.priority.to_string())
                .str("repo.mirror_type", mirror_name(conf.mirror_type))
                .str("repo.signature_type", signature_name(conf.signature_type))
                .opt("repo.fingerprints", conf.fingerprints.as_deref())
                .opt("repo.pubkey", conf.pubkey.as_deref());
            if self.pkg_offline {
                shown.push(format!("{} {url}", conf.name));
                continue;
            }
            // As `pkg::repository::load_from` looks it up.
            let url = url.trim_end_matches('/').to_string();
            let digest = match kept.get(&url) {
                Some(f) => f.digest.clone(),
                None => {
                    let f = self.fetch_catalogue(&conf.name, &url, conf.mirror_type)?;
                    let digest = f.digest.clone();
                    kept.insert(url.clone(), f);
                    digest
                }
            };
            e.str("repo.catalogue", &digest.to_string());
            shown.push(format!("{} {url} {digest}", conf.name));
        }
        if self.pkg_offline {
            e.str("offline", "yes");
        }
        // What the configuration sets over the image's pkg.conf
        // (`[pkg] files_ignore_*`) changes what the step leaves; the
        // image's own pkg.conf is the parent's, keyed with it.
        e.str("pkg_conf", &self.pkg_conf.key_text());
        Ok(format!("{abi}; {}; {}", shown.join(", "), e.finish()))
    }
}

/// The ABI a release's version gives for `arch`.
fn release_abi(release: &FreeBsdVersion, arch: &str) -> Option<Abi> {
    Some(Abi {
        major: release.osversion / 100_000,
        minor: release.osversion / 1000 % 100,
        arch: abi::pkg_arch(arch)?.to_string(),
        osversion: release.osversion,
    })
}

fn mirror_name(m: MirrorType) -> &'static str {
    match m {
        MirrorType::None => "none",
        MirrorType::Srv => "srv",
        MirrorType::Http => "http",
    }
}

fn signature_name(s: SignatureType) -> &'static str {
    match s {
        SignatureType::None => "none",
        SignatureType::Pubkey => "pubkey",
        SignatureType::Fingerprints => "fingerprints",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A root whose freebsd-version says 14.3, naming the repository
    /// `file://<dir>/repo/${ABI}` in `/etc/pkg/FreeBSD.conf`.
    fn root_naming(t: &Path) -> std::path::PathBuf {
        let root = t.join("root");
        fs::create_dir_all(root.join("bin")).unwrap();
        fs::create_dir_all(root.join("etc/pkg")).unwrap();
        fs::write(
            root.join("bin/freebsd-version"),
            "USERLAND_VERSION=\"14.3-RELEASE\"\n",
        )
        .unwrap();
        fs::write(
            root.join("etc/pkg/FreeBSD.conf"),
            format!(
                "FreeBSD: {{ url: \"file://{}/repo/${{ABI}}\" }}\n",
                t.display()
            ),
        )
        .unwrap();
        let repo = t.join("repo/FreeBSD:14:amd64");
        fs::create_dir_all(&repo).unwrap();
        fs::write(repo.join("packagesite.pkg"), b"catalogue 1").unwrap();
        root
    }

    #[test]
    fn the_root_s_repositories_and_their_catalogues_are_keyed() {
        let t = tempfile::tempdir().unwrap();
        let root = root_naming(t.path());
        let catalogue = t.path().join("repo/FreeBSD:14:amd64/packagesite.pkg");
        let mut env = FreeBsdEnv::default();
        let answer = |env: &FreeBsdEnv| {
            env.pkg_root(Some(&root), "amd64", None, &mut Kept::new())
                .unwrap()
        };
        let first = answer(&env);
        assert!(
            first.starts_with("FreeBSD:14:amd64; FreeBSD file://"),
            "{first}"
        );
        assert_eq!(first, answer(&env));

        // One build reads a catalogue once: what it kept stands.
        let mut kept = Kept::new();
        let kept_first = env.pkg_root(Some(&root), "amd64", None, &mut kept).unwrap();
        fs::write(&catalogue, b"catalogue 2").unwrap();
        assert_eq!(
            kept_first,
            env.pkg_root(Some(&root), "amd64", None, &mut kept).unwrap()
        );
        // The next build sees the new catalogue.
        let second = answer(&env);
        assert_ne!(first, second, "an updated catalogue must change the key");

        // A repository the image adds in /usr/local/etc/pkg/repos counts
        // (and its catalogue is read)...
        let local = root.join("usr/local/etc/pkg/repos");
        fs::create_dir_all(&local).unwrap();
        fs::write(
            local.join("local.conf"),
            format!(
                "local: {{ url: \"file://{}/repo/${{ABI}}\", priority: 5 }}\n",
                t.path().display()
            ),
        )
        .unwrap();
        let with_local = answer(&env);
        assert!(with_local.contains(", local file://"), "{with_local}");
        // ... and --pkg-repos is read in its place.
        let repos = t.path().join("repos");
        fs::create_dir(&repos).unwrap();
        fs::write(repos.join("off.conf"), "FreeBSD: { enabled: no }\n").unwrap();
        env.pkg_repos_dir = Some(repos.clone());
        let overridden = answer(&env);
        assert!(
            overridden.starts_with("FreeBSD:14:amd64; ; "),
            "{overridden}"
        );

        // Offline: the configuration counts, the catalogue does not.
        env.pkg_repos_dir = None;
        env.pkg_offline = true;
        let offline = answer(&env);
        fs::write(&catalogue, b"catalogue 3").unwrap();
        assert_eq!(offline, answer(&env));
        fs::remove_file(local.join("local.conf")).unwrap();
        assert_ne!(
            offline,
            answer(&env),
            "a changed config must change the key"
        );

        // A --pkg-repos directory that is not there is said, not read as
        // an empty one.
        env.pkg_repos_dir = Some(t.path().join("no-such-dir"));
        let e = env
            .pkg_root(Some(&root), "amd64", None, &mut Kept::new())
            .unwrap_err();
        assert!(
            e.is_user_error() && e.to_string().contains("no-such-dir"),
            "{e}"
        );
    }

    #[test]
    fn a_root_that_does_not_say_its_abi_takes_its_release_s() {
        let t = tempfile::tempdir().unwrap();
        let root = root_naming(t.path());
        fs::remove_file(root.join("bin/freebsd-version")).unwrap();
        let env = FreeBsdEnv {
            pkg_offline: true,
            ..Default::default()
        };
        let e = env
            .pkg_root(Some(&root), "amd64", None, &mut Kept::new())
            .unwrap_err();
        assert!(
            matches!(e, PkgRootError::Abi(_)) && e.is_user_error(),
            "{e}"
        );
        let release = FreeBsdVersion::of_release("14.3-RELEASE", "arm64").unwrap();
        let answer = env
            .pkg_root(Some(&root), "arm64", Some(&release), &mut Kept::new())
            .unwrap();
        assert!(
            answer.starts_with("FreeBSD:14:aarch64; FreeBSD file://"),
            "{answer}"
        );
        assert!(answer.contains("/repo/FreeBSD:14:aarch64"), "{answer}");
    }
}
