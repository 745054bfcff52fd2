//! Reading pkg(8)'s database of installed packages, `local.sqlite`, from an
//! image: the file is hostile input.
//!
//! The copy is opened read-only and immutable (SQLite writes nothing, not
//! even a journal, and trusts no hot journal), with `trusted_schema` off
//! and a cap on the length of any value. Only tables are read (a view or a
//! virtual table by one of pkg's names is refused: either could make a
//! query as slow as its author likes), each table's rows are counted
//! before it is read and refused past [`DbLimits`], and every query is a
//! plain scan of one table: the joins are made here, in memory that the
//! counts bound.
//!
//! The schema is pkg's (`libpkg/pkgdb.c`, `pkgdb_init`): `packages` (`id`,
//! `name`, `version`, `origin`, `arch`, `comment`, `www`, `maintainer`,
//! `licenselogic`, `manifestdigest`, …), `deps` (`name`, `origin`,
//! `version`, `package_id`), `licenses` (`id`, `name`) and `pkg_licenses`
//! (`package_id`, `license_id`). Columns jbuild does not read may be
//! missing; a column it reads that is missing is a schema error.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

/// How much of a package database jbuild reads. The defaults are far
/// above any real system (FreeBSD's ports tree has about 35 000 ports).
#[derive(Debug, Clone, Copy)]
pub struct DbLimits {
    /// The database file's size.
    pub max_bytes: u64,
    /// Rows of any one table.
    pub max_rows: u64,
    /// Bytes of any one value (text or blob).
    pub max_value: usize,
    /// SQLite virtual-machine steps for the whole read: whatever the file
    /// holds, reading it ends.
    pub max_steps: u64,
}

impl Default for DbLimits {
    fn default() -> Self {
        DbLimits {
            max_bytes: 1 << 30,
            max_rows: 1_000_000,
            max_value: 1 << 20,
            max_steps: 1_000_000_000,
        }
    }
}

/// One installed package, as pkg recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// The port it was built from (`www/curl`).
    pub origin: String,
    /// pkg's ABI string (`FreeBSD:14:amd64`).
    pub arch: String,
    pub comment: String,
    pub www: Option<String>,
    pub maintainer: Option<String>,
    /// pkg's `licenselogic`: 1 single, `'|'` (124) or, `'&'` (38) and.
    pub license_logic: i64,
    /// The port's license names (`BSD2CLAUSE`, `GPLv2+`), sorted.
    pub licenses: Vec<String>,
    /// pkg's digest of the package's manifest (`2$1$<hex>`), when recorded.
    pub manifest_digest: Option<String>,
    /// What it depends on, sorted by name.
    pub deps: Vec<Dep>,
}

#[cfg(test)]
impl Package {
    /// A package with only a name (and version 1), for tests.
    pub(crate) fn named(name: &str) -> Package {
        Package {
            name: name.into(),
            version: "1".into(),
            origin: String::new(),
            arch: String::new(),
            comment: String::new(),
            www: None,
            maintainer: None,
            license_logic: 1,
            licenses: vec![],
            manifest_digest: None,
            deps: vec![],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dep {
    pub name: String,
    pub origin: String,
    pub version: String,
}

/// Why a package database cannot be read. Every case is the image's
/// (hostile or damaged input), so the user's to look at.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("it is not an SQLite database jbuild can read")]
    NotSqlite(#[source] rusqlite::Error),
    #[error("it has no table `{0}`: it is not pkg(8)'s database")]
    MissingTable(&'static str),
    #[error("`{name}` is a {kind}, not a table: jbuild reads only tables")]
    NotATable { name: &'static str, kind: String },
    #[error("table `{table}` does not have pkg(8)'s columns")]
    Schema {
        table: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("table `{table}` has {rows} rows; jbuild reads at most {max}")]
    TooManyRows {
        table: &'static str,
        rows: u64,
        max: u64,
    },
    #[error("reading it took more than {0} SQLite steps")]
    TooMuchWork(u64),
    #[error("cannot read table `{table}`")]
    Read {
        table: &'static str,
        #[source]
        source: rusqlite::Error,
    },
}

impl crate::blame::Blame for DbError {
    /// The image's database (hostile or damaged input): see the type.
    fn is_user_error(&self) -> bool {
        true
    }
}

const TABLES: [&str; 4] = ["packages", "deps", "licenses", "pkg_licenses"];

/// The most entries (tables, indexes, views, triggers) the schema may
/// have; pkg's has fewer than a hundred.
const MAX_SCHEMA_ENTRIES: u64 = 10_000;

/// Every package the database at `path` lists, sorted by name.
pub fn read(path: &Path, limits: &DbLimits) -> Result<Vec<Package>, DbError> {
    let db = open(path, limits)?;
    let calls = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&calls);
    // SQLite calls the handler every `per_call` steps of a statement.
    let per_call = (limits.max_steps / 100).clamp(1, 10_000);
    let max_calls = limits.max_steps / per_call;
    db.progress_handler(
        per_call as i32,
        Some(move || counted.fetch_add(1, Ordering::Relaxed) >= max_calls),
    );
    read_open(&db, limits).map_err(|e| {
        if calls.load(Ordering::Relaxed) > max_calls {
            DbError::TooMuchWork(limits.max_steps)
        } else {
            e
        }
    })
}

fn read_open(db: &Connection, limits: &DbLimits) -> Result<Vec<Package>, DbError> {
    check_tables(db, limits)?;

    let licenses: HashMap<i64, String> =
        rows(db, "licenses", "SELECT id, name FROM licenses", |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .into_iter()
        .collect();
    let mut licenses_of: HashMap<i64, Vec<String>> = HashMap::new();
    for (pkg, lic) in rows(
        db,
        "pkg_licenses",
        "SELECT package_id, license_id FROM pkg_licenses",
        |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
    )? {
        if let Some(name) = licenses.get(&lic) {
            licenses_of.entry(pkg).or_default().push(name.clone());
        }
    }
    let mut deps_of: HashMap<i64, Vec<Dep>> = HashMap::new();
    for (pkg, dep) in rows(
        db,
        "deps",
        "SELECT package_id, name, origin, version FROM deps",
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Dep {
                    name: r.get(1)?,
                    origin: r.get(2)?,
                    version: r.get(3)?,
                },
            ))
        },
    )? {
        deps_of.entry(pkg).or_default().push(dep);
    }

    let mut by_name: BTreeMap<String, Package> = BTreeMap::new();
    for (id, mut p) in rows(
        db,
        "packages",
        "SELECT id, name, version, origin, arch, comment, www, maintainer, licenselogic, \
         manifestdigest FROM packages",
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                Package {
                    name: r.get(1)?,
                    version: r.get(2)?,
                    origin: r.get(3)?,
                    arch: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
                    comment: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
                    www: r.get(6)?,
                    maintainer: r.get(7)?,
                    license_logic: r.get::<_, Option<i64>>(8)?.unwrap_or(1),
                    licenses: Vec::new(),
                    manifest_digest: r.get(9)?,
                    deps: Vec::new(),
                },
            ))
        },
    )? {
        p.licenses = licenses_of.remove(&id).unwrap_or_default();
        p.licenses.sort();
        p.licenses.dedup();
        p.deps = deps_of.remove(&id).unwrap_or_default();
        p.deps.sort();
        p.deps.dedup();
        by_name.insert(p.name.clone(), p);
    }
    Ok(by_name.into_values().collect())
}

fn open(path: &Path, limits: &DbLimits) -> Result<Connection, DbError> {
    // A URI, so that `immutable=1` applies: nothing is written beside the
    // copy and no journal is looked for.
    let escaped: String = path
        .to_string_lossy()
        .chars()
        .map(|c| match c {
            '%' => "%25".to_string(),
            '?' => "%3f".to_string(),
            '#' => "%23".to_string(),
            c => c.to_string(),
        })
        .collect();
    let db = Connection::open_with_flags(
        format!("file:{escaped}?immutable=1"),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(DbError::NotSqlite)?;
    let max_value = i32::try_from(limits.max_value).unwrap_or(i32::MAX);
    db.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, max_value)
        .map_err(DbError::NotSqlite)?;
    db.pragma_update(None, "trusted_schema", "OFF")
        .map_err(DbError::NotSqlite)?;
    Ok(db)
}

/// pkg's tables are there, are tables, and are not too long.
fn check_tables(db: &Connection, limits: &DbLimits) -> Result<(), DbError> {
    let mut kinds: HashMap<String, String> = HashMap::new();
    let mut stmt = db
        .prepare("SELECT name, type FROM sqlite_master")
        .map_err(DbError::NotSqlite)?;
    let mut q = stmt.query([]).map_err(DbError::NotSqlite)?;
    let mut seen = 0u64;
    while let Some(r) = q.next().map_err(DbError::NotSqlite)? {
        seen += 1;
        if seen > MAX_SCHEMA_ENTRIES {
            return Err(DbError::TooManyRows {
                table: "sqlite_master",
                rows: seen,
                max: MAX_SCHEMA_ENTRIES,
            });
        }
        let name: String = r.get(0).map_err(DbError::NotSqlite)?;
        let kind: String = r.get(1).map_err(DbError::NotSqlite)?;
        kinds.insert(name, kind);
    }
    for table in TABLES {
        match kinds.get(table).map(String::as_str) {
            None => return Err(DbError::MissingTable(table)),
            Some("table") => {}
            Some(other) => {
                return Err(DbError::NotATable {
                    name: table,
                    kind: other.to_string(),
                })
            }
        }
        // A virtual table says so only in its SQL.
        let sql: Option<String> = db
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .map_err(|source| DbError::Read { table, source })?;
        if sql.is_some_and(|s| {
            s.trim_start()
                .to_ascii_uppercase()
                .starts_with("CREATE VIRTUAL")
        }) {
            return Err(DbError::NotATable {
                name: table,
                kind: "virtual table".into(),
            });
        }
        let count: i64 = db
            .query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| {
                r.get(0)
            })
            .map_err(|source| DbError::Read { table, source })?;
        let count = u64::try_from(count).unwrap_or(0);
        if count > limits.max_rows {
            return Err(DbError::TooManyRows {
                table,
                rows: count,
                max: limits.max_rows,
            });
        }
    }
    Ok(())
}

/// Every row of one query over `table`, mapped by `f`.
fn rows<T>(
    db: &Connection,
    table: &'static str,
    sql: &str,
    f: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>, DbError> {
    let mut stmt = db
        .prepare(sql)
        .map_err(|source| DbError::Schema { table, source })?;
    let mapped = stmt
        .query_map([], f)
        .map_err(|source| DbError::Read { table, source })?;
    mapped
        .collect::<rusqlite::Result<Vec<T>>>()
        .map_err(|source| DbError::Read { table, source })
}
