//! What extraction needs of a package's `+MANIFEST`: every path it
//! installs with its checksum and, from pkg 2.4, owner, mode, flags and
//! mtime; its directories; its `@config` files.
//!
//! pkg writes `files` as `{"/path": "<sum>"}` up to 2.3 and as
//! `{"/path": {"sum", "uname", "gname", "perm", "fflags", "mtime",
//! "symlink_target"}}` from 2.4; `directories` as `{"/path": "y"}` or
//! objects likewise; paths URL-encoded where needed (`%` and bytes outside
//! ASCII: `pkg_manifest.c`, `urlencode`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// One file (regular, symlink or hard link) a package installs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileMeta {
    /// pkg's checksum of the content (`None` for `-` or none).
    pub sum: Option<String>,
    pub uname: Option<String>,
    pub gname: Option<String>,
    pub perm: Option<u32>,
    pub fflags: Option<u32>,
    pub mtime: Option<i64>,
}

/// The contents a package's manifest lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    pub name: String,
    pub version: String,
    pub origin: String,
    pub prefix: String,
    /// By absolute path, decoded.
    pub files: BTreeMap<String, FileMeta>,
    pub dirs: BTreeMap<String, FileMeta>,
    pub config: BTreeSet<String>,
}

impl Contents {
    /// Reads the manifest `text` (pkg's compact JSON).
    pub fn parse(text: &str) -> Result<Contents, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let mut c = Contents {
            name: s("name"),
            version: s("version"),
            origin: s("origin"),
            prefix: s("prefix"),
            ..Contents::default()
        };
        if c.name.is_empty() || c.version.is_empty() {
            return Err("it has no name or version".into());
        }
        for (key, into) in [("files", &mut c.files), ("directories", &mut c.dirs)] {
            match v.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Object(map)) => {
                    for (path, meta) in map {
                        into.insert(url_decode(path)?, file_meta(meta, key == "files"));
                    }
                }
                Some(_) => return Err(format!("`{key}` is not an object")),
            }
        }
        match v.get("config") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for p in list {
                    let p = p.as_str().ok_or("`config` holds something not a path")?;
                    c.config.insert(url_decode(p)?);
                }
            }
            Some(_) => return Err("`config` is not an array".into()),
        }
        Ok(c)
    }
}

fn file_meta(v: &Value, is_file: bool) -> FileMeta {
    let sum = |s: &str| (is_file && !s.is_empty() && s != "-").then(|| s.to_string());
    match v {
        Value::String(s) => FileMeta {
            sum: sum(s),
            ..FileMeta::default()
        },
        Value::Object(o) => {
            let text = |k: &str| o.get(k).and_then(Value::as_str).map(String::from);
            let number = |k: &str| match o.get(k) {
                Some(Value::Number(n)) => n.as_i64(),
                Some(Value::String(s)) => i64::from_str_radix(s, 8).ok(),
                _ => None,
            };
            FileMeta {
                sum: text("sum").as_deref().and_then(sum),
                uname: text("uname"),
                gname: text("gname"),
                perm: number("perm").and_then(|n| u32::try_from(n).ok()),
                // An integer elsewhere than FreeBSD, flag names on it.
                fflags: match o.get("fflags") {
                    Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
                    Some(Value::String(s)) => Some(crate::layer::fflags::from_text(s)),
                    _ => None,
                },
                mtime: o.get("mtime").and_then(Value::as_i64),
            }
        }
        _ => FileMeta::default(),
    }
}

/// `%XX` decoded (pkg's `urldecode`).
fn url_decode(s: &str) -> Result<String, String> {
    if !s.contains('%') {
        return Ok(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("`{s}` has a bad %-escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_file_forms_and_config_read() {
        let c = Contents::parse(
            r#"{"name":"a","version":"1","origin":"x/a","prefix":"/usr/local",
            "files":{"/usr/local/bin/a":"1$abc","/usr/local/a%20b":{"sum":"2$x","uname":"www","gname":"www","perm":"4755","fflags":"schg","mtime":5}},
            "directories":{"/usr/local/share/a":"y"},"config":["/usr/local/etc/a.conf"]}"#,
        )
        .unwrap();
        assert_eq!(c.files["/usr/local/bin/a"].sum.as_deref(), Some("1$abc"));
        let b = &c.files["/usr/local/a b"];
        assert_eq!(b.uname.as_deref(), Some("www"));
        assert_eq!(b.perm, Some(0o4755));
        assert_eq!(b.fflags, Some(crate::layer::fflags::SF_IMMUTABLE));
        assert!(c.dirs.contains_key("/usr/local/share/a"));
        assert!(c.config.contains("/usr/local/etc/a.conf"));
        assert!(Contents::parse(r#"{"name":"a"}"#).is_err());
    }
}
