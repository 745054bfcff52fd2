//! `jbuild verify`: rebuild an image from the recipe it carries and compare.
//!
//! An image jbuild built holds its Jailfile (the `org.jbuild.jailfile`
//! label), its time (`created`, the build's `SOURCE_DATE_EPOCH`), its
//! platform, its labels, its manifest annotations and its base image's
//! digest. Given the build context, that is everything a rebuild needs but
//! the build arguments and the target stage, which the build's provenance
//! ([`super::provenance`]) adds when it is at hand.
//!
//! The rebuild runs in a scratch directory the caller gives: a store of its
//! own there, and snapshots the caller made for it
//! ([`VerifyEnv::scratch_snapshots`], the CLI's are `dir` snapshots under
//! the scratch directory), so no cached step of the user's is reused.
//! The only thing it takes from the user's store is what FROM reads, each
//! image copied at the digest the original build used when that is known
//! (`PinnedStore`). Then the manifest digests are compared; when they
//! differ, the first layer that differs is named, with the step that made
//! it and the first file that differs in it ([`crate::layer::compare`]).

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::path::PathBuf;

use oci_spec::image::Descriptor;
use serde_json::Value;

use super::add::AddPlaces;
use super::env::{BuildEnv, BuildOptions};
use super::error::BuildError;
use super::freebsd::FreeBsdEnv;
use super::provenance::Provenance;
use super::pull_policy::PullPolicy;
use crate::digest::Digest;
use crate::exec::SecretData;
use crate::image::pull::{Arrivals, FetchError};
use crate::image::{
    self, ImageError, ImageSource, LayerPolicy, LoadedImage, Platform, JAILFILE_LABEL, MAX_DOCUMENT,
};
use crate::layer::compare::{first_difference, FileDifference};
use crate::layer::{Compression, LayerError};
use crate::report::Reporter;
use crate::snapshot::Snapshotter;
use crate::store::{descriptor_digest, ImageName, Store, StoreError};
use crate::transport::{self, LayoutTransport, Location};

/// The manifest annotations every jbuild image gets from its build (not
/// from `--annotation`): the rebuild makes them again.
const BUILD_ANNOTATIONS: [&str; 3] = [
    "org.opencontainers.image.created",
    "org.opencontainers.image.base.name",
    "org.opencontainers.image.base.digest",
];

/// What `jbuild verify` runs against.
pub struct VerifyEnv<'a> {
    /// The user's store: the image, and the images its FROMs name.
    pub store: &'a Store,
    pub reporter: &'a dyn Reporter,
    pub freebsd: FreeBsdEnv,
    pub layer_policy: LayerPolicy,
    /// Where what the store lacks comes from (a registry): the image when
    /// it is named `docker://REF`, and FROM images.
    pub registry: Option<&'a dyn ImageSource>,
    /// The rebuild's snapshots: empty, and apart from the user's (no
    /// cached step of theirs is reused).
    pub scratch_snapshots: &'a dyn Snapshotter,
    /// Where the rebuild's ADD keeps what it fetches: the user's
    /// (downloads are kept by their digest, git mirrors are fetched again
    /// and refs resolved anew, so nothing of the original build is taken
    /// on trust); `None`: the rebuild reads local files only.
    pub add: Option<AddPlaces>,
}

/// What to verify, and how.
#[derive(Debug, Clone)]
pub struct VerifyOptions {
    /// The image as the user names it in the store, or `docker://REF` to
    /// fetch it (into the scratch store only) from its registry.
    pub image: String,
    /// The build context to rebuild from.
    pub context: PathBuf,
    /// `--build-arg`: over the provenance's.
    pub build_args: BTreeMap<String, String>,
    /// `--target`: over the provenance's.
    pub target: Option<String>,
    /// The build's provenance, when at hand.
    pub provenance: Option<Provenance>,
    /// `--secret`: what `RUN --mount=type=secret` steps read (they reach
    /// no layer, so the original build's need not be the same bytes).
    pub secrets: BTreeMap<String, SecretData>,
    /// An empty directory for the rebuild's store and snapshots.
    pub scratch: PathBuf,
}

/// The outcome of a rebuild.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The manifest digest of the image verified.
    pub expected: Digest,
    /// The manifest digest of the rebuild.
    pub rebuilt: Digest,
    /// Where they part, when they do.
    pub difference: Option<Difference>,
}

impl Verdict {
    pub fn is_same(&self) -> bool {
        self.expected == self.rebuilt
    }
}

/// The first thing that differs between the image and its rebuild
/// (`--json` gives it as is, `kind` naming the variant).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Difference {
    /// A layer (0 is the bottom one).
    Layer {
        index: usize,
        /// The diff IDs; `None` where that image has fewer layers.
        expected: Option<Digest>,
        rebuilt: Option<Digest>,
        /// The instruction that made the image's layer, from its history.
        step: Option<String>,
        /// The first file that differs in it.
        file: Option<FileDifference>,
    },
    /// Every layer is the same; the config differs at `path`
    /// (`config.Labels.x`, `history`, ...).
    Config { path: String },
    /// Layers and config are the same; the manifest differs (its
    /// annotations, or the layers' compression).
    Manifest { path: String },
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error(transparent)]
    Image(#[from] ImageError),
    /// `docker://REF` without a registry to ask, or that it failed.
    #[error("cannot fetch `{image}`")]
    Fetch {
        image: String,
        #[source]
        source: FetchError,
    },
    /// The image holds no Jailfile: another tool made it.
    #[error("image `{0}` carries no Jailfile (no label {JAILFILE_LABEL}): only images jbuild built can be rebuilt")]
    NoRecipe(String),
    /// The provenance given is of another build.
    #[error("the provenance names the Jailfile sha256:{provenance}, but image `{image}` carries sha256:{carried}: it is the provenance of another build")]
    ProvenanceMismatch {
        image: String,
        provenance: String,
        carried: String,
    },
    #[error("rebuilding `{image}`")]
    Build {
        image: String,
        #[source]
        source: Box<BuildError>,
    },
    #[error("the scratch directory of the rebuild")]
    ScratchStore(#[source] StoreError),
    #[error("comparing layer {index}")]
    Compare {
        index: usize,
        #[source]
        source: LayerError,
    },
    #[error("reading blob {digest}")]
    Blob {
        digest: Digest,
        #[source]
        source: StoreError,
    },
}

impl Blame for VerifyError {
    fn is_user_error(&self) -> bool {
        match self {
            VerifyError::Image(e) => e.is_user_error(),
            VerifyError::Fetch { source, .. } => source.user,
            VerifyError::NoRecipe(_) | VerifyError::ProvenanceMismatch { .. } => true,
            VerifyError::Build { source, .. } => source.is_user_error(),
            VerifyError::ScratchStore(_)
            | VerifyError::Compare { .. }
            | VerifyError::Blob { .. } => false,
        }
    }
}

/// Rebuilds `opts.image` from the recipe it carries in `opts.scratch` and
/// compares the result with it.
pub fn verify(env: &VerifyEnv<'_>, opts: &VerifyOptions) -> Result<Verdict, VerifyError> {
    let host = Platform::default_for_host();
    let scratch = Store::open(&opts.scratch.join("store")).map_err(VerifyError::ScratchStore)?;
    // An image from a registry lands in the scratch store, never the user's.
    let location = opts.image.parse::<Location>();
    let fetch_failed = |source| VerifyError::Fetch {
        image: opts.image.clone(),
        source,
    };
    let (img, expected_store) = match (location, env.registry) {
        (Err(e), Some(_)) => {
            return Err(fetch_failed(FetchError {
                user: true,
                source: Box::new(e),
            }))
        }
        (Ok(Location::Registry(name)), Some(registry)) => {
            // Only copied, not unpacked: nobody reads what arrives.
            let arrivals = Arrivals::default();
            let fetched = registry
                .fetch(&scratch, &name, &host, env.reporter, &arrivals)
                .map_err(fetch_failed)?;
            let img = image::load_descriptor(&scratch, &fetched, &host, &opts.image)?;
            (img, &scratch)
        }
        _ => (image::load(env.store, &opts.image, &host)?, env.store),
    };
    let recipe = Recipe::of(&img, opts)?;
    let source = PinnedStore {
        store: env.store.clone(),
        pins: recipe
            .pins
            .iter()
            .filter_map(|(typed, d)| {
                let name = ImageName::parse(typed).ok()?;
                Some((name, (typed.clone(), d.clone())))
            })
            .collect(),
        registry: env.registry,
    };
    let build_env = BuildEnv::new(&scratch, env.scratch_snapshots, env.reporter)
        .with_freebsd(env.freebsd.clone())
        .with_layers(env.layer_policy.clone())
        .with_image_source(&source)
        .with_pull(PullPolicy::Missing);
    let build_env = match &env.add {
        Some(places) => build_env.with_add_places(places.clone()),
        None => build_env,
    };
    let build_opts = BuildOptions {
        context: opts.context.clone(),
        jailfile: opts.context.join("Jailfile"),
        tags: Vec::new(),
        build_args: recipe.build_args.clone(),
        no_cache: false,
        platform: Some(recipe.platform.clone()),
        compression: recipe.compression,
        epoch: recipe.epoch,
        hash_cache: None,
        target: recipe.target.clone(),
        labels: recipe.labels.clone(),
        annotations: recipe.annotations.clone(),
        // Jail annotations the image had are among `recipe.annotations`.
        jail_annotations: false,
        mount_cache: Some(opts.scratch.join("mounts")),
        secrets: opts.secrets.clone(),
        context_source: None,
    };
    let out = super::build_text(&build_env, &build_opts, &recipe.jailfile).map_err(|source| {
        VerifyError::Build {
            image: opts.image.clone(),
            source: Box::new(source),
        }
    })?;
    let mut verdict = Verdict {
        expected: img.manifest_digest.clone(),
        rebuilt: out.manifest_digest.clone(),
        difference: None,
    };
    if !verdict.is_same() {
        let rebuilt = image::load_descriptor(
            &scratch,
            &out.manifest,
            &recipe.platform,
            "the rebuilt image",
        )?;
        verdict.difference = Some(difference(expected_store, &img, &scratch, &rebuilt)?);
    }
    Ok(verdict)
}

/// What the image (and its provenance) say about the build that made it.
struct Recipe {
    jailfile: String,
    epoch: u64,
    platform: Platform,
    compression: Compression,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    build_args: BTreeMap<String, String>,
    target: Option<String>,
    /// FROM references and the manifest digests the build used.
    pins: BTreeMap<String, Digest>,
}

impl Recipe {
    fn of(img: &LoadedImage, opts: &VerifyOptions) -> Result<Recipe, VerifyError> {
        let cfg = &img.config;
        let mut labels: BTreeMap<String, String> = cfg
            .config()
            .as_ref()
            .and_then(|c| c.labels().clone())
            .unwrap_or_default()
            .into_iter()
            .collect();
        let jailfile = labels
            .remove(JAILFILE_LABEL)
            .ok_or_else(|| VerifyError::NoRecipe(opts.image.clone()))?;
        let epoch = cfg
            .created()
            .as_deref()
            .and_then(|c| humantime::parse_rfc3339(c).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        let platform = Platform {
            os: cfg.os().to_string(),
            architecture: cfg.architecture().to_string(),
            variant: cfg.variant().clone(),
        };
        let compression = img
            .manifest
            .layers()
            .first()
            .and_then(|l| Compression::from_media_type(l.media_type().as_ref()))
            .unwrap_or(Compression::Gzip);
        let manifest_annotations: BTreeMap<String, String> = img
            .manifest
            .annotations()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        let mut pins = BTreeMap::new();
        let base = (
            manifest_annotations.get(BUILD_ANNOTATIONS[1]),
            manifest_annotations
                .get(BUILD_ANNOTATIONS[2])
                .and_then(|d| d.parse::<Digest>().ok()),
        );
        if let (Some(name), Some(digest)) = base {
            pins.insert(name.clone(), digest);
        }
        let annotations = manifest_annotations
            .into_iter()
            .filter(|(k, _)| !BUILD_ANNOTATIONS.contains(&k.as_str()))
            .collect();
        let mut build_args = BTreeMap::new();
        let mut target = None;
        if let Some(p) = &opts.provenance {
            let carried = Digest::of(jailfile.as_bytes());
            let named = p.invocation.config_source.digest.get("sha256");
            if named.map(String::as_str) != Some(carried.hex()) {
                return Err(VerifyError::ProvenanceMismatch {
                    image: opts.image.clone(),
                    provenance: named.cloned().unwrap_or_default(),
                    carried: carried.hex().to_string(),
                });
            }
            build_args = p.invocation.parameters.build_args.clone();
            target = Some(p.invocation.parameters.target.clone());
            pins.extend(p.images());
        }
        build_args.extend(opts.build_args.clone());
        Ok(Recipe {
            jailfile,
            epoch,
            platform,
            compression,
            labels,
            annotations,
            build_args,
            target: opts.target.clone().or(target),
            pins,
        })
    }
}

/// The first difference between `expected` (in `store`) and `rebuilt`
/// (in `scratch`): a layer, else the config, else the manifest.
fn difference(
    store: &Store,
    expected: &LoadedImage,
    scratch: &Store,
    rebuilt: &LoadedImage,
) -> Result<Difference, VerifyError> {
    let (a, b) = (expected.diff_ids()?, rebuilt.diff_ids()?);
    let differing = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i));
    if let Some(index) = differing {
        let step = expected
            .config
            .history()
            .as_ref()
            .map(|h| {
                h.iter()
                    .filter(|e| !e.empty_layer().unwrap_or(false))
                    .nth(index)
                    .and_then(|e| e.created_by().clone())
            })
            .unwrap_or_default();
        let file = match (
            expected.manifest.layers().get(index),
            rebuilt.manifest.layers().get(index),
        ) {
            (Some(x), Some(y)) => compare_layers(store, x, scratch, y, index)?,
            _ => None,
        };
        return Ok(Difference::Layer {
            index,
            expected: a.get(index).cloned(),
            rebuilt: b.get(index).cloned(),
            step,
            file,
        });
    }
    let config = |s: &Store, img: &LoadedImage| -> Result<Value, VerifyError> {
        let d = descriptor_digest(img.manifest.config()).map_err(|source| ImageError::Digest {
            image: img.manifest_digest.to_string(),
            source,
        })?;
        document(s, &d)
    };
    if let Some(path) = json_difference(&config(store, expected)?, &config(scratch, rebuilt)?) {
        return Ok(Difference::Config { path });
    }
    let path = json_difference(
        &document(store, &expected.manifest_digest)?,
        &document(scratch, &rebuilt.manifest_digest)?,
    )
    .unwrap_or_default();
    Ok(Difference::Manifest { path })
}

fn document(store: &Store, digest: &Digest) -> Result<Value, VerifyError> {
    let bytes = store
        .read_blob(digest, MAX_DOCUMENT)
        .map_err(|source| VerifyError::Blob {
            digest: digest.clone(),
            source,
        })?;
    // Both were read and parsed once already: a document that fails now
    // compares as `null`.
    Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn compare_layers(
    store: &Store,
    x: &Descriptor,
    scratch: &Store,
    y: &Descriptor,
    index: usize,
) -> Result<Option<FileDifference>, VerifyError> {
    let open = |s: &Store, d: &Descriptor| {
        let digest = descriptor_digest(d).map_err(|source| ImageError::Digest {
            image: format!("layer {index}"),
            source,
        })?;
        s.open_blob(&digest)
            .map_err(|source| VerifyError::Blob { digest, source })
    };
    first_difference(
        x.media_type().as_ref(),
        open(store, x)?,
        y.media_type().as_ref(),
        open(scratch, y)?,
    )
    .map_err(|source| VerifyError::Compare { index, source })
}

/// The first path (`config.Labels.x`, `history[2]`) where two JSON
/// documents differ, keys in sorted order.
fn json_difference(a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(p), Some(q)) => json_difference(p, q).map(|rest| join(k, &rest)),
                _ => Some(k.clone()),
            })
        }
        (Value::Array(x), Value::Array(y)) => {
            (0..x.len().max(y.len())).find_map(|i| match (x.get(i), y.get(i)) {
                (Some(p), Some(q)) => {
                    json_difference(p, q).map(|rest| format!("[{i}]{}", dot(&rest)))
                }
                _ => Some(format!("[{i}]")),
            })
        }
        _ if a == b => None,
        _ => Some(String::new()),
    }
}

fn join(key: &str, rest: &str) -> String {
    if rest.is_empty() {
        key.to_string()
    } else if rest.starts_with('[') {
        format!("{key}{rest}")
    } else {
        format!("{key}.{rest}")
    }
}

fn dot(rest: &str) -> String {
    if rest.is_empty() || rest.starts_with('[') {
        rest.to_string()
    } else {
        format!(".{rest}")
    }
}

/// FROM images from the user's store (else from the registry), at the
/// digests the original build used: an image whose name now points
/// elsewhere is refused, naming the digest to pull.
struct PinnedStore<'a> {
    store: Store,
    /// The digest each FROM image was built from, by its parsed name, with
    /// the name as the recipe wrote it (for messages).
    pins: BTreeMap<ImageName, (String, Digest)>,
    registry: Option<&'a dyn ImageSource>,
}

#[derive(Debug, thiserror::Error)]
#[error("`{reference}` in the store is {found}, but the image was built from {wanted}: pull that one (`jbuild pull REPOSITORY@{wanted}`) and tag it `{reference}`, then verify again")]
struct MovedBase {
    reference: String,
    found: String,
    wanted: Digest,
}

impl ImageSource for PinnedStore<'_> {
    fn name(&self, reference: &str) -> Option<String> {
        Some(reference.to_string())
    }

    fn fetch(
        &self,
        store: &Store,
        reference: &ImageName,
        platform: &Platform,
        reporter: &dyn Reporter,
        arrivals: &Arrivals,
    ) -> Result<Descriptor, FetchError> {
        let pinned = self.pins.get(reference);
        let wanted = pinned.map(|(_, d)| d);
        // The pinned manifest itself, when the store names it; else by name.
        let from = match wanted {
            Some(d) if matches!(self.store.resolve(&d.to_string()), Ok(Some(_))) => d.to_string(),
            _ => reference.to_string(),
        };
        let stored = matches!(self.store.resolve(&from), Ok(Some(_)));
        let desc = match self.registry {
            Some(registry) if !stored => {
                registry.fetch(store, reference, platform, reporter, arrivals)?
            }
            _ => {
                let src = LayoutTransport::from_store(self.store.clone());
                let arrivals = Some(arrivals);
                transport::registry::fetch_into(
                    &src, &from, store, platform, 2, reporter, arrivals,
                )?
            }
        };
        if let Some((typed, wanted)) = pinned {
            let found = desc.digest().to_string();
            if found != wanted.to_string() {
                return Err(FetchError {
                    user: true,
                    source: Box::new(MovedBase {
                        reference: typed.clone(),
                        found,
                        wanted: wanted.clone(),
                    }),
                });
            }
        }
        Ok(desc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_difference_names_the_first_path() {
        let a =
            json!({"config": {"Labels": {"a": "1", "b": "2"}}, "history": [{"x": 1}, {"x": 2}]});
        assert_eq!(json_difference(&a, &a), None);
        let b = json!({"config": {"Labels": {"a": "1", "b": "3"}}, "history": [{"x": 1}]});
        assert_eq!(json_difference(&a, &b).as_deref(), Some("config.Labels.b"));
        let c =
            json!({"config": {"Labels": {"a": "1", "b": "2"}}, "history": [{"x": 1}, {"x": 3}]});
        assert_eq!(json_difference(&a, &c).as_deref(), Some("history[1].x"));
    }
}
