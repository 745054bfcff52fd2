//! One multi-platform build of a Jailfile with `PKG`, for freebsd/amd64
//! and freebsd/arm64, on the `dir`, `overlay` and zfs-fuse backends: each
//! platform's image has one digest whatever the backend, and each
//! platform's image holds its own ABI's packages (read from its
//! `local.sqlite` with `sqlite3` and from a file only that ABI's `app`
//! carries), not only amd64's.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::support::backends::{self, Backend};
use crate::support::common::{jbuild, ok, umoci_unpack};
use crate::support::pkgrepo::image::freebsd_tree;
use crate::support::pkgrepo::platform::{write_repo_for, ABI_FILE};
use crate::support::pkgrepo::Key;
use jbuild::snapshot::testsuite::UnmountOnDrop;

use super::{serve, sqlite};

const PLATFORMS: [(&str, &str); 2] = [
    ("freebsd/amd64", "FreeBSD:14:amd64"),
    ("freebsd/arm64", "FreeBSD:14:aarch64"),
];

/// Builds `ctx` on `b` for both platforms into the list `name`; returns
/// each platform's image digest.
fn build(b: &Backend, ctx: &Path, name: &str) -> BTreeMap<String, String> {
    let mut c = b.jbuild();
    c.args(["build", "-q", "--manifest", name]);
    for (p, _) in PLATFORMS {
        c.args(["--platform", p]);
    }
    ok(c.arg(ctx));
    let list: serde_json::Value =
        serde_json::from_str(&ok(b.jbuild().args(["manifest", "inspect", name]))).unwrap();
    list["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let p = &m["platform"];
            (
                format!(
                    "{}/{}",
                    p["os"].as_str().unwrap(),
                    p["architecture"].as_str().unwrap()
                ),
                m["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn pkg_gives_each_platform_one_image_on_every_backend() {
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    for (_, abi) in PLATFORMS {
        write_repo_for(&www.join(abi).join("latest"), &key, abi);
    }
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/${{ABI}}/latest", server.port);
    let base = t.path().join("base");
    for arch in ["amd64", "arm64"] {
        freebsd_tree(&base.join(format!("tree-{arch}")), arch, &url, &key);
    }
    fs::write(
        base.join("Jailfile"),
        "FROM scratch\nARG TARGETARCH\nCOPY tree-${TARGETARCH}/ /\n",
    )
    .unwrap();
    let app = t.path().join("app");
    fs::create_dir_all(&app).unwrap();
    fs::write(app.join("Jailfile"), "FROM base:1\nPKG app\n").unwrap();

    let backends = backends::here(t.path());
    let backends = &backends.all;
    let mut images: Vec<(&str, BTreeMap<String, String>)> = Vec::new();
    for b in backends {
        build(b, &base, "base:1");
        images.push((b.name, build(b, &app, "app:1")));
    }
    let (_, dir) = &images[0];
    assert_eq!(dir.len(), 2, "{dir:?}");
    assert_ne!(dir["freebsd/amd64"], dir["freebsd/arm64"]);
    for (name, got) in &images[1..] {
        assert_eq!(got, dir, "{name} against dir");
    }

    // Each platform's image: the list exported, its child named in the
    // layout's index, unpacked by umoci.
    let layout = t.path().join("oci");
    ok(backends[0]
        .jbuild()
        .arg("export")
        .arg("app:1")
        .arg(format!("oci:{}:list", layout.display())));
    name_children(&layout);
    for (platform, abi) in PLATFORMS {
        let arch = platform.rsplit('/').next().unwrap();
        let rootfs = t.path().join(format!("rootfs-{arch}"));
        umoci_unpack(&format!("{}:{arch}", layout.display()), &rootfs, true);
        assert_eq!(
            fs::read_to_string(rootfs.join(ABI_FILE)).unwrap(),
            format!("{abi}\n"),
            "{platform}"
        );
        assert_eq!(
            fs::read(rootfs.join("usr/local/etc/app.conf")).unwrap(),
            b"port = 80\n",
            "{platform}: the Lua @sample ran"
        );
        let db = rootfs.join("var/db/pkg/local.sqlite");
        assert_eq!(
            sqlite(
                &db,
                "SELECT name, version, arch FROM packages ORDER BY name"
            ),
            format!("app|2.1_3,1|{abi}\nlibfoo|1.0|{abi}\npkg|2.1.2|{abi}\n"),
            "{platform}"
        );
        let files = sqlite(
            &db,
            "SELECT path FROM files WHERE package_id = (SELECT id FROM packages WHERE name = 'app') ORDER BY path",
        );
        assert!(
            files.contains(&format!("/{ABI_FILE}\n")),
            "{platform}: {files}"
        );
        assert_eq!(sqlite(&db, "PRAGMA integrity_check"), "ok\n");
        // pkg check -s/-d: pkg, libfoo, app's 5 files and the sample copy
        // (not recorded: the Lua script made it).
        assert_eq!(
            super::pkgcheck::pkg_check(&db, &rootfs, &[]),
            7,
            "{platform}"
        );
    }
}

/// Adds each child manifest of the list in the layout's index, named by
/// its architecture (`amd64`, `arm64`), for umoci to unpack.
fn name_children(layout: &Path) {
    let read = |p: PathBuf| -> serde_json::Value {
        serde_json::from_slice(&fs::read(p).unwrap()).unwrap()
    };
    let mut index = read(layout.join("index.json"));
    let list_digest = index["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let blob = |d: &str| {
        layout
            .join("blobs/sha256")
            .join(d.trim_start_matches("sha256:"))
    };
    let list = read(blob(&list_digest));
    let mut children = Vec::new();
    for m in list["manifests"].as_array().unwrap() {
        let mut d = m.clone();
        let arch = d["platform"]["architecture"].as_str().unwrap().to_string();
        d["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": arch});
        children.push(d);
    }
    index["manifests"].as_array_mut().unwrap().extend(children);
    fs::write(layout.join("index.json"), index.to_string()).unwrap();
}

/// A repository that serves amd64 packages under the arm64 ABI's path:
/// the arm64 build refuses them, as pkg does ("wrong architecture"),
/// instead of making an arm64 image of amd64 programs.
#[test]
fn packages_of_another_abi_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let key = Key::new(t.path(), "repo");
    let www = t.path().join("www");
    write_repo_for(
        &www.join("FreeBSD:14:aarch64/latest"),
        &key,
        "FreeBSD:14:amd64",
    );
    let server = serve(www);
    let url = format!("http://127.0.0.1:{}/${{ABI}}/latest", server.port);
    let ctx = t.path().join("ctx");
    freebsd_tree(&ctx.join("tree"), "arm64", &url, &key);
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY tree/ /\nPKG --no-bootstrap other\n",
    )
    .unwrap();
    let root = t.path().join("root");
    let out = crate::support::common::run(
        jbuild(&root)
            .args(["build", "-q", "-t", "x:1", "--platform", "freebsd/arm64"])
            .arg(&ctx),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("libfoo-1.0 is for `FreeBSD:14:amd64`, not the image's `FreeBSD:14:aarch64`"),
        "{err}"
    );
}
