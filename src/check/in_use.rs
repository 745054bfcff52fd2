//! Which unpacked layers (`chain-<chain id>` snapshots) the images in the
//! store still use, so `jbuild prune` and `jbuild check` can tell the others.

use std::collections::HashSet;

use oci_spec::image::{Descriptor, ImageIndex};

use crate::build::chain_snapshot;
use crate::build::image::{self, MEDIA_INDEX};
use crate::plan::Platform;
use crate::store::{descriptor_digest, Store};

/// The largest index document read (as the store's own garbage collector).
const MAX_INDEX: u64 = 4 << 20;

/// The `chain-<id>` names of every layer stack of every image the store's
/// index reaches (all platforms of a multi-platform image). A manifest
/// missing from the store (a partial layout) uses nothing; one that cannot
/// be read is an error, because guessing could delete what it uses.
pub fn chains_in_use(store: &Store) -> Result<HashSet<String>, String> {
    let mut used = HashSet::new();
    let mut todo: Vec<Descriptor> = store
        .list()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(_, d)| d)
        .collect();
    while let Some(desc) = todo.pop() {
        let digest = descriptor_digest(&desc).map_err(|e| e.to_string())?;
        if !store.has_blob(&digest) {
            continue;
        }
        let media = desc.media_type().to_string();
        if media == MEDIA_INDEX || media.ends_with(".manifest.list.v2+json") {
            let bytes = store
                .read_blob(&digest, MAX_INDEX)
                .map_err(|e| e.to_string())?;
            let index: ImageIndex = serde_json::from_slice(&bytes)
                .map_err(|e| format!("image index {digest} is not valid: {e}"))?;
            todo.extend(index.manifests().iter().cloned());
            continue;
        }
        let img = image::load_descriptor(
            store,
            &desc,
            &Platform::default_for_host(),
            &digest.to_string(),
        )?;
        let diff_ids = img.diff_ids()?;
        used.extend(image::chain_ids(&diff_ids).iter().map(chain_snapshot));
    }
    Ok(used)
}
