//! The two ways overlayfs keeps its own metadata in a layer directory, and
//! which one a process, and a store, uses.
//!
//! - **trusted** (`trusted.overlay.*` xattrs, e.g. an opaque directory has
//!   `trusted.overlay.opaque=y`): the kernel's default, for a mount made by
//!   root in the initial user namespace — `trusted.*` xattrs can be read
//!   and written only with `CAP_SYS_ADMIN` there.
//! - **userxattr** (the `userxattr` mount option, Linux ≥ 5.11;
//!   `user.overlay.*` xattrs, so `user.overlay.opaque=y`): what a mount
//!   made in any other user namespace needs (a CI job under `unshare
//!   --user --map-root-user --mount`, a rootless container). The kernel then
//!   refuses `redirect_dir` and `metacopy` (they would let a user forge a
//!   redirect), and on kernels whose `redirect_always_follow` is on (the
//!   default) it reads `redirect_dir=off` as `follow` and refuses the mount
//!   as conflicting: the option is `redirect_dir=nofollow`, which is what
//!   userxattr means anyway.
//!
//! Whiteouts are the same in both: character devices 0/0, which an
//! unprivileged user may make since Linux 5.8 (overlayfs makes them).
//! In a user namespace a mount *without* `userxattr` is accepted by the
//! kernel but cannot mark a directory opaque (removing a directory and
//! making it again fails with EIO): the mounts' probe (`mount::probe`) tries
//! exactly that, under the flavour it is given.
//!
//! Which user namespace a process is in is read from the inode number of
//! `/proc/self/ns/user`: the kernel gives the initial user namespace the
//! fixed number [`INIT_USER_NS_INODE`] (`PROC_USER_INIT_INO` in
//! `include/linux/proc_ns.h`, fixed since Linux 3.8) and every other
//! namespace a number from the dynamic range above it, so the test is
//! exact. The other tests in use are not: comparing with
//! `/proc/1/ns/user` says "initial" in a container whose PID namespace
//! has its own PID 1 in the same user namespace, and an unprivileged
//! process may not read PID 1's link at all; `/proc/self/uid_map` being
//! `0 0 4294967295` (containerd's test) is also what a namespace made by
//! root with the whole identity mapping shows.
//!
//! A store remembers the flavour its layers were made under (the file
//! `ROOT/flavour`), because the other flavour would misread them *silently*:
//! a trusted mount ignores `user.overlay.opaque`, and a process outside the
//! initial user namespace reads every `trusted.*` xattr as absent, so in
//! both cases an opaque directory would show the lower layers' entries
//! again. Root may mount either flavour, so a store made in a user
//! namespace stays usable by root (under userxattr); a store made by root
//! is refused in a user namespace ([`for_store`]), with what to do.

use std::io;
use std::path::Path;

/// The features jbuild turns off: each would store a change somewhere other
/// than the upper directory's plain entries (a redirect xattr for a renamed
/// directory, a metadata-only copy-up), which the overlay differ does not
/// read. A mount with an upper directory turns the inode index on where it
/// can ([`Flavour::features`]): it keeps a copied-up file's names one file
/// (see `links.rs`, which moves what it holds into the upper directory
/// before the mount goes).
pub const FEATURES_OFF: &str = "redirect_dir=off,metacopy=off,index=off";

/// [`FEATURES_OFF`] with the inode index on: a trusted mount with an upper
/// directory.
pub const FEATURES_INDEX: &str = "redirect_dir=off,metacopy=off,index=on";

/// The inode number of the initial user namespace's `/proc/*/ns/user`
/// (`PROC_USER_INIT_INO`).
pub const INIT_USER_NS_INODE: u64 = 0xEFFF_FFFD;

/// How overlayfs stores its metadata in layer directories.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// `trusted.overlay.*`: root in the initial user namespace.
    Trusted,
    /// `user.overlay.*` (the `userxattr` mount option): any other user
    /// namespace.
    UserXattr,
}

impl Flavour {
    /// The name in `ROOT/flavour` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Flavour::Trusted => "trusted",
            Flavour::UserXattr => "userxattr",
        }
    }

    /// The flavour `name` ([`Flavour::name`]) names.
    pub fn parse(name: &str) -> Option<Flavour> {
        match name.trim() {
            "trusted" => Some(Flavour::Trusted),
            "userxattr" => Some(Flavour::UserXattr),
            _ => None,
        }
    }

    /// The xattr an opaque directory carries in an upper directory.
    pub fn opaque_xattr(self) -> &'static str {
        match self {
            Flavour::Trusted => "trusted.overlay.opaque",
            Flavour::UserXattr => "user.overlay.opaque",
        }
    }

    /// The options after the directories: the features jbuild turns off
    /// ([`FEATURES_OFF`]), spelled as `userxattr` needs them where it is
    /// used, and the inode index on for a `writable` trusted mount. A read-only
    /// mount has no use for an index (the kernel says so in its log), and
    /// in a user namespace the kernel turns it off (it needs to decode file
    /// handles, which takes `CAP_DAC_READ_SEARCH` in the initial user
    /// namespace), logging that it did: asked for there, it only fills the log.
    pub fn features(self, writable: bool) -> &'static str {
        match (self, writable) {
            (Flavour::Trusted, true) => FEATURES_INDEX,
            (Flavour::Trusted, false) => FEATURES_OFF,
            (Flavour::UserXattr, _) => "userxattr,redirect_dir=nofollow,metacopy=off,index=off",
        }
    }

    /// The flavour of a process whose `/proc/self/ns/user` has inode
    /// `inode`.
    pub fn for_user_ns_inode(inode: u64) -> Flavour {
        if inode == INIT_USER_NS_INODE {
            Flavour::Trusted
        } else {
            Flavour::UserXattr
        }
    }

    /// The flavour this process mounts with, and a phrase saying why (for
    /// `jbuild info`). (Elsewhere than Linux: trusted, and no mount works.)
    #[cfg(target_os = "linux")]
    pub fn of_this_process() -> io::Result<(Flavour, &'static str)> {
        use std::os::unix::fs::MetadataExt;
        let ns = std::fs::metadata("/proc/self/ns/user").map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot tell which user namespace this is (/proc/self/ns/user: {e})"),
            )
        })?;
        let flavour = Flavour::for_user_ns_inode(ns.ino());
        Ok((flavour, flavour.why()))
    }

    #[cfg(not(target_os = "linux"))]
    pub fn of_this_process() -> io::Result<(Flavour, &'static str)> {
        Ok((Flavour::Trusted, "not Linux"))
    }

    /// Where a process of this flavour is, and what it mounts with.
    pub fn why(self) -> &'static str {
        match self {
            Flavour::Trusted => "in the initial user namespace: trusted xattrs",
            Flavour::UserXattr => "in a user namespace: userxattr",
        }
    }
}

/// The flavour a store that recorded `recorded` (`None`: a new store) is
/// used with by a process of flavour `this`, or why it cannot be.
pub fn for_store(recorded: Option<Flavour>, this: Flavour) -> Result<Flavour, String> {
    match (recorded, this) {
        (None, f) | (Some(f @ Flavour::UserXattr), _) => Ok(f),
        (Some(Flavour::Trusted), Flavour::Trusted) => Ok(Flavour::Trusted),
        (Some(Flavour::Trusted), Flavour::UserXattr) => Err(
            "its layers were made by root outside any user namespace and mark opaque directories \
             with trusted.overlay.* xattrs, which a process in a user namespace cannot read (it \
             would see deleted entries again); use this store as root, or give this user a store \
             of its own (JBUILD_ROOT), or use --backend dir"
                .to_string(),
        ),
    }
}

/// The flavour `root/flavour` records: `Ok(None)` for a store that has
/// none and holds no snapshot yet; a store with snapshots but no record
/// was made before jbuild recorded it, by root: trusted.
pub fn recorded(root: &Path) -> io::Result<Option<Flavour>> {
    let file = root.join("flavour");
    match std::fs::read_to_string(&file) {
        Ok(text) => Flavour::parse(&text).map(Some).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} says {:?}: expected trusted or userxattr",
                    file.display(),
                    text.trim()
                ),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let holds_any = |sub: &str| {
                std::fs::read_dir(root.join(sub)).map_or(Ok(false), |mut d| {
                    d.next().transpose().map(|first| first.is_some())
                })
            };
            Ok((holds_any("committed")? || holds_any("active")?).then_some(Flavour::Trusted))
        }
        Err(e) => Err(e),
    }
}

/// Records `flavour` in `root/flavour` unless a record is there already
/// (another process's, made first), and returns the flavour recorded: the
/// file appears whole or not at all.
pub fn record(root: &Path, flavour: Flavour) -> io::Result<Flavour> {
    let file = root.join("flavour");
    let tmp = root.join(format!("flavour.{}.tmp", std::process::id()));
    std::fs::write(&tmp, format!("{}\n", flavour.name()))?;
    std::fs::File::open(&tmp)?.sync_all()?;
    let linked = std::fs::hard_link(&tmp, &file);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(flavour),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            recorded(root)?.ok_or_else(|| io::Error::other("the flavour file vanished"))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_initial_user_namespace_is_trusted_any_other_userxattr() {
        assert_eq!(Flavour::for_user_ns_inode(0xEFFF_FFFD), Flavour::Trusted);
        assert_eq!(Flavour::for_user_ns_inode(4026532177), Flavour::UserXattr);
        assert_eq!(Flavour::Trusted.opaque_xattr(), "trusted.overlay.opaque");
        assert_eq!(Flavour::UserXattr.opaque_xattr(), "user.overlay.opaque");
        for f in [Flavour::Trusted, Flavour::UserXattr] {
            assert_eq!(Flavour::parse(&format!("{}\n", f.name())), Some(f));
        }
        assert_eq!(Flavour::parse("user"), None);
    }

    #[test]
    fn a_trusted_store_is_refused_in_a_user_namespace_and_nothing_else() {
        use Flavour::*;
        assert_eq!(for_store(None, Trusted), Ok(Trusted));
        assert_eq!(for_store(None, UserXattr), Ok(UserXattr));
        assert_eq!(for_store(Some(Trusted), Trusted), Ok(Trusted));
        // Root may mount with userxattr: the store keeps its flavour.
        assert_eq!(for_store(Some(UserXattr), Trusted), Ok(UserXattr));
        assert_eq!(for_store(Some(UserXattr), UserXattr), Ok(UserXattr));
        let e = for_store(Some(Trusted), UserXattr).unwrap_err();
        assert!(
            e.contains("trusted.overlay") && e.contains("JBUILD_ROOT"),
            "{e}"
        );
    }

    #[test]
    fn a_store_records_its_flavour_once_and_old_stores_are_trusted() {
        let t = tempfile::tempdir().unwrap();
        for sub in ["committed", "active"] {
            std::fs::create_dir(t.path().join(sub)).unwrap();
        }
        assert_eq!(recorded(t.path()).unwrap(), None);
        std::fs::create_dir(t.path().join("committed/x")).unwrap();
        assert_eq!(recorded(t.path()).unwrap(), Some(Flavour::Trusted));
        assert_eq!(
            record(t.path(), Flavour::UserXattr).unwrap(),
            Flavour::UserXattr
        );
        // The first record stays, and says so.
        assert_eq!(
            record(t.path(), Flavour::Trusted).unwrap(),
            Flavour::UserXattr
        );
        assert_eq!(recorded(t.path()).unwrap(), Some(Flavour::UserXattr));
        let left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 3, "{left:?}");
        std::fs::write(t.path().join("flavour"), "user\n").unwrap();
        assert!(recorded(t.path()).is_err());
    }
}
