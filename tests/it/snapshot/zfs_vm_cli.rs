//! The `jbuild` binary end to end on real OpenZFS, in the qemu lane
//! (`bash tests/zfs-vm/lane.sh` runs these ignored tests in the guest with
//! `JBUILD_TEST_ZFS_POOL` set; on the host they are ignored, "needs the
//! qemu lane"). It is the binary cargo builds for the tests
//! (`CARGO_BIN_EXE_jbuild`), run as a user would: builds of the examples
//! whose layers `zfs diff` lists (the `--json` export events say which
//! differ ran) to the digests the `dir` backend gives, two pulled images
//! that store their base once, and `check`, `prune`, `create` with a clone
//! and `check --repair` after a killed build.
//!
//! Each test works under its own dataset `<pool>/cli<pid>x<n>`, destroyed
//! with everything under it when the test ends.

use crate::support::common;
use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{example, json_result, ok, run};
use registry_support::Registry;
use serde_json::Value;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A test's dataset on the guest's pool, with jbuild's layers in
/// `<name>/jbuild`; destroyed (recursively, clones too) on drop.
struct Dataset {
    name: String,
}

impl Dataset {
    fn new() -> Dataset {
        crate::support::lane::require(crate::support::lane::Lane::Qemu);
        let pool = std::env::var("JBUILD_TEST_ZFS_POOL").unwrap_or_else(|_| {
            panic!("JBUILD_TEST_ZFS_POOL is not set: these tests run in the qemu lane, `bash tests/zfs-vm/lane.sh`")
        });
        assert!(
            common::is_root(),
            "the qemu lane runs as root (ZFS and RUN steps need it)"
        );
        let name = format!(
            "{pool}/cli{}x{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        zfs(&["create", &name]);
        zfs(&["create", &format!("{name}/jbuild")]);
        Dataset { name }
    }

    /// The dataset jbuild's ZFS backend keeps its layers in.
    fn layers(&self) -> String {
        format!("{}/jbuild", self.name)
    }
}

impl Drop for Dataset {
    fn drop(&mut self) {
        let _ = Command::new("zfs")
            .args(["destroy", "-R", "-f", &self.name])
            .status();
    }
}

fn zfs(args: &[&str]) -> String {
    let out = Command::new("zfs")
        .args(args)
        .output()
        .expect("run zfs (the qemu lane's guest has it)");
    assert!(
        out.status.success(),
        "zfs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

/// `(name relative to the layers dataset, origin)` of each `chain-` layer.
fn chains(layers: &str) -> Vec<(String, String)> {
    let prefix = format!("{layers}/");
    zfs(&[
        "list",
        "-H",
        "-r",
        "-t",
        "filesystem",
        "-o",
        "name,origin",
        layers,
    ])
    .lines()
    .filter_map(|l| {
        let (name, origin) = l.split_once('\t')?;
        let rel = name.strip_prefix(&prefix)?;
        rel.starts_with("chain-").then(|| {
            let origin = origin.strip_prefix(&prefix).unwrap_or(origin);
            (rel.to_string(), origin.to_string())
        })
    })
    .collect()
}

/// `jbuild` on the ZFS backend with its layers in `layers`.
fn on_zfs(root: &Path, layers: &str) -> Command {
    let mut c = common::jbuild(root);
    c.env("JBUILD_ZFS_DATASET", layers)
        .env("JBUILD_CONFIG", "/dev/null")
        .env("JBUILD_TEST_HOST_ROOT", root.join("host"))
        .args(["--backend", "zfs"]);
    c
}

fn on_dir(root: &Path) -> Command {
    let mut c = common::jbuild(root);
    c.args(["--backend", "dir"]);
    c
}

/// `jbuild --json check` (with `extra` arguments): exit code and report.
fn check(mut c: Command, extra: &[&str]) -> (i32, Value) {
    let o = run(c.args(["--json", "check"]).args(extra));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o.status.code().unwrap(), v)
}

fn kinds(v: &Value, severity: &str) -> Vec<String> {
    v[severity]
        .as_array()
        .unwrap_or_else(|| panic!("no {severity} in {v}"))
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

fn assert_clean(c: Command, extra: &[&str]) {
    let (code, v) = check(c, extra);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");
}

/// The differ named by each export event of a `--json` build, in order.
fn export_differs(events: &str) -> Vec<String> {
    events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["event"] == "transfer_start"
                && e["id"].as_str().is_some_and(|i| i.starts_with("export-"))
        })
        .map(|e| e["differ"].as_str().unwrap_or("(none)").to_string())
        .collect()
}

fn the_static_busybox() -> PathBuf {
    let bb = PathBuf::from("/bin/busybox");
    assert!(
        bb.exists(),
        "/bin/busybox is missing: the guest copies the host's (Debian busybox-static, tests/run installs it)"
    );
    bb
}

fn jailfile(dir: &Path, text: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), text).unwrap();
    dir.to_path_buf()
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn examples_build_with_zfs_diff_to_the_digests_of_dir_and_check_deep_is_clean() {
    let ds = Dataset::new();
    let t = tempfile::tempdir().unwrap();
    let mut examples = vec![];
    for name in ["static-site", "multi-stage", "busybox-linux"] {
        let ctx = example(name, t.path());
        if name == "busybox-linux" {
            fs::copy(the_static_busybox(), ctx.join("busybox")).unwrap();
        }
        examples.push((name, ctx));
    }
    let (dir_root, zfs_root) = (t.path().join("dir"), t.path().join("zfs"));
    for (name, ctx) in &examples {
        let want = ok(on_dir(&dir_root).args(["build", "-q", "-t", name]).arg(ctx));
        let events = ok(on_zfs(&zfs_root, &ds.layers())
            .args(["--json", "build", "-t", name])
            .arg(ctx));
        let got = json_result(&events)["manifest"].clone();
        assert_eq!(got, want.trim(), "{name}: zfs and dir give other images");
        // The base layer has no parent to compare: the walk lists it.
        // Every layer above it is one `zfs diff` of two @jbuild snapshots.
        let differs = export_differs(&events);
        assert!(differs.len() >= 2, "{name}: {events}");
        assert_eq!(differs[0], "tree-walk", "{name}: {events}");
        assert!(
            differs[1..].iter().all(|d| d == "zfs-diff"),
            "{name}: a layer was not exported from `zfs diff`: {differs:?}\n{events}"
        );
    }
    let info = ok(on_zfs(&zfs_root, &ds.layers()).arg("info"));
    assert!(
        info.lines()
            .any(|l| l.starts_with("differ") && l.ends_with("zfs-diff")),
        "{info}"
    );
    // Diffing every layer again (with `zfs diff`) gives the labels' diff IDs.
    assert_clean(on_zfs(&zfs_root, &ds.layers()), &["--deep"]);
}

#[test]
#[ignore = "needs the qemu lane: bash tests/zfs-vm/lane.sh"]
fn pulled_images_store_their_base_once_then_check_prune_create_and_repair() {
    let ds = Dataset::new();
    let layers = ds.layers();
    let t = tempfile::tempdir().unwrap();
    let reg = Registry::start();
    let src = t.path().join("src");
    let base = jailfile(
        &t.path().join("base"),
        "FROM scratch\nCOPY etc /etc\nLINE_IN_FILE \"base\" /etc/motd\n",
    );
    fs::create_dir_all(base.join("etc")).unwrap();
    fs::write(base.join("etc/a"), "a").unwrap();
    ok(on_dir(&src)
        .args(["build", "-q", "-t", "base:1"])
        .arg(&base));
    let mut pushed = vec![];
    for app in ["one", "two"] {
        let ctx = jailfile(
            &t.path().join(app),
            &format!("FROM base:1\nLINE_IN_FILE \"{app}\" /etc/app\n"),
        );
        ok(on_dir(&src)
            .args(["build", "-q", "-t", &format!("{app}:1")])
            .arg(&ctx));
        let name = format!("{}/jbuild/{app}:1", reg.host());
        ok(on_dir(&src).args(["push", &format!("{app}:1"), &name]));
        pushed.push(name);
    }

    // Pulled into the ZFS backend: the base's layers once, one top each,
    // both tops clones of the base's top.
    let root = t.path().join("zfs");
    let sn = || on_zfs(&root, &layers);
    for name in &pushed {
        ok(sn().args(["pull", name]));
    }
    let inspect: Value = serde_json::from_str(&ok(sn().args(["inspect", &pushed[0]]))).unwrap();
    let base_layers = inspect["manifest"]["layers"].as_array().unwrap().len() - 1;
    assert!(base_layers >= 2, "{inspect}");
    let c = chains(&layers);
    assert_eq!(c.len(), base_layers + 2, "{c:?}");
    let tops: Vec<_> = c
        .iter()
        .filter(|(n, _)| !c.iter().any(|(_, o)| *o == format!("{n}@jbuild")))
        .collect();
    assert_eq!(tops.len(), 2, "{c:?}");
    assert_eq!(tops[0].1, tops[1].1, "both tops clone one base: {c:?}");
    assert!(
        c.iter().any(|(n, _)| tops[0].1 == format!("{n}@jbuild")),
        "the tops' origin is a layer of the chain: {c:?}"
    );
    assert_clean(sn(), &[]);

    // create: the jail's root is a clone of `two`'s top layer.
    let jail_ds = format!("{}/jails/web", ds.name);
    zfs(&["create", &format!("{}/jails", ds.name)]);
    let out = run(sn()
        .args([
            "--json",
            "create",
            &pushed[1],
            "web",
            "--dataset",
            &jail_ds,
            "--path",
        ])
        .arg(t.path().join("web"))
        .arg("--conf")
        .arg(t.path().join("web.conf")));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_result(&String::from_utf8_lossy(&out.stdout));
    let top = v["clone"]["layer"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    // The jail's dataset is a clone of the layer, with the image's files.
    let jail_stands_on_its_layer = || {
        assert_eq!(
            zfs(&["get", "-H", "-o", "value", "origin", &jail_ds]),
            format!("{layers}/{top}@jbuild")
        );
        assert_eq!(
            fs::read_to_string(t.path().join("web/etc/app")).unwrap(),
            "two\n"
        );
        assert_eq!(fs::read_to_string(t.path().join("web/etc/a")).unwrap(), "a");
    };
    jail_stands_on_its_layer();

    // prune: with `one` gone, only its top layer goes; `two`'s, under the jail, stays.
    ok(sn().args(["rmi", &pushed[0]]));
    let out = ok(sn().arg("prune"));
    assert!(out.contains("removed 1 snapshots"), "{out}");
    assert_eq!(chains(&layers).len(), base_layers + 1);
    assert_clean(sn(), &[]);

    // A build killed in its RUN step leaves its active dataset behind:
    // reclaimable, and `check --repair` takes it away.
    let bb = the_static_busybox();
    let ctx = jailfile(
        &t.path().join("killed"),
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"sh\", \"-c\", \"/bin/busybox touch /started && /bin/busybox sleep 60\"]\n",
    );
    fs::copy(bb, ctx.join("busybox")).unwrap();
    let mut build = sn()
        .args(["build", "-q", "-t", "killed:1"])
        .arg(&ctx)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let actives = || -> Vec<String> {
        zfs(&["list", "-H", "-r", "-o", "name,mountpoint", &layers])
            .lines()
            .filter(|l| l.contains("/active-"))
            .map(String::from)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let started = actives().iter().any(|l| {
            let mp = l.split('\t').nth(1).unwrap_or("-");
            Path::new(mp).join("started").exists()
        });
        if started {
            break;
        }
        if let Some(st) = build.try_wait().unwrap() {
            panic!("the build ended ({st}) before its RUN step was seen running");
        }
        assert!(Instant::now() < deadline, "the RUN step never started");
        std::thread::sleep(Duration::from_millis(100));
    }
    build.kill().unwrap();
    build.wait().unwrap();
    assert_eq!(actives().len(), 1, "{:?}", actives());
    let (code, v) = check(sn(), &[]);
    assert_eq!(code, 0, "{v:#}");
    assert!(
        kinds(&v, "reclaimable").contains(&"dead-active-snapshot".to_string()),
        "{v:#}"
    );
    let (code, v) = check(sn(), &["--repair"]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(actives(), Vec::<String>::new(), "{v:#}");
    assert_clean(sn(), &[]);
    jail_stands_on_its_layer();
}
