//! Opening a layout directory, and creating one where there is none.

use std::fs;
use std::path::Path;

use oci_spec::image::{ImageIndexBuilder, MediaType};

use super::json::canonical_json;
use super::INDEX;
use super::{Durability, Store, StoreError};
use crate::fsutil::input::InputError;
use crate::fsutil::{sync_dir, write_renamed, write_replacing};

pub(super) const LAYOUT_FILE: &str = "oci-layout";
const LAYOUT_JSON: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;
/// The most of `oci-layout` read: 4 MiB, as every document
/// (`image::MAX_DOCUMENT`, a floor above the store).
const MAX_LAYOUT_FILE: u64 = 4 << 20;

/// What a directory may hold when an earlier `Store::open` was interrupted
/// while creating the layout: `oci-layout` is written last, so these
/// (with `blobs/` still empty) are the only traces that can exist without it.
const CREATION_LEFTOVERS: &[&str] = &["blobs", "index.json", ".jbuild"];

impl Store {
    /// Opens the layout at `dir`, creating it (and `dir`) if there is
    /// nothing there yet. A directory that holds something other than an
    /// OCI layout is refused, never written into.
    pub fn open(dir: &Path) -> Result<Store, StoreError> {
        let store = Store {
            root: dir.to_path_buf(),
            durability: Durability::Ordered,
        };
        match fs::metadata(dir) {
            Ok(m) if !m.is_dir() => return Err(store.not_a_layout("it is not a directory")),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                fs::create_dir_all(dir)
                    .map_err(|e| StoreError::io(format!("cannot create {}", dir.display()), e))?;
            }
            Err(e) => return Err(StoreError::io(format!("cannot read {}", dir.display()), e)),
        }
        let has_layout = dir
            .join(LAYOUT_FILE)
            .try_exists()
            .map_err(|e| StoreError::io(format!("cannot read {}", dir.display()), e))?;
        if has_layout && store.lost_its_empty_index() {
            // Creation syncs the directory once, after both files: a crash
            // before that may keep `oci-layout` and lose `index.json`.
            store.create_layout()?;
        } else if !has_layout {
            match store.check_creatable() {
                Ok(()) => store.create_layout()?,
                // Another process finished creating it meanwhile.
                Err(_) if dir.join(LAYOUT_FILE).is_file() => {}
                Err(e) => return Err(e),
            }
        }
        store.check_layout()?;
        Ok(store)
    }

    /// Opens the layout at `dir`, which must exist. Opening never writes.
    pub fn open_existing(dir: &Path) -> Result<Store, StoreError> {
        let store = Store {
            root: dir.to_path_buf(),
            durability: Durability::Ordered,
        };
        store.check_layout()?;
        Ok(store)
    }

    /// A handle on the layout at `dir` without checking anything, for
    /// `jbuild check`, which examines a layout that may be damaged and
    /// reports what it finds. Nothing is read or written here.
    pub fn open_unchecked(dir: &Path) -> Store {
        Store {
            root: dir.to_path_buf(),
            durability: Durability::Ordered,
        }
    }

    /// Whether this is a layout whose creation was interrupted: no
    /// `oci-layout` yet, and nothing [`Store::open`] would not finish.
    pub fn is_unfinished(&self) -> bool {
        !self.root.join(LAYOUT_FILE).exists() && self.check_creatable().is_ok()
    }

    /// Whether this is a layout whose creation (by jbuild: its own
    /// `oci-layout` bytes) a crash cut after `oci-layout` but lost
    /// `index.json` with it (see [`Store::create_layout`]): nothing can
    /// have been stored yet.
    ///
    /// Asked at every open: the one `stat` of `index.json` answers for
    /// every sound layout, before the blobs directory is read.
    fn lost_its_empty_index(&self) -> bool {
        let no_blobs = || match fs::read_dir(self.root.join("blobs/sha256")) {
            Ok(mut d) => d.next().is_none(),
            Err(_) => true,
        };
        !self.index_path().exists()
            && self
                .within()
                .read(Path::new(LAYOUT_FILE), LAYOUT_JSON.len() as u64)
                .is_ok_and(|b| b == LAYOUT_JSON)
            && no_blobs()
    }

    fn not_a_layout(&self, reason: impl Into<String>) -> StoreError {
        StoreError::NotALayout {
            path: self.root.clone(),
            reason: reason.into(),
        }
    }

    /// Refuses a directory with anything in it that an interrupted creation
    /// could not have left.
    fn check_creatable(&self) -> Result<(), StoreError> {
        let read_err = |e| StoreError::io(format!("cannot read {}", self.root.display()), e);
        for entry in fs::read_dir(&self.root).map_err(read_err)? {
            let name = entry.map_err(read_err)?.file_name();
            let name = name.to_string_lossy();
            if !(CREATION_LEFTOVERS.contains(&name.as_ref()) || name.starts_with(".tmp-")) {
                return Err(self.not_a_layout(format!(
                    "it is not empty (has `{name}`) and has no oci-layout file"
                )));
            }
        }
        let blobs = self.root.join("blobs/sha256");
        if fs::read_dir(&blobs).is_ok_and(|mut d| d.next().is_some()) {
            return Err(self.not_a_layout("it has blobs but no oci-layout file"));
        }
        Ok(())
    }

    /// Writes `index.json` (empty), then `oci-layout`, each fsynced before
    /// its rename, and syncs the directory once, after both (not after each:
    /// one fsync fewer for every new layout). Until that sync a crash may
    /// keep either name; [`Store::open`] finishes what it finds
    /// ([`Store::lost_its_empty_index`] for `oci-layout` alone). A
    /// [`Durability::Staged`] store syncs nothing here: its layout is
    /// synced whole later ([`super::NewLayout::publish`]); nor does a
    /// [`Durability::Deferred`] one, which is never synced.
    pub(super) fn create_layout(&self) -> Result<(), StoreError> {
        self.blobs_dir()?;
        let index = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(vec![])
            .build()
            .expect("an empty index is valid");
        for (name, bytes) in [
            (INDEX, canonical_json(&index)),
            (LAYOUT_FILE, LAYOUT_JSON.to_vec()),
        ] {
            let path = self.root.join(name);
            // A process creating the same layout at the same time may have
            // written it, and tagged an image in it: never reset a valid one.
            if name == INDEX && self.read_index().is_ok() {
                continue;
            }
            let written = if self.syncs() {
                write_replacing(&path, &bytes)
            } else {
                write_renamed(&path, &bytes)
            };
            if let Err(e) = written {
                // Once another process has finished the same layout, a
                // `jbuild check --repair` may take our temporary file: what
                // we meant to write is then there already.
                let there = if name == LAYOUT_FILE {
                    self.within()
                        .read(Path::new(name), bytes.len() as u64)
                        .is_ok_and(|b| b == bytes)
                } else {
                    self.read_index().is_ok()
                };
                if !there {
                    return Err(StoreError::io(
                        format!("cannot write {}", path.display()),
                        e,
                    ));
                }
            }
        }
        if !self.syncs() {
            return Ok(());
        }
        sync_dir(&self.root)
            .map_err(|e| StoreError::io(format!("cannot sync {}", self.root.display()), e))
    }

    /// A layout has a readable `oci-layout` of version 1.x and a readable
    /// `index.json`.
    pub(super) fn check_layout(&self) -> Result<(), StoreError> {
        match fs::metadata(&self.root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(self.not_a_layout("it is not a directory")),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.not_a_layout("it does not exist"))
            }
            Err(e) => {
                return Err(StoreError::io(
                    format!("cannot read {}", self.root.display()),
                    e,
                ))
            }
        }
        let path = self.root.join(LAYOUT_FILE);
        let bytes = match self.within().read(Path::new(LAYOUT_FILE), MAX_LAYOUT_FILE) {
            Ok(b) => b,
            Err(InputError::Missing) => {
                return Err(self.not_a_layout("it has no oci-layout file"));
            }
            Err(InputError::Io(e)) => {
                return Err(StoreError::io(format!("cannot read {}", path.display()), e))
            }
            Err(e) => return Err(self.refused(LAYOUT_FILE, e)),
        };
        #[derive(serde::Deserialize)]
        struct Layout {
            #[serde(rename = "imageLayoutVersion")]
            version: String,
        }
        let layout: Layout = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        if !layout.version.starts_with("1.") {
            return Err(self.not_a_layout(format!(
                "layout version {} is not supported (1.x is)",
                layout.version
            )));
        }
        self.read_index().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    #[test]
    fn creates_and_reopens() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b/store");
        let s = Store::open(&dir).unwrap();
        assert_eq!(fs::read(dir.join("oci-layout")).unwrap(), LAYOUT_JSON);
        assert!(dir.join("blobs/sha256").is_dir());
        assert!(s.list().unwrap().is_empty());
        assert!(
            !dir.join(".jbuild").exists(),
            "opening does not create jbuild's directory"
        );
        let before = fs::read(dir.join("index.json")).unwrap();
        Store::open(&dir).unwrap();
        Store::open_existing(&dir).unwrap();
        assert_eq!(fs::read(dir.join("index.json")).unwrap(), before);
    }

    #[test]
    fn refuses_what_is_not_a_layout() {
        let t = tempfile::tempdir().unwrap();
        fs::write(t.path().join("notes.txt"), "mine").unwrap();
        let err = Store::open(t.path()).unwrap_err();
        assert!(matches!(err, StoreError::NotALayout { .. }), "{err}");
        assert!(err.to_string().contains("notes.txt"), "{err}");
        assert!(!t.path().join("oci-layout").exists());

        let file = t.path().join("notes.txt");
        assert!(matches!(
            Store::open(&file),
            Err(StoreError::NotALayout { .. })
        ));
        assert!(matches!(
            Store::open_existing(&t.path().join("none")),
            Err(StoreError::NotALayout { .. })
        ));

        let v2 = t.path().join("v2");
        fs::create_dir(&v2).unwrap();
        fs::write(v2.join("oci-layout"), r#"{"imageLayoutVersion":"2.0.0"}"#).unwrap();
        assert!(matches!(
            Store::open(&v2),
            Err(StoreError::NotALayout { .. })
        ));
    }

    #[test]
    fn finishes_an_interrupted_creation() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("blobs/sha256")).unwrap();
        fs::write(t.path().join("index.json"), "{").unwrap();
        Store::open(t.path()).unwrap();
        assert!(t.path().join("oci-layout").exists());
    }

    #[test]
    fn finishes_a_creation_that_lost_its_index_but_not_a_layout_with_blobs() {
        let t = tempfile::tempdir().unwrap();
        // What a crash before the creation's one directory sync may keep.
        fs::create_dir_all(t.path().join("blobs/sha256")).unwrap();
        fs::write(t.path().join("oci-layout"), LAYOUT_JSON).unwrap();
        assert!(
            Store::open_existing(t.path()).is_err(),
            "reading never writes"
        );
        let s = Store::open(t.path()).unwrap();
        assert!(s.list().unwrap().is_empty());
        assert!(t.path().join("index.json").is_file());

        // With a blob it is not an interrupted creation: left as it is.
        let u = tempfile::tempdir().unwrap();
        fs::create_dir_all(u.path().join("blobs/sha256")).unwrap();
        fs::write(u.path().join("oci-layout"), LAYOUT_JSON).unwrap();
        let blob = u.path().join("blobs/sha256").join(Digest::of(b"x").hex());
        fs::write(blob, b"x").unwrap();
        let err = Store::open(u.path()).unwrap_err();
        assert!(matches!(err, StoreError::NotALayout { .. }), "{err}");
        assert!(!u.path().join("index.json").exists());
    }

    #[test]
    fn corrupt_index_is_reported_not_replaced() {
        let t = tempfile::tempdir().unwrap();
        Store::open(t.path()).unwrap();
        fs::write(t.path().join("index.json"), b"{\"schemaVersion\":2,\"manif").unwrap();
        let err = Store::open(t.path()).unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("index.json"), "{err}");
        assert_eq!(
            fs::read(t.path().join("index.json")).unwrap(),
            b"{\"schemaVersion\":2,\"manif"
        );
    }

    #[test]
    fn many_openers_of_one_new_layout_all_succeed_and_keep_tags() {
        for round in 0..300 {
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join(format!("layout-{round}"));
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            Store::open(&dir)
                        })
                    })
                    .collect();
                for h in handles {
                    if let Err(e) = h.join().unwrap() {
                        panic!("round {round}: {e}");
                    }
                }
            });
            assert_eq!(fs::read(dir.join("oci-layout")).unwrap(), LAYOUT_JSON);
        }
    }
}
