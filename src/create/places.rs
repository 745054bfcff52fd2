//! Where `jbuild create` puts a jail when it is not told: the places
//! FreeBSD's handbook and jail(8)'s rc script use, or Bastille's.
//!
//! ```text
//! plain     /usr/local/jails/NAME                 the root (--path)
//!           /etc/jail.conf.d/NAME.conf            the entry (--conf); rc.d/jail reads it
//!           /etc/jail.conf.d/NAME.fstab           beside the entry, when there are mounts
//! bastille  PREFIX/jails/NAME/root                PREFIX: [bastille] prefix, default
//!           PREFIX/jails/NAME/jail.conf, fstab    /usr/local/bastille
//! ```
//!
//! A path the user gives (`--path`, `--conf`) is taken as it is. The default
//! places are host paths, so tests move them: with `JBUILD_TEST_HOST_ROOT`
//! set, every default place (Bastille's prefix too) is taken under that
//! directory, and a test writes nothing outside its temporary directory.
//! The entry then names the moved paths, since those are the ones written.

use std::path::{Path, PathBuf};

/// The parent of plain jails' roots.
pub const JAILS_DIR: &str = "/usr/local/jails";
/// Where rc.d/jail looks for one file per jail.
pub const CONF_DIR: &str = "/etc/jail.conf.d";
/// Bastille's own default prefix.
pub const BASTILLE_PREFIX: &str = "/usr/local/bastille";

/// The files one jail is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Places {
    pub root: PathBuf,
    pub conf: PathBuf,
    pub fstab: PathBuf,
}

/// `path`, a host place, as this process should write it: under
/// `$JBUILD_TEST_HOST_ROOT` when that is set.
pub fn on_host(path: &Path) -> PathBuf {
    match std::env::var_os("JBUILD_TEST_HOST_ROOT") {
        Some(top) if !top.is_empty() => under(Path::new(&top), path),
        _ => path.to_path_buf(),
    }
}

fn under(top: &Path, path: &Path) -> PathBuf {
    top.join(path.strip_prefix("/").unwrap_or(path))
}

/// The plain layout for `name`, with the user's `--path`/`--conf`.
pub fn plain(name: &str, path: Option<PathBuf>, conf: Option<PathBuf>) -> Places {
    let conf = conf.unwrap_or_else(|| on_host(&Path::new(CONF_DIR).join(format!("{name}.conf"))));
    Places {
        root: path.unwrap_or_else(|| on_host(&Path::new(JAILS_DIR).join(name))),
        fstab: conf.with_extension("fstab"),
        conf,
    }
}

/// Bastille's layout for `name` under `prefix` (the configuration's, else
/// [`BASTILLE_PREFIX`]).
pub fn bastille(prefix: &Path, name: &str, path: Option<PathBuf>, conf: Option<PathBuf>) -> Places {
    let prefix = on_host(prefix);
    let dir = prefix.join("jails").join(name);
    let conf = conf.unwrap_or_else(|| dir.join("jail.conf"));
    Places {
        root: path.unwrap_or_else(|| dir.join("root")),
        fstab: conf.with_file_name("fstab"),
        conf,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_paths_are_kept_and_the_fstab_sits_beside_the_entry() {
        let p = plain("web", Some("/j/web".into()), Some("/c/web.conf".into()));
        assert_eq!(p.root, Path::new("/j/web"));
        assert_eq!(p.fstab, Path::new("/c/web.fstab"));
        let b = bastille(Path::new("/b"), "web", None, Some("/c/j.conf".into()));
        assert_eq!(b.fstab, Path::new("/c/fstab"));
    }

    #[test]
    fn a_host_place_moves_under_the_test_root() {
        assert_eq!(
            under(Path::new("/tmp/t"), Path::new("/etc/jail.conf.d/a.conf")),
            Path::new("/tmp/t/etc/jail.conf.d/a.conf")
        );
        assert_eq!(
            under(Path::new("/tmp/t"), Path::new("rel")),
            Path::new("/tmp/t/rel")
        );
    }
}
