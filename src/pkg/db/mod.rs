//! The image's package database, `/var/db/pkg/local.sqlite`, as pkg(8)
//! writes it on install (`libpkg/pkgdb.c`: `pkgdb_init`,
//! `pkgdb_register_pkg`), so that `pkg info`, `pkg check`, `pkg upgrade`
//! and `pkg delete` in the jail later see what `pkg install` would have
//! left (`../shared/notes/pkg-anyhost.md` §6).
//!
//! - A database that is not there is made in pkg's schema
//!   ([`schema::CREATE`], `user_version` [`schema::USER_VERSION`]); one
//!   that is there keeps its schema and version, and the columns it has
//!   beyond that (`files.uname`, … from schema 37) are filled too.
//! - Each package is recorded in one transaction with pkg's statements
//!   (`record`); the install time is the one given (the build's
//!   `SOURCE_DATE_EPOCH`), never the clock: pkg's `NOW()` is a value here.
//! - The file is written with a rollback journal deleted on commit, so a
//!   layer holds `local.sqlite` alone, and the same installs write the
//!   same bytes.
//! - An existing database is the image's, so hostile: it is opened with
//!   `trusted_schema` off, a bound on every value's length and on the work
//!   any statement does, and refused (naming the file) when it is not
//!   SQLite, fails `quick_check`, lacks pkg's tables, or has a trigger or
//!   view where jbuild writes.

mod local;
mod previous;
mod record;
pub mod schema;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rusqlite::{Connection, OpenFlags};

pub use local::Local;
pub use previous::Previous;
pub use record::Record;

/// Where pkg keeps it, under the root.
pub const DB_PATH: &str = "var/db/pkg/local.sqlite";
/// The largest existing database opened (a full desktop's is tens of MiB).
pub const MAX_DB_BYTES: u64 = 1 << 30;
/// The longest value SQLite will hold (a config file's content, a script).
pub const MAX_VALUE: i32 = 64 << 20;
/// SQLite steps the statements of one open database may take together
/// before they are stopped.
pub const MAX_STEPS: u64 = 20_000_000_000;
/// The most packages read from an existing database.
pub const MAX_PACKAGES: usize = 200_000;

/// A package the database lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub origin: String,
    pub version: String,
    /// Installed as a dependency, not asked for.
    pub automatic: bool,
    pub locked: bool,
    /// Dependencies by name, sorted.
    pub deps: Vec<String>,
}

/// Why the database cannot be read or written; the file is named.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("{path}: {reason}")]
    Unsafe { path: PathBuf, reason: String },
    #[error("{path}: the image's package database is not one jbuild can use: {reason}")]
    Hostile { path: PathBuf, reason: String },
    #[error("{path}: the image's package database is not one jbuild can use")]
    NotSqlite {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "{path}: schema version {version} is older than pkg 2.0's ({oldest}); \
         run `pkg` once in the image to upgrade it, or start from an image with pkg 2"
    )]
    TooOld {
        path: PathBuf,
        version: i64,
        oldest: i64,
    },
    #[error("{path}: {pkg}: {reason}")]
    Conflict {
        path: PathBuf,
        pkg: String,
        reason: String,
    },
    #[error("{path}: writing {what}")]
    Write {
        path: PathBuf,
        what: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl crate::blame::Blame for DbError {
    /// A database the image brought, or packages that collide, are the
    /// user's to look at; a write or a file operation that fails is the
    /// machine's.
    fn is_user_error(&self) -> bool {
        !matches!(self, DbError::Write { .. } | DbError::Io { .. })
    }
}

/// The image's `local.sqlite`, open for recording installs.
pub struct LocalDb {
    conn: Connection,
    path: PathBuf,
    /// The install time recorded (`packages.time`).
    time: i64,
    version: i64,
    /// Columns beyond schema 36's that this database has.
    files_extra: bool,
    dirs_extra: bool,
}

impl LocalDb {
    /// Opens `root`'s database, or makes it (and `var/db/pkg`, mode 0755)
    /// in pkg's schema. `time` is what installs record as their time.
    pub fn open_or_create(root: &Path, time: i64) -> Result<LocalDb, DbError> {
        let path = db_path(root)?;
        let exists = path.exists();
        if exists {
            let size = std::fs::metadata(&path)
                .map_err(|source| DbError::Io {
                    path: path.clone(),
                    source,
                })?
                .len();
            if size > MAX_DB_BYTES {
                return Err(DbError::Hostile {
                    path,
                    reason: format!("{size} bytes, more than the {MAX_DB_BYTES} read"),
                });
            }
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| DbError::NotSqlite {
            path: path.clone(),
            source,
        })?;
        let not_sqlite = |source| DbError::NotSqlite {
            path: path.clone(),
            source,
        };
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE)
            .map_err(not_sqlite)?;
        conn.pragma_update(None, "trusted_schema", "OFF")
            .map_err(not_sqlite)?;
        bound_work(&conn);
        // As pkg opens it: a package replaced takes its rows with it.
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(not_sqlite)?;
        // Not WAL: one file in the layer, and the same bytes each time.
        let mode: String = conn
            .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
            .map_err(not_sqlite)?;
        if !mode.eq_ignore_ascii_case("delete") {
            return Err(DbError::Hostile {
                path,
                reason: format!("its journal mode stays `{mode}`"),
            });
        }
        // No sync per transaction: the database is in a build step's
        // root, which the step's snapshot commit makes durable whole (a
        // step that dies is discarded). The file written is the same.
        conn.pragma_update(None, "synchronous", "OFF")
            .map_err(not_sqlite)?;
        let mut db = LocalDb {
            conn,
            path,
            time,
            version: schema::USER_VERSION,
            files_extra: false,
            dirs_extra: false,
        };
        if exists && db.has_tables()? {
            db.check_existing()?;
        } else {
            db.create()?;
        }
        Ok(db)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The database's `user_version`.
    pub fn user_version(&self) -> i64 {
        self.version
    }

    /// What is installed, sorted by name.
    pub fn installed(&self) -> Result<Vec<Installed>, DbError> {
        let hostile = |source: rusqlite::Error| DbError::Hostile {
            path: self.path.clone(),
            reason: format!("reading its packages: {source}"),
        };
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, name, origin, version, automatic, locked FROM packages ORDER BY name",
            )
            .map_err(hostile)?;
        let mut rows = stmt.query([]).map_err(hostile)?;
        let mut list = Vec::new();
        let mut ids = Vec::new();
        while let Some(r) = rows.next().map_err(hostile)? {
            if list.len() >= MAX_PACKAGES {
                return Err(DbError::Hostile {
                    path: self.path.clone(),
                    reason: format!("more than {MAX_PACKAGES} packages"),
                });
            }
            ids.push(r.get::<_, i64>(0).map_err(hostile)?);
            list.push(Installed {
                name: r.get(1).map_err(hostile)?,
                origin: r.get(2).map_err(hostile)?,
                version: r.get(3).map_err(hostile)?,
                automatic: r.get::<_, i64>(4).map_err(hostile)? != 0,
                locked: r.get::<_, Option<i64>>(5).map_err(hostile)?.unwrap_or(0) != 0,
                deps: Vec::new(),
            });
        }
        let mut deps = self
            .conn
            .prepare("SELECT name FROM deps WHERE package_id = ?1 ORDER BY name")
            .map_err(hostile)?;
        for (p, id) in list.iter_mut().zip(ids) {
            let names = deps
                .query_map([id], |r| r.get::<_, String>(0))
                .map_err(hostile)?;
            for n in names {
                p.deps.push(n.map_err(hostile)?);
            }
        }
        Ok(list)
    }

    fn has_tables(&self) -> Result<bool, DbError> {
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|source| DbError::NotSqlite {
                path: self.path.clone(),
                source,
            })?;
        Ok(n > 0)
    }

    fn create(&mut self) -> Result<(), DbError> {
        let sql = format!(
            "BEGIN;{}PRAGMA user_version = {};COMMIT;",
            schema::CREATE,
            schema::USER_VERSION
        );
        self.conn
            .execute_batch(&sql)
            .map_err(|source| DbError::Write {
                path: self.path.clone(),
                what: "pkg's schema".into(),
                source,
            })
    }

    /// An existing database: SQLite, sound, pkg's, and nothing hidden
    /// where rows are written.
    fn check_existing(&mut self) -> Result<(), DbError> {
        let path = self.path.clone();
        let hostile = |reason: String| DbError::Hostile {
            path: path.clone(),
            reason,
        };
        let sql_err = |e: rusqlite::Error| hostile(e.to_string());
        let check: String = self
            .conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(sql_err)?;
        if check != "ok" {
            return Err(hostile(format!("quick_check: {check}")));
        }
        self.version = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql_err)?;
        if self.version < schema::OLDEST {
            return Err(DbError::TooOld {
                path: path.clone(),
                version: self.version,
                oldest: schema::OLDEST,
            });
        }
        if self.version / 1000 != 0 {
            return Err(hostile(format!(
                "schema version {} is of another major version than pkg 2's",
                self.version
            )));
        }
        let mut kinds = std::collections::HashMap::new();
        let mut triggers = HashSet::new();
        {
            let mut stmt = self
                .conn
                .prepare("SELECT type, name, tbl_name FROM sqlite_master")
                .map_err(sql_err)?;
            let mut rows = stmt.query([]).map_err(sql_err)?;
            while let Some(r) = rows.next().map_err(sql_err)? {
                let kind: String = r.get(0).map_err(sql_err)?;
                let name: String = r.get(1).map_err(sql_err)?;
                let table: String = r.get(2).map_err(sql_err)?;
                if kind == "trigger" {
                    triggers.insert(table.to_ascii_lowercase());
                }
                kinds.insert(name.to_ascii_lowercase(), kind);
            }
        }
        for t in schema::WRITTEN {
            match kinds.get(t).map(String::as_str) {
                Some("table") => {}
                Some(kind) => return Err(hostile(format!("`{t}` is a {kind}, not pkg's table"))),
                None => return Err(hostile(format!("it has no table `{t}`"))),
            }
            if triggers.contains(t) {
                return Err(hostile(format!("a trigger is set on `{t}`")));
            }
        }
        let cols = |table: &str| -> Result<HashSet<String>, DbError> {
            let mut stmt = self
                .conn
                .prepare(&format!("PRAGMA table_info({table})"))
                .map_err(sql_err)?;
            let names = stmt
                .query_map([], |r| r.get::<_, String>(1))
                .map_err(sql_err)?
                .collect::<Result<HashSet<_>, _>>()
                .map_err(sql_err)?;
            Ok(names)
        };
        let files = cols("files")?;
        self.files_extra = [
            "uname",
            "gname",
            "perm",
            "fflags",
            "mtime",
            "symlink_target",
        ]
        .iter()
        .all(|c| files.contains(*c));
        let dirs = cols("directories")?;
        self.dirs_extra = ["uname", "gname", "perm", "fflags"]
            .iter()
            .all(|c| dirs.contains(*c));
        Ok(())
    }
}

/// `root/var/db/pkg/local.sqlite`, its directories made (0755) and none
/// of them a symbolic link: the file written must be inside the root.
fn db_path(root: &Path) -> Result<PathBuf, DbError> {
    let mut dir = root.to_path_buf();
    for part in ["var", "db", "pkg"] {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(DbError::Unsafe {
                    path: dir,
                    reason: "not a directory (a symbolic link or a file): pkg's database \
                             must be inside the image"
                        .into(),
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .mode(0o755)
                    .create(&dir)
                    .map_err(|source| DbError::Io {
                        path: dir.clone(),
                        source,
                    })?;
            }
            Err(source) => return Err(DbError::Io { path: dir, source }),
        }
    }
    let path = dir.join("local.sqlite");
    for p in [
        path.clone(),
        dir.join("local.sqlite-journal"),
        dir.join("local.sqlite-wal"),
    ] {
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            if !m.is_file() {
                return Err(DbError::Unsafe {
                    path: p,
                    reason: "not a regular file".into(),
                });
            }
        }
    }
    Ok(path)
}

/// The connection's statements stop after [`MAX_STEPS`] steps together: a
/// hostile schema cannot make one run for ever.
fn bound_work(conn: &Connection) {
    let calls = Arc::new(AtomicU64::new(0));
    let per_call: u64 = 100_000;
    let max_calls = MAX_STEPS / per_call;
    conn.progress_handler(
        per_call as i32,
        Some(move || calls.fetch_add(1, Ordering::Relaxed) >= max_calls),
    );
}

#[cfg(test)]
mod tests;
