//! Which packages the image already has are replaced, as pkg decides it
//! for each requested name and each installed dependency
//! (`pkg_jobs_need_upgrade`, `libpkg/pkg_jobs.c`), and what an upgrade
//! needs of the old version (`pkg_add_upgrade`, `libpkg/pkg_add.c`).
//!
//! pkg's order of tests, first answer wins:
//!
//! 1. the installed package is locked: kept;
//! 2. the installed package's digest (`manifestdigest`) is the
//!    catalogue's: the same package, kept;
//! 3. the versions (`pkg_version_cmp`): the installed one newer, kept
//!    (and said); older, **upgraded**;
//! 4. the same version: **reinstalled** when its ABI, `vital` flag,
//!    options (pkg's `PKG_REINSTALL_ON_OPTIONS_CHANGE`, on by default),
//!    direct dependencies (names and origins), conflicts, provides,
//!    requires, provided or required shared libraries differ, with
//!    pkg's reason (`option changed: SSL (on -> off)`); else kept.
//!
//! The required shared libraries are compared without those the image's
//! base system provides, as pkg sets them aside
//! ([`super::system_shlibs`]: the root's `/lib`, `/usr/lib`,
//! `/usr/lib32`, unless its database owns `/usr/bin/uname`, i.e. the base
//! is itself pkgbase packages).
//!
//! One departure, so that a package is never reinstalled for nothing: the
//! catalogue's conflicts are compared with the installed ones only among
//! packages the image has (pkg records an installed package's conflicts
//! by the other's row, so only installed ones are there to compare).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::catalogue::Package;
use super::db::{DbError, Installed, Local, LocalDb, Previous};
use super::manifest::ScriptType;
use super::resolve::Chosen;
use super::version;

/// A file the database owns when the base system is pkgbase packages
/// (pkg's test in `pkg_jobs_solve`): then the packages provide the base's
/// libraries, and none is set aside.
pub const PKGBASE_MARK: &str = "/usr/bin/uname";

/// What becomes of an installed package the closure names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The same package, or locked: nothing to do.
    Keep,
    /// The image's version is newer than the repository's: kept.
    KeepNewer,
    /// The repository's version is newer.
    Upgrade,
    /// The same version, but what pkg compares differs: why.
    Reinstall(String),
}

/// `pkg_jobs_need_upgrade` for the repository's `remote` over the
/// installed `local` (see the module docs); `installed` says whether a
/// package of that name is in the image; `system` holds the base
/// system's shared libraries, left out of the required ones compared.
pub fn need_upgrade(
    remote: &Package,
    local: &Local,
    locked: bool,
    installed: &dyn Fn(&str) -> bool,
    system: &BTreeSet<String>,
) -> Decision {
    if locked {
        return Decision::Keep;
    }
    if local.digest.as_deref().is_some_and(|d| d == remote.digest) {
        return Decision::Keep;
    }
    match version::cmp(&local.version, &remote.version) {
        Ordering::Greater => return Decision::KeepNewer,
        Ordering::Less => return Decision::Upgrade,
        Ordering::Equal => {}
    }
    match same_version_change(remote, local, installed, system) {
        Some(reason) => Decision::Reinstall(reason),
        None => Decision::Keep,
    }
}

/// What differs between two packages of the same version, in pkg's
/// order and words; `None` when nothing pkg compares does.
fn same_version_change(
    remote: &Package,
    local: &Local,
    installed: &dyn Fn(&str) -> bool,
    system: &BTreeSet<String>,
) -> Option<String> {
    if local.abi != remote.abi {
        return Some(format!("ABI changed: '{}' -> '{}'", local.abi, remote.abi));
    }
    if local.vital != remote.vital {
        return Some(format!(
            "Vital flag changed: '{}' -> '{}'",
            local.vital, remote.vital
        ));
    }
    let options = remote.options();
    let mut changes = Vec::new();
    for key in local
        .options
        .keys()
        .chain(options.keys())
        .collect::<BTreeSet<_>>()
    {
        match (local.options.get(key), options.get(key)) {
            (Some(l), Some(r)) if l != r => changes.push(format!("{key} ({l} -> {r})")),
            (Some(_), None) => changes.push(format!("{key} (removed)")),
            (None, Some(_)) => changes.push(format!("{key} (added)")),
            _ => {}
        }
    }
    if !changes.is_empty() {
        return Some(format!("option changed: {}", changes.join(", ")));
    }
    let deps: BTreeMap<&str, &str> = remote
        .deps
        .iter()
        .map(|(n, d)| (n.as_str(), d.origin.as_str()))
        .collect();
    for name in local
        .deps
        .keys()
        .map(String::as_str)
        .chain(deps.keys().copied())
        .collect::<BTreeSet<_>>()
    {
        match (local.deps.get(name), deps.get(name)) {
            (Some(l), Some(r)) if l != r => changes.push(format!("{name} (origin changed)")),
            (Some(_), None) => changes.push(format!("{name} (removed)")),
            (None, Some(_)) => changes.push(format!("{name} (added)")),
            _ => {}
        }
    }
    if !changes.is_empty() {
        return Some(format!("direct dependency changed: {}", changes.join(", ")));
    }
    let conflicts: Vec<String> = sorted(remote.conflicts.iter().filter(|c| installed(c)));
    if conflicts != local.conflicts {
        return Some("direct conflict changed".into());
    }
    let not_base = |v: &[String]| -> Vec<String> {
        v.iter().filter(|s| !system.contains(*s)).cloned().collect()
    };
    let lists = [
        ("provides changed", local.provides.clone(), &remote.provides),
        ("requires changed", local.requires.clone(), &remote.requires),
        (
            "provided shared library changed",
            local.shlibs_provided.clone(),
            &remote.shlibs_provided,
        ),
        (
            "required shared library changed",
            not_base(&local.shlibs_required),
            &not_base(&remote.shlibs_required),
        ),
    ];
    for (label, l, r) in lists {
        if let Some(diff) = list_diff(&l, &sorted(r.iter())) {
            return Some(format!("{label}: {diff}"));
        }
    }
    None
}

fn sorted<'a>(v: impl Iterator<Item = &'a String>) -> Vec<String> {
    let set: BTreeSet<&String> = v.collect();
    set.into_iter().cloned().collect()
}

/// `a (removed), b (added)` between two sorted lists, if they differ.
fn list_diff(local: &[String], remote: &[String]) -> Option<String> {
    let l: BTreeSet<&String> = local.iter().collect();
    let r: BTreeSet<&String> = remote.iter().collect();
    let mut all: Vec<(&String, &str)> = l.difference(&r).map(|s| (*s, "removed")).collect();
    all.extend(r.difference(&l).map(|s| (*s, "added")));
    all.sort();
    (!all.is_empty()).then(|| {
        all.iter()
            .map(|(s, what)| format!("{s} ({what})"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// An installed package the new version replaces.
#[derive(Debug, Clone)]
pub struct Upgrade {
    /// The installed version.
    pub version: String,
    pub automatic: bool,
    /// Its files, directories, config contents and scripts in the
    /// database.
    pub previous: Previous,
}

/// What was decided of one installed package the closure names, for the
/// installer to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub name: String,
    /// The image's version.
    pub installed: String,
    /// The repository's, and the repository.
    pub offered: String,
    pub repository: String,
    pub decision: Decision,
}

/// Why the closure cannot be weighed.
#[derive(Debug, thiserror::Error)]
pub enum WeighError {
    #[error(transparent)]
    Db(#[from] DbError),
    /// The installed version to be replaced has a shell script pkg would
    /// run to remove it that is not shell: `name-version` and why.
    #[error("package {package}")]
    Script {
        package: String,
        #[source]
        source: Box<super::install::script_error::ShellError>,
    },
}

impl crate::blame::Blame for WeighError {
    fn is_user_error(&self) -> bool {
        match self {
            WeighError::Db(e) => e.is_user_error(),
            WeighError::Script { source, .. } => source.is_user_error(),
        }
    }
}

/// What [`weigh`] leaves: the packages to install (new ones, upgrades
/// and reinstalls, in the closure's order), by the new `name-version` the
/// installed package each replaces, and a verdict per installed package.
pub type Weighed<'a> = (Vec<Chosen<'a>>, BTreeMap<String, Upgrade>, Vec<Verdict>);

/// The closure with what the image has weighed (see [`Weighed`]). An
/// installed package to be replaced whose pre-deinstall shell script pkg
/// would run does not parse refuses the install before anything is
/// written (the script runs at the upgrade: `install::shell`).
pub fn weigh<'a>(
    closure: Vec<Chosen<'a>>,
    installed: &BTreeMap<String, Installed>,
    db: &LocalDb,
    root: &std::path::Path,
) -> Result<Weighed<'a>, WeighError> {
    let mut upgrades = BTreeMap::new();
    let mut todo = Vec::new();
    let mut verdicts = Vec::new();
    let has = |n: &str| installed.contains_key(&n.to_ascii_lowercase());
    // The base system's libraries, read once, when a package the image
    // has is weighed and the base is not pkgbase (`pkg_jobs_solve`).
    let mut system: Option<BTreeSet<String>> = None;
    for c in closure {
        let Some(old) = installed.get(&c.package.name.to_ascii_lowercase()) else {
            todo.push(c);
            continue;
        };
        let local = db.local(&old.name)?;
        if system.is_none() {
            system = Some(if db.owns_file(PKGBASE_MARK)? {
                BTreeSet::new()
            } else {
                super::system_shlibs::scan(root)
            });
        }
        let system = system.as_ref().expect("read above");
        let decision = need_upgrade(c.package, &local, old.locked, &has, system);
        verdicts.push(Verdict {
            name: c.package.name.clone(),
            installed: old.version.clone(),
            offered: c.package.version.clone(),
            repository: c.repository.name.clone(),
            decision: decision.clone(),
        });
        if matches!(decision, Decision::Keep | Decision::KeepNewer) {
            continue;
        }
        let previous = db.previous(&old.name)?;
        let runs = [ScriptType::PreDeinstall, ScriptType::Deinstall];
        super::install::script_error::check_parse(&previous.scripts, &runs).map_err(|source| {
            WeighError::Script {
                package: format!("{}-{}", old.name, old.version),
                source: Box::new(source),
            }
        })?;
        upgrades.insert(
            format!("{}-{}", c.package.name, c.package.version),
            Upgrade {
                version: old.version.clone(),
                automatic: old.automatic,
                previous,
            },
        );
        todo.push(c);
    }
    Ok((todo, upgrades, verdicts))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote(version: &str) -> Package {
        Package {
            name: "foo".into(),
            version: version.into(),
            abi: "FreeBSD:14:amd64".into(),
            ..Package::default()
        }
    }

    fn local(version: &str) -> Local {
        Local {
            version: version.into(),
            abi: "FreeBSD:14:amd64".into(),
            ..Local::default()
        }
    }

    fn decide(r: &Package, l: &Local) -> Decision {
        need_upgrade(r, l, false, &|_| true, &BTreeSet::new())
    }

    #[test]
    fn versions_then_what_pkg_compares() {
        assert_eq!(decide(&remote("2"), &local("1")), Decision::Upgrade);
        assert_eq!(decide(&remote("1"), &local("2")), Decision::KeepNewer);
        assert_eq!(decide(&remote("1"), &local("1")), Decision::Keep);
        assert_eq!(
            need_upgrade(&remote("2"), &local("1"), true, &|_| true, &BTreeSet::new()),
            Decision::Keep
        );
        let mut r = remote("1");
        r.raw_options.insert("SSL".into(), serde_json::json!("off"));
        r.raw_options.insert("X11".into(), serde_json::json!(true));
        let mut l = local("1");
        l.options.insert("SSL".into(), "on".into());
        l.options.insert("DOCS".into(), "on".into());
        assert_eq!(
            decide(&r, &l),
            Decision::Reinstall(
                "option changed: DOCS (removed), SSL (on -> off), X11 (added)".into()
            )
        );
        // The same digest: the same package, whatever else.
        l.digest = Some("2$abc".into());
        r.digest = "2$abc".into();
        assert_eq!(decide(&r, &l), Decision::Keep);
        let mut r = remote("1");
        r.shlibs_required = vec!["libz.so.6".into(), "libc.so.7".into()];
        let mut l = local("1");
        l.shlibs_required = vec!["libc.so.7".into(), "libssl.so.3".into()];
        assert_eq!(
            decide(&r, &l),
            Decision::Reinstall(
                "required shared library changed: libssl.so.3 (removed), libz.so.6 (added)".into()
            )
        );
        // A library the base system provides is set aside, as pkg does.
        let base = BTreeSet::from(["libssl.so.3".to_string(), "libz.so.6".to_string()]);
        assert_eq!(
            need_upgrade(&r, &l, false, &|_| true, &base),
            Decision::Keep
        );
        let base = BTreeSet::from(["libssl.so.3".to_string()]);
        assert_eq!(
            need_upgrade(&r, &l, false, &|_| true, &base),
            Decision::Reinstall("required shared library changed: libz.so.6 (added)".into())
        );
        let mut r = remote("1");
        r.conflicts = vec!["bar".into()];
        assert_eq!(
            need_upgrade(&r, &local("1"), false, &|_| false, &BTreeSet::new()),
            Decision::Keep
        );
        assert_eq!(
            decide(&r, &local("1")),
            Decision::Reinstall("direct conflict changed".into())
        );
    }
}
