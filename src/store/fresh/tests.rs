use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use oci_spec::image::{Descriptor, MediaType};

use super::*;
use crate::fsutil::SYNCED;
use crate::store::oci_digest;

/// Writes a small image (config, layer, manifest) into `store`, tagged
/// `tag`; returns the manifest's descriptor.
fn write_image(store: &Store, tag: &str, seed: u8) -> Descriptor {
    let (config, _) = store.put_bytes(&[b'{', seed, b'}']).unwrap();
    let (layer, _) = store.put_bytes(&[seed; 4096]).unwrap();
    let manifest = format!(r#"{{"config":"{config}","layer":"{layer}"}}"#);
    let (d, n) = store.put_bytes(manifest.as_bytes()).unwrap();
    let desc = Descriptor::new(MediaType::ImageManifest, n, oci_digest(&d));
    store.tag_ref(tag, &desc).unwrap();
    desc
}

/// The layout at `dir` is whole: readable, every blob hashes to its name,
/// and `tag` names `desc`.
fn assert_whole(dir: &Path, tag: &str, desc: &Descriptor) {
    let store = Store::open_existing(dir).unwrap();
    let found = store.resolve(tag).unwrap();
    assert_eq!(
        found.map(|d| d.digest().clone()),
        Some(desc.digest().clone()),
        "{tag}"
    );
    let blobs = store.blob_digests().unwrap();
    assert!(blobs.len() >= 3, "{blobs:?}");
    for d in blobs {
        assert!(store.blob_is_sound(&d), "{d}");
    }
}

/// Every file and directory under `root`, `.jbuild/` left out, and `root`.
fn tree(root: &Path) -> BTreeSet<PathBuf> {
    let mut all = BTreeSet::from([root.to_path_buf()]);
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            if e.file_name() == ".jbuild" {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                todo.push(e.path());
            }
            all.insert(e.path());
        }
    }
    all
}

/// What [`SYNCED`] holds about paths under `under`.
fn events_under(under: &Path) -> Vec<(&'static str, PathBuf)> {
    all_events_under(under)
        .into_iter()
        .filter(|(what, _)| *what != "writeback")
        .collect()
}

/// [`events_under`] with the writebacks started (which wait for nothing).
fn all_events_under(under: &Path) -> Vec<(&'static str, PathBuf)> {
    SYNCED
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, p)| p.starts_with(under))
        .cloned()
        .collect()
}

/// The staging directories beside `place`.
fn staging_dirs(place: &Path) -> Vec<PathBuf> {
    let prefix = format!(".{}{STAGING}", place.file_name().unwrap().to_string_lossy());
    fs::read_dir(place.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Makes the staging directory's lock file look older than the grace a
/// live creator gets.
fn age_lock(staging: &Path) {
    let old = SystemTime::now() - LOCK_GRACE * 2;
    fs::File::options()
        .write(true)
        .open(staging.join(".jbuild/lock"))
        .unwrap()
        .set_modified(old)
        .unwrap();
}

#[test]
fn everything_staged_is_synced_at_once_before_the_rename_and_the_parents_after() {
    let t = tempfile::tempdir().unwrap();
    let place = t.path().join("a/b/layout");
    let new = Store::create_new(&place).unwrap().unwrap();
    let staging = new.store().path().to_path_buf();
    assert_eq!(staging.parent(), place.parent());
    assert!(!place.exists(), "nothing at the place before publishing");
    let desc = write_image(new.store(), "1", 1);
    assert!(
        events_under(t.path()).is_empty(),
        "nothing synced while writing: {:?}",
        events_under(t.path())
    );
    let staged = tree(&staging);

    let store = new.publish().unwrap();
    assert_eq!(store.path(), place);
    assert_whole(&place, "1", &desc);
    assert!(staging_dirs(&place).is_empty());

    let events = events_under(t.path());
    let rename = events
        .iter()
        .position(|e| *e == ("rename", place.clone()))
        .unwrap_or_else(|| panic!("no rename: {events:?}"));
    let before: Vec<&PathBuf> = events[..rename]
        .iter()
        .filter(|(what, _)| *what == "sync")
        .map(|(_, p)| p)
        .collect();
    let after: BTreeSet<&PathBuf> = events[rename + 1..].iter().map(|(_, p)| p).collect();
    // Each entry of the staged layout once, nothing else, all before the
    // rename; then the directories whose entries changed.
    assert_eq!(
        before.iter().copied().cloned().collect::<BTreeSet<_>>(),
        staged,
        "synced before the rename"
    );
    assert_eq!(before.len(), staged.len(), "{before:?}");
    let parents = [
        t.path().join("a/b"),
        t.path().join("a"),
        t.path().to_path_buf(),
    ];
    assert_eq!(after, parents.iter().collect(), "synced after the rename");
}

/// Linux: the staged layout is made durable by one `syncfs` (one wait
/// for the journal), not by an fsync per entry on threads started one
/// after another, whose late ones waited for a second commit (issue 34).
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn a_new_layout_waits_for_the_disk_once_before_its_rename() {
    let t = tempfile::tempdir().unwrap();
    let place = t.path().join("layout");
    let new = Store::create_new(&place).unwrap().unwrap();
    let staging = new.store().path().to_path_buf();
    write_image(new.store(), "1", 7);
    new.publish().unwrap();
    let events = events_under(t.path());
    let rename = events
        .iter()
        .position(|e| *e == ("rename", place.clone()))
        .unwrap_or_else(|| panic!("no rename: {events:?}"));
    let waits: Vec<_> = events
        .iter()
        .enumerate()
        .filter(|(_, (what, _))| *what == "syncfs")
        .collect();
    assert_eq!(
        waits,
        vec![(0, &("syncfs", staging.clone()))],
        "one syncfs of the staged layout, the first wait: {events:?}"
    );
    assert!(rename > 0);
}

/// Each blob of a staged layout has its writeback started when it is
/// complete, before the layout's one sync, so that the sync finds its
/// data on the way to the disk (issue 34: the 2 MB copy's `syncfs` was
/// mostly its one layer's bytes). A scratch layout, never synced, starts
/// none.
#[test]
fn a_staged_blob_starts_for_the_disk_before_the_layouts_sync() {
    let t = tempfile::tempdir().unwrap();
    let place = t.path().join("layout");
    let new = Store::create_new(&place).unwrap().unwrap();
    let staging = new.store().path().to_path_buf();
    write_image(new.store(), "1", 9);
    let blobs: BTreeSet<PathBuf> = new
        .store()
        .blob_digests()
        .unwrap()
        .iter()
        .map(|d| new.store().blob_path(d))
        .collect();
    new.publish().unwrap();
    let events = all_events_under(t.path());
    let sync = events
        .iter()
        .position(|(what, _)| *what == "syncfs" || *what == "sync")
        .unwrap_or_else(|| panic!("no sync: {events:?}"));
    let started: BTreeSet<PathBuf> = events[..sync]
        .iter()
        .filter(|(what, _)| *what == "writeback")
        .map(|(_, p)| p.clone())
        .collect();
    assert_eq!(started, blobs, "{events:?}");
    assert!(
        events[sync..].iter().all(|(what, _)| *what != "writeback"),
        "{events:?}"
    );
    assert!(!staging.exists());

    let scratch = t.path().join("scratch");
    write_image(&Store::create_scratch(&scratch).unwrap(), "1", 9);
    assert_eq!(
        all_events_under(&scratch),
        vec![],
        "a scratch layout reaches no disk"
    );
}

#[test]
fn a_kill_at_any_point_leaves_no_layout_or_the_whole_one_and_a_rerun_works() {
    // Where the process dies: `None` while writing (before publishing),
    // else at that step of publishing.
    for stop in [None, Some(Step::Synced), Some(Step::Placed)] {
        let t = tempfile::tempdir().unwrap();
        let place = t.path().join("layout");
        let new = Store::create_new(&place).unwrap().unwrap();
        let desc = write_image(new.store(), "1", 7);
        let staging = new.store().path().to_path_buf();
        match stop {
            None => drop(new.die()),
            Some(step) => assert!(new.publish_until(Some(step)).unwrap().is_none()),
        }
        if stop == Some(Step::Placed) {
            assert_whole(&place, "1", &desc);
            assert!(!staging.exists());
        } else {
            assert!(!place.exists(), "{stop:?}: a layout before its rename");
            assert!(staging.exists(), "{stop:?}: a kill cleans nothing up");
            age_lock(&staging);
        }

        // The rerun: a copy to the same place.
        match Store::create_new(&place).unwrap() {
            Some(again) => {
                assert!(
                    !staging.exists(),
                    "{stop:?}: a dead staging directory stays"
                );
                write_image(again.store(), "1", 7);
                again.publish().unwrap();
            }
            None => {
                write_image(&Store::open(&place).unwrap(), "1", 7);
            }
        }
        assert_whole(&place, "1", &desc);
        assert!(staging_dirs(&place).is_empty(), "{stop:?}");
    }
}

#[test]
fn a_live_staging_directory_stays_and_a_second_maker_of_the_place_merges() {
    let t = tempfile::tempdir().unwrap();
    let place = t.path().join("layout");
    let first = Store::create_new(&place).unwrap().unwrap();
    let one = write_image(first.store(), "one", 1);
    // Its lock is held: old as its file is, it is not judged dead.
    age_lock(first.store().path());
    let second = Store::create_new(&place).unwrap().unwrap();
    assert!(first.store().path().exists());
    let two = write_image(second.store(), "two", 2);
    second.publish().unwrap();

    // The first finds the place taken and puts its image there.
    let store = first.publish().unwrap();
    assert_eq!(store.path(), place);
    assert_whole(&place, "one", &one);
    assert_whole(&place, "two", &two);
    assert_eq!(store.blob_digests().unwrap().len(), 6);
    assert!(staging_dirs(&place).is_empty());
}

#[test]
fn a_place_that_exists_is_not_made_again() {
    let t = tempfile::tempdir().unwrap();
    assert!(Store::create_new(t.path()).unwrap().is_none());
    assert!(Store::create_new(Path::new("/")).unwrap().is_none());
    let file = t.path().join("file");
    fs::write(&file, b"").unwrap();
    assert!(Store::create_new(&file).unwrap().is_none());
    // Dropped unpublished (a failed copy): nothing is left.
    let place = t.path().join("layout");
    let new = Store::create_new(&place).unwrap().unwrap();
    write_image(new.store(), "1", 3);
    drop(new);
    assert!(!place.exists());
    assert!(staging_dirs(&place).is_empty());
}

#[test]
fn a_scratch_layout_syncs_nothing() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("scratch");
    let store = Store::create_scratch(&dir).unwrap();
    let desc = write_image(&store, "1", 4);
    assert_whole(&dir, "1", &desc);
    assert_eq!(events_under(t.path()), vec![]);
}

#[test]
fn an_existing_layout_still_syncs_each_write_in_order() {
    let t = tempfile::tempdir().unwrap();
    let store = Store::open(t.path()).unwrap();
    let created = events_under(t.path()).len();
    write_image(&store, "1", 5);
    let events = events_under(t.path())[created..].to_vec();
    let at = |p: &Path| events.iter().rposition(|(_, q)| q == p);
    let blobs = at(&t.path().join("blobs/sha256")).expect("the blobs directory synced");
    let root = at(t.path()).expect("the layout's directory synced");
    // Three blob files, each synced (in .jbuild/tmp) before the blobs
    // directory; index.json's temporary file before the directory it goes in.
    let tmp = t.path().join(".jbuild/tmp");
    let files: Vec<usize> = (0..events.len())
        .filter(|&i| events[i].1.starts_with(&tmp))
        .collect();
    assert_eq!(files.len(), 3, "{events:?}");
    assert!(files.iter().all(|&i| i < blobs), "{events:?}");
    assert!(blobs < root, "{events:?}");
}
