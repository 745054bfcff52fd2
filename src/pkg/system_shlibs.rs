//! The shared libraries the image's base system provides, as pkg finds
//! them (`scan_system_shlibs` in `libpkg/system_shlibs.c`, called by
//! `pkg_jobs_solve` in `libpkg/pkg_jobs.c`): the names in the root's
//! `/lib` and `/usr/lib`, and in `/usr/lib32` with pkg's `:32` suffix,
//! of regular files and symlinks called `lib*.so` or `lib*.so.N[.N…]`.
//! pkg reads them only when the base system is not itself installed from
//! packages (pkgbase: its database owns `/usr/bin/uname`), and sets them
//! aside when it compares an installed package's required shared
//! libraries with the repository's (`pkg_jobs_need_upgrade`): a library
//! the base provides changing in that list is no reason to reinstall.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The directories pkg scans, under the root, and the suffix of their
/// names.
const DIRS: [(&str, &str); 3] = [("lib", ""), ("usr/lib", ""), ("usr/lib32", ":32")];

/// The most names read from one directory (a base's `/usr/lib` has about
/// a thousand); the rest are not looked at.
pub const MAX_NAMES: usize = 1 << 16;

/// The base system's shared libraries in the image at `root` (see the
/// module docs). A directory that cannot be read gives none.
pub fn scan(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (dir, suffix) in DIRS {
        let Ok(host) = crate::fsutil::resolve_in_root(root, Path::new(dir), true) else {
            continue;
        };
        let Ok(entries) = fs::read_dir(&host) else {
            continue;
        };
        for entry in entries.take(MAX_NAMES).flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if !(kind.is_file() || kind.is_symlink()) {
                continue;
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if is_shlib_name(name) {
                out.insert(format!("{name}{suffix}"));
            }
        }
    }
    out
}

/// `lib*.so`, or `lib*.so.` followed by digits and dots, at least seven
/// characters long: what pkg takes for a shared library's name.
fn is_shlib_name(name: &str) -> bool {
    if name.len() < 7 || !name.starts_with("lib") {
        return false;
    }
    let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if stem.len() == name.len() {
        return name.ends_with(".so");
    }
    // What was trimmed starts with the `.` after `so`.
    stem.ends_with(".so") && name[stem.len()..].starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_pkg_takes_them() {
        for ok in ["libc.so.7", "libfoo.so", "libssl.so.3.0", "libx.so"] {
            assert!(is_shlib_name(ok), "{ok}");
        }
        for no in [
            "libc.a",
            "libc.so.7.x",
            "ld-elf.so.1",
            "lib.so",
            "libfoo.sox",
            "libfoo.1",
        ] {
            assert!(!is_shlib_name(no), "{no}");
        }
    }

    #[test]
    fn lib_usr_lib_and_lib32_of_the_root() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        for (dir, names) in [
            ("lib", &["libc.so.7", "libz.a"][..]),
            ("usr/lib", &["libssl.so.30", "crt1.o"][..]),
            ("usr/lib32", &["libc.so.7"][..]),
        ] {
            fs::create_dir_all(root.join(dir)).unwrap();
            for n in names {
                fs::write(root.join(dir).join(n), b"").unwrap();
            }
        }
        std::os::unix::fs::symlink("libssl.so.30", root.join("usr/lib/libssl.so")).unwrap();
        fs::create_dir(root.join("usr/lib/libdir.so")).unwrap();
        let got: Vec<String> = scan(root).into_iter().collect();
        assert_eq!(
            got,
            ["libc.so.7", "libc.so.7:32", "libssl.so", "libssl.so.30"]
        );
    }
}
