//! The snapshotter conformance suite on the `zfs` backend, on zfs-fuse:
//! each check on a fresh file-backed pool (see `tests/support/zfs_fuse.rs`).

use crate::support::zfs_fuse;

use jbuild::snapshot::testsuite::Fixture;
use jbuild::snapshot::zfs::ZfsSnapshotter;

fn make() -> Fixture {
    let pool = zfs_fuse::Pool::new().expect("the suite's tests declared the zfs-fuse lane first");
    let sn = ZfsSnapshotter::open(&pool.dataset).unwrap();
    Fixture::new(Box::new(sn), pool)
}

// The suite calls `($make)()` inside each generated test: the block runs
// `need!` there first, so a machine without zfs-fuse counts each check as
// a skip of the zfs-fuse lane (never as a pass on another backend).
jbuild::snapshotter_suite!({
    need!(ZfsFuse);
    make
});

// ---- what only the ZFS backend promises -----------------------------------

use jbuild::snapshot::{Kind, Labels, SnapshotError, Snapshotter};

fn zfs_get(prop: &str, target: &str) -> String {
    let (ok, out) = zfs_fuse::sh("zfs", &["get", "-H", "-o", "value", prop, target]);
    assert!(ok, "zfs get {prop} {target}: {out}");
    out.trim_end_matches('\n').to_string()
}

#[test]
fn labels_are_user_properties_of_the_jbuild_snapshot_and_committed_trees_are_read_only() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let sn = ZfsSnapshotter::open(&pool.dataset).unwrap();
    assert!(!sn.has_zfs_diff(), "zfs-fuse 0.7 has no `zfs diff`");
    let root = sn.prepare("active-1-0", None).unwrap();
    std::fs::write(root.join("f"), "x").unwrap();
    let labels: Labels = [
        ("jbuild:chainid", "sha256:ab"),
        ("Org.Example:Name", "two words"),
        ("a", ""),
        ("tabbed", "a\tb\nc"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    sn.commit("chain-ab", "active-1-0", &labels).unwrap();
    let snap = format!("{}/chain-ab@jbuild", pool.dataset);
    // jbuild's own labels read as themselves in `zfs get`; the rest mapped.
    assert_eq!(zfs_get("jbuild:chainid", &snap), "sha256:ab");
    assert_eq!(
        zfs_get("jbuild.l:_4frg._45xample:_4eame", &snap),
        "two words"
    );
    assert_eq!(sn.stat("chain-ab").unwrap().unwrap().labels, labels);
    // The key is gone, the dataset renamed, and its tree read-only.
    let names = pool.zfs_list("name");
    assert!(
        !names.iter().any(|n| n.ends_with("/active-1-0")),
        "{names:?}"
    );
    let view = sn.view("chain-ab").unwrap();
    assert_eq!(view, pool.mountpoint.join("chain-ab"));
    let e = std::fs::write(view.join("g"), "y").unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    // A child is a clone of the @jbuild snapshot.
    sn.prepare("child", Some("chain-ab")).unwrap();
    assert_eq!(zfs_get("origin", &format!("{}/child", pool.dataset)), snap);
    // Removing the parent is refused, naming the clone; nothing changes.
    let e = sn.remove("chain-ab").unwrap_err();
    assert!(
        matches!(&e, SnapshotError::HasChildren { children, .. } if children == "child"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(view.join("f")).unwrap(), "x");
    // A snapshot sent with its properties and received under P is a
    // committed snapshot with the same labels.
    let (ok, out) = zfs_fuse::sh(
        "sh",
        &[
            "-c",
            &format!("zfs send -p {snap} | zfs recv {}/copied", pool.dataset),
        ],
    );
    assert!(ok, "{out}");
    let copied = sn.stat("copied").unwrap().unwrap();
    assert_eq!((copied.kind, copied.labels), (Kind::Committed, labels));
    sn.remove("copied").unwrap();
    // Datasets that are not jbuild's are not snapshots.
    let (ok, out) = zfs_fuse::sh(
        "zfs",
        &["create", &format!("{}/child/nested", pool.dataset)],
    );
    assert!(ok, "{out}");
    let listed: Vec<(String, Kind)> = sn
        .list()
        .unwrap()
        .into_iter()
        .map(|i| (i.name, i.kind))
        .collect();
    assert_eq!(
        listed,
        [
            ("chain-ab".to_string(), Kind::Committed),
            ("child".to_string(), Kind::Active)
        ]
    );
}

#[test]
fn two_commits_racing_for_one_name_leave_one_winner_and_the_other_key_active() {
    let Some(pool) = zfs_fuse::Pool::new() else {
        return;
    };
    let sn = ZfsSnapshotter::open(&pool.dataset).unwrap();
    for round in 0..4 {
        let name = format!("n{round}");
        let keys = [format!("k{round}a"), format!("k{round}b")];
        for k in &keys {
            let root = sn.prepare(k, None).unwrap();
            std::fs::write(root.join("who"), k).unwrap();
        }
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = keys
                .iter()
                .map(|k| {
                    let (sn, name) = (&sn, &name);
                    s.spawn(move || sn.commit(name, k, &Labels::new()))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<_> = keys
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let (winner, _) = winners[0];
        let loser = keys.iter().find(|k| *k != winner).unwrap();
        let lost = results.iter().find(|r| r.is_err()).unwrap();
        assert!(
            matches!(lost, Err(SnapshotError::AlreadyExists(n)) if *n == name),
            "{lost:?}"
        );
        let view = sn.view(&name).unwrap();
        assert_eq!(&std::fs::read_to_string(view.join("who")).unwrap(), winner);
        let info = sn.stat(loser).unwrap().expect("the losing key stays");
        assert_eq!(info.kind, Kind::Active);
        assert!(info.labels.is_empty(), "{info:?}");
        let root = pool.mountpoint.join(loser);
        assert_eq!(&std::fs::read_to_string(root.join("who")).unwrap(), loser);
        std::fs::write(root.join("still-writable"), "").unwrap();
    }
}
