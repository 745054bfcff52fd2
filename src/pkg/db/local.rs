//! What the database holds of an installed package that pkg compares
//! with the repository's version of it to decide whether to reinstall it
//! at the same version (`pkg_jobs_need_upgrade`, `libpkg/pkg_jobs.c`):
//! its ABI, `vital` flag, digest, options, direct dependencies,
//! conflicts, provides and requires, and shared libraries, as pkg loads
//! them (`PKG_LOAD_OPTIONS`, `_DEPS`, `_CONFLICTS`, `_SHLIBS_*`, …).

use std::collections::BTreeMap;

use super::{DbError, LocalDb, MAX_PACKAGES};

/// An installed package as `pkg_jobs_need_upgrade` sees it. The lists
/// are sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Local {
    pub version: String,
    /// `packages.arch`: the ABI it was installed for.
    pub abi: String,
    pub vital: bool,
    /// `packages.manifestdigest`, when recorded.
    pub digest: Option<String>,
    pub options: BTreeMap<String, String>,
    /// Direct dependencies: name to origin.
    pub deps: BTreeMap<String, String>,
    /// The installed packages it conflicts with, by name (pkg records a
    /// conflict by the other package's row).
    pub conflicts: Vec<String>,
    pub provides: Vec<String>,
    pub requires: Vec<String>,
    pub shlibs_provided: Vec<String>,
    pub shlibs_required: Vec<String>,
}

impl LocalDb {
    /// Whether an installed package owns the file `path` (pkg's
    /// `pkgdb_file_exists`).
    pub fn owns_file(&self, path: &str) -> Result<bool, DbError> {
        self.conn
            .query_row(
                "SELECT 1 FROM files WHERE path = ?1 LIMIT 1",
                [path],
                |_| Ok(()),
            )
            .map(|_| true)
            .or_else(|e| match e {
                rusqlite::Error::QueryReturnedNoRows => Ok(false),
                e => Err(DbError::Hostile {
                    path: self.path.clone(),
                    reason: format!("looking for the owner of {path}: {e}"),
                }),
            })
    }

    /// The files of the installed packages but those named in `except`
    /// (the ones an install replaces), each with its package
    /// (`name-version`): what a new package may not install too (pkg's
    /// `pkg_conflicts_check_local_path`).
    pub fn owners(
        &self,
        except: &std::collections::BTreeSet<String>,
    ) -> Result<std::collections::BTreeMap<String, String>, DbError> {
        let hostile = |source: rusqlite::Error| DbError::Hostile {
            path: self.path.clone(),
            reason: format!("reading the installed files: {source}"),
        };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT f.path, p.name, p.version FROM files f \
                 JOIN packages p ON p.id = f.package_id",
            )
            .map_err(hostile)?;
        let mut rows = stmt.query([]).map_err(hostile)?;
        let mut out = std::collections::BTreeMap::new();
        while let Some(r) = rows.next().map_err(hostile)? {
            let name: String = r.get(1).map_err(hostile)?;
            if except.contains(&name) {
                continue;
            }
            if out.len() >= super::MAX_PACKAGES * 64 {
                return Err(DbError::Hostile {
                    path: self.path.clone(),
                    reason: "the installed packages list too many files".into(),
                });
            }
            let version: String = r.get(2).map_err(hostile)?;
            out.insert(r.get(0).map_err(hostile)?, format!("{name}-{version}"));
        }
        Ok(out)
    }

    /// The installed package `name` as pkg compares it (see the module
    /// docs).
    pub fn local(&self, name: &str) -> Result<Local, DbError> {
        let hostile = |source: rusqlite::Error| DbError::Hostile {
            path: self.path.clone(),
            reason: format!("reading {name}: {source}"),
        };
        let (id, mut local) = self
            .conn
            .query_row(
                "SELECT id, version, arch, vital, manifestdigest FROM packages WHERE name = ?1",
                [name],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        Local {
                            version: r.get(1)?,
                            abi: r.get(2)?,
                            vital: r.get::<_, Option<i64>>(3)?.unwrap_or(0) != 0,
                            digest: r.get::<_, Option<String>>(4)?.filter(|d| !d.is_empty()),
                            ..Local::default()
                        },
                    ))
                },
            )
            .map_err(hostile)?;
        let pairs = |sql: &str| -> Result<Vec<(String, String)>, DbError> {
            let mut stmt = self.conn.prepare(sql).map_err(hostile)?;
            let mut rows = stmt.query([id]).map_err(hostile)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(hostile)? {
                if out.len() >= MAX_PACKAGES {
                    return Err(DbError::Hostile {
                        path: self.path.clone(),
                        reason: format!("{name} lists too many rows"),
                    });
                }
                let first: String = r.get(0).map_err(hostile)?;
                let second: Option<String> = r.get(1).map_err(hostile)?;
                out.push((first, second.unwrap_or_default()));
            }
            out.sort();
            Ok(out)
        };
        let names = |sql: &str| -> Result<Vec<String>, DbError> {
            Ok(pairs(sql)?.into_iter().map(|(n, _)| n).collect())
        };
        local.options = pairs(
            "SELECT o.option, p.value FROM pkg_option p JOIN option o \
             ON o.option_id = p.option_id WHERE p.package_id = ?1",
        )?
        .into_iter()
        .collect();
        local.deps = pairs("SELECT name, origin FROM deps WHERE package_id = ?1")?
            .into_iter()
            .collect();
        local.conflicts = names(
            "SELECT p.name, NULL FROM pkg_conflicts c JOIN packages p \
             ON p.id = c.conflict_id WHERE c.package_id = ?1",
        )?;
        local.provides = names(
            "SELECT r.provide, NULL FROM pkg_provides p JOIN provides r \
             ON r.id = p.provide_id WHERE p.package_id = ?1",
        )?;
        local.requires = names(
            "SELECT r.require, NULL FROM pkg_requires p JOIN requires r \
             ON r.id = p.require_id WHERE p.package_id = ?1",
        )?;
        local.shlibs_provided = names(
            "SELECT s.name, NULL FROM pkg_shlibs_provided p JOIN shlibs s \
             ON s.id = p.shlib_id WHERE p.package_id = ?1",
        )?;
        local.shlibs_required = names(
            "SELECT s.name, NULL FROM pkg_shlibs_required p JOIN shlibs s \
             ON s.id = p.shlib_id WHERE p.package_id = ?1",
        )?;
        Ok(local)
    }
}
