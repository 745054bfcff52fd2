//! The snapshotter conformance suite on the `dir` backend.

use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::testsuite::Fixture;

fn make() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let sn = DirSnapshotter::new(tmp.path().join("snapshots")).unwrap();
    Fixture::new(Box::new(sn), tmp)
}

jbuild::snapshotter_suite!(make);

/// The same suite on the `overlay` backend (Linux, as root).
mod overlay {
    use jbuild::snapshot::overlay::OverlaySnapshotter;
    use jbuild::snapshot::testsuite::{Fixture, UnmountOnDrop};

    fn make() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let sn = OverlaySnapshotter::new(tmp.path().join("snapshots")).unwrap();
        Fixture::new(Box::new(sn), (UnmountOnDrop(tmp.path().to_path_buf()), tmp))
    }

    jbuild::snapshotter_suite!(make);

    /// 200 layers named like chain IDs (`lowerdir=` would need ~22 KB, the
    /// kernel takes one page): every tree is right, and so is every layer's
    /// diff, including those stacked on a flattened copy.
    #[test]
    fn two_hundred_layers_stay_mountable_by_flattening() {
        use std::fs;
        use std::path::Path;

        use jbuild::diff::{ChangeKind, SnapshotRef};
        use jbuild::snapshot::{Labels, Snapshotter};

        let tmp = tempfile::tempdir().unwrap();
        let _unmount = UnmountOnDrop(tmp.path().to_path_buf());
        let sn = OverlaySnapshotter::new(tmp.path().join("snapshots")).unwrap();
        let name = |i: usize| format!("chain-sha256:{i:064x}");
        for i in 0..200usize {
            let parent = i.checked_sub(1).map(name);
            let root = sn.prepare("active", parent.as_deref()).unwrap();
            fs::write(root.join(format!("layer-{i}")), i.to_string()).unwrap();
            fs::write(root.join("counter"), i.to_string()).unwrap();
            if i >= 2 {
                fs::remove_file(root.join(format!("layer-{}", i - 2))).unwrap();
            }
            sn.commit(&name(i), "active", &Labels::new()).unwrap();
        }
        let committed = tmp.path().join("snapshots/committed");
        let flats = (0..200)
            .filter(|&i| committed.join(name(i)).join("flat").is_dir())
            .count();
        println!("200 layers: {flats} flattened copies");
        assert!((1..10).contains(&flats), "{flats} flattened copies");

        // Mounts name layers by short links; one a crash did not make is
        // made when a mount needs it.
        let links = tmp.path().join("snapshots/l");
        assert_eq!(fs::read_dir(&links).unwrap().count(), 200);
        for e in fs::read_dir(&links).unwrap().take(100) {
            fs::remove_file(e.unwrap().path()).unwrap();
        }

        let top = sn.view(&name(199)).unwrap();
        let mut names: Vec<String> = fs::read_dir(&top)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["counter", "layer-198", "layer-199"]);
        assert_eq!(fs::read_to_string(top.join("counter")).unwrap(), "199");

        let differ = sn.differ();
        for i in 2..200 {
            let (p, c) = (sn.view(&name(i - 1)).unwrap(), sn.view(&name(i)).unwrap());
            let (pn, cn) = (name(i - 1), name(i));
            let got: Vec<(String, ChangeKind)> = differ
                .changes(
                    Some(SnapshotRef {
                        name: &pn,
                        root: &p,
                    }),
                    SnapshotRef {
                        name: &cn,
                        root: &c,
                    },
                )
                .unwrap()
                .into_iter()
                .map(|c| (c.path.display().to_string(), c.kind))
                .collect();
            let want = vec![
                (format!("layer-{}", i - 2), ChangeKind::Deleted),
                ("counter".to_string(), ChangeKind::Modified),
                (format!("layer-{i}"), ChangeKind::Added),
            ];
            assert_eq!(got, want, "layer {i}");
            assert!(Path::new(&c).exists());
        }
    }
}
