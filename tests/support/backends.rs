//! The snapshot backends a test can build on here, each with a state root
//! of its own: `dir` always; `overlay` when the root lane runs; zfs-fuse
//! when its lane does (a [`zfs_fuse::Pool`] held as long as the
//! [`Backends`]). A lane that cannot run is counted as a skip, or fails
//! where it is required (`lane.rs`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::jbuild;
use super::lane::{self, Lane};
use super::zfs_fuse;

/// A backend's state root and environment.
pub struct Backend {
    pub name: &'static str,
    pub root: PathBuf,
    pub env: Vec<(&'static str, String)>,
}

impl Backend {
    /// `jbuild` on this backend's root.
    pub fn jbuild(&self) -> Command {
        let mut c = jbuild(&self.root);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }
}

/// Every backend this machine has, roots under one directory.
pub struct Backends {
    pub all: Vec<Backend>,
    _pool: Option<zfs_fuse::Pool>,
}

/// The backends this machine has (see the module docs), their roots
/// `dir/<name>`.
pub fn here(dir: &Path) -> Backends {
    let backend = |name: &'static str, env: Vec<(&'static str, String)>| Backend {
        name,
        root: dir.join(name),
        env,
    };
    let mut all = vec![backend("dir", vec![("JBUILD_BACKEND", "dir".into())])];
    if lane::need(Lane::Root) {
        all.push(backend(
            "overlay",
            vec![("JBUILD_BACKEND", "overlay".into())],
        ));
    }
    let pool = zfs_fuse::Pool::new();
    if let Some(pool) = &pool {
        all.push(backend(
            "zfs",
            vec![
                ("JBUILD_BACKEND", "zfs".into()),
                ("JBUILD_ZFS_DATASET", pool.dataset.clone()),
                ("JBUILD_CONFIG", "/dev/null".into()),
            ],
        ));
    }
    Backends { all, _pool: pool }
}
