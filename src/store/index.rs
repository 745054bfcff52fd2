//! `index.json`: which images the store holds, and under which names.

use std::collections::BTreeSet;
use std::io::Read;

use oci_spec::image::{Descriptor, ImageIndex};

use super::index_file::Written;
use super::name::ImageName;
use super::{descriptor_digest, Store, StoreError, MAX_INDEX, REF_NAME};
use crate::fsutil::{record_sync, sync_dir};

/// Shortest digest prefix [`Store::resolve`] accepts.
const MIN_PREFIX: usize = 6;

/// What [`Store::lookup`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The image: a manifest or an index (a manifest list).
    pub descriptor: Descriptor,
    /// The ref name it was found by; `None` when it was found by its
    /// digest (or a prefix of it), which names the image, not one name.
    pub name: Option<String>,
}

impl Found {
    fn by_digest(d: &Descriptor) -> Found {
        Found {
            descriptor: d.clone(),
            name: None,
        }
    }
}

/// How an entry of `index.json` is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefName {
    /// A name in jbuild's normalised form (`[registry/]repository:tag`).
    Image(ImageName),
    /// A ref name another tool wrote (`skopeo copy … oci:STORE:v1` gives `v1`).
    Other(String),
    /// No ref name: kept only so the image stays reachable.
    Untagged,
}

impl std::fmt::Display for RefName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RefName::Image(n) => write!(f, "{n}"),
            RefName::Other(s) => f.write_str(s),
            RefName::Untagged => f.write_str("<none>"),
        }
    }
}

impl Store {
    /// Reads and parses `index.json`, at most [`MAX_INDEX`] bytes of a
    /// regular file (a symlink, a FIFO or a device there is refused at
    /// once). A file that does not parse is reported as corrupt; nothing
    /// here ever replaces it.
    pub fn read_index(&self) -> Result<ImageIndex, StoreError> {
        let (file, _) = self.open_index()?;
        // Parsed as it is read, never held whole beside what it parses
        // to; bounded again in case it grows meanwhile (the cut shows as
        // an early end).
        let reader = std::io::BufReader::with_capacity(64 << 10, file.take(MAX_INDEX + 1));
        serde_json::from_reader(reader).map_err(|e| match e.io_error_kind() {
            Some(kind) => StoreError::io(
                format!("cannot read {}", self.index_path().display()),
                kind.into(),
            ),
            None => StoreError::Corrupt {
                path: self.index_path(),
                reason: e.to_string(),
            },
        })
    }

    /// Read-modify-write of the index's descriptors under the index lock.
    /// The result is sorted (named entries by name, then untagged ones by
    /// digest) and written atomically; if `f` fails, nothing is written.
    pub fn update_index<R>(
        &self,
        f: impl FnOnce(&mut Vec<Descriptor>) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        let _lock = self.lock_file("index.lock", true)?;
        let mut index = self.read_index_file()?;
        let result = f(&mut index.manifests)?;
        index.manifests.sort_by_cached_key(|d| {
            (
                ref_name(d).is_none(),
                ref_name(d).map(str::to_owned),
                d.digest().to_string(),
            )
        });
        let path = self.index_path();
        // Nothing changed (a rebuild re-tagging the same image): no write,
        // no fsync. Past MAX_INDEX: never written, as every reader would
        // refuse it, `rmi` included.
        let Written::New(tmp) = index.write(&self.root, &path)? else {
            return Ok(result);
        };
        drop(index);
        let cannot =
            |e: std::io::Error| StoreError::io(format!("cannot write {}", path.display()), e);
        if self.syncs() {
            // The blobs renamed into place since the last change (blob
            // commits leave this to here) become durable before anything
            // names them.
            let blobs = self.root.join("blobs/sha256");
            sync_dir(&blobs)
                .map_err(|e| StoreError::io(format!("cannot sync {}", blobs.display()), e))?;
            tmp.as_file().sync_all().map_err(cannot)?;
            record_sync(tmp.path());
        }
        tmp.persist(&path).map_err(|e| cannot(e.error))?;
        if self.syncs() {
            sync_dir(&self.root).map_err(cannot)?;
        }
        Ok(result)
    }

    /// Names `manifest` (a manifest or index descriptor) `name`, replacing
    /// whatever had that name. The digest part of `name`, if any, is not part
    /// of a tag and is ignored.
    pub fn tag(&self, name: &ImageName, manifest: &Descriptor) -> Result<(), StoreError> {
        self.tag_ref(&name.tagged(), manifest)
    }

    /// Like [`tag`](Store::tag) with a raw ref name, as `oci:DIR:REF` gives
    /// it. The ref must be one containers/image accepts.
    pub fn tag_ref(&self, reference: &str, manifest: &Descriptor) -> Result<(), StoreError> {
        if !valid_ref_name(reference) {
            return Err(StoreError::BadRefName(reference.to_string()));
        }
        descriptor_digest(manifest)?;
        let mut entry = manifest.clone();
        let mut annotations = entry.annotations().clone().unwrap_or_default();
        annotations.insert(REF_NAME.to_string(), reference.to_string());
        entry.set_annotations(Some(annotations));
        self.update_index(|manifests| {
            // An untagged entry for the same image only kept it reachable.
            manifests.retain(|d| {
                let name = ref_name(d);
                name != Some(reference) && !(name.is_none() && d.digest() == manifest.digest())
            });
            manifests.push(entry);
            Ok(())
        })
    }

    /// Adds `manifest` to the index without a name (so it stays reachable),
    /// unless the index already holds it.
    pub fn add_untagged(&self, manifest: &Descriptor) -> Result<(), StoreError> {
        descriptor_digest(manifest)?;
        self.update_index(|manifests| {
            if !manifests.iter().any(|d| d.digest() == manifest.digest()) {
                let mut entry = manifest.clone();
                if let Some(mut a) = entry.annotations().clone() {
                    a.remove(REF_NAME);
                    entry.set_annotations(Some(a).filter(|a| !a.is_empty()));
                }
                manifests.push(entry);
            }
            Ok(())
        })
    }

    /// Removes the untagged entry for `manifest`, if there is one (what
    /// [`add_untagged`](Store::add_untagged) added); names stay.
    pub fn remove_untagged(&self, manifest: &Descriptor) -> Result<(), StoreError> {
        self.update_index(|manifests| {
            manifests.retain(|d| ref_name(d).is_some() || d.digest() != manifest.digest());
            Ok(())
        })
    }

    /// Removes the name `name`; returns what it named.
    pub fn untag(&self, name: &ImageName) -> Result<Option<Descriptor>, StoreError> {
        self.untag_ref(&name.tagged())
    }

    /// Removes the raw ref name `reference`; returns what it named.
    pub fn untag_ref(&self, reference: &str) -> Result<Option<Descriptor>, StoreError> {
        self.update_index(|manifests| {
            let pos = manifests
                .iter()
                .position(|d| ref_name(d) == Some(reference));
            Ok(pos.map(|i| manifests.remove(i)))
        })
    }

    /// Finds an image by what a user typed, as docker would
    /// ([`lookup`](Store::lookup)); `None` when nothing matches.
    pub fn resolve(&self, name_or_digest: &str) -> Result<Option<Descriptor>, StoreError> {
        Ok(self.lookup(name_or_digest)?.map(|f| f.descriptor))
    }

    /// [`lookup`](Store::lookup), with a typed error when nothing matches.
    pub fn find(&self, name_or_digest: &str) -> Result<Found, StoreError> {
        self.lookup(name_or_digest)?
            .ok_or_else(|| StoreError::NotFound(name_or_digest.to_string()))
    }

    /// Finds an image by what a user typed, in this order:
    ///
    /// 1. a raw ref name, exactly (`v1`, as `skopeo copy … oci:STORE:v1`
    ///    writes it);
    /// 2. an image name, compared as docker resolves names
    ///    ([`ImageName::docker_tagged`]): `alpine`, `library/alpine` and
    ///    `docker.io/library/alpine:latest` are one name; `base` is
    ///    `base:latest`; `localhost/x` and `host:5000/x` are themselves;
    /// 3. `name@digest`, a digest (`sha256:…`) or a prefix of one of at
    ///    least 6 hex digits (with or without `sha256:`): the image ID
    ///    (`--iidfile` writes the manifest digest).
    ///
    /// Names win over prefixes: `cafe01` is first looked up as a name. A
    /// prefix (or a name spelled so that two stored names match it) that
    /// fits more than one image is [`StoreError::Ambiguous`], listing them.
    pub fn lookup(&self, name_or_digest: &str) -> Result<Option<Found>, StoreError> {
        let index = self.read_index()?;
        let manifests = index.manifests();
        let s = name_or_digest;
        let by_name = |d: &Descriptor| Found {
            descriptor: d.clone(),
            name: ref_name(d).map(str::to_owned),
        };
        if let Some(d) = manifests.iter().find(|d| ref_name(d) == Some(s)) {
            return Ok(Some(by_name(d)));
        }
        if let Ok(name) = ImageName::parse(s) {
            if let Some(digest) = name.digest() {
                return Ok(manifests
                    .iter()
                    .find(|d| d.digest().to_string() == digest.to_string())
                    .map(Found::by_digest));
            }
            let tagged = name.tagged();
            if let Some(d) = manifests.iter().find(|d| ref_name(d) == Some(&tagged)) {
                return Ok(Some(by_name(d)));
            }
            let wanted = name.docker_tagged();
            let mut same: Vec<&Descriptor> = manifests
                .iter()
                .filter(|d| {
                    ref_name(d)
                        .and_then(|r| ImageName::parse(r).ok())
                        .is_some_and(|n| n.digest().is_none() && n.docker_tagged() == wanted)
                })
                .collect();
            // Two spellings of one name on the same image are one answer.
            let first = same.first().map(|d| d.digest().clone());
            if same.iter().all(|d| Some(d.digest()) == first.as_ref()) {
                same.truncate(1);
            }
            match same.as_slice() {
                [] => {}
                [d] => return Ok(Some(by_name(d))),
                several => {
                    return Err(StoreError::Ambiguous {
                        reference: s.to_string(),
                        candidates: several
                            .iter()
                            .map(|d| format!("{} ({})", ref_name(d).unwrap_or(""), d.digest()))
                            .collect(),
                    })
                }
            }
        }
        let hex = s.strip_prefix("sha256:").unwrap_or(s);
        if hex.len() < MIN_PREFIX
            || hex.len() > 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Ok(None);
        }
        let matching: BTreeSet<String> = manifests
            .iter()
            .filter_map(|d| d.as_digest_sha256())
            .filter(|h| h.starts_with(hex))
            .map(str::to_owned)
            .collect();
        match matching.len() {
            0 => Ok(None),
            1 => Ok(manifests
                .iter()
                .find(|d| d.as_digest_sha256() == matching.first().map(|h| h.as_str()))
                .map(Found::by_digest)),
            _ => Err(StoreError::Ambiguous {
                reference: s.to_string(),
                candidates: matching
                    .iter()
                    .map(|h| {
                        let names = names_of(manifests, h);
                        if names.is_empty() {
                            format!("sha256:{h}")
                        } else {
                            format!("sha256:{h} ({})", names.join(", "))
                        }
                    })
                    .collect(),
            }),
        }
    }

    /// Every ref name of the image `digest` names, sorted.
    pub fn names_of(&self, digest: &oci_spec::image::Digest) -> Result<Vec<String>, StoreError> {
        let index = self.read_index()?;
        let manifests = index.manifests();
        Ok(digest
            .to_string()
            .strip_prefix("sha256:")
            .map(|h| names_of(manifests, h))
            .unwrap_or_default())
    }

    /// Every entry of the index, in index order (named first, by name).
    pub fn list(&self) -> Result<Vec<(RefName, Descriptor)>, StoreError> {
        let index = self.read_index()?;
        Ok(index
            .manifests()
            .iter()
            .map(|d| {
                let name = match ref_name(d) {
                    None => RefName::Untagged,
                    Some(r) => match ImageName::parse(r) {
                        Ok(n) if n.digest().is_none() && n.tagged() == r => RefName::Image(n),
                        _ => RefName::Other(r.to_string()),
                    },
                };
                (name, d.clone())
            })
            .collect())
    }
}

/// The ref names of the entries whose digest is `sha256:<hex>`, sorted.
fn names_of(manifests: &[Descriptor], hex: &str) -> Vec<String> {
    let mut names: Vec<String> = manifests
        .iter()
        .filter(|d| d.as_digest_sha256() == Some(hex))
        .filter_map(|d| ref_name(d).map(str::to_owned))
        .collect();
    names.sort();
    names
}

fn ref_name(d: &Descriptor) -> Option<&str> {
    d.annotations().as_ref()?.get(REF_NAME).map(String::as_str)
}

/// containers/image's `refRegexp`: components of alphanumerics joined by one
/// of `-._:@+` or by `--`, separated by `/`. skopeo refuses other refs.
pub(crate) fn valid_ref_name(r: &str) -> bool {
    !r.is_empty()
        && r.split('/').all(|c| {
            let b = c.as_bytes();
            if b.is_empty()
                || !b[0].is_ascii_alphanumeric()
                || !b[b.len() - 1].is_ascii_alphanumeric()
            {
                return false;
            }
            c.split(|ch: char| ch.is_ascii_alphanumeric()).all(|sep| {
                sep.is_empty() || sep == "--" || (sep.len() == 1 && "-._:@+".contains(sep))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;
    use crate::store::oci_digest;
    use oci_spec::image::MediaType;

    fn manifest(n: u8) -> Descriptor {
        Descriptor::new(
            MediaType::ImageManifest,
            100 + n as u64,
            oci_digest(&Digest::of(&[n])),
        )
    }

    #[test]
    fn ref_names_follow_containers_image() {
        for ok in [
            "a",
            "a:1",
            "localhost:5000/x/y:1.0",
            "a--b",
            "a@sha256:ab",
            "A+b",
        ] {
            assert!(valid_ref_name(ok), "{ok}");
        }
        for bad in ["", "a/", ":a", "a::b", "a b", "a---b", "a/../b"] {
            assert!(!valid_ref_name(bad), "{bad}");
        }
    }

    #[test]
    fn tag_untag_resolve() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let (m1, m2) = (manifest(1), manifest(2));
        let base = ImageName::parse("jails/base").unwrap();
        s.tag(&base, &m1).unwrap();
        s.tag(
            &ImageName::parse("localhost:5000/jails/base:14.1").unwrap(),
            &m2,
        )
        .unwrap();
        assert_eq!(
            s.resolve("jails/base").unwrap(),
            s.resolve("jails/base:latest").unwrap()
        );
        assert_eq!(
            s.resolve("jails/base").unwrap().unwrap().digest(),
            m1.digest()
        );
        let d2 = descriptor_digest(&m2).unwrap();
        assert_eq!(
            s.resolve("localhost:5000/jails/base:14.1")
                .unwrap()
                .unwrap()
                .digest(),
            m2.digest()
        );
        assert_eq!(
            s.resolve(&d2.to_string()).unwrap().unwrap().digest(),
            m2.digest()
        );
        assert_eq!(
            s.resolve(&d2.hex()[..6]).unwrap().unwrap().digest(),
            m2.digest()
        );
        assert_eq!(
            s.resolve(&format!("sha256:{}", &d2.hex()[..8]))
                .unwrap()
                .unwrap()
                .digest(),
            m2.digest()
        );
        assert_eq!(
            s.resolve(&d2.hex()[..5]).unwrap(),
            None,
            "too short to be a prefix"
        );
        assert_eq!(
            s.resolve(&format!("jails/base@{d2}"))
                .unwrap()
                .unwrap()
                .digest(),
            m2.digest()
        );
        assert_eq!(s.resolve("nope").unwrap(), None);

        // Retagging replaces, and index.json stays sorted by name.
        s.tag(&base, &m2).unwrap();
        assert_eq!(
            s.resolve("jails/base").unwrap().unwrap().digest(),
            m2.digest()
        );
        let names: Vec<RefName> = s.list().unwrap().into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            vec![
                RefName::Image(ImageName::parse("jails/base:latest").unwrap()),
                RefName::Image(ImageName::parse("localhost:5000/jails/base:14.1").unwrap()),
            ]
        );
        let idx = std::fs::read_to_string(t.path().join("index.json")).unwrap();
        assert!(
            idx.contains(r#""org.opencontainers.image.ref.name":"jails/base:latest""#),
            "{idx}"
        );

        assert_eq!(s.untag(&base).unwrap().unwrap().digest(), m2.digest());
        assert_eq!(s.untag(&base).unwrap(), None);
        assert_eq!(s.resolve("jails/base").unwrap(), None);
    }

    #[test]
    fn ambiguous_prefix_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        // Find two digests sharing their first 6 hex digits.
        let mut seen = std::collections::HashMap::new();
        let (a, b) = (0u32..)
            .find_map(|i| {
                let d = Digest::of(&i.to_le_bytes());
                seen.insert(d.hex()[..6].to_string(), i).map(|j| (j, i))
            })
            .unwrap();
        let desc = |i: u32| {
            Descriptor::new(
                MediaType::ImageManifest,
                1,
                oci_digest(&Digest::of(&i.to_le_bytes())),
            )
        };
        s.tag_ref("a", &desc(a)).unwrap();
        s.tag_ref("b", &desc(b)).unwrap();
        let prefix = &Digest::of(&a.to_le_bytes()).hex()[..6].to_string();
        let err = s.resolve(prefix).unwrap_err();
        assert!(
            matches!(&err, StoreError::Ambiguous { candidates, .. } if candidates.len() == 2),
            "{err}"
        );
        // The same image under two names is not ambiguous.
        s.tag_ref("c", &desc(a)).unwrap();
        let longer = &Digest::of(&a.to_le_bytes()).hex()[..20].to_string();
        assert!(s.resolve(longer).unwrap().is_some());
    }

    #[test]
    fn untagged_entries_and_foreign_refs() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        s.add_untagged(&manifest(1)).unwrap();
        s.add_untagged(&manifest(1)).unwrap();
        s.tag_ref("v1", &manifest(2)).unwrap();
        assert!(matches!(
            s.tag_ref("bad ref", &manifest(2)),
            Err(StoreError::BadRefName(_))
        ));
        let list = s.list().unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].0, RefName::Other("v1".into()));
        assert_eq!(list[1].0, RefName::Untagged);
        // Tagging the untagged image replaces its untagged entry.
        s.tag_ref("v0", &manifest(1)).unwrap();
        assert_eq!(s.list().unwrap().len(), 2);
        assert_eq!(
            s.resolve("v1").unwrap().unwrap().digest(),
            manifest(2).digest()
        );
    }

    #[test]
    fn concurrent_tagging_loses_nothing() {
        let t = tempfile::tempdir().unwrap();
        Store::open(t.path()).unwrap();
        std::thread::scope(|scope| {
            for thread in 0..4u8 {
                let dir = t.path().to_path_buf();
                scope.spawn(move || {
                    // Each thread opens the store itself, as another process would.
                    let s = Store::open(&dir).unwrap();
                    for i in 0..50u8 {
                        let name = ImageName::parse(&format!("t{thread}/img:{i}")).unwrap();
                        s.tag(&name, &manifest(thread * 50 + i)).unwrap();
                    }
                });
            }
        });
        let s = Store::open(t.path()).unwrap();
        let list = s.list().unwrap();
        assert_eq!(list.len(), 200);
        assert!(list.iter().all(|(n, _)| matches!(n, RefName::Image(_))));
        assert_eq!(
            s.resolve("t3/img:49").unwrap().unwrap().digest(),
            manifest(199).digest()
        );
    }
}
