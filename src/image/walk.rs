//! The one walk of the image graph: from some roots (the entries of a
//! store's `index.json`, or the image a copy was asked for) through
//! indexes to manifests, and from manifests to their config, layers and
//! subject.
//!
//! The walk does no reading itself, so the same walk serves a store read
//! from disk (garbage collection, the in-use set, `jbuild check`) and a
//! transport read over the network (every copy): [`Walk::next_node`] says what
//! to visit; for a document the caller reads and parses it and hands it
//! back with [`Walk::expand`], which queues its children. Each digest is
//! visited once; [`Bounds`] refuse graphs no real image has before they
//! are read.

use std::collections::HashSet;

use oci_spec::image::Descriptor;

use super::media::{DocKind, Document, MAX_DOCUMENT};
use crate::digest::Digest;
use crate::digest::DigestError;
use crate::store::descriptor_digest;

/// Indexes nested deeper than this are refused (real images use one level).
pub const MAX_DEPTH: usize = 4;
/// Manifests and indexes in one image, at most.
pub const MAX_DOCUMENTS: usize = 1024;
/// Layers of one manifest, at most: each becomes a snapshot stacked on the
/// one below (docker stopped at 127; real images have a few dozen).
pub const MAX_LAYERS: usize = 1000;

/// How big a graph the walk accepts. A store's own index is walked
/// unbounded (its images were checked when they came in); an image from
/// outside is walked [`Bounds::image`].
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_depth: usize,
    pub max_documents: usize,
    pub max_layers: usize,
    /// The largest config a manifest may name (it is read whole later).
    pub max_config: u64,
}

impl Bounds {
    /// The bounds for one image from outside.
    pub const fn image() -> Bounds {
        Bounds {
            max_depth: MAX_DEPTH,
            max_documents: MAX_DOCUMENTS,
            max_layers: MAX_LAYERS,
            max_config: MAX_DOCUMENT,
        }
    }

    /// No bounds (a store's own index).
    pub const fn none() -> Bounds {
        Bounds {
            max_depth: usize::MAX,
            max_documents: usize::MAX,
            max_layers: usize::MAX,
            max_config: u64::MAX,
        }
    }
}

/// What a node of the graph is to the document that named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A root, or an index's entry: a manifest or an index (or, in a
    /// damaged or foreign graph, something else).
    Entry,
    /// A manifest's config.
    Config,
    /// A manifest's layer.
    Layer,
    /// A manifest's `subject` (a referrer keeps it alive).
    Subject,
}

/// One node to visit.
#[derive(Debug, Clone)]
pub struct Node {
    pub desc: Descriptor,
    pub digest: Digest,
    pub role: Role,
    /// Indexes above it (a root has depth 0).
    pub depth: usize,
    /// The root it was first reached from (its position among the roots).
    pub root: usize,
}

impl Node {
    /// Whether the node is a manifest or an index, which the caller reads
    /// and hands to [`Walk::expand`].
    pub fn is_document(&self) -> bool {
        DocKind::of(self.desc.media_type()).is_some()
    }
}

/// Why a graph is refused.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    /// A descriptor whose digest jbuild cannot use.
    #[error("descriptor {digest}: {source}")]
    Descriptor {
        digest: String,
        #[source]
        source: DigestError,
    },
    /// The graph is beyond [`Bounds`]; `reason` says which.
    #[error("{0}")]
    TooLarge(String),
}

/// A walk in progress. See the module docs.
pub struct Walk {
    todo: Vec<Node>,
    seen: HashSet<Digest>,
    bounds: Bounds,
    documents: usize,
}

impl Walk {
    /// A walk from `roots`, in their order.
    pub fn new(
        roots: impl IntoIterator<Item = Descriptor>,
        bounds: Bounds,
    ) -> Result<Walk, WalkError> {
        let mut todo = Vec::new();
        for (i, desc) in roots.into_iter().enumerate() {
            todo.push(node(desc, Role::Entry, 0, i)?);
        }
        todo.reverse();
        Ok(Walk {
            todo,
            seen: HashSet::new(),
            bounds,
            documents: 0,
        })
    }

    /// The next node not visited yet, parents before their children.
    /// A document counts against [`Bounds::max_documents`] here.
    pub fn next_node(&mut self) -> Result<Option<Node>, WalkError> {
        while let Some(n) = self.todo.pop() {
            if !self.seen.insert(n.digest.clone()) {
                continue;
            }
            if n.is_document() {
                if self.documents == self.bounds.max_documents {
                    return Err(WalkError::TooLarge(format!(
                        "the image has more than {} manifests",
                        self.bounds.max_documents
                    )));
                }
                self.documents += 1;
            }
            return Ok(Some(n));
        }
        Ok(None)
    }

    /// Queues what `doc`, the document at `parent`, names.
    pub fn expand(&mut self, parent: &Node, doc: &Document) -> Result<(), WalkError> {
        let mut children = Vec::new();
        match doc {
            Document::Index(index) => {
                if parent.depth == self.bounds.max_depth {
                    return Err(WalkError::TooLarge(format!(
                        "indexes are nested more than {} deep",
                        self.bounds.max_depth
                    )));
                }
                for m in index.manifests() {
                    children.push(node(m.clone(), Role::Entry, parent.depth + 1, parent.root)?);
                }
            }
            Document::Manifest(manifest) => {
                if manifest.layers().len() > self.bounds.max_layers {
                    return Err(WalkError::TooLarge(format!(
                        "it has {} layers; jbuild takes images of at most {} layers",
                        manifest.layers().len(),
                        self.bounds.max_layers
                    )));
                }
                if manifest.config().size() > self.bounds.max_config {
                    return Err(WalkError::TooLarge(format!(
                        "its config is {} bytes; jbuild reads configs of at most {} MiB",
                        manifest.config().size(),
                        self.bounds.max_config >> 20
                    )));
                }
                let depth = parent.depth;
                children.push(node(
                    manifest.config().clone(),
                    Role::Config,
                    depth,
                    parent.root,
                )?);
                for l in manifest.layers() {
                    children.push(node(l.clone(), Role::Layer, depth, parent.root)?);
                }
                if let Some(s) = manifest.subject() {
                    children.push(node(s.clone(), Role::Subject, depth, parent.root)?);
                }
            }
        }
        // Popped from the end: reversed, they are visited in document order.
        self.todo.extend(children.into_iter().rev());
        Ok(())
    }

    /// Whether `digest` has been visited.
    pub fn visited(&self, digest: &Digest) -> bool {
        self.seen.contains(digest)
    }

    /// Every digest visited so far.
    pub fn into_visited(self) -> HashSet<Digest> {
        self.seen
    }
}

fn node(desc: Descriptor, role: Role, depth: usize, root: usize) -> Result<Node, WalkError> {
    let digest = descriptor_digest(&desc).map_err(|source| WalkError::Descriptor {
        digest: desc.digest().to_string(),
        source,
    })?;
    Ok(Node {
        desc,
        digest,
        role,
        depth,
        root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{canonical_json, oci_digest};
    use oci_spec::image::{ImageIndexBuilder, ImageManifestBuilder, MediaType};

    fn desc(mt: MediaType, bytes: &[u8]) -> Descriptor {
        Descriptor::new(mt, bytes.len() as u64, oci_digest(&Digest::of(bytes)))
    }

    #[test]
    fn visits_each_digest_once_parents_first() {
        let config = desc(MediaType::ImageConfig, b"{}");
        let layer = desc(MediaType::ImageLayerGzip, b"layer");
        let m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .media_type(MediaType::ImageManifest)
            .config(config.clone())
            .layers(vec![layer.clone(), layer.clone()])
            .build()
            .unwrap();
        let m_bytes = canonical_json(&m);
        let m_desc = desc(MediaType::ImageManifest, &m_bytes);
        let i = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![m_desc.clone(), m_desc.clone()])
            .build()
            .unwrap();
        let i_desc = desc(MediaType::ImageIndex, &canonical_json(&i));
        let mut w = Walk::new([i_desc, m_desc], Bounds::image()).unwrap();
        let mut order = Vec::new();
        while let Some(n) = w.next_node().unwrap() {
            order.push((n.role, n.depth));
            if n.desc.media_type() == &MediaType::ImageIndex {
                w.expand(&n, &Document::Index(Box::new(i.clone()))).unwrap();
            } else if n.is_document() {
                w.expand(&n, &Document::Manifest(Box::new(m.clone())))
                    .unwrap();
            }
        }
        assert_eq!(
            order,
            [
                (Role::Entry, 0),
                (Role::Entry, 1),
                (Role::Config, 1),
                (Role::Layer, 1)
            ]
        );
    }

    #[test]
    fn refuses_deep_nesting_and_too_many_layers() {
        let layer = desc(MediaType::ImageLayerGzip, b"layer");
        let m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .config(desc(MediaType::ImageConfig, b"{}"))
            .layers(vec![layer; 3])
            .build()
            .unwrap();
        let bounds = Bounds {
            max_layers: 2,
            ..Bounds::image()
        };
        let mut w = Walk::new([desc(MediaType::ImageManifest, b"m")], bounds).unwrap();
        let n = w.next_node().unwrap().unwrap();
        let err = w.expand(&n, &Document::Manifest(Box::new(m))).unwrap_err();
        assert!(err.to_string().contains("3 layers"), "{err}");

        let i = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![])
            .build()
            .unwrap();
        let bounds = Bounds {
            max_depth: 0,
            ..Bounds::image()
        };
        let mut w = Walk::new([desc(MediaType::ImageIndex, b"i")], bounds).unwrap();
        let n = w.next_node().unwrap().unwrap();
        let err = w.expand(&n, &Document::Index(Box::new(i))).unwrap_err();
        assert!(err.to_string().contains("nested"), "{err}");
    }
}
