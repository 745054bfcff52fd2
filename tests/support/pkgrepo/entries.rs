//! Packages for the `jbuild build` tests of what a package installs: one
//! with every entry type pkg installs (directory, file, hard link,
//! symlink, `@config` file, file flags, an owner and group by a name only
//! the image has, a setuid file), one whose `@config` file a recipe
//! changes before installing it, and hostile ones (a path out of the
//! root, a symlink out and a file through it, a bomb).

use super::image::{packages as base_packages, USER};
use super::pkgfile::{config, dir, file, owned, raw, Contents, Item, Raw};
use super::{pkg, TestPkg};

/// The mtime every entry has.
pub const MTIME: u64 = 1_600_000_000;

fn with(name: &str, items: Vec<Item>, raw: Vec<Raw>) -> TestPkg {
    let mut p = pkg(name, "1.0", &[]);
    p.contents = Some(Contents {
        items,
        raw,
        mtime: MTIME,
        ..Contents::default()
    });
    p
}

/// `entries`: every entry type.
pub fn every_entry() -> TestPkg {
    with("entries", every_entry_items(USER), vec![])
}

/// Every entry type pkg installs: a file, a hard link to it, a relative
/// and an absolute symlink, a setuid file, a file with the `schg` flag, an
/// `@config` file of group `user`, a file and a directory of `user:user`,
/// a directory of root's.
pub fn every_entry_items(user: &str) -> Vec<Item> {
    vec![
        file("/usr/local/bin/app", 0o755, b"#!/bin/sh\necho app\n"),
        Item::HardLink {
            path: "/usr/local/bin/app-again".into(),
            target: "/usr/local/bin/app".into(),
        },
        Item::Symlink {
            path: "/usr/local/bin/app-link".into(),
            target: "app".into(),
        },
        Item::Symlink {
            path: "/usr/local/etc/ssl-cert.pem".into(),
            target: "/etc/ssl/cert.pem".into(),
        },
        file("/usr/local/bin/app-su", 0o4755, b"setuid\n"),
        Item::File {
            path: "/usr/local/lib/libapp.so.1".into(),
            mode: 0o444,
            uname: "root".into(),
            gname: "wheel".into(),
            content: b"\x7fELF not really".to_vec(),
            flags: Some("schg".into()),
            config: false,
        },
        config("/usr/local/etc/app.conf", 0o640, user, b"listen = 80\n"),
        owned("/var/db/app/state", 0o600, user, user, b"state\n"),
        dir("/var/db/app", 0o750, user, user),
        dir("/usr/local/share/app", 0o755, "root", "wheel"),
    ]
}

/// `second`: one `@config` file, `/usr/local/etc/second.conf`.
pub fn second() -> TestPkg {
    with(
        "second",
        vec![config(
            "/usr/local/etc/second.conf",
            0o644,
            "wheel",
            b"from the package\n",
        )],
        vec![],
    )
}

/// Hostile packages: `escape` (a path out of the root), `linkout` (a
/// symlink to `outside`, then a file through it) and `bomb` (`bomb_size`
/// zero bytes, a few KiB compressed).
pub fn hostile(outside: &str, bomb_size: usize) -> Vec<TestPkg> {
    vec![
        with(
            "escape",
            vec![],
            vec![raw("/../../../tmp/escaped-by-a-package", b'0', "", b"x")],
        ),
        with(
            "linkout",
            vec![Item::Symlink {
                path: "/usr/local/evil".into(),
                target: outside.into(),
            }],
            vec![raw("/usr/local/evil/written", b'0', "", b"x")],
        ),
        with(
            "bomb",
            vec![file("/usr/local/zeros", 0o644, &vec![0u8; bomb_size])],
            vec![],
        ),
    ]
}

/// `pkg` (what bootstrap installs) and the packages above.
pub fn packages(outside: &str, bomb_size: usize) -> Vec<TestPkg> {
    let mut all: Vec<TestPkg> = base_packages()
        .into_iter()
        .filter(|p| p.name == "pkg")
        .collect();
    all.push(every_entry());
    all.push(second());
    all.extend(hostile(outside, bomb_size));
    all
}
