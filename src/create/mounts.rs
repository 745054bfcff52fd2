//! The mount points in a jail's root. Every VOLUME of the image — and so
//! every fstab line a Bastille MOUNT left with it — names a directory the
//! jail mounts something on; mount(8) (run by jail(8) for `mount.fstab`)
//! needs that directory to exist, as Bastille's own `mount` makes it. So
//! `create` (plain, `--bastille` and `--bundle`) makes the missing ones:
//!
//! - a mount point the image already has keeps the image's owner and
//!   mode, whatever it is;
//! - a missing one, and each missing directory above it, is made owned by
//!   root (uid 0, gid 0) with mode 0755 — what docker does for a volume
//!   path its image lacks. (Run by another user than root, the directories
//!   are that user's: nothing else could be written.)
//!
//! The path is taken as the jail sees it: a symlink in the image that
//! stays inside the root (`home -> usr/home`) is followed, and the fstab
//! line names where it leads. One that the host would follow out of the
//! root — an absolute target, or `..` climbing above the root — is refused
//! before anything is written: jail(8) mounts fstab lines on the host,
//! where such a link leads into the host's own tree
//! ([`resolve_in_root_strictly`]).

use std::io;
use std::path::{Component, Path, PathBuf};

use super::{io as io_error, CreateError};
use crate::fsutil::{resolve_in_root_strictly, InRootError};

/// A VOLUME and its place in the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPoint {
    /// As the image names it: `/var/log/nginx`.
    pub volume: String,
    /// Where it is in the root, relative to it, with the image's symlinks
    /// followed as the jail follows them: `usr/home/data` for
    /// `/home/data` when `home -> usr/home`.
    pub inside: PathBuf,
}

/// Checks every VOLUME of `image` against its tree (`view`; `None` for an
/// image without layers) and says where each lies in the root. Refuses
/// (a user error: the image's) a path that is not absolute, has `..`, is
/// led out of the root by a symlink, or goes through a file.
pub fn check<'v>(
    image: &str,
    view: Option<&Path>,
    volumes: impl IntoIterator<Item = &'v String>,
) -> Result<Vec<MountPoint>, CreateError> {
    let refuse = |v: &str, why: String| {
        CreateError::User(format!(
            "image {image}: VOLUME {v}: {why}; no jail was written"
        ))
    };
    let mut points = Vec::new();
    for v in volumes {
        let path = Path::new(v);
        if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
            return Err(refuse(
                v,
                "a mount point must be an absolute path inside the jail, without `..`".into(),
            ));
        }
        let inside = match view {
            Some(view) => match resolve_in_root_strictly(view, path) {
                Ok(host) => host
                    .strip_prefix(view)
                    .expect("a path resolved in a root is under it")
                    .to_path_buf(),
                Err(e @ InRootError::Outside { .. }) => {
                    return Err(refuse(
                        v,
                        format!("{e}; the host would mount there, not in the jail"),
                    ))
                }
                Err(InRootError::Io(e)) => {
                    return Err(io_error(format!(
                        "cannot resolve VOLUME {v} in image {image}"
                    ))(e))
                }
            },
            None => path.components().skip(1).collect(),
        };
        if let Some(view) = view {
            if let Some(file) = through_file(view, &inside) {
                return Err(refuse(
                    v,
                    format!(
                        "/{} is not a directory in the image, so nothing can be mounted below it",
                        file.display()
                    ),
                ));
            }
        }
        points.push(MountPoint {
            volume: v.clone(),
            inside,
        });
    }
    Ok(points)
}

/// The first component of `inside` above its last that is in the tree and
/// not a directory (the last itself may be anything: a file can be a
/// mount point).
fn through_file(root: &Path, inside: &Path) -> Option<PathBuf> {
    let mut at = PathBuf::new();
    let parts: Vec<Component> = inside.components().collect();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        at.push(part);
        match std::fs::symlink_metadata(root.join(&at)) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Some(at),
            Err(_) => return None,
        }
    }
    None
}

/// Makes the missing mount points in `root` (a fresh copy or clone of the
/// tree [`check`] looked at): each missing directory root's, mode 0755.
/// Never follows a symlink: [`check`] resolved them, so one met here means
/// the root is not that tree, and is refused.
pub fn make(root: &Path, points: &[MountPoint]) -> Result<(), CreateError> {
    let as_root = nix::unistd::geteuid().is_root();
    for p in points {
        let mut at = root.to_path_buf();
        for part in p.inside.components() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(CreateError::User(format!(
                        "VOLUME {}: {} is a symlink in the jail's root, which was not in the image; no mount point was made",
                        p.volume,
                        at.display()
                    )))
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    make_dir(&at, as_root)
                        .map_err(io_error(format!("cannot make mount point {}", at.display())))?;
                }
                Err(e) => return Err(io_error(format!("cannot read {}", at.display()))(e)),
            }
        }
    }
    Ok(())
}

fn make_dir(path: &Path, as_root: bool) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new().mode(0o755).create(path)?;
    // The umask may have taken bits off.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    if as_root {
        std::os::unix::fs::lchown(path, Some(0), Some(0))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blame::Blame;
    use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};

    fn volumes(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mount_points_are_found_as_the_jail_sees_them() {
        let t = tempfile::tempdir().unwrap();
        let view = t.path().join("view");
        std::fs::create_dir_all(view.join("usr/home")).unwrap();
        std::fs::create_dir_all(view.join("etc")).unwrap();
        std::fs::write(view.join("etc/passwd"), "").unwrap();
        symlink("usr/home", view.join("home")).unwrap();
        let got = check(
            "img",
            Some(&view),
            &volumes(&["/var/log/nginx", "/home/data", "/etc/passwd"]),
        )
        .unwrap();
        let inside: Vec<&Path> = got.iter().map(|p| p.inside.as_path()).collect();
        assert_eq!(
            inside,
            [
                Path::new("var/log/nginx"),
                Path::new("usr/home/data"),
                Path::new("etc/passwd")
            ]
        );
        // Without layers, the path as written.
        let none = check("img", None, &volumes(&["/data/db"])).unwrap();
        assert_eq!(none[0].inside, Path::new("data/db"));
    }

    #[test]
    fn what_leads_out_or_through_a_file_is_refused() {
        let t = tempfile::tempdir().unwrap();
        let view = t.path().join("view");
        std::fs::create_dir_all(view.join("var")).unwrap();
        std::fs::write(view.join("file"), "").unwrap();
        symlink("/tmp", view.join("var/abs")).unwrap();
        symlink("../../..", view.join("var/up")).unwrap();
        let err = |v: &str| {
            let e = check("img", Some(&view), &volumes(&[v])).unwrap_err();
            assert!(e.is_user_error(), "{v}: {e}");
            e.to_string()
        };
        assert!(err("/var/abs/x").contains("through the symlink /var/abs -> /tmp"));
        assert!(err("/var/up/x").contains("through the symlink /var/up -> ../../.."));
        assert!(err("/file/x").contains("/file is not a directory"));
        assert!(err("relative").contains("an absolute path inside the jail, without `..`"));
        assert!(err("/a/../b").contains("an absolute path inside the jail, without `..`"));
    }

    #[test]
    fn missing_mount_points_are_made_root_0755_and_existing_ones_kept() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        std::fs::create_dir_all(root.join("srv/www")).unwrap();
        std::fs::set_permissions(root.join("srv/www"), std::fs::Permissions::from_mode(0o750))
            .unwrap();
        let points = check("img", Some(root), &volumes(&["/srv/www", "/var/db/x"])).unwrap();
        make(root, &points).unwrap();
        let mode = |p: &str| std::fs::metadata(root.join(p)).unwrap().mode() & 0o7777;
        assert_eq!(mode("srv/www"), 0o750);
        assert_eq!(mode("var"), 0o755);
        assert_eq!(mode("var/db/x"), 0o755);
        if nix::unistd::geteuid().is_root() {
            let m = std::fs::metadata(root.join("var/db/x")).unwrap();
            assert_eq!((m.uid(), m.gid()), (0, 0));
        }
        // A symlink that was not there when checked is not followed.
        std::fs::create_dir(root.join("elsewhere")).unwrap();
        symlink("/elsewhere", root.join("opt")).unwrap();
        let stale = [MountPoint {
            volume: "/opt/x".into(),
            inside: "opt/x".into(),
        }];
        assert!(make(root, &stale).unwrap_err().is_user_error());
        assert!(!root.join("elsewhere/x").exists());
    }
}
