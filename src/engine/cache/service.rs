//! The registry side of the cache: lookups (with the entry's config and
//! layer fetched on a hit) and pushes, all on the async runtime, many at
//! once. Nothing here touches a snapshot or reports anything: answers and
//! warnings go back to the build loop, which decides.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use futures_util::StreamExt;
use oci_spec::image::{Descriptor, MediaType};
use tempfile::NamedTempFile;

use super::entry::{self, BadEntry, EntryConfig, LayerBlob, MAX_CONFIG};
use crate::digest::Digest;
use crate::report::error_chain;
use crate::store::{oci_digest, Store};
use crate::transport::{ManifestRole, Transport, TransportError};

/// Lookups in flight at once (each is a manifest GET, then on a hit two
/// blob GETs). The first steps' lookups start first.
const LOOKUPS_AT_ONCE: usize = 8;
/// Entries pushed at once.
const PUSHES_AT_ONCE: usize = 4;

/// One cache repository, and whether it stopped answering. Entries are
/// read and written through the Transport seam only.
pub(super) struct Repo {
    pub(super) transport: Box<dyn Transport>,
    pub(super) down: AtomicBool,
}

impl Repo {
    pub(super) fn new(transport: Box<dyn Transport>) -> Arc<Repo> {
        Arc::new(Repo {
            transport,
            down: AtomicBool::new(false),
        })
    }

    pub(super) fn name(&self) -> String {
        self.transport.describe()
    }
}

/// An entry found and fetched: its claims, its layer's descriptor, and
/// the layer blob in a temporary file of the store (digest and size
/// checked while it was written).
pub(super) struct Fetched {
    pub(super) repo: String,
    pub(super) config: EntryConfig,
    pub(super) layer: LayerBlob,
    pub(super) file: NamedTempFile,
}

/// Something the build loop says once it knows which step it is about.
pub(super) enum Note {
    /// The repository's entry for the key is not usable.
    Bad { repo: String, why: String },
    /// The repository is down or refuses jbuild: it is not asked again.
    Down { repo: String, why: String },
}

/// What the lookup of one key found.
#[derive(Default)]
pub(super) struct Answer {
    pub(super) hit: Option<Fetched>,
    pub(super) notes: Vec<Note>,
}

/// Why fetching an entry failed.
enum Fail {
    Bad(String),
    Down(TransportError),
}

impl From<BadEntry> for Fail {
    fn from(e: BadEntry) -> Fail {
        Fail::Bad(e.to_string())
    }
}

/// What the registry sent (a digest or size that does not match, a
/// document too large or malformed, a blob the entry names but the
/// registry lacks) is the entry's fault; anything else is the registry's
/// or the network's.
impl From<TransportError> for Fail {
    fn from(e: TransportError) -> Fail {
        match e {
            TransportError::Mismatch { .. }
            | TransportError::TooLarge { .. }
            | TransportError::Invalid { .. }
            | TransportError::NotFound { .. } => Fail::Bad(error_chain(&e)),
            e => Fail::Down(e),
        }
    }
}

/// Looks every key up, in order, [`LOOKUPS_AT_ONCE`] at a time, and sends
/// each answer as soon as it is known. Runs until every key is answered
/// or `cancel` is set.
pub(super) async fn lookups(
    repos: Vec<Arc<Repo>>,
    store: Store,
    jobs: Vec<(Digest, Sender<Answer>)>,
    cancel: Arc<AtomicBool>,
) {
    futures_util::stream::iter(jobs)
        .for_each_concurrent(LOOKUPS_AT_ONCE, |(key, tx)| {
            let (repos, store, cancel) = (&repos, &store, &cancel);
            async move {
                let answer = lookup(repos, store, &key, cancel).await;
                // A receiver gone is a build that ended: the file goes with it.
                let _ = tx.send(answer);
            }
        })
        .await;
}

/// The first usable entry for `key` in `repos`, asking each repository
/// (that is not down) one manifest GET.
async fn lookup(repos: &[Arc<Repo>], store: &Store, key: &Digest, cancel: &AtomicBool) -> Answer {
    let mut answer = Answer::default();
    let tag = entry::tag(key);
    for repo in repos {
        if cancel.load(Ordering::Relaxed) || repo.down.load(Ordering::Relaxed) {
            continue;
        }
        let found = match repo.transport.resolve(&tag).await {
            Ok(desc) => fetch(repo, store, key, &desc).await,
            Err(TransportError::NotFound { .. }) => continue,
            Err(e) => Err(Fail::from(e)),
        };
        match found {
            Ok(f) => {
                answer.hit = Some(f);
                break;
            }
            Err(Fail::Bad(why)) => answer.notes.push(Note::Bad {
                repo: repo.name(),
                why,
            }),
            Err(Fail::Down(e)) => {
                // Only the first to see it down says so.
                if !repo.down.swap(true, Ordering::Relaxed) {
                    answer.notes.push(Note::Down {
                        repo: repo.name(),
                        why: error_chain(&e),
                    });
                }
            }
        }
    }
    answer
}

/// The entry `desc` names: its manifest (kept from the lookup), config and
/// layer, each checked.
async fn fetch(
    repo: &Repo,
    store: &Store,
    key: &Digest,
    desc: &Descriptor,
) -> Result<Fetched, Fail> {
    let manifest = repo.transport.fetch_manifest(desc).await?;
    let parts = entry::parse_manifest(&manifest)?;
    let config_file = store.blob_tempfile().map_err(TransportError::from)?;
    repo.transport
        .fetch_blob(&parts.config, config_file.path(), &|_| {})
        .await?;
    let mut bytes = Vec::new();
    config_file
        .as_file()
        .take(MAX_CONFIG + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            Fail::Down(TransportError::Io {
                context: format!("cannot read {}", config_file.path().display()),
                source: e,
            })
        })?;
    let config = entry::parse_config(&bytes, key, &parts.layer)?;
    let layer = LayerBlob {
        digest: crate::store::descriptor_digest(&parts.layer)
            .map_err(|e| Fail::Bad(format!("its layer descriptor: {e}")))?,
        size: parts.layer.size(),
        media_type: parts.layer.media_type().to_string(),
    };
    let file = store.blob_tempfile().map_err(TransportError::from)?;
    repo.transport
        .fetch_blob(&parts.layer, file.path(), &|_| {})
        .await?;
    Ok(Fetched {
        repo: repo.name(),
        config,
        layer,
        file,
    })
}

/// Pushes each entry (its layer from the store, its config, then its
/// manifest under its tag), [`PUSHES_AT_ONCE`] at a time. After the first
/// failure nothing more is sent; the failure is returned, once.
pub(super) async fn pushes(
    repo: &Repo,
    store: &Store,
    entries: Vec<(EntryConfig, LayerBlob)>,
) -> Option<String> {
    let failures = futures_util::stream::iter(entries)
        .map(|(config, layer)| async move {
            if repo.down.load(Ordering::Relaxed) {
                return None;
            }
            match push(repo, store, &config, &layer).await {
                Ok(()) => None,
                Err(e) => (!repo.down.swap(true, Ordering::Relaxed)).then(|| error_chain(&e)),
            }
        })
        .buffer_unordered(PUSHES_AT_ONCE)
        .filter_map(|f| async move { f })
        .collect::<Vec<String>>()
        .await;
    failures.into_iter().next()
}

fn descriptor(media_type: &str, digest: &Digest, size: u64) -> Descriptor {
    Descriptor::new(MediaType::from(media_type), size, oci_digest(digest))
}

async fn push(
    repo: &Repo,
    store: &Store,
    config: &EntryConfig,
    layer: &LayerBlob,
) -> Result<(), TransportError> {
    let t = &repo.transport;
    let encoded = entry::encode(config, layer);
    let layer_desc = descriptor(&layer.media_type, &layer.digest, layer.size);
    if !t.has_blob(&layer_desc).await? {
        t.push_blob(&layer_desc, &store.blob_path(&layer.digest), &|_| {})
            .await?;
    }
    let config_desc = descriptor(
        entry::CONFIG_MEDIA_TYPE,
        &encoded.config_digest,
        encoded.config.len() as u64,
    );
    if !t.has_blob(&config_desc).await? {
        let file = store.blob_tempfile()?;
        std::fs::write(file.path(), &encoded.config).map_err(|e| TransportError::Io {
            context: format!("cannot write {}", file.path().display()),
            source: e,
        })?;
        t.push_blob(&config_desc, file.path(), &|_| {}).await?;
    }
    let manifest_desc = descriptor(
        crate::image::media::OCI_MANIFEST,
        &encoded.manifest_digest,
        encoded.manifest.len() as u64,
    );
    let tag = entry::tag(&config.key);
    t.push_manifest(
        &encoded.manifest,
        &manifest_desc,
        ManifestRole::Root { tag: Some(&tag) },
    )
    .await
}
