//! Where a compared image comes from: the store (a name, digest or digest
//! prefix), or a registry (`docker://REF`, through the same
//! [`ImageSource`] `jbuild pull` uses, so behind the same pull policy).
//!
//! A registry image is fetched into the store, not unpacked: its manifest,
//! config and layer blobs are copied in untagged, as the first half of a
//! pull ([`crate::image::pull()`]), and the comparison reads the layers from
//! there as it reads a stored image's. While the blobs arrive nothing in
//! `index.json` reaches them, so the fetch runs under the pull's *pin*, the
//! store lock held shared, which keeps `prune` from taking them; the pin is
//! held until the comparison is done. Then what the fetch added goes: its
//! untagged entries at once, its blobs under the store lock held
//! exclusively, taken without waiting (as a failed pull does; if another
//! jbuild holds the lock they stay for `prune`, harmless). Blobs the store
//! held before stay: a registry image that shares its base with a stored
//! one downloads only what the store lacks.

use std::collections::HashSet;

use oci_spec::image::Descriptor;

use super::CompareError;
use crate::digest::Digest;
use crate::image::pull::{Arrivals, ImageSource};
use crate::image::{self, gc, LoadedImage, Platform};
use crate::report::Reporter;
use crate::store::{Store, StoreLock};
use crate::transport::Location;

/// What a comparison reads its images from.
pub struct Sources<'a> {
    pub store: &'a Store,
    /// Where `docker://` references are fetched from (the registry behind
    /// the pull policy); `None` refuses them.
    pub registry: Option<&'a dyn ImageSource>,
    /// Told the fetch's progress.
    pub reporter: &'a dyn Reporter,
}

/// The images of one comparison, loaded; what was fetched for them is
/// taken away when this is dropped (see the module docs).
pub(super) struct Loading<'a> {
    sources: &'a Sources<'a>,
    platform: &'a Platform,
    /// Taken before the first fetch.
    fetched: Option<Fetched>,
}

/// The pin and what the store held before the first fetch.
struct Fetched {
    pin: StoreLock,
    blobs: HashSet<Digest>,
    indexed: HashSet<String>,
    /// The untagged entries the fetches wrote.
    added: Vec<Descriptor>,
}

impl<'a> Loading<'a> {
    pub(super) fn new(sources: &'a Sources<'a>, platform: &'a Platform) -> Loading<'a> {
        Loading {
            sources,
            platform,
            fetched: None,
        }
    }

    /// The image `reference` names: a `docker://` reference fetched from
    /// the registry, anything else found in the store.
    pub(super) fn load(&mut self, reference: &str) -> Result<LoadedImage, CompareError> {
        let store = self.sources.store;
        let Ok(Location::Registry(name)) = reference.parse::<Location>() else {
            let desc = store
                .find(reference)
                .map_err(CompareError::Find)?
                .descriptor;
            return image::load_descriptor(store, &desc, self.platform, reference)
                .map_err(CompareError::Image);
        };
        let Some(registry) = self.sources.registry else {
            return Err(CompareError::NoRegistry {
                image: reference.to_string(),
            });
        };
        let fetched = match &mut self.fetched {
            Some(f) => f,
            None => self.fetched.insert(Fetched::pin(store)?),
        };
        let desc = registry
            .fetch(
                store,
                &name,
                self.platform,
                self.sources.reporter,
                &Arrivals::default(),
            )
            .map_err(|source| CompareError::Fetch {
                image: reference.to_string(),
                source,
            })?;
        if !fetched.indexed.contains(desc.digest().as_ref()) {
            fetched.added.push(desc.clone());
        }
        image::load_descriptor(store, &desc, self.platform, reference).map_err(CompareError::Image)
    }
}

impl Fetched {
    fn pin(store: &Store) -> Result<Fetched, CompareError> {
        let pin = StoreLock::shared(store).map_err(CompareError::Pin)?;
        let indexed = store
            .list()
            .map_err(CompareError::Pin)?
            .into_iter()
            .map(|(_, d)| d.digest().to_string())
            .collect();
        let blobs = store
            .blob_digests()
            .map_err(CompareError::Pin)?
            .into_iter()
            .collect();
        Ok(Fetched {
            pin,
            blobs,
            indexed,
            added: Vec::new(),
        })
    }

    /// Takes away what the fetches added. Best effort: what cannot go now
    /// is unreferenced, and `prune` takes it.
    fn discard(self, store: &Store) {
        for desc in &self.added {
            if let Err(e) = store.remove_untagged(desc) {
                tracing::debug!("cannot drop the untagged entry of {}: {e}", desc.digest());
            }
        }
        drop(self.pin);
        let Ok(Some(_lock)) = StoreLock::try_exclusive(store) else {
            tracing::debug!("the store is busy: the fetched blobs are left for prune");
            return;
        };
        let unreferenced = match gc::unreferenced_blobs(store) {
            Ok(u) => u,
            Err(e) => return tracing::debug!("cannot tell which blobs are unreferenced: {e}"),
        };
        for d in unreferenced.iter().filter(|d| !self.blobs.contains(d)) {
            if let Err(e) = store.remove_blob(d) {
                tracing::debug!("cannot remove {d}: {e}");
            }
        }
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.fetched.take() {
            f.discard(self.sources.store);
        }
    }
}
