//! What extraction looks up for each tar entry of a package: the
//! manifest's ([`crate::pkg::manifest::Manifest`]) files, directories and
//! `@config` files by absolute path.

use std::collections::{BTreeMap, BTreeSet};

use crate::pkg::manifest::Manifest;

/// What the manifest says of one path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileMeta {
    /// pkg's checksum of the content (`None` without one, or `-`).
    pub sum: Option<String>,
    pub uname: Option<String>,
    pub gname: Option<String>,
    pub fflags: Option<u32>,
    pub mtime: Option<i64>,
}

/// A manifest's paths, indexed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contents {
    pub files: BTreeMap<String, FileMeta>,
    pub dirs: BTreeMap<String, FileMeta>,
    pub config: BTreeSet<String>,
}

impl Contents {
    pub fn of(m: &Manifest) -> Contents {
        let files = m
            .files
            .iter()
            .map(|f| {
                let meta = FileMeta {
                    sum: f.sum.clone().filter(|s| !s.is_empty() && s != "-"),
                    uname: f.uname.clone(),
                    gname: f.gname.clone(),
                    fflags: f.fflags,
                    mtime: f.mtime,
                };
                (f.path.clone(), meta)
            })
            .collect();
        let dirs = m
            .directories
            .iter()
            .map(|d| {
                let meta = FileMeta {
                    uname: d.uname.clone(),
                    gname: d.gname.clone(),
                    fflags: d.fflags,
                    ..FileMeta::default()
                };
                (d.path.trim_end_matches('/').to_string(), meta)
            })
            .collect();
        Contents {
            files,
            dirs,
            config: m.config.iter().cloned().collect(),
        }
    }
}
