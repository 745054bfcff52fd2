//! [`Facts`]: what the store check learns that the parts after it need.
//! A file of its own so that the store check and the walk of its images
//! (which fills in `walk_complete`) both depend on it, not on each other.

use std::collections::{HashMap, HashSet};

use crate::digest::Digest;
use crate::store::Store;

/// What the store check learnt, for the checks after it.
#[derive(Debug, Default)]
pub struct Facts {
    /// The store, when its directory exists.
    pub store: Option<Store>,
    /// Every blob file named by a digest, with its size.
    pub blobs: HashMap<Digest, u64>,
    /// Blobs whose content does not match their name.
    pub corrupt: HashSet<Digest>,
    /// Whether the index was read and every manifest and index it reaches
    /// was present and readable: only then is "unreferenced" known.
    pub walk_complete: bool,
}
