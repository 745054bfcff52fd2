//! Valid layers that look odd: `jbuild pull` must accept them. Refusing
//! good input is a bug too.

use std::fs;
use std::path::Path;

use super::world::{layers, one, Aim, Img};
use super::{Layer, Tar};

/// A valid layer that looks odd: pulled with `flags`, it must be accepted,
/// and `check` looks at the unpacked root.
pub struct Accepted {
    pub name: &'static str,
    pub image: fn(&Aim) -> Img,
    pub flags: &'static [&'static str],
    pub check: fn(&Aim, &Path),
}

pub fn accepted() -> Vec<Accepted> {
    use std::os::unix::fs::MetadataExt;
    vec![
        Accepted {
            name: "hard-links-within-the-layer",
            image: |_| {
                let t = Tar::new().file(b"bin/sh", b"shell");
                one(t
                    .hard_link(b"bin/rsh", b"bin/sh")
                    .hard_link(b"sbin/nologin", b"./bin/sh")
                    .finish())
            },
            flags: &[],
            check: |_, root| {
                let (a, b) = (root.join("bin/sh"), root.join("sbin/nologin"));
                let (a, b) = (fs::metadata(a).unwrap(), fs::metadata(b).unwrap());
                assert_eq!((a.ino(), a.nlink()), (b.ino(), 3));
            },
        },
        Accepted {
            name: "absolute-symlinks-are-only-stored",
            image: |a| {
                let t = Tar::new()
                    .symlink(b"etc/localtime", b"/usr/share/zoneinfo/UTC")
                    .symlink(b"canary-link", &a.abs("canary/secret"))
                    .symlink(b"lib/up", &a.up("canary"));
                one(t.finish())
            },
            flags: &[],
            check: |a, root| {
                let target = fs::read_link(root.join("canary-link")).unwrap();
                assert_eq!(
                    target.into_os_string().into_encoded_bytes(),
                    a.abs("canary/secret")
                );
                let up = fs::read_link(root.join("lib/up")).unwrap();
                assert_eq!(up.into_os_string().into_encoded_bytes(), a.up("canary"));
            },
        },
        Accepted {
            name: "hard-link-to-a-symlink",
            image: |a| {
                let t = Tar::new().symlink(b"s", &a.abs("canary/secret"));
                one(t.hard_link(b"h", b"s").finish())
            },
            flags: &[],
            check: |a, root| {
                let h = fs::symlink_metadata(root.join("h")).unwrap();
                assert!(h.file_type().is_symlink());
                let target = fs::read_link(root.join("h")).unwrap();
                assert_eq!(
                    target.into_os_string().into_encoded_bytes(),
                    a.abs("canary/secret")
                );
            },
        },
        Accepted {
            name: "whiteout-of-a-lower-file",
            image: |_| {
                let lower = Tar::new().file(b"etc/motd", b"hi").file(b"etc/keep", b"k");
                let upper = Tar::new().file(b"etc/.wh.motd", b"");
                layers(vec![
                    Layer::gzip(&lower.finish()),
                    Layer::tar(upper.finish()),
                ])
            },
            flags: &[],
            check: |_, root| {
                assert!(!root.join("etc/motd").exists());
                assert_eq!(fs::read(root.join("etc/keep")).unwrap(), b"k");
            },
        },
        Accepted {
            name: "opaque-directory",
            image: |_| {
                let lower = Tar::new().file(b"d/old", b"o").file(b"d/sub/old", b"o");
                let upper = Tar::new().file(b"d/.wh..wh..opq", b"").file(b"d/new", b"n");
                layers(vec![
                    Layer::gzip(&lower.finish()),
                    Layer::tar(upper.finish()),
                ])
            },
            flags: &[],
            check: |_, root| {
                let names: Vec<_> = fs::read_dir(root.join("d"))
                    .unwrap()
                    .map(|e| e.unwrap().file_name())
                    .collect();
                assert_eq!(names, ["new"]);
            },
        },
        Accepted {
            name: "non-utf8-name",
            image: |_| {
                one(Tar::new()
                    .pax(&[("path", b"caf\xe9")])
                    .file(b"caf_", b"latin-1")
                    .finish())
            },
            flags: &[],
            check: |_, root| {
                use std::os::unix::ffi::OsStrExt;
                let p = root.join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
                assert_eq!(fs::read(p).unwrap(), b"latin-1");
            },
        },
        Accepted {
            name: "lower-symlink-written-through-stays-inside",
            image: |a| {
                let lower = Tar::new().symlink(b"evil", &a.abs("canary"));
                let upper = Tar::new().file(b"evil/pwned", b"contained");
                layers(vec![Layer::tar(lower.finish()), Layer::tar(upper.finish())])
            },
            flags: &[],
            check: |a, root| {
                let inside = root.join(Path::new(
                    std::str::from_utf8(&a.abs("canary/pwned")[1..]).unwrap(),
                ));
                assert_eq!(fs::read(inside).unwrap(), b"contained");
            },
        },
        Accepted {
            name: "setuid-allowed-on-purpose",
            image: |_| one(Tar::new().file_mode(b"usr/bin/su", 0o4755, b"su").finish()),
            flags: &["--allow-setuid"],
            check: |_, root| {
                let m = fs::metadata(root.join("usr/bin/su")).unwrap();
                assert_eq!(m.mode() & 0o7777, 0o4755);
            },
        },
        Accepted {
            name: "device-allowed-on-purpose",
            image: |_| one(Tar::new().device(b"dev/null", b'3', 1, 3).finish()),
            flags: &["--allow-devices"],
            check: |_, root| {
                let m = fs::symlink_metadata(root.join("dev/null")).unwrap();
                assert_eq!(m.rdev(), jbuild::diff::meta::make_dev(1, 3));
            },
        },
    ]
}
