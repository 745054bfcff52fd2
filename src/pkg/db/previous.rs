//! What the database holds of a package about to be replaced by an
//! upgrade: pkg loads the same (`pkgdb_ensure_loaded` with files,
//! directories and scripts, in `pkg_add_upgrade`) to remove what the new
//! version no longer installs and to tell a configuration file the user
//! changed from one the old version left as it was; and its scripts,
//! whose pre-deinstall ones pkg runs before it removes the old files
//! (`pkg_add_cleanup_old`).

use std::collections::BTreeMap;

use super::{DbError, LocalDb, MAX_PACKAGES};
use crate::pkg::manifest::{LuaScriptType, ScriptType};

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
    /// `packages.prefix`: where its Lua scripts' relative paths are.
    pub prefix: String,
    /// Its shell scripts by type (`pkg_script`).
    pub scripts: Vec<(ScriptType, String)>,
    /// Its Lua scripts by type, in the order recorded (`pkg_lua_script`).
    pub lua_scripts: Vec<(LuaScriptType, String)>,
}

impl LocalDb {
    /// The rows of the installed package `name` an upgrade needs.
    pub fn previous(&self, name: &str) -> Result<Previous, DbError> {
        let hostile = |source: rusqlite::Error| DbError::Hostile {
            path: self.path.clone(),
            reason: format!("reading the files of {name}: {source}"),
        };
        let (id, prefix): (i64, String) = self
            .conn
            .query_row(
                "SELECT id, prefix FROM packages WHERE name = ?1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
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
        let typed = |sql: &str| -> Result<Vec<(i64, String)>, DbError> {
            let mut stmt = self.conn.prepare(sql).map_err(hostile)?;
            let rows = stmt
                .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(hostile)?;
            rows.take(64).collect::<Result<_, _>>().map_err(hostile)
        };
        let scripts = typed(
            "SELECT p.type, s.script FROM pkg_script p JOIN script s \
             ON s.script_id = p.script_id WHERE p.package_id = ?1 ORDER BY p.rowid",
        )?
        .into_iter()
        .filter_map(|(t, body)| ScriptType::from_db(t).map(|t| (t, body)))
        .collect();
        let lua_scripts = typed(
            "SELECT p.type, s.lua_script FROM pkg_lua_script p JOIN lua_script s \
             ON s.lua_script_id = p.lua_script_id WHERE p.package_id = ?1 ORDER BY p.rowid",
        )?
        .into_iter()
        .filter_map(|(t, body)| LuaScriptType::from_db(t).map(|t| (t, body)))
        .collect();
        Ok(Previous {
            files: files.into_iter().map(|(p, _)| p).collect(),
            dirs: dirs.into_iter().map(|(p, _)| p).collect(),
            config: config
                .into_iter()
                .filter_map(|(p, c)| c.map(|c| (p, c)))
                .collect(),
            prefix,
            scripts,
            lua_scripts,
        })
    }
}
