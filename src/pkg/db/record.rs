//! Recording one installed package: `pkgdb_register_pkg` in
//! `libpkg/pkgdb.c`, its prepared statements, in its order, inside one
//! transaction.

use std::collections::BTreeMap;

use rusqlite::{params, Transaction};

use super::{DbError, LocalDb};
use crate::pkg::manifest::Manifest;

/// What an install adds to a manifest.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Pulled in as a dependency, not asked for (`packages.automatic`).
    pub automatic: bool,
    /// The repository it came from: pkg annotates `repository` and
    /// `repo_type` (`binary`) when it installs from one.
    pub repository: Option<String>,
    /// The contents of the package's config files as installed, by path
    /// (`config_files.content`, for pkg's three-way merge on upgrade).
    pub config_contents: BTreeMap<String, String>,
    /// The catalogue's digest of the package (`packages.manifestdigest`),
    /// which pkg copies from the repository's entry when it installs.
    pub digest: Option<String>,
}

impl LocalDb {
    /// Records `m` as installed, in one transaction: every table pkg fills
    /// on install. A file or config file another package owns is refused
    /// naming both (pkg: "conflicts with ... installs files into the same
    /// place"), and nothing of `m` is kept.
    pub fn record(&mut self, m: &Manifest, rec: &Record) -> Result<(), DbError> {
        let path = self.path.clone();
        let (time, files_extra, dirs_extra) = (self.time, self.files_extra, self.dirs_extra);
        let write = |what: &str| {
            let path = path.clone();
            let what = format!("{}-{}: {what}", m.name, m.version);
            move |source| DbError::Write { path, what, source }
        };
        let tx = self.conn.transaction().map_err(write("a transaction"))?;
        // An upgrade: the old version's rows go first, with everything
        // that hangs on its `packages` row (files, deps, scripts, ...), as
        // pkg's `INSERT OR REPLACE` of the row does.
        tx.execute("DELETE FROM packages WHERE name = ?1", params![m.name])
            .map_err(write("packages"))?;
        let id = insert_package(&tx, m, rec, time).map_err(write("packages"))?;
        // Packages that depend on this one learn its origin and version.
        tx.execute(
            "UPDATE deps SET origin=?1, version=?2 WHERE name=?3;",
            params![m.origin, m.version, m.name],
        )
        .map_err(write("deps"))?;
        for d in &m.deps {
            tx.execute(
                "INSERT INTO deps (origin, name, version, package_id) VALUES (?1, ?2, ?3, ?4)",
                params![d.origin, d.name, d.version, id],
            )
            .map_err(write("deps"))?;
        }
        insert_files(&tx, m, id, files_extra).map_err(|e| match e {
            Insert::Owned(owner, file) => DbError::Conflict {
                path: path.clone(),
                pkg: format!("{}-{}", m.name, m.version),
                reason: format!(
                    "conflicts with {owner} (installs files into the same place): {file}"
                ),
            },
            Insert::Sql(source) => write("files")(source),
        })?;
        for cf in &m.config {
            let content = rec.config_contents.get(cf);
            match tx.execute(
                "INSERT INTO config_files(path, content, package_id) VALUES (?1, ?2, ?3);",
                params![cf, content, id],
            ) {
                Ok(_) => {}
                Err(e) if is_constraint(&e) => {
                    return Err(DbError::Conflict {
                        path: path.clone(),
                        pkg: format!("{}-{}", m.name, m.version),
                        reason: format!("another package already owns the config file {cf}"),
                    })
                }
                Err(e) => return Err(write("config_files")(e)),
            }
        }
        insert_dirs(&tx, m, id, dirs_extra).map_err(write("directories"))?;
        insert_interned(&tx, m, id).map_err(|(what, e)| write(what)(e))?;
        insert_scripts(&tx, m, id).map_err(|(what, e)| write(what)(e))?;
        insert_shlibs(&tx, m, id).map_err(|(what, e)| write(what)(e))?;
        insert_annotations(&tx, m, rec, id).map_err(|(what, e)| write(what)(e))?;
        insert_conflicts(&tx, m, id).map_err(|(what, e)| write(what)(e))?;
        insert_provides(&tx, m, id).map_err(|(what, e)| write(what)(e))?;
        tx.commit().map_err(write("the transaction"))
    }
}

/// A failed statement and the table it wrote, for [`DbError::Write`].
type Failed = (&'static str, rusqlite::Error);

fn at(what: &'static str) -> impl FnOnce(rusqlite::Error) -> Failed {
    move |e| (what, e)
}

/// The interned names (categories, licenses, users, groups) and their links.
fn insert_interned(tx: &Transaction, m: &Manifest, id: i64) -> Result<(), Failed> {
    let interned = [
        (
            "categories",
            "name",
            "pkg_categories",
            "category_id",
            &m.categories,
        ),
        (
            "licenses",
            "name",
            "pkg_licenses",
            "license_id",
            &m.licenses,
        ),
        ("users", "name", "pkg_users", "user_id", &m.users),
        ("groups", "name", "pkg_groups", "group_id", &m.groups),
    ];
    for (table, col, link, link_col, values) in interned {
        link_names(tx, id, (table, col, link, link_col), values)?;
    }
    Ok(())
}

/// The package's scripts, Lua scripts and options.
fn insert_scripts(tx: &Transaction, m: &Manifest, id: i64) -> Result<(), Failed> {
    for (t, body) in &m.scripts {
        tx.execute("INSERT OR IGNORE INTO script(script) VALUES (?1)", [body])
            .map_err(at("script"))?;
        tx.execute(
            "INSERT INTO pkg_script(script_id, package_id, type) \
             VALUES ((SELECT script_id FROM script WHERE script = ?1), ?2, ?3)",
            params![body, id, t.db_value()],
        )
        .map_err(at("pkg_script"))?;
    }
    for (t, body) in &m.lua_scripts {
        tx.execute(
            "INSERT OR IGNORE INTO lua_script(lua_script) VALUES (?1)",
            [body],
        )
        .map_err(at("lua_script"))?;
        tx.execute(
            "INSERT INTO pkg_lua_script(lua_script_id, package_id, type) \
             VALUES ((SELECT lua_script_id FROM lua_script WHERE lua_script = ?1), ?2, ?3)",
            params![body, id, t.db_value()],
        )
        .map_err(at("pkg_lua_script"))?;
    }
    for (k, v) in &m.options {
        tx.execute("INSERT OR IGNORE INTO option (option) VALUES (?1)", [k])
            .map_err(at("option"))?;
        tx.execute(
            "INSERT INTO pkg_option(package_id, option_id, value) \
             VALUES (?1, (SELECT option_id FROM option WHERE option = ?2),?3)",
            params![id, k, v],
        )
        .map_err(at("pkg_option"))?;
    }
    Ok(())
}

/// The shared libraries it requires and provides.
fn insert_shlibs(tx: &Transaction, m: &Manifest, id: i64) -> Result<(), Failed> {
    for (link, values) in [
        ("pkg_shlibs_required", &m.shlibs_required),
        ("pkg_shlibs_provided", &m.shlibs_provided),
    ] {
        for v in values {
            tx.execute("INSERT OR IGNORE INTO shlibs(name) VALUES(?1)", [v])
                .map_err(at("shlibs"))?;
            tx.execute(
                &format!(
                    "INSERT OR IGNORE INTO {link}(package_id, shlib_id) \
                     VALUES (?1, (SELECT id FROM shlibs WHERE name = ?2))"
                ),
                params![id, v],
            )
            .map_err(at(link))?;
        }
    }
    Ok(())
}

/// Its annotations, with the repository it came from.
fn insert_annotations(tx: &Transaction, m: &Manifest, rec: &Record, id: i64) -> Result<(), Failed> {
    let mut annotations = m.annotations.clone();
    if let Some(repo) = &rec.repository {
        for (k, v) in [("repo_type", "binary"), ("repository", repo.as_str())] {
            if !annotations.iter().any(|(t, _)| t == k) {
                annotations.push((k.into(), v.into()));
            }
        }
    }
    for (k, v) in &annotations {
        for a in [k, v] {
            tx.execute(
                "INSERT OR IGNORE INTO annotation(annotation) VALUES (?1)",
                [a],
            )
            .map_err(at("annotation"))?;
        }
        tx.execute(
            "INSERT OR ROLLBACK INTO pkg_annotation(package_id, tag_id, value_id) VALUES (?1, \
             (SELECT annotation_id FROM annotation WHERE annotation = ?2), \
             (SELECT annotation_id FROM annotation WHERE annotation = ?3))",
            params![id, k, v],
        )
        .map_err(at("pkg_annotation"))?;
    }
    Ok(())
}

/// Its conflicts with installed packages.
fn insert_conflicts(tx: &Transaction, m: &Manifest, id: i64) -> Result<(), Failed> {
    // pkg records a conflict by the other package's row: only a
    // conflicting package that is installed has one.
    for c in &m.conflicts {
        tx.execute(
            "INSERT OR IGNORE INTO pkg_conflicts(package_id, conflict_id) \
             SELECT ?1, id FROM packages WHERE name = ?2",
            params![id, c],
        )
        .map_err(at("pkg_conflicts"))?;
    }
    Ok(())
}

/// Each of `values` interned in `table` (`col`) and linked to the
/// package through `link` (`link_col`), as pkg does for categories,
/// licenses, users, groups, provides and requires.
fn link_names<'a>(
    tx: &Transaction,
    id: i64,
    (table, col, link, link_col): (&'static str, &'static str, &'static str, &'static str),
    values: impl IntoIterator<Item = &'a String>,
) -> Result<(), Failed> {
    for v in values {
        tx.execute(
            &format!("INSERT OR IGNORE INTO {table}({col}) VALUES(?1)"),
            [v],
        )
        .map_err(at(table))?;
        tx.execute(
            &format!(
                "INSERT INTO {link}(package_id, {link_col}) \
                 VALUES (?1, (SELECT id FROM {table} WHERE {col} = ?2))"
            ),
            params![id, v],
        )
        .map_err(at(link))?;
    }
    Ok(())
}

/// What it provides and requires.
fn insert_provides(tx: &Transaction, m: &Manifest, id: i64) -> Result<(), Failed> {
    for (table, col, link, link_col, values) in [
        (
            "provides",
            "provide",
            "pkg_provides",
            "provide_id",
            &m.provides,
        ),
        (
            "requires",
            "require",
            "pkg_requires",
            "require_id",
            &m.requires,
        ),
    ] {
        link_names(tx, id, (table, col, link, link_col), values)?;
    }
    Ok(())
}

fn insert_package(
    tx: &Transaction,
    m: &Manifest,
    rec: &Record,
    time: i64,
) -> rusqlite::Result<i64> {
    let www = (!m.www.is_empty()).then_some(m.www.as_str());
    tx.execute(
        "INSERT OR REPLACE INTO packages( origin, name, version, comment, desc, message, arch, \
         maintainer, www, prefix, flatsize, automatic, licenselogic, time, manifestdigest, \
         dep_formula, vital)VALUES( ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
         ?14, ?15, ?16, ?17 )",
        params![
            m.origin,
            m.name,
            m.version,
            m.comment,
            m.desc,
            m.message_json(),
            m.abi,
            m.maintainer,
            www,
            m.prefix,
            m.flatsize,
            i64::from(rec.automatic),
            m.licenselogic.db_value(),
            time,
            rec.digest.as_deref().filter(|d| !d.is_empty()),
            m.dep_formula,
            i64::from(m.vital),
        ],
    )?;
    Ok(tx.last_insert_rowid())
}

enum Insert {
    /// The path, and the package (`name-version`) that owns it.
    Owned(String, String),
    Sql(rusqlite::Error),
}

fn is_constraint(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ConstraintViolation)
    )
}

fn insert_files(tx: &Transaction, m: &Manifest, id: i64, extra: bool) -> Result<(), Insert> {
    let sql = if extra {
        "INSERT INTO files (path, sha256, package_id, uname, gname, perm, fflags, mtime, \
         symlink_target) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
    } else {
        "INSERT INTO files (path, sha256, package_id) VALUES (?1, ?2, ?3)"
    };
    let mut stmt = tx.prepare(sql).map_err(Insert::Sql)?;
    for f in &m.files {
        let r = if extra {
            stmt.execute(params![
                f.path,
                f.sum,
                id,
                f.uname,
                f.gname,
                f.perm,
                f.fflags,
                f.mtime,
                f.symlink_target
            ])
        } else {
            stmt.execute(params![f.path, f.sum, id])
        };
        match r {
            Ok(_) => {}
            Err(e) if is_constraint(&e) => {
                let owner: Option<String> = tx
                    .query_row(
                        "SELECT p.name || '-' || p.version FROM packages AS p \
                         JOIN files AS f ON p.id = f.package_id WHERE f.path = ?1",
                        [&f.path],
                        |r| r.get(0),
                    )
                    .ok();
                match owner {
                    Some(o) => return Err(Insert::Owned(o, f.path.clone())),
                    // A stray row no package owns: pkg overwrites it.
                    None => {
                        tx.execute(
                            "INSERT OR REPLACE INTO files (path, sha256, package_id) \
                             VALUES (?1, ?2, ?3)",
                            params![f.path, f.sum, id],
                        )
                        .map_err(Insert::Sql)?;
                    }
                }
            }
            Err(e) => return Err(Insert::Sql(e)),
        }
    }
    Ok(())
}

fn insert_dirs(tx: &Transaction, m: &Manifest, id: i64, extra: bool) -> rusqlite::Result<()> {
    for d in &m.directories {
        if extra {
            tx.execute(
                "INSERT OR IGNORE INTO directories(path, uname, gname, perm, fflags) \
                 VALUES(?1, ?2, ?3, ?4, ?5)",
                params![d.path, d.uname, d.gname, d.perm, d.fflags],
            )?;
        } else {
            tx.execute(
                "INSERT OR IGNORE INTO directories(path) VALUES(?1)",
                [&d.path],
            )?;
        }
        tx.execute(
            "INSERT INTO pkg_directories(package_id, directory_id, try) VALUES (?1, \
             (SELECT id FROM directories WHERE path = ?2), ?3)",
            params![id, d.path, 1i64],
        )?;
    }
    Ok(())
}
