//! Native instructions (COPY, SYSRC, LINE_IN_FILE, RENDER, the context
//! digest) against real directories, one module per instruction.

mod copy;
mod digest;
mod edit;
mod sysrc;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A scratch area with a root (`root/`), a build context (`ctx/`) and a
/// place outside both (`outside/`) that hostile symlinks aim at.
pub struct Scratch {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub ctx: PathBuf,
    pub outside: PathBuf,
}

impl Scratch {
    pub fn create() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let (root, ctx, outside) = (base.join("root"), base.join("ctx"), base.join("outside"));
        for d in [&root, &ctx, &outside] {
            fs::create_dir(d).unwrap();
        }
        Scratch {
            _dir: dir,
            root,
            ctx,
            outside,
        }
    }

    /// Writes `content` at `rel` under `base`, creating directories.
    pub fn write(base: &Path, rel: &str, content: &str) -> PathBuf {
        let p = base.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, content).unwrap();
        p
    }

    pub fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.root.join(rel)).unwrap()
    }
}

pub fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

pub fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}
