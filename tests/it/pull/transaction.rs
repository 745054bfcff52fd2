//! The pull transaction (`jbuild::image::pull`) at the library level, with
//! an OCI layout as the source: no registry and no binary. `jbuild pull`
//! and a build's FROM both go through it, so a refused image must leave
//! the store and the snapshots exactly as they were either way.

use crate::support::layer::compressed;
use crate::support::tar as tar_support;
use jbuild::blame::Blame;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use oci_spec::image::Descriptor;
use serde_json::json;
use tar_support::ustar;

use jbuild::digest::Digest;
use jbuild::engine::{self, BuildEnv, BuildOptions};
use jbuild::image::pull::{Arrivals, FetchError, ImageSource, PullError};
use jbuild::image::unpack::UnpackError;
use jbuild::image::{self, gc, LayerPolicy, Platform, Unpacker};
use jbuild::layer::Compression;
use jbuild::report::{Reporter, SilentReporter};
use jbuild::snapshot::dir::DirSnapshotter;
use jbuild::snapshot::Snapshotter;
use jbuild::store::{canonical_json, oci_digest, ImageName, Store};
use jbuild::transport::{
    block_on, copy_image_telling, CopyOptions, LayoutTransport, Transport, TransportError,
};

/// An OCI layout directory as a source, images named `pulled/<ref>`.
pub(super) struct LayoutSource {
    dir: PathBuf,
}

impl ImageSource for LayoutSource {
    fn name(&self, reference: &str) -> Option<String> {
        Some(format!("pulled/{reference}"))
    }

    fn fetch(
        &self,
        store: &Store,
        reference: &ImageName,
        platform: &Platform,
        _reporter: &dyn Reporter,
        arrivals: &Arrivals,
    ) -> Result<Descriptor, FetchError> {
        // The layout's references are bare names, no tag.
        let reference = &reference.name();
        let src = LayoutTransport::new(self.dir.clone());
        let dst = LayoutTransport::from_store(store.clone());
        let options = CopyOptions {
            jobs: 2,
            platform: Some(platform.clone()),
        };
        block_on(async {
            let desc = copy_image_telling(
                &src,
                reference,
                &dst,
                None,
                &options,
                Some(arrivals),
                &|_| {},
            )
            .await?;
            dst.finish().await?;
            Ok(desc)
        })
        .map_err(|e: TransportError| FetchError {
            user: e.is_user_error(),
            source: Box::new(e),
        })
    }
}

/// Writes an image of `layers` (plain tars) into the layout `dir`, named
/// `reference`.
pub(crate) fn publish(dir: &Path, reference: &str, layers: &[Vec<u8>]) {
    let plain: Vec<_> = layers
        .iter()
        .map(|l| (l.clone(), Compression::None, Digest::of(l).to_string()))
        .collect();
    publish_as(dir, reference, &plain);
}

/// Writes an image into the layout `dir`, named `reference`, of layers
/// given as (blob, its compression, the diff ID its config claims).
fn publish_as(dir: &Path, reference: &str, layers: &[(Vec<u8>, Compression, String)]) {
    let layout = Store::open(dir).unwrap();
    let mut diff_ids = Vec::new();
    let mut descs = Vec::new();
    for (blob, compression, diff_id) in layers {
        let (d, n) = layout.put_bytes(blob).unwrap();
        diff_ids.push(diff_id.clone());
        descs.push(
            json!({"mediaType": compression.media_type(), "digest": d.to_string(), "size": n}),
        );
    }
    let config = json!({
        "architecture": Platform::default_for_host().architecture,
        "os": "freebsd",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let (config_digest, config_size) = layout.put_bytes(&canonical_json(&config)).unwrap();
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest.to_string(), "size": config_size},
        "layers": descs,
    });
    let (digest, size) = layout.put_bytes(&canonical_json(&manifest)).unwrap();
    let desc = Descriptor::new(
        oci_spec::image::MediaType::ImageManifest,
        size,
        oci_digest(&digest),
    );
    layout.tag_ref(reference, &desc).unwrap();
}

/// A state root as `jbuild` lays it out (`JBUILD_ROOT=top`: the store, the
/// `dir` snapshots), and a layout to pull from holding `good` (two layers)
/// and `bad` (the same first layer, then a setuid file, which the default
/// policy refuses).
pub(super) struct World {
    _tmp: tempfile::TempDir,
    pub(super) top: PathBuf,
    pub(super) store: Store,
    pub(super) snapshots: DirSnapshotter,
    pub(super) source: LayoutSource,
}

/// The layers of `good`, bottom first (plain tars).
pub(crate) fn good_layers() -> [Vec<u8>; 2] {
    [
        ustar(&[("etc/motd", 0o644, b"welcome\n")]),
        ustar(&[("etc/hosts", 0o644, b"::1\n")]),
    ]
}

pub(super) fn world() -> World {
    let tmp = tempfile::tempdir().unwrap();
    let top = tmp.path().to_path_buf();
    let [base, good_top] = good_layers();
    let setuid = ustar(&[("bin/su", 0o4755, b"#!su")]);
    let layout = top.join("layout");
    publish(&layout, "good", &[base.clone(), good_top]);
    publish(&layout, "bad", &[base, setuid]);
    World {
        store: Store::open(&top.join("store")).unwrap(),
        snapshots: DirSnapshotter::new(top.join("snapshots/dir")).unwrap(),
        source: LayoutSource { dir: layout },
        top,
        _tmp: tmp,
    }
}

impl World {
    pub(super) fn unpacker(&self) -> Unpacker<'_> {
        Unpacker::new(
            &self.store,
            &self.snapshots,
            &SilentReporter,
            LayerPolicy::default(),
        )
    }

    pub(super) fn pull(&self, reference: &str) -> Result<image::pull::Pulled, PullError> {
        image::pull(
            &self.unpacker(),
            &self.source,
            reference,
            &Platform::default_for_host(),
        )
    }

    /// What a refused pull must leave as it was: names, blobs, snapshots.
    fn state(&self) -> (BTreeSet<String>, BTreeSet<Digest>, BTreeSet<String>) {
        let names = self
            .store
            .list()
            .unwrap()
            .into_iter()
            .map(|(n, d)| format!("{n} {}", d.digest()))
            .collect();
        let blobs = self.store.blob_digests().unwrap().into_iter().collect();
        let snapshots = self
            .snapshots
            .list()
            .unwrap()
            .into_iter()
            .map(|i| i.name)
            .collect();
        (names, blobs, snapshots)
    }
}

#[test]
fn a_pulled_image_is_named_only_once_its_layers_are_unpacked() {
    let w = world();
    let pulled = w.pull("good").unwrap();
    assert_eq!(pulled.name, "pulled/good");
    let (names, _, snapshots) = w.state();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names.iter().next().unwrap().starts_with("pulled/good "));
    let chains: Vec<_> = snapshots
        .iter()
        .filter(|s| s.starts_with("chain-"))
        .collect();
    assert_eq!(chains.len(), 2, "{snapshots:?}");
    assert!(gc::unreferenced_blobs(&w.store).unwrap().is_empty());
}

#[test]
fn a_refused_layer_leaves_no_name_no_snapshot_and_no_blob() {
    let w = world();
    w.pull("good").unwrap();
    let before = w.state();
    let err = w.pull("bad").unwrap_err();
    assert!(err.is_user_error(), "{err}");
    let PullError::Unpack { name, source } = &err else {
        panic!("not an unpack refusal: {err:?}");
    };
    assert_eq!(name, "pulled/bad");
    assert!(
        matches!(
            **source,
            UnpackError::LayerRefused {
                index: 2,
                count: 2,
                ..
            }
        ),
        "{source:?}"
    );
    assert!(err.to_string().contains("it cannot be unpacked"), "{err}");
    // The first layer of `bad` is `good`'s: its snapshot was there before
    // and stays; nothing else was added.
    assert_eq!(w.state(), before);
}

#[test]
fn a_refused_layer_into_an_empty_root_leaves_nothing() {
    let w = world();
    let before = w.state();
    w.pull("bad").unwrap_err();
    assert_eq!(w.state(), before);
    assert!(w.store.list().unwrap().is_empty());
}

#[test]
fn a_damaged_stored_layer_is_blamed_as_such() {
    let w = world();
    w.pull("good").unwrap();
    // The layers' snapshots go (as `prune --cache` does), the blobs stay.
    gc::prune(&w.store, &w.snapshots, true).unwrap();
    let img = image::load(&w.store, "pulled/good", &Platform::default_for_host()).unwrap();
    let layer = img.layer_digests().unwrap().remove(1);
    let path = w.store.blob_path(&layer);
    let mut bytes = fs::read(&path).unwrap();
    bytes[600] ^= 0xff;
    let mut perms = fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    fs::set_permissions(&path, perms).unwrap();
    fs::write(&path, bytes).unwrap();

    let err = w.pull("good").unwrap_err();
    match &err {
        PullError::DamagedStoredLayer { digest, .. } => assert_eq!(digest, &layer),
        other => panic!("not blamed on the store: {other:?}"),
    }
    assert!(
        !err.is_user_error(),
        "a damaged store is not the user's mistake"
    );
    assert!(err.to_string().contains("jbuild check --repair"), "{err}");
}

/// The options of a build, tagged `out`, of the Jailfile `text`, written
/// into a context directory under `top`.
pub(super) fn build_options(top: &Path, text: &str) -> BuildOptions {
    let context = top.join("context");
    fs::create_dir_all(&context).unwrap();
    let jailfile = context.join("Jailfile");
    fs::write(&jailfile, text).unwrap();
    BuildOptions {
        context,
        jailfile,
        tags: vec![ImageName::parse("out").unwrap()],
        build_args: Default::default(),
        no_cache: false,
        platform: None,
        compression: Compression::Gzip,
        epoch: 0,
        hash_cache: None,
        target: None,
        labels: Default::default(),
        annotations: Default::default(),
        jail_annotations: false,
        mount_cache: None,
        secrets: Default::default(),
        context_source: None,
    }
}

#[test]
fn a_build_whose_from_image_has_a_refused_layer_leaves_no_name() {
    let w = world();
    w.pull("good").unwrap();
    let before = w.state();
    let env = BuildEnv::new(&w.store, &w.snapshots, &SilentReporter).with_image_source(&w.source);
    let opts = build_options(&w.top, "FROM bad\nLABEL made=here\n");
    let err = engine::build(&env, &opts).unwrap_err();
    assert!(err.is_user_error(), "{err}");
    let text = jbuild::report::error_chain(&err);
    assert!(text.contains("is refused"), "{text}");
    assert_eq!(w.state(), before, "{text}");

    // The same build FROM the good image, into a root that lacks it, pulls
    // it under its name and builds.
    let w = world();
    let env = BuildEnv::new(&w.store, &w.snapshots, &SilentReporter).with_image_source(&w.source);
    fs::write(&opts.jailfile, "FROM good\nLABEL made=here\n").unwrap();
    engine::build(&env, &opts).unwrap();
    let names: Vec<String> = w
        .store
        .list()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert!(names.iter().any(|n| n == "pulled/good"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("out")), "{names:?}");
}

#[test]
fn a_diff_id_mismatch_found_at_the_end_leaves_nothing_behind() {
    // The layer itself is sound (its blob digest is right, every entry
    // applies); only the diff ID its config claims is not the sha256 of
    // its tar, which is known once the whole stream has gone through.
    let tar = ustar(&[
        ("etc/motd", 0o644, b"welcome\n"),
        ("srv/data", 0o644, &[7u8; 300_000][..]),
    ]);
    let wrong = Digest::of(b"another tar").to_string();
    for compression in [Compression::Gzip, Compression::Zstd] {
        let w = world();
        let layout = w.top.join("layout");
        let blob = compressed(&tar, compression);
        publish_as(
            &layout,
            "lying",
            &[(blob.clone(), compression, wrong.clone())],
        );
        let before = w.state();
        let err = w.pull("lying").unwrap_err();
        assert!(err.is_user_error(), "{compression:?}: {err}");
        let text = jbuild::report::error_chain(&err);
        assert!(
            text.contains(&wrong),
            "{compression:?}: names the claimed diff ID: {text}"
        );
        assert!(
            text.contains(&Digest::of(&tar).to_string()),
            "{compression:?}: and the real one: {text}"
        );
        assert_eq!(w.state(), before, "{compression:?}: {text}");
        assert!(w.store.list().unwrap().is_empty(), "{compression:?}");
        let active = fs::read_dir(w.top.join("snapshots/dir"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .flat_map(|d| fs::read_dir(d).unwrap().flatten().map(|e| e.path()))
            .collect::<Vec<_>>();
        assert!(active.is_empty(), "{compression:?}: trees left: {active:?}");

        // The same blob under its true diff ID is pulled.
        let right = Digest::of(&tar).to_string();
        publish_as(&layout, "true", &[(blob, compression, right)]);
        w.pull("true").unwrap();
    }
}

/// A source that brings `reference` from the layout `dir` blob by blob,
/// as a transport's copy does (each blob told once stored, the untagged
/// entry written last), but that stops at `at` until `between` has
/// returned.
pub(crate) struct Between<'a> {
    pub(crate) dir: PathBuf,
    pub(crate) at: HoldAt,
    pub(crate) between: &'a (dyn Fn() + Sync),
}

/// Where [`Between`] stops.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum HoldAt {
    /// Before it tells the pull of the image's last layer: the pull sits
    /// between two layers, the one below committed and nothing standing
    /// on it.
    LastLayer,
    /// Once it has told every blob, before it writes the untagged entry:
    /// the pull may unpack every layer, while no entry in `index.json`
    /// names the image yet.
    Entry,
}

impl ImageSource for Between<'_> {
    fn name(&self, reference: &str) -> Option<String> {
        Some(format!("pulled/{reference}"))
    }

    fn fetch(
        &self,
        store: &Store,
        reference: &ImageName,
        _platform: &Platform,
        _reporter: &dyn Reporter,
        arrivals: &Arrivals,
    ) -> Result<Descriptor, FetchError> {
        let reference = &reference.name();
        let layout = Store::open_existing(&self.dir).unwrap();
        let desc = layout.resolve(reference).unwrap().unwrap();
        let digest: Digest = desc.digest().to_string().parse().unwrap();
        let bytes = layout.read_blob(&digest, 1 << 20).unwrap();
        arrivals.manifest(&desc, &bytes);
        let manifest: oci_spec::image::ImageManifest = serde_json::from_slice(&bytes).unwrap();
        let mut blobs = vec![manifest.config().clone()];
        blobs.extend(manifest.layers().iter().cloned());
        let last = blobs.len() - 1;
        for (i, blob) in blobs.iter().enumerate() {
            let d: Digest = blob.digest().to_string().parse().unwrap();
            store
                .put_bytes(&layout.read_blob(&d, 1 << 20).unwrap())
                .unwrap();
            if i == last && self.at == HoldAt::LastLayer {
                (self.between)();
            }
            arrivals.stored(&d);
        }
        if self.at == HoldAt::Entry {
            (self.between)();
        }
        store.put_bytes(&bytes).unwrap();
        store.add_untagged(&desc).unwrap();
        Ok(desc)
    }
}

/// Whether a process waits for an exclusive `flock` of `file` (a `->` line
/// of `/proc/locks` names the request blocked on the file's inode).
pub(super) fn waits_for_flock(file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(file).unwrap();
    // As the kernel prints it: major and minor in hex, the inode in decimal.
    let id = format!(
        "{:02x}:{:02x}:{}",
        libc::major(meta.dev()),
        libc::minor(meta.dev()),
        meta.ino()
    );
    fs::read_to_string("/proc/locks").unwrap().lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&"->")
            && f.get(2) == Some(&"FLOCK")
            && f.get(4) == Some(&"WRITE")
            && f.get(6) == Some(&id.as_str())
    })
}

/// Waits (at most a minute) until `done` answers yes.
pub(crate) fn wait_until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..6000 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("still waiting for {what} after a minute");
}

/// `jbuild prune` while a pull has committed its first layer and not yet
/// begun its second (the image has no name yet, so no image uses that
/// layer): the pull's pin — the store lock it holds shared — keeps prune
/// waiting until the image is named; prune then removes nothing of it, and
/// the image is whole.
#[test]
fn prune_while_a_pull_is_between_two_layers_waits_and_takes_nothing_of_it() {
    let w = world();
    let diff_ids: Vec<Digest> = good_layers().iter().map(|l| Digest::of(l)).collect();
    let chains: Vec<String> = image::chain_ids(&diff_ids)
        .iter()
        .map(image::SnapshotName::chain)
        .collect();
    let lock_file = w.top.join("store/.jbuild/lock");
    let prune_started = std::sync::atomic::AtomicBool::new(false);
    let pruned = std::sync::Mutex::new(None);
    // Prune runs on its own thread once the first layer is committed; the
    // pull goes on once prune has finished, or once it waits for the lock.
    let between = || {
        wait_until("prune to start", || {
            prune_started.load(std::sync::atomic::Ordering::SeqCst)
        });
        wait_until("prune to finish or to wait for the store lock", || {
            pruned.lock().unwrap().is_some() || waits_for_flock(&lock_file)
        });
    };
    let source = Between {
        dir: w.top.join("layout"),
        at: HoldAt::LastLayer,
        between: &between,
    };
    let pulled = std::thread::scope(|s| {
        s.spawn(|| {
            wait_until("the first layer's snapshot", || {
                w.snapshots.stat(&chains[0]).unwrap().is_some()
            });
            prune_started.store(true, std::sync::atomic::Ordering::SeqCst);
            let summary = gc::prune(&w.store, &w.snapshots, false);
            *pruned.lock().unwrap() = Some(summary);
        });
        image::pull(
            &w.unpacker(),
            &source,
            "good",
            &Platform::default_for_host(),
        )
    });
    let summary = pruned.into_inner().unwrap().unwrap();
    let pulled = pulled.unwrap_or_else(|e| {
        panic!(
            "the pull failed after prune ({summary:?}): {}",
            jbuild::report::error_chain(&e)
        )
    });
    let summary = summary.unwrap();
    assert_eq!(summary.snapshots_removed, 0, "{summary:?}");
    assert!(summary.blobs_removed.is_empty(), "{summary:?}");
    assert_eq!(pulled.name, "pulled/good");
    for chain in &chains {
        assert!(w.snapshots.stat(chain).unwrap().is_some(), "{chain} gone");
    }
    let (top, _) = w
        .unpacker()
        .top("pulled/good", &Platform::default_for_host())
        .unwrap();
    let root = w.snapshots.view(&top.unwrap()).unwrap();
    assert_eq!(fs::read(root.join("etc/motd")).unwrap(), b"welcome\n");
    assert_eq!(fs::read(root.join("etc/hosts")).unwrap(), b"::1\n");
    assert!(gc::unreferenced_blobs(&w.store).unwrap().is_empty());
}
