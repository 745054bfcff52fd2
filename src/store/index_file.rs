//! `index.json` as [`Store::update_index`] reads and rewrites it, in the
//! memory its descriptors take and no more.
//!
//! Why not [`oci_spec::image::ImageIndex`] here: it lends its descriptors
//! only by reference, so changing them means a second copy, and writing it
//! in canonical form ([`super::canonical_json`]) builds a JSON tree of the
//! whole index and then its bytes. At [`MAX_INDEX`] (some 50,000 names)
//! that was about 200 MiB for one `tag`. Here the descriptors are parsed
//! as the file is read (never holding its bytes), changed in place, and
//! written straight to the temporary file that replaces the index, each
//! descriptor through `canonical_json` on its own: the same bytes the
//! whole index through `canonical_json` gives, keys in byte order.
//! Whether anything changed is told by the digest of what was read against
//! that of what would be written.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use oci_spec::image::{Descriptor, ImageIndex};
use serde_json::{Map, Value};

use super::json::canonical_json;
use super::{Store, StoreError, INDEX, MAX_INDEX};
use crate::digest::{Digest, HashingReader, HashingWriter};
use crate::fsutil::input::InputError;

/// The index as read: its descriptors apart from everything else.
pub(super) struct IndexFile {
    pub manifests: Vec<Descriptor>,
    rest: Map<String, Value>,
    /// The digest of the bytes read.
    read: Digest,
}

#[derive(serde::Deserialize)]
struct Parts {
    manifests: Vec<Descriptor>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// What [`IndexFile::write`] did.
pub(super) enum Written {
    /// The same bytes as were read: nothing to replace.
    Same,
    /// New bytes, in this temporary file beside the index.
    New(tempfile::NamedTempFile),
}

impl Store {
    /// Reads `index.json` as [`Store::read_index`] does (the same bound
    /// and checks: a regular file of at most [`MAX_INDEX`] bytes, an OCI
    /// index), for [`Store::update_index`].
    pub(super) fn read_index_file(&self) -> Result<IndexFile, StoreError> {
        let (file, _) = self.open_index()?;
        let corrupt = |reason: String| StoreError::Corrupt {
            path: self.index_path(),
            reason,
        };
        let mut reader =
            HashingReader::new(BufReader::with_capacity(64 << 10, file.take(MAX_INDEX + 1)));
        let parts: Parts =
            serde_json::from_reader(&mut reader).map_err(|e| match e.io_error_kind() {
                Some(kind) => StoreError::io(
                    format!("cannot read {}", self.index_path().display()),
                    kind.into(),
                ),
                None => corrupt(e.to_string()),
            })?;
        let (read, _, _) = reader.finish();
        // Everything but the descriptors, checked as an OCI index would be.
        let mut rest = parts.rest;
        rest.insert("manifests".into(), Value::Array(Vec::new()));
        serde_json::from_value::<ImageIndex>(Value::Object(rest.clone()))
            .map_err(|e| corrupt(e.to_string()))?;
        rest.remove("manifests");
        Ok(IndexFile {
            manifests: parts.manifests,
            rest,
            read,
        })
    }

    /// Opens `index.json` for reading: see [`Store::read_index`].
    pub(super) fn open_index(&self) -> Result<(std::fs::File, u64), StoreError> {
        self.within()
            .open(Path::new(INDEX), MAX_INDEX)
            .map_err(|e| match e {
                InputError::Missing => StoreError::NotALayout {
                    path: self.root.clone(),
                    reason: "it has no index.json".into(),
                },
                InputError::Io(e) => {
                    StoreError::io(format!("cannot read {}", self.index_path().display()), e)
                }
                e => self.refused(INDEX, e),
            })
    }
}

impl IndexFile {
    /// Writes the index in canonical form to a temporary file in `dir`
    /// (the layout), unless it is the same as was read; refused past
    /// [`MAX_INDEX`], which no reader would read back.
    pub fn write(&self, dir: &Path, index_path: &Path) -> Result<Written, StoreError> {
        let cannot =
            |e: io::Error| StoreError::io(format!("cannot write {}", index_path.display()), e);
        let mut tmp = tempfile::Builder::new()
            .prefix(".tmp-")
            .tempfile_in(dir)
            .map_err(cannot)?;
        let mut out = HashingWriter::new(BufWriter::with_capacity(64 << 10, tmp.as_file_mut()));
        self.write_to(&mut out).map_err(cannot)?;
        let (digest, size, buffered) = out.finish();
        buffered.into_inner().map_err(|e| cannot(e.into_error()))?;
        if size > MAX_INDEX {
            return Err(StoreError::IndexFull {
                path: index_path.to_path_buf(),
                size,
                max: MAX_INDEX,
            });
        }
        Ok(if digest == self.read {
            Written::Same
        } else {
            Written::New(tmp)
        })
    }

    /// The canonical bytes: an object whose keys come in byte order,
    /// compact, `manifests` one descriptor at a time.
    fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        let mut keys: Vec<&str> = self.rest.keys().map(String::as_str).collect();
        keys.push("manifests");
        keys.sort_unstable();
        out.write_all(b"{")?;
        for (i, key) in keys.into_iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":")?;
            match self.rest.get(key) {
                Some(v) => serde_json::to_writer(&mut *out, v)?,
                None => {
                    out.write_all(b"[")?;
                    for (j, d) in self.manifests.iter().enumerate() {
                        if j > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(&canonical_json(d))?;
                    }
                    out.write_all(b"]")?;
                }
            }
        }
        out.write_all(b"}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::oci_digest;
    use oci_spec::image::{ImageIndexBuilder, MediaType, Platform};

    #[test]
    fn the_same_bytes_as_the_whole_index_through_canonical_json() {
        let t = tempfile::tempdir().unwrap();
        let s = Store::open(t.path()).unwrap();
        let descs: Vec<Descriptor> = (0..5u8)
            .map(|i| {
                let mut d = Descriptor::new(
                    MediaType::ImageManifest,
                    10 + i as u64,
                    oci_digest(&Digest::of(&[i])),
                );
                let mut a = std::collections::HashMap::new();
                a.insert(super::super::REF_NAME.to_string(), format!("n{i}"));
                a.insert("z.other".to_string(), "v".to_string());
                d.set_annotations(Some(a));
                d.set_platform(Some(Platform::default()));
                d
            })
            .collect();
        let index = ImageIndexBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageIndex)
            .manifests(descs)
            .build()
            .unwrap();
        let whole = canonical_json(&index);
        std::fs::write(t.path().join("index.json"), &whole).unwrap();
        let file = s.read_index_file().unwrap();
        let mut mine = Vec::new();
        file.write_to(&mut mine).unwrap();
        assert_eq!(
            String::from_utf8(mine).unwrap(),
            String::from_utf8(whole).unwrap()
        );
        assert!(matches!(
            file.write(t.path(), &t.path().join("index.json")).unwrap(),
            Written::Same
        ));
    }
}
