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
    #[error("descriptor {digest}")]
    Descriptor {
        digest: String,
        #[source]
        source: DigestError,
    },
    /// The graph is beyond [`Bounds`]; `reason` says which.
    #[error("{0}")]
    TooLarge(String),
}

impl crate::blame::Blame for WalkError {
    /// An image's graph that is not one jbuild reads is the image's
    /// fault (the store's own damage is blamed by the caller: [`super::gc::GcError`]).
    fn is_user_error(&self) -> bool {
        true
    }
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
        for desc in roots {
            todo.push(node(desc, Role::Entry, 0)?);
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
        self.queue(parent, doc, None)
    }

    /// As [`Walk::expand`], but a child whose digest jbuild cannot use is
    /// left out instead of refusing the whole document; the errors say
    /// which were left out. For a reader that reports what it finds
    /// (`jbuild check`) rather than one that must reach everything.
    pub fn expand_usable(
        &mut self,
        parent: &Node,
        doc: &Document,
    ) -> Result<Vec<WalkError>, WalkError> {
        let mut unusable = Vec::new();
        self.queue(parent, doc, Some(&mut unusable))?;
        Ok(unusable)
    }

    /// Takes back the visit of `node`, which [`Walk::next_node`] has just
    /// returned and the caller will not expand (a `subject` it only notes):
    /// should another path reach the same digest, it is visited then.
    pub fn leave(&mut self, node: &Node) {
        if self.seen.remove(&node.digest) && node.is_document() {
            self.documents -= 1;
        }
    }

    fn queue(
        &mut self,
        parent: &Node,
        doc: &Document,
        mut unusable: Option<&mut Vec<WalkError>>,
    ) -> Result<(), WalkError> {
        let mut children = Vec::new();
        let mut child =
            |desc: &Descriptor, role: Role, depth: usize| match node(desc.clone(), role, depth) {
                Ok(n) => {
                    children.push(n);
                    Ok(())
                }
                Err(e) => match unusable.as_deref_mut() {
                    Some(unusable) => {
                        unusable.push(e);
                        Ok(())
                    }
                    None => Err(e),
                },
            };
        match doc {
            Document::Index(index) => {
                if parent.depth == self.bounds.max_depth {
                    return Err(WalkError::TooLarge(format!(
                        "indexes are nested more than {} deep",
                        self.bounds.max_depth
                    )));
                }
                for m in index.manifests() {
                    child(m, Role::Entry, parent.depth + 1)?;
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
                child(manifest.config(), Role::Config, depth)?;
                for l in manifest.layers() {
                    child(l, Role::Layer, depth)?;
                }
                if let Some(s) = manifest.subject() {
                    child(s, Role::Subject, depth)?;
                }
            }
        }
        // Popped from the end: reversed, they are visited in document order.
        self.todo.extend(children.into_iter().rev());
        Ok(())
    }

    /// Every digest visited so far.
    pub fn into_visited(self) -> HashSet<Digest> {
        self.seen
    }
}

fn node(desc: Descriptor, role: Role, depth: usize) -> Result<Node, WalkError> {
    let digest = descriptor_digest(&desc).map_err(|source| WalkError::Descriptor {
        digest: desc.digest().to_string(),
        source,
    })?;
    Ok(Node {
        desc,
        digest,
        role,
        depth,
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
    fn a_left_subject_is_visited_again_as_an_entry() {
        let subject_m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .config(desc(MediaType::ImageConfig, b"{}"))
            .layers(vec![desc(MediaType::ImageLayerGzip, b"subject layer")])
            .build()
            .unwrap();
        let subject = desc(MediaType::ImageManifest, &canonical_json(&subject_m));
        let referrer_m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .config(desc(MediaType::EmptyJSON, b"{ }"))
            .layers(vec![])
            .subject(subject.clone())
            .build()
            .unwrap();
        let referrer = desc(MediaType::ImageManifest, &canonical_json(&referrer_m));
        let i = ImageIndexBuilder::default()
            .schema_version(2u32)
            .manifests(vec![referrer.clone(), subject.clone()])
            .build()
            .unwrap();
        let i_desc = desc(MediaType::ImageIndex, &canonical_json(&i));
        let walk = |leave: bool| {
            let mut w = Walk::new([i_desc.clone()], Bounds::image()).unwrap();
            let mut order = Vec::new();
            while let Some(n) = w.next_node().unwrap() {
                order.push(n.role);
                let doc = if n.digest == descriptor_digest(&i_desc).unwrap() {
                    Document::Index(Box::new(i.clone()))
                } else if n.digest == descriptor_digest(&referrer).unwrap() {
                    Document::Manifest(Box::new(referrer_m.clone()))
                } else if n.digest == descriptor_digest(&subject).unwrap() {
                    if leave && n.role == Role::Subject {
                        w.leave(&n);
                        continue;
                    }
                    Document::Manifest(Box::new(subject_m.clone()))
                } else {
                    continue;
                };
                w.expand(&n, &doc).unwrap();
            }
            order
        };
        use Role::*;
        // Expanded where it is first reached, as a subject, it is not an
        // entry any more.
        assert_eq!(walk(false), [Entry, Entry, Config, Subject, Config, Layer]);
        // Left, it is reached again as the index's entry.
        assert_eq!(
            walk(true),
            [Entry, Entry, Config, Subject, Entry, Config, Layer]
        );
    }

    #[test]
    fn expand_usable_leaves_out_what_expand_refuses() {
        let sha512: oci_spec::image::Digest =
            format!("sha512:{}", "a".repeat(128)).parse().unwrap();
        let odd = Descriptor::new(MediaType::ImageLayerGzip, 1, sha512);
        let good = desc(MediaType::ImageLayerGzip, b"layer");
        let m = ImageManifestBuilder::default()
            .schema_version(2u32)
            .config(desc(MediaType::ImageConfig, b"{}"))
            .layers(vec![odd, good.clone()])
            .build()
            .unwrap();
        let m = Document::Manifest(Box::new(m));
        let root = desc(MediaType::ImageManifest, b"m");

        let mut w = Walk::new([root.clone()], Bounds::image()).unwrap();
        let n = w.next_node().unwrap().unwrap();
        let err = w.expand(&n, &m).unwrap_err();
        assert!(matches!(err, WalkError::Descriptor { .. }), "{err}");
        assert!(w.next_node().unwrap().is_none(), "nothing was queued");

        let mut w = Walk::new([root], Bounds::image()).unwrap();
        let n = w.next_node().unwrap().unwrap();
        let unusable = w.expand_usable(&n, &m).unwrap();
        assert_eq!(unusable.len(), 1);
        assert!(
            unusable[0].to_string().contains("sha512:"),
            "{}",
            unusable[0]
        );
        let mut rest = Vec::new();
        while let Some(n) = w.next_node().unwrap() {
            rest.push((n.role, n.digest));
        }
        assert_eq!(
            rest,
            [
                (Role::Config, Digest::of(b"{}")),
                (Role::Layer, descriptor_digest(&good).unwrap())
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
