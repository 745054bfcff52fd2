//! What `jbuild import oci-archive:FILE` says of a layout file it does not
//! read: the archive the user gave is named, never the temporary
//! directory it was extracted to (gone once jbuild exits), and it is the
//! archive's fault (exit 1). A layout directory (`oci:DIR`) likewise.

use crate::support::hostile::Tar;
use crate::support::registry::{jbuild, run_bounded, LIMIT};

use std::fs;

/// Imports an archive holding `oci_layout` and an empty index; its stderr.
fn import(oci_layout: &[u8]) -> (String, String) {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("image.tar");
    let tar = Tar::new()
        .file(b"oci-layout", oci_layout)
        .file(b"index.json", br#"{"schemaVersion":2,"manifests":[]}"#)
        .finish();
    fs::write(&file, tar).unwrap();
    let location = format!("oci-archive:{}", file.display());
    let out = run_bounded(
        jbuild(home.path()).args(["import", &location, "x:1"]),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    (location, err)
}

#[test]
fn an_unsupported_layout_version_names_the_archive() {
    let (location, err) = import(br#"{"imageLayoutVersion":"2.0.0"}"#);
    assert!(err.contains(&location), "the archive is not named:\n{err}");
    assert!(
        err.contains("layout version 2.0.0 is not supported"),
        "{err}"
    );
    assert!(
        !err.contains("jbuild-archive-"),
        "a staging directory is named:\n{err}"
    );
}

#[test]
fn an_unreadable_oci_layout_file_names_the_archive() {
    let (location, err) = import(b"not json");
    assert!(err.contains(&location), "the archive is not named:\n{err}");
    assert!(err.contains("oci-layout"), "{err}");
    assert!(
        !err.contains("jbuild-archive-"),
        "a staging directory is named:\n{err}"
    );
}

/// The same of a layout directory (`import oci:DIR`): another layout
/// version, or an `index.json` that is not JSON, is what the user named,
/// not damage of jbuild's (exit 1, not 2), and the location is named.
#[test]
fn a_layout_directory_jbuild_does_not_read_is_the_users_input() {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("layout");
    fs::create_dir_all(dir.join("blobs/sha256")).unwrap();
    let location = format!("oci:{}", dir.display());
    for (oci_layout, index, says) in [
        (
            &br#"{"imageLayoutVersion":"2.0.0"}"#[..],
            &br#"{"schemaVersion":2,"manifests":[]}"#[..],
            "layout version 2.0.0 is not supported",
        ),
        (
            br#"{"imageLayoutVersion":"1.0.0"}"#,
            b"{not json",
            "`index.json` is not valid",
        ),
    ] {
        fs::write(dir.join("oci-layout"), oci_layout).unwrap();
        fs::write(dir.join("index.json"), index).unwrap();
        let out = run_bounded(
            jbuild(home.path()).args(["import", &location, "x:1"]),
            LIMIT,
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(&location) && err.contains(says), "{err}");
    }
}
