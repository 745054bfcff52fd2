//! `jbuild check [--repair]` through the binary, on the `dir` backend: a
//! real build, then real damage and real leftovers made by hand.

use crate::support::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use common::{jbuild, ok, run};
use serde_json::Value;

const RECIPE: &str =
    "FROM scratch\nENV A=1\nLINE_IN_FILE \"hello\" /etc/motd\nLINE_IN_FILE \"x\" /etc/x\nCMD [\"/bin/sh\"]\n";

/// A root with one image, `one:1`, built from a two-layer recipe.
fn built(t: &Path) -> PathBuf {
    let ctx = t.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Jailfile"), RECIPE).unwrap();
    let root = t.join("root");
    ok(jbuild(&root).args(["build", "-q", "-t", "one:1"]).arg(&ctx));
    root
}

pub(super) fn check(root: &Path, extra: &[&str]) -> Output {
    run(jbuild(root).arg("check").args(extra))
}

pub(super) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `--json check [extra]`: exit code and the result object.
pub(super) fn check_json(root: &Path, extra: &[&str]) -> (i32, Value) {
    let o = run(jbuild(root).args(["--json", "check"]).args(extra));
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: not JSON:\n{}", text(&o)));
    (o.status.code().unwrap(), v)
}

pub(super) fn kinds(v: &Value, severity: &str) -> Vec<String> {
    v[severity]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_string())
        .collect()
}

fn assert_clean(root: &Path) {
    let (code, v) = check_json(root, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");
}

/// The image's manifest as JSON, and its blob paths: manifest, config, layers.
fn image_blobs(root: &Path) -> (PathBuf, PathBuf, Vec<PathBuf>) {
    let v: Value = serde_json::from_str(&ok(jbuild(root).args(["inspect", "one:1"]))).unwrap();
    let blob = |d: &str| root.join("store/blobs/sha256").join(&d[7..]);
    let layers = v["manifest"]["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| blob(l["digest"].as_str().unwrap()))
        .collect();
    (
        blob(v["digest"].as_str().unwrap()),
        blob(v["manifest"]["config"]["digest"].as_str().unwrap()),
        layers,
    )
}

/// Every file under `dir` with the sha256 of its bytes (to show nothing was
/// written). Empty lock files, which taking a lock may create, are left out.
fn snapshot_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for e in walk(dir) {
        let name = e.file_name().unwrap().to_string_lossy().into_owned();
        if e.is_file() && name != "lock" && !name.ends_with(".lock") {
            let sum = <sha2::Sha256 as sha2::Digest>::digest(fs::read(&e).unwrap());
            out.push((e.clone(), format!("{sum:x}")));
        }
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    if dir.is_dir() && !dir.is_symlink() {
        for e in fs::read_dir(dir).unwrap() {
            out.extend(walk(&e.unwrap().path()));
        }
    }
    out
}

fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// An active `dir` snapshot as a killed `prepare` leaves it.
fn active_snapshot(root: &Path, name: &str) -> PathBuf {
    let dir = root.join("snapshots/dir/active").join(name);
    fs::create_dir_all(dir.join("fs/etc")).unwrap();
    fs::write(
        dir.join("meta.json"),
        format!(r#"{{"version":1,"name":"{name}","kind":"active","parent":null,"labels":{{}}}}"#),
    )
    .unwrap();
    dir
}

/// Holds the store lock shared, as a pull does while it adds blobs.
fn hold_store_lock(root: &Path) -> nix::fcntl::Flock<fs::File> {
    let lock_file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join("store/.jbuild/lock"))
        .unwrap();
    nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockShared).unwrap()
}

#[test]
fn an_empty_root_and_a_fresh_build_are_sound() {
    let t = tempfile::tempdir().unwrap();
    let empty = t.path().join("empty");
    let o = check(&empty, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("store: 0 images, 0 blobs (0 B), 0 snapshots: all sound"),
        "{}",
        text(&o)
    );
    assert!(!empty.join("store").exists(), "checking wrote a store");

    let root = built(t.path());
    let o = check(&root, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(
        out.starts_with("store: 1 images, 4 blobs (")
            && out.trim_end().ends_with("2 snapshots: all sound"),
        "{out}"
    );
    assert_clean(&root);
    let (_, v) = check_json(&root, &[]);
    assert_eq!(v["sound"], true);
    assert_eq!(v["summary"]["images"], 1);
    assert_eq!(v["summary"]["blobs"], 4);
    assert_eq!(v["summary"]["snapshots"], 2);
}

#[test]
fn a_flipped_byte_in_a_layer_names_the_image_and_repair_deletes_it() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let (_, _, layers) = image_blobs(&root);
    let mut bytes = fs::read(&layers[0]).unwrap();
    bytes[20] ^= 0x01;
    fs::write(&layers[0], &bytes).unwrap();

    let o = check(&root, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("damaged: layer sha256:"), "{out}");
    assert!(out.contains("is corrupt"), "{out}");
    assert!(out.contains("images: one:1"), "{out}");
    assert!(out.contains("jbuild pull one:1"), "{out}");
    assert!(out.contains(&layers[0].display().to_string()), "{out}");

    // While another process adds content, the corrupt blob stays: a pull
    // finding it in place would keep it.
    let held = hold_store_lock(&root);
    let o = check(&root, &["--repair"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("repaired: left corrupt blob sha256:"),
        "{}",
        text(&o)
    );
    assert!(layers[0].exists());
    drop(held);

    let o = check(&root, &["--repair"]);
    let out = text(&o);
    assert!(
        out.contains("repaired: deleted corrupt blob sha256:"),
        "{out}"
    );
    assert!(out.contains("(pull or build again: one:1)"), "{out}");
    assert!(!layers[0].exists());
    // Still damaged: the image lacks a layer until it is fetched or built again.
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("is missing"), "{out}");
    let (code, v) = check_json(&root, &[]);
    assert_eq!(
        (code, kinds(&v, "damaged")),
        (1, vec!["missing-blob".to_string()])
    );
    assert_eq!(v["damaged"][0]["images"], serde_json::json!(["one:1"]));

    // A rebuild exports the layer again (its recorded blob is gone).
    ok(jbuild(&root)
        .args(["build", "-q", "-t", "one:1"])
        .arg(t.path().join("ctx")));
    assert!(layers[0].exists(), "the same layer, the same digest");
    assert_clean(&root);
}

#[test]
fn truncated_and_missing_blobs_are_damage_naming_the_image() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    ok(jbuild(&root).args(["tag", "one:1", "two:2"]));
    let (_, config, layers) = image_blobs(&root);
    let len = fs::metadata(&config).unwrap().len();
    fs::OpenOptions::new()
        .write(true)
        .open(&config)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    fs::remove_file(&layers[1]).unwrap();

    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 1, "{v:#}");
    let mut damaged = kinds(&v, "damaged");
    damaged.sort();
    assert_eq!(damaged, vec!["corrupt-blob", "missing-blob"], "{v:#}");
    for f in v["damaged"].as_array().unwrap() {
        assert_eq!(f["images"], serde_json::json!(["one:1", "two:2"]), "{f:#}");
        assert!(!f["action"].as_str().unwrap().is_empty(), "{f:#}");
    }
    let corrupt = v["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "corrupt-blob")
        .unwrap();
    assert!(
        corrupt["what"]
            .as_str()
            .unwrap()
            .starts_with("image config sha256:"),
        "{corrupt:#}"
    );
    let missing = v["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "missing-blob")
        .unwrap();
    assert_eq!(missing["where"], layers[1].display().to_string());
    let action = missing["action"].as_str().unwrap();
    assert!(
        action.contains("one:1, two:2") && action.contains("jbuild rmi one:1 two:2"),
        "{action}"
    );
    let action = corrupt["action"].as_str().unwrap();
    assert!(
        action.contains("`jbuild pull one:1`, `jbuild pull two:2`"),
        "{action}"
    );
    // Nothing is unreferenced: everything is still reached. The layer's
    // snapshot records a blob that is gone, which a build ignores.
    assert_eq!(kinds(&v, "reclaimable"), vec!["stale-label"], "{v:#}");
}

#[test]
fn a_bad_index_is_damage_and_nothing_is_written() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    fs::write(
        root.join("store/index.json"),
        b"{\"schemaVersion\":2,\"manif",
    )
    .unwrap();
    let before = snapshot_files(&root.join("store"));
    for args in [&[][..], &["--repair"][..]] {
        let o = check(&root, args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let out = text(&o);
        assert!(out.contains("index.json does not parse"), "{out}");
        assert!(out.contains("restore index.json from a backup"), "{out}");
        assert!(out.contains("error: the store is damaged"), "{out}");
        assert_eq!(
            snapshot_files(&root.join("store")),
            before,
            "{args:?} wrote to the store"
        );
    }
    // Other commands point at the check.
    let o = run(jbuild(&root).arg("images"));
    assert!(!o.status.success());
    assert!(
        text(&o).contains("the image store is damaged: `jbuild check` says what to do"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_unreferenced_blob_is_reclaimable_and_repair_removes_it() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let content = b"nobody uses me\n";
    let hex = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(content));
    let path = root.join("store/blobs/sha256").join(&hex);
    fs::write(&path, content).unwrap();

    let o = check(&root, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(&format!(
            "reclaimable: blob sha256:{hex} is not used by any image"
        )),
        "{out}"
    );
    assert!(
        out.contains("no damage; 1 reclaimable (`jbuild check --repair` removes it)"),
        "{out}"
    );

    let o = check(&root, &["--repair"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "repaired: removed unreferenced blob sha256:{hex} (15 B)"
        )),
        "{}",
        text(&o)
    );
    assert!(!path.exists());
    assert_clean(&root);
}

#[test]
fn leftovers_of_interrupted_work_are_reclaimable_then_gone() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let store = root.join("store");
    let leftovers = [
        store.join(".jbuild/tmp/blob-a1b2c3"),
        store.join(".tmp-Xy12ab"),
        root.join("tmp/work-1/file"),
    ];
    for p in &leftovers {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, b"half written").unwrap();
    }
    // A meta.json being replaced when its writer was killed.
    let committed = fs::read_dir(root.join("snapshots/dir/committed"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    fs::write(committed.join(".tmp-meta1"), b"{").unwrap();
    // An origin hint for a blob the store does not have.
    fs::create_dir_all(store.join(".jbuild/origins")).unwrap();
    fs::write(
        store.join(".jbuild/origins").join("ab".repeat(32)),
        b"docker://x/y",
    )
    .unwrap();
    // An unpacked-size note (`jbuild images`) for a blob the store does not have.
    fs::create_dir_all(store.join(".jbuild/sizes")).unwrap();
    fs::write(store.join(".jbuild/sizes").join("ef".repeat(32)), b"1024\n").unwrap();
    // And one a `jbuild images` killed two hours ago was writing.
    let half = store.join(".jbuild/sizes/.tmp-Ab12Cd");
    fs::write(&half, b"10").unwrap();
    let two_hours_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    filetime::set_file_mtime(&half, filetime::FileTime::from_system_time(two_hours_ago)).unwrap();
    let dead_pid = dead_pid();
    let dead = format!("active-{dead_pid}-1");
    active_snapshot(&root, &dead);
    // Origin notes being written name their writer: a dead one's is a
    // leftover, a live one's (ours) is not even listed.
    let origins = store.join(".jbuild/origins");
    let dead_note = origins.join(format!(".{}.tmp-{dead_pid}", "cd".repeat(32)));
    let live_note = origins.join(format!(".{}.tmp-{}", "cd".repeat(32), std::process::id()));
    fs::write(&dead_note, b"r x\n").unwrap();
    fs::write(&live_note, b"r x\n").unwrap();

    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    let mut found = kinds(&v, "reclaimable");
    found.sort();
    assert_eq!(
        found,
        vec![
            "dead-active-snapshot",
            "stale-origin",
            "stale-size",
            "tmp-file",
            "tmp-file",
            "tmp-file",
            "tmp-file",
            "tmp-file",
            "tmp-file"
        ],
        "{v:#}"
    );
    let wheres: Vec<&str> = v["reclaimable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["where"].as_str().unwrap())
        .collect();
    assert!(
        wheres.contains(&format!("dir snapshot {dead}").as_str()),
        "{wheres:?}"
    );
    assert!(
        wheres.contains(&root.join("tmp/work-1").display().to_string().as_str()),
        "{wheres:?}"
    );

    let o = check(&root, &["--repair"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(&format!("repaired: removed snapshot {dead}")),
        "{out}"
    );
    assert!(out.contains("all sound"), "{out}");
    for p in &leftovers {
        assert!(!p.exists(), "{} is still there", p.display());
    }
    assert!(!committed.join(".tmp-meta1").exists());
    assert!(!dead_note.exists());
    assert!(
        live_note.exists(),
        "a live writer's origin note was removed"
    );
    assert!(!root.join(format!("snapshots/dir/active/{dead}")).exists());
    assert_clean(&root);
}

#[test]
fn a_live_process_keeps_its_work() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let mine = format!("active-{}-7", std::process::id());
    let dir = active_snapshot(&root, &mine);
    // The test process holds the store lock shared, as a pull does, and
    // has a blob half written.
    let tmp = root.join("store/.jbuild/tmp/blob-live");
    fs::write(&tmp, b"in progress").unwrap();
    let held = hold_store_lock(&root);
    // A leftover old enough to be nobody's any more goes even so.
    let old = root.join("store/.jbuild/tmp/blob-old");
    fs::write(&old, b"stale").unwrap();
    let two_hours_ago =
        filetime::FileTime::from_unix_time(filetime::FileTime::now().unix_seconds() - 7200, 0);
    filetime::set_file_mtime(&old, two_hours_ago).unwrap();

    // A blob no image uses yet: a pull holding the lock may be about to tag it.
    let content = b"about to be tagged\n";
    let hex = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(content));
    let pending = root.join("store/blobs/sha256").join(&hex);
    fs::write(&pending, content).unwrap();

    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        kinds(&v, "reclaimable"),
        vec!["tmp-file"],
        "only the old temporary file: {v:#}"
    );
    // The blob may be the lock holder's: pending, not reclaimable.
    assert_eq!(kinds(&v, "pending"), vec!["unreferenced-blob"], "{v:#}");
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("other jbuild processes are running"),
        "{notes}"
    );
    assert!(
        notes.contains("1 active snapshots are work in progress"),
        "{notes}"
    );

    let o = check(&root, &["--repair"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("repaired: removed {}", old.display())),
        "{}",
        text(&o)
    );
    assert!(!old.exists());
    assert!(tmp.exists(), "a live writer's blob was removed");
    assert!(
        pending.exists(),
        "a blob was collected while the store lock was held"
    );
    assert!(
        text(&o).contains(
            "repaired: left 1 unreferenced blobs: other jbuild processes are adding content"
        ),
        "{}",
        text(&o)
    );
    assert!(dir.exists(), "a live process's snapshot was removed");
    drop(held);

    // Once the lock is free, the blob is a leftover; the snapshot is still ours.
    let (code, v) = check_json(&root, &["--repair"]);
    assert_eq!(code, 0, "{v:#}");
    assert!(!tmp.exists());
    assert!(!pending.exists());
    assert!(dir.exists());
    assert_eq!(kinds(&v, "reclaimable"), Vec::<String>::new(), "{v:#}");
    assert_eq!(kinds(&v, "pending"), Vec::<String>::new(), "{v:#}");
}

#[test]
fn a_chain_label_that_does_not_follow_is_damage() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    // The top layer's snapshot: the one whose parent is a snapshot.
    let mut tampered = None;
    for e in fs::read_dir(root.join("snapshots/dir/committed")).unwrap() {
        let meta = e.unwrap().path().join("meta.json");
        let mut m: Value = serde_json::from_slice(&fs::read(&meta).unwrap()).unwrap();
        if m["parent"].is_string() {
            assert!(m["labels"]["jbuild:chainid"].is_string(), "{m:#}");
            m["labels"]["jbuild:chainid"] = Value::String(format!("sha256:{}", "0".repeat(64)));
            fs::write(&meta, serde_json::to_vec(&m).unwrap()).unwrap();
            tampered = Some(m["name"].as_str().unwrap().to_string());
        }
    }
    let name = tampered.expect("a two-layer image has a snapshot with a parent");
    let before = snapshot_files(&root.join("snapshots"));
    let o = check(&root, &["--repair"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains(&format!(
            "snapshot `{name}` is labelled with chain ID sha256:000"
        )),
        "{out}"
    );
    assert!(out.contains("jbuild prune --cache"), "{out}");
    assert!(!out.contains("repaired:"), "{out}");
    assert_eq!(
        snapshot_files(&root.join("snapshots")),
        before,
        "repair changed snapshots"
    );
}

#[test]
fn a_missing_layout_file_is_written_back() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    fs::remove_file(root.join("store/oci-layout")).unwrap();
    let (code, v) = check_json(&root, &[]);
    assert_eq!(
        (code, kinds(&v, "damaged")),
        (1, vec!["layout-file".to_string()]),
        "{v:#}"
    );
    let (code, v) = check_json(&root, &["--repair"]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        v["repaired"],
        serde_json::json!([format!("wrote {}", root.join("store/oci-layout").display())])
    );
    assert_eq!(
        fs::read(root.join("store/oci-layout")).unwrap(),
        br#"{"imageLayoutVersion":"1.0.0"}"#
    );
    assert_clean(&root);
}

#[test]
fn unpacked_layers_no_image_uses_are_reclaimable_leaves_first() {
    let t = tempfile::tempdir().unwrap();
    let root = built(t.path());
    let archive = t.path().join("one.tar");
    ok(jbuild(&root)
        .args(["export", "one:1"])
        .arg(format!("oci-archive:{}", archive.display())));
    ok(jbuild(&root).args(["rmi", "one:1"]));
    ok(jbuild(&root).args(["prune", "--cache"]));
    ok(jbuild(&root)
        .arg("import")
        .arg(format!("oci-archive:{}", archive.display()))
        .arg("one:1"));
    // A build FROM the imported image unpacks its layers as chain- snapshots.
    let ctx = t.path().join("ctx2");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Jailfile"), "FROM one:1\nENV B=2\n").unwrap();
    ok(jbuild(&root).args(["build", "-q", "-t", "two:2"]).arg(&ctx));
    let chains: Vec<String> = fs::read_dir(root.join("snapshots/dir/committed"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("chain-"))
        .collect();
    assert_eq!(chains.len(), 2, "{chains:?}");
    assert_clean(&root);

    // Only two:2 still uses them: one:1's manifest and config are unused.
    ok(jbuild(&root).args(["rmi", "one:1"]));
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        kinds(&v, "reclaimable"),
        vec!["unreferenced-blob", "unreferenced-blob"],
        "{v:#}"
    );

    // A chain- snapshot whose label disagrees with its name is damage.
    let meta = root
        .join("snapshots/dir/committed")
        .join(&chains[0])
        .join("meta.json");
    let good = fs::read(&meta).unwrap();
    let mut m: Value = serde_json::from_slice(&good).unwrap();
    m["labels"]["jbuild:chainid"] = Value::String(format!("sha256:{}", "1".repeat(64)));
    fs::write(&meta, serde_json::to_vec(&m).unwrap()).unwrap();
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 1, "{v:#}");
    assert!(
        kinds(&v, "damaged").iter().all(|k| k == "chain-mismatch"),
        "{v:#}"
    );
    assert!(v["damaged"].to_string().contains(&chains[0]), "{v:#}");
    fs::write(&meta, &good).unwrap();

    ok(jbuild(&root).args(["rmi", "two:2"]));
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    let unused: Vec<&str> = v["reclaimable"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "unused-layer")
        .map(|f| f["where"].as_str().unwrap())
        .collect();
    assert_eq!(unused.len(), 2, "{v:#}");
    let o = check(&root, &["--repair"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    for c in &chains {
        assert!(
            out.contains(&format!("repaired: removed snapshot {c}")),
            "{out}"
        );
        assert!(!root.join("snapshots/dir/committed").join(c).exists());
    }
    assert!(!out.contains("could not"), "{out}");
    assert_clean(&root);
}

#[test]
fn deep_diffs_built_layers_again() {
    let t = tempfile::tempdir().unwrap();
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Jailfile"), RECIPE).unwrap();
    let root = t.path().join("root");
    // Exported with a clamp that is not 0: --deep must use the same one.
    ok(jbuild(&root)
        .env("SOURCE_DATE_EPOCH", "1700000000")
        .args(["build", "-q", "-t", "one:1"])
        .arg(&ctx));
    let (code, v) = check_json(&root, &["--deep"]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");
    assert!(
        v["notes"]
            .to_string()
            .contains("--deep: 2 layers diffed again"),
        "{v:#}"
    );

    // A file of the top layer changed behind jbuild's back: only --deep sees it.
    let mut top = None;
    for e in fs::read_dir(root.join("snapshots/dir/committed")).unwrap() {
        let dir = e.unwrap().path();
        if dir.join("fs/etc/x").exists() {
            top = Some(dir);
        }
    }
    let top = top.unwrap();
    fs::write(top.join("fs/etc/x"), "changed\n").unwrap();
    assert_clean(&root);
    let o = check(&root, &["--deep"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    let name = top.file_name().unwrap().to_string_lossy();
    assert!(
        out.contains(&format!("snapshot `{name}` no longer holds its layer")),
        "{out}"
    );
}

#[test]
fn an_interrupted_store_creation_is_finished_by_repair() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    // What a process killed while creating the store leaves.
    fs::create_dir_all(root.join("store/blobs/sha256")).unwrap();
    fs::write(root.join("store/index.json"), "{").unwrap();
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "reclaimable"), vec!["unfinished-store"], "{v:#}");
    let (code, v) = check_json(&root, &["--repair"]);
    assert_eq!(code, 0, "{v:#}");
    assert!(
        v["repaired"][0]
            .as_str()
            .unwrap()
            .starts_with("finished creating the store"),
        "{v:#}"
    );
    assert!(root.join("store/oci-layout").is_file());
    assert_clean(&root);
}

/// Builds run while `check --repair` runs again and again: builds hold the
/// store lock shared from their first blob to their tag, so repair never
/// collects a blob a build is about to tag, and every image comes out whole.
#[test]
fn repair_running_beside_builds_takes_nothing_they_need() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let done = std::sync::atomic::AtomicBool::new(false);
    let mut repairs = 0;
    std::thread::scope(|s| {
        let builders: Vec<_> = (0..3)
            .map(|b| {
                let (root, dir) = (&root, t.path().join(format!("ctx{b}")));
                s.spawn(move || {
                    fs::create_dir_all(&dir).unwrap();
                    for n in 0..5 {
                        fs::write(
                            dir.join("Jailfile"),
                            format!("FROM scratch\nLINE_IN_FILE \"{b} {n}\" /etc/a\nLINE_IN_FILE \"x\" /etc/b\n"),
                        )
                        .unwrap();
                        ok(jbuild(root).args(["build", "-q", "-t", &format!("b{b}:{n}")]).arg(&dir));
                    }
                })
            })
            .collect();
        let repairer = s.spawn(|| {
            let mut n = 0;
            while !done.load(std::sync::atomic::Ordering::SeqCst) && n < 2000 {
                let o = check(&root, &["--repair"]);
                // A build's blobs not tagged yet are not damage (the
                // store lock keeps repair from taking them): exit 0.
                assert_eq!(o.status.code(), Some(0), "{}", text(&o));
                n += 1;
            }
            n
        });
        // Stop the repairs even when a build failed, then report it.
        let built: Vec<_> = builders.into_iter().map(|b| b.join()).collect();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        repairs = repairer.join().unwrap();
        for b in built {
            if let Err(panic) = b {
                std::panic::resume_unwind(panic);
            }
        }
    });
    assert!(repairs > 0);
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "damaged"), Vec::<String>::new(), "{v:#}");
    assert_eq!(v["summary"]["images"], 15, "{v:#}");
}
