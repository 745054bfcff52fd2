//! What a build runs against ([`BuildEnv`]: the store, the snapshotter,
//! the reporter, the executor made on first use, where FROM images and
//! cached steps come from) and what it is asked to do ([`BuildOptions`]),
//! and what it answers ([`BuildOutput`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use oci_spec::image::Descriptor;

use super::add::AddPlaces;
use super::cache::RegistryCache;
use super::freebsd::FreeBsdEnv;
use super::pull_policy::PullPolicy;
use crate::digest::Digest;
use crate::exec::{self, Executor};
use crate::image::{ImageSource, LayerPolicy, Platform, Unpacker};
use crate::layer::Compression;
use crate::report::Reporter;
use crate::snapshot::Snapshotter;
use crate::store::{ImageName, Store};

/// What a build runs against.
pub struct BuildEnv<'a> {
    pub store: &'a Store,
    pub snapshotter: &'a dyn Snapshotter,
    pub reporter: &'a dyn Reporter,
    /// The executor is made only when a step needs one, so builds of native
    /// instructions work on any host, without privileges.
    pub executor: OnceLock<Box<dyn Executor>>,
    /// Releases, the package cache and repositories, jail-parameter consent.
    pub freebsd: FreeBsdEnv,
    /// Where a FROM image missing from the store is fetched from (a
    /// registry), as `docker build` does; `None`: it must be in the store.
    pub image_source: Option<&'a dyn ImageSource>,
    /// What layers unpacked from images may hold and how big they may be.
    pub layer_policy: LayerPolicy,
    /// When FROM images are asked of `image_source` (`--pull`).
    pub pull: PullPolicy,
    /// `--cache-from` / `--cache-to`: steps shared through registries.
    pub registry_cache: Option<RegistryCache>,
    /// Where ADD keeps what it fetches and extracts; `None`: ADD reads
    /// local files only, extracting archives in the system's temporary
    /// directory.
    pub add: Option<AddPlaces>,
}

impl<'a> BuildEnv<'a> {
    pub fn new(
        store: &'a Store,
        snapshotter: &'a dyn Snapshotter,
        reporter: &'a dyn Reporter,
    ) -> Self {
        BuildEnv {
            store,
            snapshotter,
            reporter,
            executor: OnceLock::new(),
            freebsd: FreeBsdEnv::default(),
            image_source: None,
            layer_policy: LayerPolicy::default(),
            pull: PullPolicy::default(),
            registry_cache: None,
            add: None,
        }
    }

    /// Keeps what ADD fetches under jbuild's root ([`AddPlaces`]).
    pub fn with_add_places(mut self, places: AddPlaces) -> Self {
        self.add = Some(places);
        self
    }

    /// Looks steps up in, and pushes them to, the registries of `cache`.
    pub fn with_registry_cache(mut self, cache: RegistryCache) -> Self {
        self.registry_cache = Some(cache);
        self
    }

    /// Asks `image_source` for FROM images as `policy` says.
    pub fn with_pull(mut self, policy: PullPolicy) -> Self {
        self.pull = policy;
        self
    }

    /// Unpacks image layers as `policy` says.
    pub fn with_layers(mut self, policy: LayerPolicy) -> Self {
        self.layer_policy = policy;
        self
    }

    /// The unpacker for FROM and `COPY --from` images.
    pub fn unpacker(&self) -> Unpacker<'_> {
        Unpacker::new(
            self.store,
            self.snapshotter,
            self.reporter,
            self.layer_policy.clone(),
        )
    }

    /// Uses these FreeBSD settings (release mirror, pkg cache, ...).
    pub fn with_freebsd(mut self, freebsd: FreeBsdEnv) -> Self {
        self.freebsd = freebsd;
        self
    }

    /// Fetches FROM images the store lacks from `source`.
    pub fn with_image_source(mut self, source: &'a dyn ImageSource) -> Self {
        self.image_source = Some(source);
        self
    }

    pub(super) fn executor(&self) -> Result<&dyn Executor, exec::ExecError> {
        if let Some(e) = self.executor.get() {
            return Ok(e.as_ref());
        }
        let made = exec::host_executor()?;
        Ok(self.executor.get_or_init(|| made).as_ref())
    }
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub context: PathBuf,
    pub jailfile: PathBuf,
    pub tags: Vec<ImageName>,
    pub build_args: BTreeMap<String, String>,
    pub no_cache: bool,
    pub platform: Option<Platform>,
    pub compression: Compression,
    /// Image times and the clamp for file times (`SOURCE_DATE_EPOCH`).
    pub epoch: u64,
    /// Where content hashes of context files persist between builds.
    pub hash_cache: Option<PathBuf>,
    /// `--target`: the stage to build (name or index; default: the last).
    pub target: Option<String>,
    /// `--label`: config labels over the Jailfile's LABELs. Like LABEL,
    /// they change the image, never a step's cache key.
    pub labels: BTreeMap<String, String>,
    /// `--annotation`: manifest annotations.
    pub annotations: BTreeMap<String, String>,
    /// `--jail-annotations`: the image's jail parameters also as manifest
    /// annotations `org.freebsd.jail.<param>` (under `annotations`).
    pub jail_annotations: bool,
    /// Where `RUN --mount=type=cache` directories persist between builds
    /// (`cache/mounts` under jbuild's root); `None` refuses cache mounts.
    pub mount_cache: Option<PathBuf>,
    /// Build secrets by id (`--secret`), for `RUN --mount=type=secret`;
    /// their `Debug` is `<redacted>`.
    pub secrets: BTreeMap<String, exec::SecretData>,
    /// Where `context` came from when it was fetched (a git repository,
    /// an archive): named in the provenance, and a repository's commit
    /// is part of the key of every step that reads the context.
    pub context_source: Option<super::context::ContextSource>,
}

#[derive(Debug, Clone)]
pub struct BuildOutput {
    pub manifest: Descriptor,
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub steps_run: usize,
    pub steps_cached: usize,
    /// Steps restored from a registry cache (`--cache-from`).
    pub steps_fetched: usize,
    /// What went into the build, for its provenance.
    pub facts: super::facts::BuildFacts,
}
