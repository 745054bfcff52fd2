//! Rootless builds (the userns lane): a user without root, given
//! subordinate ids in `/etc/subuid` and `/etc/subgid`, builds a recipe
//! whose `RUN` gives files away (`chown 1000:1000`) with no wrapper, and
//! the layer carries the owners the recipe gave; a user without them is
//! told what to configure.
//!
//! Nothing of the machine is changed: the test's users exist only in a
//! mount namespace of its own, where its `passwd`, `group`, `subuid` and
//! `subgid` are bind-mounted over the system's, which is where shadow's
//! setuid `newuidmap`/`newgidmap` read them.

use crate::support::common::{self, static_busybox};

use std::fs;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The user with subordinate ids, and the one without.
const WITH: u32 = 23456;
const WITHOUT: u32 = 23457;

struct World {
    tmp: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::tempdir().unwrap();
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let w = World { tmp };
        let etc = w.path("etc");
        fs::create_dir_all(&etc).unwrap();
        let mut passwd = fs::read_to_string("/etc/passwd").unwrap();
        let mut group = fs::read_to_string("/etc/group").unwrap();
        for (name, id) in [("rl", WITH), ("rl2", WITHOUT)] {
            let home = w.path(name);
            fs::create_dir_all(&home).unwrap();
            chown(&home, Some(id), Some(id)).unwrap();
            passwd.push_str(&format!("{name}:x:{id}:{id}::{}:/bin/sh\n", home.display()));
            group.push_str(&format!("{name}:x:{id}:\n"));
        }
        fs::write(etc.join("passwd"), passwd).unwrap();
        fs::write(etc.join("group"), group).unwrap();
        // By name for one file and by number for the other: subuid(5)
        // allows both.
        fs::write(etc.join("subuid"), "rl:300000:65536\n").unwrap();
        fs::write(etc.join("subgid"), format!("{WITH}:300000:65536\n")).unwrap();
        let ctx = w.path("ctx");
        fs::create_dir_all(&ctx).unwrap();
        fs::copy(static_busybox().unwrap(), ctx.join("busybox")).unwrap();
        fs::write(
            ctx.join("Jailfile"),
            "FROM --platform=linux/amd64 scratch\n\
             COPY busybox /bin/busybox\n\
             RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox mkdir /x && \
             /bin/busybox touch /x/f && /bin/busybox chown 1000:1000 /x && \
             /bin/busybox chown 1001:1002 /x/f\"]\n",
        )
        .unwrap();
        w
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    /// `jbuild ARGS` as `uid` (its own state under its home), with the
    /// test's users files in place of the system's.
    fn jbuild_as(&self, uid: u32, args: &[&str]) -> Output {
        let etc = self.path("etc");
        let name = if uid == WITH { "rl" } else { "rl2" };
        let mut script = String::from("set -e\n");
        for f in ["passwd", "group", "subuid", "subgid"] {
            script.push_str(&format!(
                "mount --bind '{}' /etc/{f}\n",
                etc.join(f).display()
            ));
        }
        script.push_str(&format!(
            "exec setpriv --reuid={uid} --regid={uid} --clear-groups env -u JBUILD_ROOT \
             HOME='{}' \"$@\"\n",
            self.path(name).display()
        ));
        let out = Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .arg(env!("CARGO_BIN_EXE_jbuild"))
            .args(args)
            .env_remove("JBUILD_LANE_LOG")
            .env_remove("JBUILD_REQUIRE_LANES")
            .output()
            .unwrap();
        out
    }
}

fn text(o: &Output) -> String {
    common::output_text(o)
}

/// `(uid/gid, path)` of every entry of the gzipped layer `blob`, as GNU
/// tar lists it.
fn owners(blob: &Path) -> Vec<(String, String)> {
    let out = Command::new("tar")
        .args(["--numeric-owner", "-tvzf"])
        .arg(blob)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].to_string(), f[f.len() - 1].to_string())
        })
        .collect()
}

#[test]
fn a_user_with_subordinate_ids_builds_run_steps_that_give_files_away() {
    need!(Root, Userns, Busybox);
    assert!(
        Path::new("/usr/bin/newuidmap").exists(),
        "newuidmap is missing: apt-get install uidmap (tests/run installs it)"
    );
    let w = World::new();
    let ctx = w.path("ctx").display().to_string();

    let info = w.jbuild_as(WITH, &["info"]);
    assert!(info.status.success(), "{}", text(&info));
    assert!(
        String::from_utf8_lossy(&info.stdout)
            .contains("rootless: a user namespace of 65537 ids (uid 23456 as root"),
        "{}",
        text(&info)
    );

    let built = w.jbuild_as(WITH, &["build", "-q", "-t", "rl:1", &ctx]);
    assert!(built.status.success(), "{}", text(&built));
    let layout = w.path("rl/out");
    let exported = w.jbuild_as(
        WITH,
        &["export", "rl:1", &format!("oci:{}:x", layout.display())],
    );
    assert!(exported.status.success(), "{}", text(&exported));

    // The RUN step's layer: the manifest's last.
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    let blob = |digest: &str| layout.join("blobs/sha256").join(&digest[7..]);
    let manifest: serde_json::Value = serde_json::from_slice(
        &fs::read(blob(index["manifests"][0]["digest"].as_str().unwrap())).unwrap(),
    )
    .unwrap();
    let layers = manifest["layers"].as_array().unwrap();
    let run_layer = blob(layers.last().unwrap()["digest"].as_str().unwrap());
    let got = owners(&run_layer);
    assert!(got.contains(&("1000/1000".into(), "x/".into())), "{got:?}");
    assert!(got.contains(&("1001/1002".into(), "x/f".into())), "{got:?}");

    // The state is the user's, under its home, and owned by it.
    let state = w.path("rl/.local/share/jbuild");
    assert!(state.join("store/index.json").is_file());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(state.join("store")).unwrap().uid(), WITH);
}

#[test]
fn a_user_without_subordinate_ids_is_told_what_to_configure() {
    need!(Root, Userns, Busybox);
    let w = World::new();
    let ctx = w.path("ctx").display().to_string();
    let out = w.jbuild_as(WITHOUT, &["build", "-q", "-t", "rl2:1", &ctx]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no subordinate ids in /etc/subuid") && err.contains("rl2:100000:65536"),
        "{}",
        text(&out)
    );
}
