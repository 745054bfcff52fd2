//! Which packages to install: the ones asked for and their dependency
//! closure, across the enabled repositories, in the order to install
//! them (dependencies first).
//!
//! What pkg(8) does for an install into a root with nothing installed
//! (`libpkg/pkg_jobs_universe.c`; `../shared/notes/pkg-anyhost.md` §3.2),
//! without its SAT solver, which that case does not need:
//!
//! - a request is `name`, `name-version` or an origin `category/name`
//!   (`@flavor` after it matches the `flavor` annotation), compared
//!   without case as pkg does by default (`CASE_SENSITIVE_MATCH=no`);
//! - among candidates the repository of highest `priority` wins, then the
//!   highest version ([`super::version::cmp`]), then the repository first
//!   by name;
//! - dependencies are by name (the version in `deps` is only what the
//!   package was built with); a dependency is taken from its parent's
//!   repository when that has it, as pkg prefers;
//! - `requires` are met by the `provides` of a package in the closure or,
//!   failing that, chosen as above;
//! - the catalogue's `conflicts` (globs over names) between two packages
//!   of the closure refuse the install, naming both.
//!
//! Packages already in the image's `local.sqlite` are weighed by the
//! caller ([`super::install`]: kept or upgraded); conflicts between files
//! (two packages owning one path) need the packages' contents and are
//! found by [`super::extract`] and [`super::db`].

use crate::blame::Blame;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use super::catalogue::Package;
use super::repository::Repository;
use super::version;

/// One package to install.
#[derive(Debug, Clone, Copy)]
pub struct Chosen<'a> {
    pub repository: &'a Repository,
    pub package: &'a Package,
    /// Installed as a dependency, not asked for (pkg's `automatic`).
    pub automatic: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("no repository is enabled to install {0} from")]
    NoRepositories(String),
    #[error(
        "package `{request}` is in none of the repositories {}{}",
        list(repos),
        nearest_text(nearest)
    )]
    NotFound {
        request: String,
        repos: Vec<String>,
        nearest: Vec<String>,
    },
    #[error(
        "package `{name}` has no version matching `{request}`: the repositories have {}",
        list(versions)
    )]
    NoSuchVersion {
        request: String,
        name: String,
        versions: Vec<String>,
    },
    #[error("`{package}` (repository `{repo}`) depends on `{dep}`, which is in none of the repositories {}{}", list(repos), nearest_text(nearest))]
    MissingDependency {
        package: String,
        repo: String,
        dep: String,
        repos: Vec<String>,
        nearest: Vec<String>,
    },
    #[error("`{package}` (repository `{repo}`) requires `{require}`, which no package provides")]
    MissingRequire {
        package: String,
        repo: String,
        require: String,
    },
    #[error("`{a}` (repository `{a_repo}`) conflicts with `{b}` (repository `{b_repo}`, matched by `{pattern}`): they cannot be installed together")]
    Conflict {
        a: String,
        a_repo: String,
        b: String,
        b_repo: String,
        pattern: String,
    },
}

impl Blame for ResolveError {
    /// Every resolution failure is the recipe's or its repositories'.
    fn is_user_error(&self) -> bool {
        true
    }
}

fn list(v: &[String]) -> String {
    v.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn nearest_text(v: &[String]) -> String {
    if v.is_empty() {
        String::new()
    } else {
        format!("; the nearest names are {}", list(v))
    }
}

/// The closure of `requests` over `repos`, dependencies first.
pub fn resolve<'a>(
    repos: &'a [Repository],
    requests: &[String],
) -> Result<Vec<Chosen<'a>>, ResolveError> {
    if repos.is_empty() {
        return Err(ResolveError::NoRepositories(list(requests)));
    }
    let index = Index::new(repos);
    let mut chosen: BTreeMap<String, Chosen<'a>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut roots = Vec::new();
    for request in requests {
        let c = index.request(request)?;
        roots.push(c.package.name.to_ascii_lowercase());
        chosen
            .entry(c.package.name.to_ascii_lowercase())
            .or_insert(c);
    }
    // Every dependency of every chosen package, until none is new.
    let mut queue: Vec<String> = chosen.keys().cloned().collect();
    while let Some(key) = queue.pop() {
        let parent = chosen[&key];
        for dep in parent.package.deps.keys() {
            let dkey = dep.to_ascii_lowercase();
            if chosen.contains_key(&dkey) {
                continue;
            }
            let c = index.dependency(dep, parent)?;
            chosen.insert(dkey.clone(), c);
            queue.push(dkey);
        }
        for require in &parent.package.requires {
            let met = chosen
                .values()
                .any(|c| c.package.provides.contains(require));
            if met {
                continue;
            }
            let c = index.provider(require, parent)?;
            let pkey = c.package.name.to_ascii_lowercase();
            if let std::collections::btree_map::Entry::Vacant(e) = chosen.entry(pkey.clone()) {
                e.insert(c);
                queue.push(pkey);
            }
        }
    }
    conflicts(&chosen)?;
    // Dependencies first: a depth-first walk from the requests in their
    // order, each package after what it depends on (a cycle is cut where
    // it closes, as pkg's scheduler does).
    let mut seen = BTreeSet::new();
    for root in &roots {
        visit(root, &chosen, &mut seen, &mut order);
    }
    Ok(order
        .into_iter()
        .map(|k| {
            let mut c = chosen[&k];
            c.automatic = !roots.contains(&k);
            c
        })
        .collect())
}

fn visit(
    key: &str,
    chosen: &BTreeMap<String, Chosen<'_>>,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<String>,
) {
    if !seen.insert(key.to_string()) {
        return;
    }
    let c = chosen[key];
    let mut next: Vec<String> = c
        .package
        .deps
        .keys()
        .map(|d| d.to_ascii_lowercase())
        .collect();
    for r in &c.package.requires {
        if let Some((k, _)) = chosen.iter().find(|(_, p)| p.package.provides.contains(r)) {
            next.push(k.clone());
        }
    }
    for n in next {
        visit(&n, chosen, seen, order);
    }
    order.push(key.to_string());
}

fn conflicts(chosen: &BTreeMap<String, Chosen<'_>>) -> Result<(), ResolveError> {
    for a in chosen.values() {
        for pattern in &a.package.conflicts {
            let Ok(glob) = globset::Glob::new(pattern) else {
                continue;
            };
            let m = glob.compile_matcher();
            for b in chosen.values() {
                if std::ptr::eq(a.package, b.package) {
                    continue;
                }
                let full = format!("{}-{}", b.package.name, b.package.version);
                if m.is_match(&b.package.name) || m.is_match(&full) {
                    return Err(ResolveError::Conflict {
                        a: format!("{}-{}", a.package.name, a.package.version),
                        a_repo: a.repository.name.clone(),
                        b: full,
                        b_repo: b.repository.name.clone(),
                        pattern: pattern.clone(),
                    });
                }
            }
        }
    }
    Ok(())
}

/// Every package by lowercase name.
struct Index<'a> {
    repos: &'a [Repository],
    by_name: BTreeMap<String, Vec<(&'a Repository, &'a Package)>>,
}

impl<'a> Index<'a> {
    fn new(repos: &'a [Repository]) -> Index<'a> {
        let mut by_name: BTreeMap<String, Vec<_>> = BTreeMap::new();
        for r in repos {
            for p in &r.packages {
                by_name
                    .entry(p.name.to_ascii_lowercase())
                    .or_default()
                    .push((r, p));
            }
        }
        Index { repos, by_name }
    }

    fn repo_names(&self) -> Vec<String> {
        self.repos.iter().map(|r| r.name.clone()).collect()
    }

    /// The best of `candidates` (see the module docs).
    fn best(
        candidates: impl Iterator<Item = (&'a Repository, &'a Package)>,
    ) -> Option<(&'a Repository, &'a Package)> {
        candidates.max_by(|(ra, pa), (rb, pb)| {
            ra.priority
                .cmp(&rb.priority)
                .then_with(|| version::cmp(&pa.version, &pb.version))
                .then_with(|| rb.name.cmp(&ra.name))
        })
    }

    fn chosen(r: &'a Repository, p: &'a Package) -> Chosen<'a> {
        Chosen {
            repository: r,
            package: p,
            automatic: false,
        }
    }

    fn request(&self, request: &str) -> Result<Chosen<'a>, ResolveError> {
        let all = || self.by_name.values().flatten().copied();
        let found = if request.contains('/') {
            let (origin, flavor) = match request.split_once('@') {
                Some((o, f)) => (o, Some(f)),
                None => (request, None),
            };
            Self::best(all().filter(|(_, p)| {
                p.origin.eq_ignore_ascii_case(origin)
                    && flavor.is_none_or(|f| p.annotations.get("flavor").is_some_and(|g| g == f))
            }))
        } else if let Some(list) = self.by_name.get(&request.to_ascii_lowercase()) {
            Self::best(list.iter().copied())
        } else {
            // `name-version`: the name is what comes before a `-`.
            let exact = all()
                .filter(|(_, p)| format!("{}-{}", p.name, p.version).eq_ignore_ascii_case(request));
            match Self::best(exact) {
                Some(found) => Some(found),
                None => {
                    if let Some((name, list)) = request.rsplit_once('-').and_then(|(n, _)| {
                        self.by_name.get(&n.to_ascii_lowercase()).map(|l| (n, l))
                    }) {
                        let mut versions: Vec<String> = list
                            .iter()
                            .map(|(r, p)| format!("{} ({})", p.version, r.name))
                            .collect();
                        versions.sort();
                        return Err(ResolveError::NoSuchVersion {
                            request: request.to_string(),
                            name: name.to_string(),
                            versions,
                        });
                    }
                    None
                }
            }
        };
        found
            .map(|(r, p)| Self::chosen(r, p))
            .ok_or_else(|| ResolveError::NotFound {
                request: request.to_string(),
                repos: self.repo_names(),
                nearest: self.nearest(request),
            })
    }

    fn dependency(&self, dep: &str, parent: Chosen<'a>) -> Result<Chosen<'a>, ResolveError> {
        let list = self.by_name.get(&dep.to_ascii_lowercase());
        let same_repo = list.and_then(|l| {
            Self::best(
                l.iter()
                    .copied()
                    .filter(|(r, _)| std::ptr::eq(*r, parent.repository)),
            )
        });
        same_repo
            .or_else(|| list.and_then(|l| Self::best(l.iter().copied())))
            .map(|(r, p)| Self::chosen(r, p))
            .ok_or_else(|| ResolveError::MissingDependency {
                package: format!("{}-{}", parent.package.name, parent.package.version),
                repo: parent.repository.name.clone(),
                dep: dep.to_string(),
                repos: self.repo_names(),
                nearest: self.nearest(dep),
            })
    }

    fn provider(&self, require: &str, parent: Chosen<'a>) -> Result<Chosen<'a>, ResolveError> {
        let all = self.by_name.values().flatten().copied();
        Self::best(all.filter(|(_, p)| p.provides.iter().any(|x| x == require)))
            .map(|(r, p)| Self::chosen(r, p))
            .ok_or_else(|| ResolveError::MissingRequire {
                package: format!("{}-{}", parent.package.name, parent.package.version),
                repo: parent.repository.name.clone(),
                require: require.to_string(),
            })
    }

    /// Up to three names close to `wanted`, closest first.
    fn nearest(&self, wanted: &str) -> Vec<String> {
        let wanted = wanted.to_ascii_lowercase();
        let mut scored: Vec<(f64, &String)> = self
            .by_name
            .keys()
            .map(|k| (strsim::jaro_winkler(&wanted, k), k))
            .filter(|(s, _)| *s >= 0.8)
            .collect();
        scored.sort_by(|a, b| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(Ordering::Equal)
                .then(a.1.cmp(b.1))
        });
        scored
            .into_iter()
            .take(3)
            .map(|(_, k)| self.by_name[k][0].1.name.clone())
            .collect()
    }
}
