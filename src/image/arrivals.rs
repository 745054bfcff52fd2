//! What a fetch has brought so far, for the pull to start on before the
//! fetch ends: the image's manifest as soon as it is read, and each blob
//! as it arrives in the store — a layer is applied while it downloads
//! (`curl | tar -x`, with the digest checked before anything is kept).
//!
//! The fetch (an [`ImageSource`](super::pull::ImageSource), through a
//! transport's copy) tells: [`Arrivals::manifest`] once it has checked the
//! image's manifest, [`Arrivals::coming`] when a blob starts arriving in a
//! store file that is readable as it grows (a `Tail`), [`Arrivals::stored`]
//! when a blob is in the store in one piece (it was there already, or came
//! from a file). The pull waits on those; whatever a source does not tell
//! is found in the store once the fetch has ended, so a source that tells
//! nothing still works — its pull just unpacks after the download.
//!
//! A blob read through a `Tail` ends only once the fetch has checked its
//! size and digest; a blob that fails them fails its reader. When the pull
//! stops early (a refused layer) it [abandons](Arrivals::abandoned) the
//! fetch, which may then stop downloading.

use std::collections::HashMap;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use oci_spec::image::Descriptor;

use crate::digest::Digest;
use crate::spool::Tail;
use crate::store::{Store, StoreError};

/// Told by a fetch what it has brought, read by the pull. Cheap to clone:
/// clones share one state.
#[derive(Clone, Default)]
pub struct Arrivals(Arc<Inner>);

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    changed: Condvar,
    abandoned: AtomicBool,
}

#[derive(Default)]
struct State {
    /// The image's manifest (or index) and its checked bytes.
    manifest: Option<(Descriptor, Vec<u8>)>,
    blobs: HashMap<Digest, Arrival>,
    /// The fetch returned: nothing more will be told.
    ended: bool,
}

enum Arrival {
    /// Arriving in a store file, readable as it grows.
    Coming(Tail),
    /// In the store in one piece.
    Stored,
}

impl std::fmt::Debug for Arrivals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.lock();
        f.debug_struct("Arrivals")
            .field("manifest", &st.manifest.as_ref().map(|(d, _)| d.digest()))
            .field("blobs", &st.blobs.len())
            .field("ended", &st.ended)
            .finish()
    }
}

impl Arrivals {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tell(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.0.changed.notify_all();
    }

    /// Waits until `ready` answers, or the fetch has ended (then `None`
    /// if it still does not).
    fn wait_for<T>(&self, mut ready: impl FnMut(&State) -> Option<T>) -> Option<T> {
        let mut st = self.lock();
        loop {
            if let Some(t) = ready(&st) {
                return Some(t);
            }
            if st.ended {
                return None;
            }
            st = self.0.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// The fetch has read and checked the image's top document (`desc`,
    /// with its bytes): the manifest the pull unpacks, or an index.
    pub fn manifest(&self, desc: &Descriptor, bytes: &[u8]) {
        self.tell(|st| {
            st.manifest
                .get_or_insert_with(|| (desc.clone(), bytes.to_vec()));
        });
    }

    /// The blob `digest` is arriving in a store file, readable through
    /// `tail` as it grows and ending once the fetch has checked it.
    pub fn coming(&self, digest: &Digest, tail: Tail) {
        self.tell(|st| {
            st.blobs.insert(digest.clone(), Arrival::Coming(tail));
        });
    }

    /// The blob `digest` is in the store in one piece.
    pub fn stored(&self, digest: &Digest) {
        self.tell(|st| {
            st.blobs.entry(digest.clone()).or_insert(Arrival::Stored);
        });
    }

    /// Whether the pull stopped wanting what is fetched (a layer was
    /// refused): a fetch may stop early, and fail.
    pub fn abandoned(&self) -> bool {
        self.0.abandoned.load(Ordering::Relaxed)
    }

    /// The pull stops wanting what is fetched.
    pub(super) fn abandon(&self) {
        self.0.abandoned.store(true, Ordering::Relaxed);
    }

    /// The fetch returned: nothing more will be told, and whatever was not
    /// told is in the store or not at all.
    pub(super) fn end(&self) {
        self.tell(|st| st.ended = true);
    }

    /// The image's top document once the fetch has told it; `None` if the
    /// fetch ended without telling it.
    pub(super) fn wait_manifest(&self) -> Option<(Descriptor, Vec<u8>)> {
        self.wait_for(|st| st.manifest.clone())
    }

    /// The image's top document, if the fetch told it.
    pub(super) fn told_manifest(&self) -> Option<Descriptor> {
        self.lock().manifest.as_ref().map(|(d, _)| d.clone())
    }

    /// Waits until the blob `digest`, if it is arriving, has arrived or
    /// failed to: a layer refused while it arrives may have been refused
    /// for bytes that are not the blob's, which the blob's digest tells.
    pub(super) fn settle(&self, digest: &Digest) {
        let tail = match self.lock().blobs.get(digest) {
            Some(Arrival::Coming(tail)) => tail.clone(),
            _ => return,
        };
        tail.wait_end();
    }

    /// Whether the fetch has ended, or a blob failed on its way (its size
    /// or digest, or its download): then the fetch's error, not what a
    /// reader of the blob made of it, says why a pull failed.
    pub(super) fn failed_or_ended(&self) -> bool {
        let st = self.lock();
        st.ended
            || st.blobs.values().any(|a| match a {
                Arrival::Coming(tail) => tail.failed(),
                Arrival::Stored => false,
            })
    }

    /// The blob `digest` to read from its first byte: as it arrives, or
    /// from the store once it is there (or once the fetch has ended
    /// without telling of it: then the store has it, or it is missing).
    pub(super) fn open(
        &self,
        store: &Store,
        digest: &Digest,
    ) -> Result<Box<dyn Read + Send>, StoreError> {
        let tail = self.wait_for(|st| match st.blobs.get(digest) {
            Some(Arrival::Coming(tail)) => Some(Some(tail.clone())),
            Some(Arrival::Stored) => Some(None),
            None => None,
        });
        match tail.flatten() {
            Some(tail) => Ok(Box::new(tail.reader())),
            None => Ok(Box::new(store.open_blob(digest)?)),
        }
    }
}
