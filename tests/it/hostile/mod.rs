//! What a hostile review of the release binary found (issue 29), each case
//! through the `jbuild` binary: paths the user names for output that are
//! not regular files (`outputs`), recipes whose expansion or config has no
//! bound (`budgets`), INCLUDEs that reach outside the context (`include`),
//! registries that drip, lie about digests, serve other content or echo
//! the token they were sent (`registry`), OCI layouts that lead outside or
//! never end (`layouts`, `fifos`), secrets and a store index without a
//! bound (`secrets`, `store_index`).

mod budgets;
mod fifos;
mod include;
mod layouts;
mod outputs;
mod registry;
mod secrets;
mod store_index;

use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use registry_support::{run_bounded, LIMIT};

/// A state root (`home/root`) and a build context `home/ctx` with a file
/// `site/a`.
pub(super) struct Home {
    pub tmp: tempfile::TempDir,
}

impl Home {
    pub fn new(jailfile: &str) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let ctx = tmp.path().join("ctx");
        fs::create_dir_all(ctx.join("site")).unwrap();
        fs::write(ctx.join("site/a"), "content of a\n").unwrap();
        fs::write(ctx.join("Jailfile"), jailfile).unwrap();
        Home { tmp }
    }
    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }
    pub fn ctx(&self) -> PathBuf {
        self.path("ctx")
    }
    pub fn jbuild(&self) -> Command {
        registry_support::jbuild(self.tmp.path())
    }
    /// `jbuild build ARGS… ctx`, bounded.
    pub fn build(&self, args: &[&str]) -> Output {
        run_bounded(self.jbuild().arg("build").args(args).arg(self.ctx()), LIMIT)
    }
}

pub(super) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit code 1 (the user's mistake) and each of `wanted` in the error.
pub(super) fn fails_with(out: &Output, wanted: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    for w in wanted {
        assert!(err.contains(w), "`{w}` not in:\n{err}");
    }
}

/// Succeeded; its standard output.
pub(super) fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// What kind of node `path` is, without following a symlink.
pub(super) fn kind(path: &Path) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = fs::symlink_metadata(path).unwrap().file_type();
    match () {
        _ if t.is_symlink() => "symlink",
        _ if t.is_fifo() => "fifo",
        _ if t.is_char_device() => "char device",
        _ if t.is_file() => "regular file",
        _ if t.is_dir() => "directory",
        _ => "other",
    }
}
