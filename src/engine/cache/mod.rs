//! The registry build cache: `jbuild build --cache-to REPO` and
//! `--cache-from REPO`, so runners whose disks are wiped between runs
//! (CI) share the results of build steps through a registry they already
//! have.
//!
//! # How a build uses it
//!
//! Every step's cache key is known once the plan is made, before anything
//! runs — but for a PKG step's and those built on it, which are finished
//! when the build reaches the PKG step ([`crate::plan`], "Keys finished
//! when the step is reached"). `Lookups::start` then asks the
//! `--cache-from` repositories, in the background and many at once, for
//! the entry of every step with a final key whose snapshot this machine
//! lacks (`Lookups::ask` does the same for the keys a PKG step finishes):
//! one manifest GET per step and repository, and on a hit the entry's
//! config and layer blob are fetched (and checked) right away. The build loop waits for nothing until a step needs
//! its answer (`Lookups::restore`): on a hit the layer is applied onto
//! the step's parent, as hostile input, with the same applier and
//! [`LayerPolicy`](crate::image::LayerPolicy) as a pulled layer, its diff
//! ID checked against the entry's claim, and committed as the step's
//! `step-<key>` snapshot with the labels the export would have written, so
//! the export reuses the blob and the image gets the manifest digest the
//! machine that ran the step got.
//!
//! After the image is tagged, `push` makes every step of every stage
//! built findable in the `--cache-to` repository ([`entry`] is the
//! format).
//!
//! # Hostile or absent registries
//!
//! An entry that is malformed, of another format version or key, whose
//! blobs do not match their digests, or whose layer the applier refuses or
//! whose diff ID is not the one claimed, is not used: one warning naming
//! the step, and the step runs. A repository that cannot be reached or
//! refuses jbuild is reported once and not asked again; a failed push is a
//! warning, never a failed build.

pub mod entry;
mod service;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use super::error::BuildError;
use crate::digest::Digest;
use crate::image::unpack::Apply;
use crate::image::{self, next_chain, Layer, LayerRef, SnapshotName, Unpacker};
use crate::layer::Compression;
use crate::plan::{Plan, StepKind};
use crate::report::{error_chain, Level, StepInfo};
use crate::snapshot::{label, Kind, Labels, Snapshotter};
use crate::store::Store;
use crate::transport::{
    Location, RegistryOptions, RegistryRef, RegistryTransport, Transport, TransportError,
};
use entry::{EntryConfig, LayerBlob, FORMAT};
use service::{Answer, Note, Repo};

/// Attempts per request to a cache registry (a pull or push makes six).
const CACHE_ATTEMPTS: u32 = 3;

/// Where a build's steps are looked up and stored.
#[derive(Debug, Clone)]
pub struct RegistryCache {
    /// `--cache-from`: asked in this order; the first usable entry wins.
    pub from: Vec<RegistryRef>,
    /// `--cache-to`: where entries are pushed after the build.
    pub to: Option<RegistryRef>,
    /// How the registries are reached (TLS, credentials, timeouts).
    pub options: RegistryOptions,
}

/// Why a `--cache-from` or `--cache-to` value is not a repository.
#[derive(Debug, thiserror::Error)]
pub enum RepositoryError {
    #[error(transparent)]
    Name(#[from] crate::store::NameError),
    #[error("name a repository without a tag or digest: entries are tagged by their cache keys")]
    Tagged,
}

impl crate::blame::Blame for RepositoryError {
    /// A repository name the user gave.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// A cache repository as the user names it: `[docker://]HOST/PATH`, with
/// no tag or digest.
pub fn parse_repository(s: &str) -> Result<RegistryRef, RepositoryError> {
    let name = match s.parse::<Location>() {
        Ok(Location::Registry(name)) => name,
        _ => crate::store::ImageName::parse(s)?,
    };
    if name.has_tag() || name.digest().is_some() {
        return Err(RepositoryError::Tagged);
    }
    let mut r = RegistryRef::from_name(&name)?;
    r.tag = None;
    Ok(r)
}

impl RegistryCache {
    /// A cache is a shortcut: a registry that does not answer is given
    /// less patience than one an image is pulled from.
    fn options(&self) -> RegistryOptions {
        let mut options = self.options.clone();
        options.retry.max_attempts = options.retry.max_attempts.min(CACHE_ATTEMPTS);
        options
    }

    fn transport(&self, r: &RegistryRef) -> Box<dyn Transport> {
        Box::new(RegistryTransport::new(r.clone(), self.options()))
    }
}

/// How the build exports its layers: an entry's blob is the one the export
/// would make only if it was made the same way.
#[derive(Debug, Clone, Copy)]
pub(super) struct ExportAs {
    pub(super) compression: Compression,
    pub(super) epoch: u64,
}

/// The lookups of one build, started before its first step.
pub(super) struct Lookups {
    answers: RefCell<HashMap<Digest, Receiver<Answer>>>,
    /// Every key looked up (answered or not), each asked once.
    asked: RefCell<HashSet<Digest>>,
    store: Store,
    cancel: Arc<AtomicBool>,
    /// Repositories already reported down.
    warned: RefCell<BTreeSet<String>>,
    /// Keys restored from the `--cache-to` repository: no need to push them.
    in_push_repo: RefCell<HashSet<Digest>>,
    /// The repositories asked, shared with the lookups: one found down is
    /// not pushed to either.
    repos: Vec<Arc<Repo>>,
    push_repo: Option<String>,
}

impl Lookups {
    /// Starts looking up every layer step of `plan` that has no committed
    /// snapshot here, when the build has `--cache-from` repositories.
    /// `no_cache`: keys carry a nonce (`--no-cache`), so no entry can
    /// match them and nothing is looked up.
    pub(super) fn start(
        cache: Option<&RegistryCache>,
        store: &Store,
        snapshotter: &dyn Snapshotter,
        plan: &Plan,
        no_cache: bool,
    ) -> Result<Option<Lookups>, BuildError> {
        let Some(cache) = cache.filter(|c| !c.from.is_empty() && !no_cache) else {
            return Ok(None);
        };
        let repos: Vec<_> = cache
            .from
            .iter()
            .map(|r| Repo::new(cache.transport(r)))
            .collect();
        let lookups = Lookups {
            answers: RefCell::new(HashMap::new()),
            asked: RefCell::new(HashSet::new()),
            store: store.clone(),
            cancel: Arc::new(AtomicBool::new(false)),
            warned: RefCell::new(BTreeSet::new()),
            in_push_repo: RefCell::new(HashSet::new()),
            repos,
            push_repo: cache.to.as_ref().map(|r| format!("docker://{}", r.name())),
        };
        lookups.ask(snapshotter, plan)?;
        Ok(Some(lookups))
    }

    /// Starts looking up, in the background, every layer step of `plan`
    /// whose key is final and was not asked yet, and that has no
    /// committed snapshot here: at the start of a build, and each time a
    /// PKG step's key is finished and the plan made again (the keys that
    /// build on it are known only then).
    pub(super) fn ask(&self, snapshotter: &dyn Snapshotter, plan: &Plan) -> Result<(), BuildError> {
        let mut keys = Vec::new();
        for ps in plan.stages.iter().flat_map(|s| &s.steps) {
            if let StepKind::Layer {
                key, pending: None, ..
            } = &ps.kind
            {
                // Two stages may share a step: one lookup.
                if self.asked.borrow().contains(key) || keys.contains(key) {
                    continue;
                }
                let local = snapshotter.stat(&SnapshotName::step(key))?;
                if !local.is_some_and(|i| i.kind == Kind::Committed) {
                    keys.push(key.clone());
                }
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        let mut jobs = Vec::new();
        for key in keys {
            let (tx, rx) = std::sync::mpsc::channel();
            self.answers.borrow_mut().insert(key.clone(), rx);
            self.asked.borrow_mut().insert(key.clone());
            jobs.push((key, tx));
        }
        let (store, stop, asked) = (self.store.clone(), self.cancel.clone(), self.repos.clone());
        // The answers' senders go with the thread: if it ends early, every
        // step still waiting hears "nothing" and runs.
        std::thread::Builder::new()
            .name("jbuild-cache-lookups".into())
            .spawn(move || {
                let ran = crate::transport::block_on(async move {
                    service::lookups(asked, store, jobs, stop).await;
                    Ok::<(), TransportError>(())
                });
                if let Err(e) = ran {
                    // Every step then runs, as without a cache.
                    tracing::debug!("registry cache lookups: {e}");
                }
            })
            .map_err(|e| BuildError::io("cannot start the registry cache's lookups", e))?;
        Ok(())
    }

    /// Restores the step `key` from the registry cache as the committed
    /// snapshot `name` on `parent`: `Ok(true)` if it was, `Ok(false)` if
    /// the step must run (no entry, or one not usable: warned about).
    pub(super) fn restore(
        &self,
        unpacker: &Unpacker<'_>,
        export: ExportAs,
        key: &Digest,
        parent: Option<&str>,
        name: &str,
        info: &StepInfo,
    ) -> Result<bool, BuildError> {
        let Some(rx) = self.answers.borrow_mut().remove(key) else {
            return Ok(false);
        };
        let answer = rx.recv().unwrap_or_default();
        let short: String = info
            .text
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        let step = format!("step {} (`{short}`)", info.index);
        let warn = |text: String| unpacker.reporter.message(Level::Warn, &text);
        for note in answer.notes {
            match note {
                Note::Bad { repo, why } => warn(format!(
                    "{repo}: the cache entry for {step} is not used: {why}"
                )),
                Note::Down { repo, why } => {
                    if self.warned.borrow_mut().insert(repo.clone()) {
                        warn(format!(
                            "{repo}: the registry cache cannot be used ({why}); building without it"
                        ))
                    }
                }
            }
        }
        let Some(f) = answer.hit else {
            return Ok(false);
        };
        let compression = export.compression.to_string();
        // The blob is the one this build's export would make only with the
        // same compression and the same clamp on file times; else the layer
        // is still the step's result, and the export makes the blob anew.
        let same_export =
            f.config.compression == compression && f.config.mtime_clamp == export.epoch;
        let mut labels: Labels = [(label::KEY.to_string(), key.to_string())].into();
        if same_export {
            labels.insert(label::DIFF_ID.into(), f.config.diff_id.to_string());
            labels.insert(
                format!("{}{compression}", label::BLOB_PREFIX),
                f.layer.digest.to_string(),
            );
            labels.insert(label::MTIME_CLAMP.into(), export.epoch.to_string());
            // The parent's chain ID is this layer's base only when the
            // parent's layer was exported under this clamp (or unpacked,
            // which no clamp touches): a build with another
            // SOURCE_DATE_EPOCH may have exported it last. Else no chain
            // ID is recorded, as for a parent without one.
            let epoch = export.epoch.to_string();
            let parent_chain = match parent {
                None => Some(None),
                Some(p) => unpacker
                    .snapshotter
                    .stat(p)?
                    .filter(|i| i.labels.get(label::MTIME_CLAMP).is_none_or(|c| *c == epoch))
                    .and_then(|i| i.labels.get(label::CHAIN_ID)?.parse::<Digest>().ok())
                    .map(Some),
            };
            if let Some(pc) = parent_chain {
                let chain = next_chain(pc.as_ref(), &f.config.diff_id);
                labels.insert(label::CHAIN_ID.into(), chain.to_string());
            }
        }
        let blob = LayerRef {
            digest: f.layer.digest.clone(),
            diff_id: f.config.diff_id.clone(),
            size: f.layer.size,
            media_type: f.layer.media_type.clone(),
        };
        let file = f.file.reopen().map_err(|e| {
            BuildError::io("cannot read a layer fetched from the registry cache", e)
        })?;
        match unpacker.apply_file(file, &blob, parent, name, &labels) {
            Ok(()) => {}
            Err(Apply::Refused(e)) => {
                warn(format!(
                    "{}: the cache entry for {step} is not used: its layer {} is refused: {}",
                    f.repo,
                    blob.digest,
                    error_chain(&e)
                ));
                return Ok(false);
            }
            Err(Apply::Other(e)) => return Err(e.into()),
        }
        if same_export {
            if let Err(e) = unpacker.store.adopt_blob(f.file, &blob.digest) {
                // Only a shortcut is lost: the export makes the blob again.
                tracing::debug!("keeping a layer from the registry cache: {e}");
            }
        }
        if self.push_repo.as_deref() == Some(f.repo.as_str()) {
            self.in_push_repo.borrow_mut().insert(key.clone());
        }
        Ok(true)
    }
}

impl Drop for Lookups {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// Pushes the entries of every layer step of every stage built (`stages`:
/// each stage's layers by its index) to the `--cache-to` repository
/// (exporting the layers of stages other than the target first), but for
/// those restored from it. Failures are warnings.
pub(super) fn push(
    cache: Option<&RegistryCache>,
    unpacker: &Unpacker<'_>,
    export: ExportAs,
    plan: &Plan,
    mut stages: HashMap<usize, Vec<Layer>>,
    lookups: Option<&Lookups>,
) {
    let Some((cache, to)) = cache.and_then(|c| Some((c, c.to.as_ref()?))) else {
        return;
    };
    let reporter = unpacker.reporter;
    let warn = |text: String| reporter.message(Level::Warn, &text);
    let repo = Repo::new(cache.transport(to));
    // Said to be down already (once): no more requests to it.
    let down = lookups.is_some_and(|l| {
        l.repos
            .iter()
            .any(|r| r.name() == repo.name() && r.down.load(Ordering::Relaxed))
    });
    if down {
        return;
    }
    let skip = lookups.map(|l| l.in_push_repo.borrow().clone());
    let mut entries = Vec::new();
    let mut seen = HashSet::new();
    for stage in &plan.stages {
        let Some(layers) = stages.get_mut(&stage.index) else {
            continue;
        };
        let refs = match image::export_layers(
            unpacker.store,
            unpacker.snapshotter,
            reporter,
            layers,
            export.compression,
            export.epoch,
        ) {
            Ok(refs) => refs,
            Err(e) => {
                warn(format!(
                    "{}: stage {} is not pushed to the registry cache: {}",
                    repo.name(),
                    stage.label(),
                    error_chain(&e)
                ));
                continue;
            }
        };
        let steps: Vec<_> = stage
            .steps
            .iter()
            .filter_map(|ps| match &ps.kind {
                StepKind::Layer { key, parent, .. } => Some((key, parent, &ps.step.text)),
                StepKind::Metadata => None,
            })
            .collect();
        // The stage's layers are its base's, then one per layer step.
        let Some(base) = refs.len().checked_sub(steps.len()) else {
            continue;
        };
        for ((key, parent, text), layer) in steps.into_iter().zip(&refs[base..]) {
            if skip.as_ref().is_some_and(|s| s.contains(key)) || !seen.insert(key.clone()) {
                continue;
            }
            let config = EntryConfig {
                format: FORMAT,
                key: key.clone(),
                parent: parent.clone(),
                diff_id: layer.diff_id.clone(),
                compression: export.compression.to_string(),
                mtime_clamp: export.epoch,
                step: text.clone(),
            };
            let blob = LayerBlob {
                digest: layer.digest.clone(),
                size: layer.size,
                media_type: layer.media_type.clone(),
            };
            entries.push((config, blob));
        }
    }
    if entries.is_empty() {
        return;
    }
    reporter.message(
        Level::Info,
        &format!("pushing {} cache entries to {}", entries.len(), repo.name()),
    );
    let failed = crate::transport::block_on(async {
        Ok::<_, TransportError>(service::pushes(&repo, unpacker.store, entries).await)
    });
    match failed {
        Ok(None) => {}
        Ok(Some(why)) => warn(format!(
            "{}: the registry cache does not take this build's entries ({why}); the image is built, the cache is not updated",
            repo.name()
        )),
        Err(e) => warn(format!(
            "{}: the registry cache is not updated: {}",
            repo.name(),
            error_chain(&e)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_repositories_are_named_without_tag_or_digest() {
        let r = parse_repository("docker://registry.lan:5000/ci/cache").unwrap();
        assert_eq!(r.name(), "registry.lan:5000/ci/cache");
        assert_eq!(
            parse_repository("ghcr.io/org/cache").unwrap().name(),
            "ghcr.io/org/cache"
        );
        for tagged in [
            "registry.lan/cache:latest",
            "registry.lan/cache@sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            let e = parse_repository(tagged).unwrap_err();
            assert!(matches!(e, RepositoryError::Tagged), "{tagged}: {e}");
        }
        assert!(matches!(
            parse_repository("Bad/Name"),
            Err(RepositoryError::Name(_))
        ));
    }

    #[test]
    fn a_cache_registry_gets_three_attempts_per_request() {
        let cache = RegistryCache {
            from: vec![],
            to: None,
            options: RegistryOptions::default(),
        };
        assert_eq!(RegistryOptions::default().retry.max_attempts, 6);
        assert_eq!(cache.options().retry.max_attempts, 3);
    }
}
