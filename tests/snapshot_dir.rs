//! The snapshotter conformance suite on the `dir` backend.

use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::testsuite::Fixture;

fn make() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let sn = DirSnapshotter::new(tmp.path().join("snapshots")).unwrap();
    Fixture::new(Box::new(sn), tmp)
}

jbuild::snapshotter_suite!(make);
