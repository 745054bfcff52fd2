//! The snapshot backends a test builds the same recipe on, to see that
//! each gives the same image: `dir` always, `overlay` when the test asks
//! for it (it needs the root lane), `zfs` on a zfs-fuse pool when there is
//! one (the pool's lane decides). Each backend has a jbuild root of its
//! own, and builds with one `SOURCE_DATE_EPOCH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::jbuild;
use super::zfs_fuse::Pool;

/// The `SOURCE_DATE_EPOCH` every backend builds with.
pub const EPOCH: &str = "1700000000";

/// One backend: its name (`dir`, `overlay`, `zfs`), its root and the
/// environment that selects it.
pub struct Backend {
    pub name: &'static str,
    pub root: PathBuf,
    pub env: Vec<(&'static str, String)>,
}

impl Backend {
    /// `jbuild` on this backend's root, with its environment and
    /// [`EPOCH`].
    pub fn jbuild(&self) -> Command {
        let mut c = jbuild(&self.root);
        c.env("SOURCE_DATE_EPOCH", EPOCH);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }
}

/// `dir`, then `overlay` when `overlay`, then `zfs` on `pool` when there
/// is one; their roots under `dir` (`dir/dir`, `dir/overlay`, `dir/zfs`).
pub fn backends(dir: &Path, overlay: bool, pool: Option<&Pool>) -> Vec<Backend> {
    let backend = |name: &'static str, env: Vec<(&'static str, String)>| Backend {
        name,
        root: dir.join(name),
        env,
    };
    let mut v = vec![backend("dir", vec![("JBUILD_BACKEND", "dir".into())])];
    if overlay {
        v.push(backend(
            "overlay",
            vec![("JBUILD_BACKEND", "overlay".into())],
        ));
    }
    if let Some(pool) = pool {
        v.push(backend(
            "zfs",
            vec![
                ("JBUILD_BACKEND", "zfs".into()),
                ("JBUILD_ZFS_DATASET", pool.dataset.clone()),
                ("JBUILD_CONFIG", "/dev/null".into()),
            ],
        ));
    }
    v
}

/// Every backend this machine has (overlay when the root lane runs, zfs
/// when a zfs-fuse pool can be made), the pool held as long as they are.
pub struct Backends {
    pub all: Vec<Backend>,
    _pool: Option<Pool>,
}

/// [`backends`] under `dir` for each backend this machine has: overlay
/// when the root lane runs, zfs-fuse when its lane does (a lane that
/// cannot run is counted as a skip, or fails where it is required).
pub fn here(dir: &Path) -> Backends {
    let pool = Pool::new();
    let all = backends(
        dir,
        super::lane::need(super::lane::Lane::Root),
        pool.as_ref(),
    );
    Backends { all, _pool: pool }
}
