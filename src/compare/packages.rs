//! The packages part of a comparison: each image's pkg database read as
//! `jbuild sbom` reads it (copied out of the layers, opened read-only
//! with bounds), then the two lists matched by package name, versions
//! ordered as pkg orders them ([`crate::pkg::version::cmp`]).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::image::LoadedImage;
use crate::sbom::{self, DbLimits, Package};
use crate::store::Store;

use super::CompareError;

/// One package that differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "change", rename_all = "lowercase")]
pub enum PackageChange {
    Added {
        name: String,
        version: String,
    },
    Removed {
        name: String,
        version: String,
    },
    Upgraded {
        name: String,
        from: String,
        to: String,
    },
    Downgraded {
        name: String,
        from: String,
        to: String,
    },
    /// The same version from another origin (a package renamed or moved
    /// in the ports tree, or a package of another repository).
    Replaced {
        name: String,
        version: String,
        from_origin: String,
        to_origin: String,
    },
}

impl PackageChange {
    /// How `jbuild diff` prints it: `+ name version`, `- name version`,
    /// `↑ name from → to`, `↓ name from → to`, `~ name version (origin …)`.
    pub fn line(&self) -> String {
        match self {
            PackageChange::Added { name, version } => format!("+ {name} {version}"),
            PackageChange::Removed { name, version } => format!("- {name} {version}"),
            PackageChange::Upgraded { name, from, to } => format!("↑ {name} {from} → {to}"),
            PackageChange::Downgraded { name, from, to } => format!("↓ {name} {from} → {to}"),
            PackageChange::Replaced {
                name,
                version,
                from_origin,
                to_origin,
            } => format!("~ {name} {version} (origin {from_origin} → {to_origin})"),
        }
    }
}

/// The packages that differ, sorted by name, with counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Packages {
    pub added: usize,
    pub removed: usize,
    pub upgraded: usize,
    pub downgraded: usize,
    pub replaced: usize,
    pub changes: Vec<PackageChange>,
}

impl Packages {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }
}

/// The packages installed in `image`, or `None` when it has no pkg
/// database.
pub fn installed(
    store: &Store,
    image: &LoadedImage,
    name: &str,
    limits: &DbLimits,
) -> Result<Option<Vec<Package>>, CompareError> {
    let inv = sbom::inventory_of(store, image, name, limits).map_err(|source| {
        CompareError::Packages {
            image: name.to_string(),
            source: Box::new(source),
        }
    })?;
    Ok(inv.has_database.then_some(inv.packages))
}

/// What changed from `a`'s packages to `b`'s.
pub fn compare(a: &[Package], b: &[Package]) -> Packages {
    let by_name = |list: &[Package]| -> BTreeMap<String, (String, String)> {
        list.iter()
            .map(|p| (p.name.clone(), (p.version.clone(), p.origin.clone())))
            .collect()
    };
    let (ma, mb) = (by_name(a), by_name(b));
    let mut out = Packages::default();
    for (name, (va, oa)) in &ma {
        match mb.get(name) {
            None => {
                out.removed += 1;
                out.changes.push(PackageChange::Removed {
                    name: name.clone(),
                    version: va.clone(),
                });
            }
            Some((vb, ob)) => match crate::pkg::version::cmp(va, vb) {
                Ordering::Less => {
                    out.upgraded += 1;
                    out.changes.push(PackageChange::Upgraded {
                        name: name.clone(),
                        from: va.clone(),
                        to: vb.clone(),
                    });
                }
                Ordering::Greater => {
                    out.downgraded += 1;
                    out.changes.push(PackageChange::Downgraded {
                        name: name.clone(),
                        from: va.clone(),
                        to: vb.clone(),
                    });
                }
                Ordering::Equal if oa != ob => {
                    out.replaced += 1;
                    out.changes.push(PackageChange::Replaced {
                        name: name.clone(),
                        version: vb.clone(),
                        from_origin: oa.clone(),
                        to_origin: ob.clone(),
                    });
                }
                Ordering::Equal => {}
            },
        }
    }
    for (name, (vb, _)) in &mb {
        if !ma.contains_key(name) {
            out.added += 1;
            out.changes.push(PackageChange::Added {
                name: name.clone(),
                version: vb.clone(),
            });
        }
    }
    out.changes
        .sort_by(|x, y| change_name(x).cmp(change_name(y)));
    out
}

fn change_name(c: &PackageChange) -> &str {
    match c {
        PackageChange::Added { name, .. }
        | PackageChange::Removed { name, .. }
        | PackageChange::Upgraded { name, .. }
        | PackageChange::Downgraded { name, .. }
        | PackageChange::Replaced { name, .. } => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, version: &str) -> Package {
        let mut p = Package::named(name);
        p.version = version.into();
        p.origin = format!("misc/{name}");
        p
    }

    #[test]
    fn versions_are_ordered_as_pkg_orders_them() {
        let a = [
            p("curl", "8.9.1"),
            p("old", "1"),
            p("py", "3.11.9_1"),
            p("x", "2.0"),
        ];
        let b = [
            p("curl", "8.10.0"),
            p("new", "1"),
            p("py", "3.11.9"),
            p("x", "2.0"),
        ];
        let d = compare(&a, &b);
        let lines: Vec<String> = d.changes.iter().map(PackageChange::line).collect();
        assert_eq!(
            lines,
            [
                "↑ curl 8.9.1 → 8.10.0",
                "+ new 1",
                "- old 1",
                "↓ py 3.11.9_1 → 3.11.9"
            ]
        );
        assert_eq!((d.added, d.removed, d.upgraded, d.downgraded), (1, 1, 1, 1));
    }
}
