//! Whether a repository's packages are for the image's FreeBSD version, as
//! pkg 2.x decides it (`is_valid_os_version` in `libpkg/utils.c`, called
//! for every package of a catalogue when pkg updates a repository, and for
//! a package file when pkg adds it).
//!
//! A package's `FreeBSD_version` annotation is the `__FreeBSD_version` it
//! was built on; the image's is the OSVERSION of its userland
//! ([`super::abi::of_root`]: the ABI note of `/usr/bin/uname`, else
//! `/bin/sh`, as pkg reads it). When the package's is newer:
//!
//! - by less than 100000 (a newer minor or patch level, or the first
//!   versions of the next major release: 1500000 over 1403000) pkg asks
//!   once whether to go on, and `pkg install -y` (what a PKG step is)
//!   answers yes: the packages are installed, and jbuild says so once;
//! - by 100000 or more pkg refuses the repository whatever it is
//!   answered: so does jbuild, naming the repository, the package and
//!   both versions ([`OsVersionError::TooNew`]);
//! - an annotation that is not a number from 1 to 2^31-1 is refused too.
//!
//! `IGNORE_OSVERSION` turns the check off, as pkg reads it: from pkg's
//! environment — for a PKG step the step's environment (`ENV`, `ARG`),
//! where pkg(8) run in the build jail would find it — over the image's
//! `/usr/local/etc/pkg.conf` ([`ignore_setting`]). A value that is not a
//! boolean is said and left out, as pkg leaves it out.

use std::io::Read;
use std::path::Path;

use super::repository::Repository;
use super::ucl;
use crate::blame::Blame;

/// pkg's name for the setting.
pub const IGNORE_OSVERSION: &str = "IGNORE_OSVERSION";
/// pkg.conf(5) in the image (`PREFIX/etc/pkg.conf`).
pub const PKG_CONF: &str = "usr/local/etc/pkg.conf";
/// The most bytes of pkg.conf read.
const MAX_PKG_CONF: u64 = 1 << 20;
/// A difference of this much or more is a newer major release: refused
/// even where pkg would have asked.
const MAJOR: u64 = 100_000;

#[derive(Debug, thiserror::Error)]
pub enum OsVersionError {
    #[error(
        "repository `{repo}`: package {package} is built for FreeBSD {package_version} (its \
         FreeBSD_version annotation), 100000 or more newer than the image's userland \
         ({image_version}); pkg refuses such a repository too. Use a base of FreeBSD \
         {package_major}, a repository for FreeBSD {image_major}, or, to install it anyway, \
         `ENV IGNORE_OSVERSION=yes` before the PKG line (or `IGNORE_OSVERSION = true` in the \
         image's /usr/local/etc/pkg.conf)"
    )]
    TooNew {
        repo: String,
        package: String,
        package_version: u64,
        image_version: u32,
        package_major: u64,
        image_major: u32,
    },
    #[error(
        "repository `{repo}`: package {package} has the FreeBSD_version annotation `{value}`, \
         which is not a FreeBSD version (pkg refuses it too); `ENV IGNORE_OSVERSION=yes` before \
         the PKG line skips the check"
    )]
    Invalid {
        repo: String,
        package: String,
        value: String,
    },
}

impl Blame for OsVersionError {
    /// The repository does not fit the image: the recipe's to change.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A package newer than the image within its major release: installed,
/// as `pkg install -y` installs it, and said once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Newer {
    pub repo: String,
    pub package: String,
    pub package_version: u64,
    pub image_version: u32,
}

impl Newer {
    /// What jbuild says about it.
    pub fn message(&self) -> String {
        format!(
            "repository `{}` has packages built for a newer FreeBSD than the image's userland \
             ({} has FreeBSD_version {}, the image {}): installed, as `pkg install -y` does \
             (`ENV IGNORE_OSVERSION=yes` silences this)",
            self.repo, self.package, self.package_version, self.image_version
        )
    }
}

/// Checks every package of `repos` against the image's OSVERSION (see the
/// module docs); the first package newer within the major release, if
/// any, for the caller to say.
pub fn check(repos: &[Repository], image_version: u32) -> Result<Option<Newer>, OsVersionError> {
    let mut newer = None;
    for r in repos {
        for p in &r.packages {
            let Some(value) = p.annotations.get("FreeBSD_version") else {
                continue;
            };
            let label = format!("{}-{}", p.name, p.version);
            let v = parse(value).ok_or_else(|| OsVersionError::Invalid {
                repo: r.name.clone(),
                package: label.clone(),
                value: value.clone(),
            })?;
            let image = u64::from(image_version);
            if v <= image {
                continue;
            }
            if v - image >= MAJOR {
                return Err(OsVersionError::TooNew {
                    repo: r.name.clone(),
                    package: label,
                    package_version: v,
                    image_version,
                    package_major: v / MAJOR,
                    image_major: image_version / MAJOR as u32,
                });
            }
            newer.get_or_insert(Newer {
                repo: r.name.clone(),
                package: label,
                package_version: v,
                image_version,
            });
        }
    }
    Ok(newer)
}

/// An annotation as pkg's `strtonum(value, 1, INT_MAX)` reads it: leading
/// blanks, an optional `+`, digits and nothing after them.
fn parse(value: &str) -> Option<u64> {
    let digits = value.trim_start();
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|v| (1..=i32::MAX as u64).contains(v))
}

/// A boolean as UCL parses one from a string (`yes`/`no`, `true`/`false`,
/// `on`/`off`, without regard to case).
fn boolean(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" => Some(true),
        "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// Whether `IGNORE_OSVERSION` is set for an install into `root`: `env` is
/// the value pkg's environment gives it (the PKG step's), which wins over
/// the image's pkg.conf; not set, `false`. The second value is what to
/// say about a setting left out (not a boolean, a pkg.conf that cannot be
/// read), as pkg says it and goes on.
pub fn ignore_setting(env: Option<&str>, root: &Path) -> (bool, Vec<String>) {
    let mut said = Vec::new();
    if let Some(v) = env {
        match boolean(v) {
            Some(b) => return (b, said),
            None => said.push(format!(
                "IGNORE_OSVERSION={v} in the step's environment is not a boolean (yes/no, \
                 true/false, on/off): left out, as pkg leaves it out"
            )),
        }
    }
    match pkg_conf_setting(root) {
        Ok(b) => (b.unwrap_or(false), said),
        Err(why) => {
            said.push(format!("/{PKG_CONF}: {why}: IGNORE_OSVERSION left out"));
            (false, said)
        }
    }
}

/// `IGNORE_OSVERSION` in the image's pkg.conf: keys without regard to
/// case, the value a boolean (pkg leaves a value of another type out).
fn pkg_conf_setting(root: &Path) -> Result<Option<bool>, String> {
    let path = crate::fsutil::resolve_in_root(root, Path::new(PKG_CONF), true)
        .map_err(|e| e.to_string())?;
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let mut text = String::new();
    file.take(MAX_PKG_CONF)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    let value = ucl::parse(&text).map_err(|e| e.to_string())?;
    let found = value
        .pairs()
        .iter()
        .rev()
        .find(|(k, _)| k.eq_ignore_ascii_case(IGNORE_OSVERSION));
    Ok(match found {
        Some((_, ucl::Value::Bool(b))) => Some(*b),
        Some((_, ucl::Value::Str(s))) => boolean(s),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_are_read_as_strtonum_reads_them() {
        assert_eq!(parse("1403000"), Some(1_403_000));
        assert_eq!(parse(" +1403000"), Some(1_403_000));
        assert_eq!(parse("0"), None);
        assert_eq!(parse("14.3"), None);
        assert_eq!(parse("1403000x"), None);
        assert_eq!(parse("99999999999"), None);
    }

    #[test]
    fn the_environment_wins_over_pkg_conf() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("usr/local/etc")).unwrap();
        std::fs::write(t.path().join(PKG_CONF), "ignore_osversion: yes\n").unwrap();
        assert_eq!(ignore_setting(None, t.path()), (true, vec![]));
        assert_eq!(ignore_setting(Some("NO"), t.path()), (false, vec![]));
        let (b, said) = ignore_setting(Some("maybe"), t.path());
        assert!(b && said.len() == 1, "{said:?}");
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(ignore_setting(None, empty.path()), (false, vec![]));
    }
}
