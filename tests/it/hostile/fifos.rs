//! A FIFO where a layout or the store has a file: refused at once, never
//! waited on. Before, `import` of a layout whose `index.json` or a blob
//! was a FIFO hung for ever, and so did every store command — `check`, the
//! tool meant to find damage, included — once a FIFO took a blob's place,
//! and `images` once one took the place of a note of a layer's size.
//! Nobody ever writes to these FIFOs: each run is given 30 s, and one that
//! waits is killed and fails the test.

use super::layouts::{Layout, QUICK};
use super::{fails_with, succeeded, text, Home};
use crate::support::registry::run_bounded;
use jbuild::digest::Digest;

use std::fs;
use std::path::Path;
use std::process::Output;

fn mkfifo(path: &Path) {
    let _ = fs::remove_file(path);
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
}

/// `jbuild ARGS…`, killed (failing the test) after 30 s.
fn quick(h: &Home, args: &[&str]) -> Output {
    run_bounded(h.jbuild().args(args), QUICK)
}

#[test]
fn import_of_a_layout_with_a_fifo_refuses_at_once() {
    let h = Home::new("FROM scratch\n");
    let l = Layout::new(&h.path("index-fifo"), b"layer", true);
    mkfifo(&l.dir.join("index.json"));
    let out = quick(&h, &["import", &l.location(), "f:1"]);
    fails_with(&out, &["index.json", "it is a FIFO, not a regular file"]);

    let l = Layout::new(&h.path("blob-fifo"), b"layer", false);
    mkfifo(&l.blob(b"layer"));
    let out = quick(&h, &["import", &l.location(), "f:2"]);
    let blob = format!("blobs/sha256/{}", Digest::of(b"layer").hex());
    fails_with(&out, &[&blob, "it is a FIFO, not a regular file"]);
}

#[test]
fn a_fifo_in_the_store_is_damage_that_check_reports() {
    let h = Home::new("FROM scratch\nCOPY site/ /srv/\nLABEL app=fifo\n");
    let iid = h.path("iid");
    succeeded(&h.build(&["-q", "-t", "app:1", "--iidfile", iid.to_str().unwrap()]));
    let manifest: Digest = fs::read_to_string(&iid).unwrap().trim().parse().unwrap();
    let store = h.path("root/store");

    // jbuild's own notes of layer sizes (the first `images` makes them),
    // each a FIFO: read by the next.
    succeeded(&quick(&h, &["images"]));
    let sizes = store.join(".jbuild/sizes");
    let notes: Vec<_> = fs::read_dir(&sizes)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!notes.is_empty(), "no size notes in {}", sizes.display());
    for note in &notes {
        mkfifo(note);
    }
    succeeded(&quick(&h, &["images"]));

    let blob = store.join("blobs/sha256").join(manifest.hex());
    mkfifo(&blob);

    // Every command ends; none waits on the FIFO.
    for args in [
        &["images"][..],
        &["inspect", "app:1"],
        &["tag", "app:1", "other:1"],
        &[
            "export",
            "app:1",
            &format!("oci:{}", h.path("out").display()),
        ],
        &["prune"],
    ] {
        let out = quick(&h, args);
        eprintln!("{args:?}: {:?}\n{}", out.status.code(), text(&out.stderr));
    }
    let out = quick(&h, &["check"]);
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{report}");
    let said = format!(
        "`{}` in the store's blob directory is a FIFO",
        manifest.hex()
    );
    assert!(
        report.contains(&said),
        "the FIFO is not reported:\n{report}"
    );

    // The store's own index.json as a FIFO: `check` says so.
    fs::remove_file(&blob).unwrap();
    mkfifo(&store.join("index.json"));
    let out = quick(&h, &["images"]);
    assert!(!out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("index.json: it is a FIFO"),
        "{}",
        text(&out.stderr)
    );
    let out = quick(&h, &["check"]);
    let report = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("index.json cannot be read: it is a FIFO"),
        "{report}"
    );
}
