//! `jbuild check` while a pull is between two layers: its first layer is
//! committed with nothing standing on it, its blobs are stored, and no
//! image names any of it until the pull names its image. The pull's pin
//! (the store lock, held shared) says so: check calls that content
//! *pending*, not reclaimable, and once nobody holds the lock, content no
//! image uses is reclaimable again.

use std::sync::Mutex;

use serde_json::Value;

use jbuild::digest::Digest;
use jbuild::image::{self, LayerPolicy, Platform, Unpacker};
use jbuild::report::SilentReporter;
use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::Snapshotter;
use jbuild::store::Store;

use super::dir::{check, check_json, kinds, text};
use crate::pull::transaction::{good_layers, publish, wait_until, Between, HoldAt};

/// The `where` of each finding of `severity`.
fn wheres(v: &Value, severity: &str) -> Vec<String> {
    v[severity]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["where"].as_str().unwrap().to_string())
        .collect()
}

/// What the held pull showed: the blobs it had stored, `--json check` and
/// plain `check` (exit code and output).
type Seen = (Vec<Digest>, (i32, Value), (Option<i32>, String));

#[test]
fn check_while_a_pull_is_between_two_layers_calls_its_content_pending() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let layout = t.path().join("layout");
    publish(&layout, "good", &good_layers());
    let store = Store::open(&root.join("store")).unwrap();
    let snapshots = DirSnapshotter::new(root.join("snapshots/dir")).unwrap();
    let diff_ids: Vec<Digest> = good_layers().iter().map(|l| Digest::of(l)).collect();
    let chains: Vec<String> = image::chain_ids(&diff_ids)
        .iter()
        .map(image::SnapshotName::chain)
        .collect();
    let seen: Mutex<Option<Seen>> = Mutex::new(None);
    // The pull waits here, its last layer's blob stored but not yet told
    // to the unpacker, while both checks run (as other processes).
    let between = || {
        wait_until("the first layer's snapshot", || {
            snapshots.stat(&chains[0]).unwrap().is_some()
        });
        let blobs = store.blob_digests().unwrap();
        let json = check_json(&root, &[]);
        let plain = check(&root, &[]);
        *seen.lock().unwrap() = Some((blobs, json, (plain.status.code(), text(&plain))));
    };
    let source = Between {
        dir: layout,
        at: HoldAt::LastLayer,
        between: &between,
    };
    let unpacker = Unpacker::new(&store, &snapshots, &SilentReporter, LayerPolicy::default());
    let pulled = image::pull(&unpacker, &source, "good", &Platform::default_for_host()).unwrap();
    let (blobs, (code, v), (plain_code, out)) = seen
        .into_inner()
        .unwrap()
        .expect("the source held the pull");

    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["sound"], true, "{v:#}");
    assert_eq!(
        kinds(&v, "reclaimable"),
        Vec::<String>::new(),
        "a running pull's content called reclaimable: {v:#}"
    );
    let mut expected = vec!["unreferenced-blob".to_string(); blobs.len()];
    expected.push("unused-layer".to_string());
    assert_eq!(kinds(&v, "pending"), expected, "{v:#}");
    let pending = wheres(&v, "pending");
    assert!(
        pending.contains(&format!("dir snapshot {}", chains[0])),
        "{pending:?}"
    );
    for d in &blobs {
        assert!(
            pending.iter().any(|w| w.ends_with(d.hex())),
            "{d} not pending: {pending:?}"
        );
    }
    for f in v["pending"].as_array().unwrap() {
        assert_eq!(f["severity"], "pending", "{f:#}");
        assert!(
            f["action"]
                .as_str()
                .unwrap()
                .contains("other jbuild processes are adding content"),
            "{f:#}"
        );
    }

    assert_eq!(plain_code, Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "pending: unpacked layer `{}` is not used by any image in the store",
            chains[0]
        )),
        "{out}"
    );
    assert!(!out.contains("reclaimable:"), "{out}");
    assert!(
        out.trim_end().ends_with(&format!(
            "no damage; {} pending (other jbuild processes are adding content)",
            blobs.len() + 1
        )),
        "{out}"
    );

    // Named, the image uses all of it.
    assert_eq!(pulled.name, "pulled/good");
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    for severity in ["damaged", "reclaimable", "pending"] {
        assert_eq!(kinds(&v, severity), Vec::<String>::new(), "{v:#}");
    }

    // Untagged while nobody holds the lock, it is reclaimable, as before.
    untag(&store, &pulled.name);
    let (code, v) = check_json(&root, &[]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(kinds(&v, "pending"), Vec::<String>::new(), "{v:#}");
    let mut found = kinds(&v, "reclaimable");
    found.sort();
    found.dedup();
    assert_eq!(found, vec!["unreferenced-blob", "unused-layer"], "{v:#}");
    let reclaimable = wheres(&v, "reclaimable");
    for chain in &chains {
        assert!(
            reclaimable.contains(&format!("dir snapshot {chain}")),
            "{reclaimable:?}"
        );
    }
}

fn untag(store: &Store, name: &str) {
    assert!(
        store.untag_ref(name).unwrap().is_some(),
        "{name} not tagged"
    );
}
