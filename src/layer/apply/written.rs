//! What a layer wrote so far, kept compactly: the paths (relative to the
//! root) this layer created or replaced, the directories that hold one of
//! them, and the symlinks it created, as one tree of path components.
//!
//! Why a tree and not a set of paths: the applier remembers something for
//! every entry, so its memory is what bounds a layer of a million entries
//! (`docs/security.md` holds it to 256 MiB). A set of host paths stored
//! the root's own path again with every entry, and every ancestor of a
//! deep path whole (each a copy of the path up to it, so memory grew with
//! the square of the depth): 999,000 entries took 427 MiB in the review.
//! Here each component is stored once, as a node of 16 bytes and its
//! name's bytes; a node is found by
//! its parent and name through a table of 64-bit keyed hashes (so a
//! crafted layer cannot aim collisions at it; a collision is chained and
//! compared, never trusted).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::hash::{BuildHasher, RandomState};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::super::LayerError;

/// What this layer did at a path, so that whiteouts spare it and a second
/// entry for it is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Named {
    /// A directory created because an entry below it needed it.
    Implicit,
    /// An entry of the layer, a directory.
    Dir,
    /// An entry of the layer, anything else.
    Other,
}

/// One path component.
#[derive(Debug, Clone, Copy)]
struct Node {
    parent: u32,
    /// Where its name starts in [`Written::names`].
    name_at: u32,
    /// The next node whose (parent, name) hashed to the same key, or
    /// [`NONE`].
    next: u32,
    name_len: u16,
    /// [`NAMED_MASK`] bits (0: not named), [`HOLDS`], [`SYMLINK`].
    state: u8,
}

const NONE: u32 = u32::MAX;
/// The root's node.
pub(super) const ROOT: u32 = 0;
const NAMED_MASK: u8 = 0b11;
/// Something this layer wrote lies below this directory.
const HOLDS: u8 = 0b100;
/// This layer created a symlink here.
const SYMLINK: u8 = 0b1000;

fn named_bits(n: Named) -> u8 {
    match n {
        Named::Implicit => 1,
        Named::Dir => 2,
        Named::Other => 3,
    }
}

pub(super) struct Written {
    nodes: Vec<Node>,
    /// The names of all nodes, end to end.
    names: Vec<u8>,
    /// Key of (parent, name) → the last node added with that key.
    index: HashMap<u64, u32>,
    keys: RandomState,
}

impl Written {
    pub(super) fn new() -> Self {
        Written {
            nodes: vec![Node {
                parent: NONE,
                name_at: 0,
                next: NONE,
                name_len: 0,
                state: 0,
            }],
            names: Vec::new(),
            index: HashMap::new(),
            keys: RandomState::new(),
        }
    }

    fn name(&self, n: &Node) -> &[u8] {
        &self.names[n.name_at as usize..n.name_at as usize + n.name_len as usize]
    }

    fn key(&self, parent: u32, name: &[u8]) -> u64 {
        self.keys.hash_one((parent, name))
    }

    /// The child `name` of node `parent`, if there is one.
    fn child(&self, parent: u32, name: &[u8]) -> Option<u32> {
        let mut at = *self.index.get(&self.key(parent, name))?;
        while at != NONE {
            let n = &self.nodes[at as usize];
            if n.parent == parent && self.name(n) == name {
                return Some(at);
            }
            at = n.next;
        }
        None
    }

    /// The child `name` of node `parent`, added if missing.
    fn child_or_add(&mut self, parent: u32, name: &[u8]) -> Result<u32, LayerError> {
        if let Some(found) = self.child(parent, name) {
            return Ok(found);
        }
        let too_many = || LayerError::Limit {
            what: "its paths together are longer than".into(),
            limit: "4 GiB".into(),
            key: "max_entries",
        };
        let name_at = u32::try_from(self.names.len()).map_err(|_| too_many())?;
        let id = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&id| id != NONE)
            .ok_or_else(too_many)?;
        // A component is at most NAME_MAX bytes (the file system's, or the
        // limit checked on entry paths).
        let name_len = u16::try_from(name.len()).map_err(|_| too_many())?;
        self.names.extend_from_slice(name);
        let key = self.key(parent, name);
        let next = self.index.insert(key, id).unwrap_or(NONE);
        self.nodes.push(Node {
            parent,
            name_at,
            next,
            name_len,
            state: 0,
        });
        Ok(id)
    }

    /// The node of `rel` (a clean path relative to the root), if any.
    pub(super) fn find(&self, rel: &Path) -> Option<u32> {
        let mut at = ROOT;
        for c in rel.components() {
            match c {
                Component::Normal(n) => at = self.child(at, n.as_bytes())?,
                Component::CurDir => {}
                _ => return None,
            }
        }
        Some(at)
    }

    /// The node of `rel`, added (with its parents) if missing.
    fn add(&mut self, rel: &Path) -> Result<u32, LayerError> {
        let mut at = ROOT;
        for c in rel.components() {
            if let Component::Normal(n) = c {
                at = self.child_or_add(at, n.as_bytes())?;
            }
        }
        Ok(at)
    }

    /// What this layer did at `rel`, if anything.
    pub(super) fn named(&self, rel: &Path) -> Option<Named> {
        match self.state(self.find(rel)?) & NAMED_MASK {
            1 => Some(Named::Implicit),
            2 => Some(Named::Dir),
            3 => Some(Named::Other),
            _ => None,
        }
    }

    /// Whether something this layer wrote lies below `rel`.
    pub(super) fn holds(&self, rel: &Path) -> bool {
        self.find(rel).is_some_and(|n| self.state(n) & HOLDS != 0)
    }

    /// Whether this layer created the symlink `rel`.
    pub(super) fn is_symlink(&self, rel: &Path) -> bool {
        self.find(rel).is_some_and(|n| self.state(n) & SYMLINK != 0)
    }

    fn state(&self, node: u32) -> u8 {
        self.nodes[node as usize].state
    }

    /// Notes that this layer wrote `rel` (as `Implicit` unless it was
    /// named already), and so something below each of its parents.
    /// Returns its node.
    pub(super) fn mark(&mut self, rel: &Path) -> Result<u32, LayerError> {
        let node = self.add(rel)?;
        let mut dir = self.nodes[node as usize].parent;
        // Parents already holding something have theirs marked too.
        while dir != NONE && dir != ROOT && self.state(dir) & HOLDS == 0 {
            let d = &mut self.nodes[dir as usize];
            d.state |= HOLDS;
            dir = d.parent;
        }
        let n = &mut self.nodes[node as usize];
        if n.state & NAMED_MASK == 0 {
            n.state |= named_bits(Named::Implicit);
        }
        Ok(node)
    }

    /// Records what the entry at `node` was.
    pub(super) fn set_named(&mut self, node: u32, named: Named) {
        let n = &mut self.nodes[node as usize];
        n.state = (n.state & !NAMED_MASK) | named_bits(named);
    }

    /// Records that this layer created a symlink at `node`.
    pub(super) fn set_symlink(&mut self, node: u32) {
        self.nodes[node as usize].state |= SYMLINK;
    }

    /// The node of `rel`, added if missing, whatever this layer did there
    /// (for a lower file whose flags are set again at the end).
    pub(super) fn node(&mut self, rel: &Path) -> Result<u32, LayerError> {
        self.add(rel)
    }

    /// The path of `node`, relative to the root.
    pub(super) fn path(&self, node: u32) -> PathBuf {
        let mut parts = Vec::new();
        let mut at = node;
        while at != ROOT && at != NONE {
            let n = &self.nodes[at as usize];
            parts.push(self.name(n));
            at = n.parent;
        }
        parts
            .iter()
            .rev()
            .map(|p| OsStr::from_bytes(p))
            .collect::<PathBuf>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_names_and_parents() {
        let mut w = Written::new();
        let f = w.mark(Path::new("a/b/c")).unwrap();
        assert_eq!(w.named(Path::new("a/b/c")), Some(Named::Implicit));
        w.set_named(f, Named::Other);
        assert_eq!(w.named(Path::new("a/b/c")), Some(Named::Other));
        assert!(w.holds(Path::new("a")) && w.holds(Path::new("a/b")));
        assert!(!w.holds(Path::new("a/b/c")) && !w.holds(Path::new("")));
        // Parents are held, not named; unknown paths are neither.
        assert_eq!(w.named(Path::new("a/b")), None);
        assert_eq!(w.named(Path::new("a/x")), None);
        assert!(!w.holds(Path::new("x")));
        assert_eq!(w.path(f), PathBuf::from("a/b/c"));
        let l = w.mark(Path::new("a/l")).unwrap();
        w.set_symlink(l);
        assert!(w.is_symlink(Path::new("a/l")) && !w.is_symlink(Path::new("a/b")));
    }

    #[test]
    fn same_name_under_other_parents_is_another_node() {
        let mut w = Written::new();
        let one = w.mark(Path::new("x/n")).unwrap();
        let two = w.mark(Path::new("y/n")).unwrap();
        assert_ne!(one, two);
        assert_eq!(w.path(two), PathBuf::from("y/n"));
        // A deep path stores each component once.
        let deep: PathBuf = std::iter::repeat_n("d", 2000).collect();
        w.mark(&deep).unwrap();
        assert!(w.names.len() < 2100, "{}", w.names.len());
    }

    #[test]
    fn colliding_keys_are_chained_and_compared() {
        let mut w = Written::new();
        let a = w.mark(Path::new("a")).unwrap();
        // Make `b` share `a`'s key: the chain must still tell them apart.
        let key_a = w.key(ROOT, b"a");
        let b = w.child_or_add(ROOT, b"b").unwrap();
        let key_b = w.key(ROOT, b"b");
        w.index.remove(&key_b);
        w.nodes[b as usize].next = *w.index.get(&key_a).unwrap();
        w.index.insert(key_a, b);
        // `b` is found only through `a`'s key now; find looks up b's key.
        assert_eq!(w.child(ROOT, b"a"), Some(a));
        assert_eq!(w.find(Path::new("a")), Some(a));
    }
}
