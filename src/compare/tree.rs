//! An image's root as its layers make it, read from the layer blobs
//! without unpacking anything: a sorted map from each path to what is
//! there (type, mode, owner, size, content digest, flags).
//!
//! Layers are applied bottom up as an unpacker applies them (the OCI
//! image spec's "Applying Changesets"): within a layer, whiteouts
//! (`.wh.<name>`) and opaque markers (`.wh..wh..opq`) remove what the
//! layers *below* had, then the layer's own entries land, an entry
//! replacing a directory with something else taking the directory's
//! contents with it. A hard link is the file it links to (its content,
//! size and metadata as the unpacked tree would show them).
//!
//! Layers are hostile input: every header is checked by the layer
//! reader, a hard link must name a file already in the root, and the
//! map holds at most [`MAX_ENTRIES`] paths, so memory stays bounded
//! (about 200 bytes an entry) whatever an image claims.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};

use sha2::{Digest as _, Sha256};

use crate::image::LoadedImage;
use crate::layer::{self, header, LayerError, TarReader};
use crate::sbom::root::normalize;
use crate::store::Store;

use super::CompareError;

/// The most paths one image's root may have here. A FreeBSD base system
/// has about 30,000; an image with a large ports tree a few hundred
/// thousand.
pub const MAX_ENTRIES: usize = 2_000_000;

/// What kind of file a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Directory,
    Symlink,
    Char,
    Block,
    Fifo,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Directory => "directory",
            Kind::Symlink => "symlink",
            Kind::Char => "character device",
            Kind::Block => "block device",
            Kind::Fifo => "fifo",
        }
    }
}

/// One path of the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: Kind,
    /// Permission bits with setuid, setgid and sticky (`0o7777`).
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    /// Content bytes of a file; 0 for anything else.
    pub size: u64,
    /// The sha256 of a file's content.
    pub content: Option<[u8; 32]>,
    /// A symlink's target.
    pub target: Option<Box<str>>,
    /// A device's major and minor numbers.
    pub device: Option<(u64, u64)>,
    /// FreeBSD file flags (`SCHILY.fflags`), as the layer writes them.
    pub flags: Option<Box<str>>,
}

/// The root of `image`: every path (relative, `/`-separated, without a
/// leading `/`) and what is there.
pub fn root(
    store: &Store,
    image: &LoadedImage,
    name: &str,
) -> Result<BTreeMap<String, Entry>, CompareError> {
    let mut tree = BTreeMap::new();
    for desc in image.manifest.layers() {
        let digest = crate::store::descriptor_digest(desc).map_err(|source| {
            CompareError::Image(crate::image::ImageError::Digest {
                image: name.to_string(),
                source,
            })
        })?;
        let layer_error = |source: LayerError| CompareError::Layer {
            image: name.to_string(),
            layer: digest.to_string(),
            source,
        };
        let blob = store
            .open_blob(&digest)
            .map_err(|source| CompareError::Store {
                image: name.to_string(),
                source,
            })?;
        let stream = layer::decompress(desc.media_type().as_ref(), blob).map_err(layer_error)?;
        apply(&mut tree, stream, name).map_err(|e| match e {
            Step::Layer(source) => layer_error(source),
            Step::Compare(e) => e,
        })?;
    }
    Ok(tree)
}

enum Step {
    Layer(LayerError),
    Compare(CompareError),
}

impl From<LayerError> for Step {
    fn from(e: LayerError) -> Step {
        Step::Layer(e)
    }
}

/// One layer applied to `tree`.
fn apply<R: Read>(tree: &mut BTreeMap<String, Entry>, stream: R, name: &str) -> Result<(), Step> {
    let mut tar = TarReader::new(stream);
    let mut own: Vec<(String, Entry)> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    let mut removed: Vec<String> = Vec::new();
    let mut opaque: Vec<String> = Vec::new();
    while let Some(h) = tar.next()? {
        let Some(path) = normalize(&h.path) else {
            continue;
        };
        let (dir, base) = match path.rsplit_once('/') {
            Some((d, b)) => (d.to_string(), b),
            None => (String::new(), path.as_str()),
        };
        if base == ".wh..wh..opq" {
            opaque.push(dir);
            continue;
        }
        if let Some(gone) = base.strip_prefix(".wh.") {
            removed.push(join(&dir, gone));
            continue;
        }
        let entry = match h.typeflag {
            header::HARD_LINK => {
                let Some(target) = normalize(&h.linkname) else {
                    return Err(Step::Compare(CompareError::BadLink {
                        image: name.to_string(),
                        path: format!("/{path}"),
                    }));
                };
                // The file it names in this layer, else in the root below.
                let found = at
                    .get(&target)
                    .map(|&i| &own[i].1)
                    .or_else(|| tree.get(&target))
                    .filter(|e| e.kind == Kind::File)
                    .cloned();
                found.ok_or_else(|| {
                    Step::Compare(CompareError::BadLink {
                        image: name.to_string(),
                        path: format!("/{path}"),
                    })
                })?
            }
            _ => entry_of(&h, &mut tar)?,
        };
        if tree.len() + own.len() >= MAX_ENTRIES {
            return Err(Step::Compare(CompareError::TooManyEntries {
                image: name.to_string(),
                max: MAX_ENTRIES,
            }));
        }
        match at.get(&path) {
            // A later entry for the same path wins, as an unpacker
            // overwrites.
            Some(&i) => own[i].1 = entry,
            None => {
                at.insert(path.clone(), own.len());
                own.push((path, entry));
            }
        }
    }
    for dir in opaque {
        remove_below(tree, &dir);
    }
    for path in removed {
        tree.remove(&path);
        remove_below(tree, &path);
    }
    for (path, entry) in own {
        if entry.kind != Kind::Directory {
            // A file where a directory was takes the directory's tree.
            remove_below(tree, &path);
        }
        tree.insert(path, entry);
    }
    Ok(())
}

fn entry_of<R: Read>(h: &layer::TarHeader, tar: &mut TarReader<R>) -> Result<Entry, Step> {
    let kind = match h.typeflag {
        header::REGULAR | header::CONTIGUOUS => Kind::File,
        header::DIRECTORY => Kind::Directory,
        header::SYMLINK => Kind::Symlink,
        header::CHAR_DEVICE => Kind::Char,
        header::BLOCK_DEVICE => Kind::Block,
        _ => Kind::Fifo,
    };
    let content = if kind == Kind::File {
        let mut hash = Hashing(Sha256::new());
        io::copy(&mut tar.content(), &mut hash).map_err(LayerError::Read)?;
        Some(hash.0.finalize().into())
    } else {
        None
    };
    Ok(Entry {
        kind,
        mode: h.mode & 0o7777,
        uid: h.uid,
        gid: h.gid,
        size: if kind == Kind::File { h.size } else { 0 },
        content,
        target: (kind == Kind::Symlink).then(|| {
            String::from_utf8_lossy(&h.linkname)
                .into_owned()
                .into_boxed_str()
        }),
        device: matches!(kind, Kind::Char | Kind::Block).then_some((h.devmajor, h.devminor)),
        flags: h.fflags.clone().map(String::into_boxed_str),
    })
}

struct Hashing(Sha256);

impl Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Removes every path strictly below `dir` (everything, for the root).
fn remove_below(tree: &mut BTreeMap<String, Entry>, dir: &str) {
    if dir.is_empty() {
        tree.clear();
        return;
    }
    let prefix = format!("{dir}/");
    let below: Vec<String> = tree
        .range(prefix.clone()..)
        .take_while(|(k, _)| k.starts_with(&prefix))
        .map(|(k, _)| k.clone())
        .collect();
    for k in below {
        tree.remove(&k);
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(n: u8) -> Entry {
        Entry {
            kind: Kind::File,
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 1,
            content: Some([n; 32]),
            target: None,
            device: None,
            flags: None,
        }
    }

    #[test]
    fn removing_below_a_directory_keeps_its_neighbours() {
        let mut t = BTreeMap::new();
        for p in ["a", "a-b", "a/x", "a/y/z", "ab", "b"] {
            t.insert(p.to_string(), file(0));
        }
        remove_below(&mut t, "a");
        assert_eq!(t.keys().collect::<Vec<_>>(), ["a", "a-b", "ab", "b"]);
        remove_below(&mut t, "");
        assert!(t.is_empty());
    }
}
