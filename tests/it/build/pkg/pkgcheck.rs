//! `pkg info` and `pkg check` as pkg runs them, over an image's
//! `local.sqlite` with the `sqlite3` program and its unpacked tree: the
//! statements are those of pkg's loaders (`libpkg/pkgdb_iterator.c`:
//! `pkgdb_load_files`, `pkgdb_load_deps`; `pkgdb_query.c` for the
//! package columns), written here from reading them, and the checks are
//! what `pkg check -s` (each file's recorded sum against the file) and
//! `pkg check -d` (each dependency installed) do with their rows.

use std::fs;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::sqlite;

/// `pkg info -a`'s columns for every package, by name.
pub const INFO: &str = "SELECT p.id, p.origin, p.name, p.version, p.comment, p.arch, \
    p.automatic, p.locked, p.time, p.vital FROM packages AS p ORDER BY p.name";
/// `pkgdb_load_files`: a package's files and their sums.
const FILES: &str = "SELECT path, sha256  FROM files  WHERE package_id = ?1  ORDER BY PATH ASC";
/// `pkgdb_load_deps`: a package's dependencies, with the version of the
/// installed package of that name and origin (none: not installed).
const DEPS: &str = "SELECT DISTINCT d.name, d.origin, p.version, 0  FROM deps AS d    \
    LEFT JOIN packages AS p ON    (p.origin = d.origin AND p.name = d.name)  \
    WHERE d.package_id = ?1  ORDER BY d.origin DESC";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// pkg's sum of what is at `path` now (`pkg_checksum_generate_file` with
/// SHA-256 hex): a regular file's content, a symlink's target without a
/// leading `/`.
fn sum_now(path: &Path) -> String {
    let meta = fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let data = if meta.file_type().is_symlink() {
        let t = fs::read_link(path).unwrap();
        t.to_string_lossy()
            .trim_start_matches('/')
            .as_bytes()
            .to_vec()
    } else {
        fs::read(path).unwrap()
    };
    format!("1${}", hex(&Sha256::digest(data)))
}

/// `pkg check -s -a` and `pkg check -d -a` on the image at `rootfs`:
/// every recorded sum matches the file (paths whose sum is `2$` are
/// skipped: BLAKE2b is checked by the generations test), and every
/// dependency is installed; but the paths in `changed` (config files the
/// recipe changed) differ, as `pkg check -s` reports them. Returns the
/// number of files checked.
pub fn pkg_check(db: &Path, rootfs: &Path, changed: &[&str]) -> usize {
    let ids = sqlite(db, "SELECT id FROM packages ORDER BY id");
    let mut checked = 0;
    for id in ids.lines() {
        for row in sqlite(db, &FILES.replace("?1", id)).lines() {
            let (path, sum) = row.rsplit_once('|').unwrap();
            if !sum.starts_with("1$") {
                continue;
            }
            let at = rootfs.join(path.trim_start_matches('/'));
            if changed.contains(&path) {
                assert_ne!(sum_now(&at), sum, "pkg check -s: {path} was changed");
            } else {
                assert_eq!(sum_now(&at), sum, "pkg check -s: {path} (package {id})");
            }
            checked += 1;
        }
        for row in sqlite(db, &DEPS.replace("?1", id)).lines() {
            let cols: Vec<&str> = row.split('|').collect();
            assert!(
                !cols[2].is_empty(),
                "pkg check -d: package {id} depends on {} ({}), which is not installed",
                cols[0],
                cols[1]
            );
        }
    }
    checked
}
