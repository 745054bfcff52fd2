//! What the database holds of a package about to be replaced by an
//! upgrade: pkg loads the same (`pkgdb_ensure_loaded` with files,
//! directories and scripts, in `pkg_add_upgrade`) to remove what the new
//! version no longer installs and to tell a configuration file the user
//! changed from one the old version left as it was.

use std::collections::BTreeMap;

use super::{DbError, LocalDb, MAX_PACKAGES};

/// A path and, for a config file, its content.
type Rows = Vec<(String, Option<Vec<u8>>)>;

/// An installed package's files, directories and `@config` contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Previous {
    /// Absolute paths (`files.path`).
    pub files: Vec<String>,
    /// Absolute paths (`directories.path` through `pkg_directories`).
    pub dirs: Vec<String>,
    /// `config_files`: the content the package installed, by path.
    pub config: BTreeMap<String, Vec<u8>>,
}

impl LocalDb {
    /// The rows of the installed package `name` an upgrade needs.
    pub fn previous(&self, name: &str) -> Result<Previous, DbError> {
        let hostile = |source: rusqlite::Error| DbError::Hostile {
            path: self.path.clone(),
            reason: format!("reading the files of {name}: {source}"),
        };
        let id: i64 = self
            .conn
            .query_row("SELECT id FROM packages WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .map_err(hostile)?;
        let list = |sql: &str| -> Result<Rows, DbError> {
            let mut stmt = self.conn.prepare(sql).map_err(hostile)?;
            let mut rows = stmt.query([id]).map_err(hostile)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(hostile)? {
                if out.len() >= MAX_PACKAGES * 64 {
                    return Err(DbError::Hostile {
                        path: self.path.clone(),
                        reason: format!("{name} lists too many files"),
                    });
                }
                let content = match r.get_ref(1).map_err(hostile)? {
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        Some(t.to_vec())
                    }
                    _ => None,
                };
                out.push((r.get(0).map_err(hostile)?, content));
            }
            Ok(out)
        };
        let files = list("SELECT path, NULL FROM files WHERE package_id = ?1 ORDER BY path")?;
        let dirs = list(
            "SELECT d.path, NULL FROM pkg_directories p JOIN directories d \
             ON d.id = p.directory_id WHERE p.package_id = ?1 ORDER BY d.path",
        )?;
        let config = list("SELECT path, content FROM config_files WHERE package_id = ?1")?;
        Ok(Previous {
            files: files.into_iter().map(|(p, _)| p).collect(),
            dirs: dirs.into_iter().map(|(p, _)| p).collect(),
            config: config
                .into_iter()
                .filter_map(|(p, c)| c.map(|c| (p, c)))
                .collect(),
        })
    }
}
