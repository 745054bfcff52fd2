//! The registry build cache through the `jbuild` binary, against the real
//! Distribution registry: two empty state roots (at different paths, with
//! build contexts at different paths and with different file times) that
//! share only a registry. Root A builds a recipe of RUN steps (a busybox
//! root in the Linux namespace executor) with `--cache-to`; root B builds
//! it with `--cache-from` and runs nothing, getting the same manifest
//! digest; a changed line re-runs that step and the ones after it only;
//! tampered entries are refused with a warning naming the step, which then
//! runs; a registry that fails in the middle of a build, or is not there,
//! gives one warning and a correct image.

use crate::support::common;
use crate::support::hostile as hostile_support;
use crate::support::registry as registry_support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use jbuild::digest::Digest;
use jbuild::engine::cache::entry::{self, EntryConfig, LayerBlob};
use jbuild::store::oci_digest;
use jbuild::transport::{
    self, ManifestRole, RegistryOptions, RegistryRef, RegistryTransport, Transport, TransportError,
};
use oci_spec::image::{Descriptor, ImageManifest, MediaType};
use registry_support::proxy::{Fault, FaultKind, Proxy};
use registry_support::{run_bounded, Registry, LIMIT};
use serde_json::Value;

/// Layer steps of [`JAILFILE`], by their index in the build's events.
const LAYER_STEPS: [usize; 6] = [2, 3, 4, 6, 7, 8];
const JAILFILE: &str = "FROM --platform=linux/amd64 scratch
COPY busybox /bin/busybox
RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]
RUN mkdir -p /srv && echo one > /srv/one
ENV WORD=two
RUN echo \"$WORD\" > /srv/two && hostname > /srv/host
RUN echo three > /srv/three && chmod 600 /srv/three
RUN cat /srv/one /srv/two /srv/three > /srv/all
CMD [\"/bin/cat\", \"/srv/all\"]
";

/// A build context with the recipe and busybox-static, at `dir`, its files
/// dated `mtime`. The tests need root (namespaces) and the static busybox.
fn context(dir: &Path, jailfile: &str, mtime: i64) -> PathBuf {
    // The registry cache tests run RUN steps in namespaces.
    crate::support::lane::require(crate::support::lane::Lane::Root);
    crate::support::lane::require(crate::support::lane::Lane::Busybox);
    let bb = common::static_busybox().expect("the busybox lane found it");
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join("Jailfile"), jailfile).unwrap();
    fs::copy(bb, dir.join("busybox")).unwrap();
    for f in ["Jailfile", "busybox"] {
        filetime::set_file_mtime(dir.join(f), filetime::FileTime::from_unix_time(mtime, 0))
            .unwrap();
    }
    dir.to_path_buf()
}

/// One build: its output and its `--json` events.
struct Build {
    out: Output,
    events: Vec<Value>,
}

impl Build {
    fn result(&self) -> &Value {
        self.events
            .iter()
            .find(|e| e["event"] == "result")
            .unwrap_or_else(|| panic!("no result event:\n{}", self.text()))
    }

    fn digest(&self) -> String {
        self.result()["manifest"].as_str().unwrap().to_string()
    }

    /// How each step ended, by index.
    fn steps(&self) -> BTreeMap<usize, String> {
        self.events
            .iter()
            .filter(|e| e["event"] == "step_done")
            .map(|e| {
                (
                    e["index"].as_u64().unwrap() as usize,
                    e["result"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn warnings(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e["event"] == "message" && e["level"] == "warning")
            .map(|e| e["text"].as_str().unwrap().to_string())
            .collect()
    }

    fn text(&self) -> String {
        format!(
            "status {}\nstdout:\n{}\nstderr:\n{}",
            self.out.status,
            String::from_utf8_lossy(&self.out.stdout),
            String::from_utf8_lossy(&self.out.stderr)
        )
    }
}

/// `jbuild --json build` with its state under `home/root`; must succeed.
fn build(home: &Path, ctx: &Path, extra: &[String]) -> Build {
    fs::create_dir_all(home).unwrap();
    let mut c = registry_support::jbuild(home);
    c.args(["--json", "build", "-t", "app:1"])
        .args(extra)
        .arg(ctx);
    let out = run_bounded(&mut c, LIMIT);
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let b = Build { out, events };
    assert!(b.out.status.success(), "the build failed: {}", b.text());
    b
}

fn flag(name: &str, repo: &str) -> Vec<String> {
    vec![name.to_string(), repo.to_string()]
}

/// The step keys of the snapshots committed in `home`'s root.
fn step_keys(home: &Path) -> BTreeSet<String> {
    fs::read_dir(home.join("root/snapshots/dir/committed"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            name.strip_prefix("step-").map(str::to_string)
        })
        .collect()
}

/// The cache repository `host/cache`, through jbuild's own transport.
fn repo(host: &str) -> RegistryTransport {
    RegistryTransport::new(
        RegistryRef::parse(&format!("{host}/cache")).unwrap(),
        RegistryOptions::default(),
    )
}

/// An entry as the registry holds it.
struct Stored {
    manifest: ImageManifest,
    config: EntryConfig,
}

/// Every entry whose key is in `keys`, by its step's text.
fn entries(host: &str, keys: &BTreeSet<String>) -> BTreeMap<String, Stored> {
    let t = repo(host);
    transport::block_on(async {
        let mut out = BTreeMap::new();
        let dir = tempfile::tempdir().unwrap();
        for hex in keys {
            let key: Digest = format!("sha256:{hex}").parse().unwrap();
            let desc = t.resolve(&entry::tag(&key)).await?;
            let manifest: ImageManifest =
                serde_json::from_slice(&t.fetch_manifest(&desc).await?).unwrap();
            let path = dir.path().join("config");
            t.fetch_blob(manifest.config(), &path, &|_| {}).await?;
            let config: EntryConfig = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
            out.insert(config.step.clone(), Stored { manifest, config });
        }
        Ok::<_, TransportError>(out)
    })
    .unwrap()
}

fn blob_of(desc: &Descriptor) -> LayerBlob {
    LayerBlob {
        digest: desc.digest().to_string().parse().unwrap(),
        size: desc.size(),
        media_type: desc.media_type().to_string(),
    }
}

/// Replaces the entry of `config.key` with one claiming `config` over
/// `layer`, pushing `layer_bytes` first when given.
fn overwrite(host: &str, config: &EntryConfig, layer: &LayerBlob, layer_bytes: Option<&[u8]>) {
    let t = repo(host);
    let e = entry::encode(config, layer);
    let dir = tempfile::tempdir().unwrap();
    transport::block_on(async {
        let mut blobs = vec![(
            Descriptor::new(
                MediaType::from(entry::CONFIG_MEDIA_TYPE),
                e.config.len() as u64,
                oci_digest(&e.config_digest),
            ),
            e.config.clone(),
        )];
        if let Some(bytes) = layer_bytes {
            let desc = Descriptor::new(
                MediaType::from(layer.media_type.as_str()),
                layer.size,
                oci_digest(&layer.digest),
            );
            blobs.push((desc, bytes.to_vec()));
        }
        for (i, (desc, bytes)) in blobs.iter().enumerate() {
            let path = dir.path().join(i.to_string());
            fs::write(&path, bytes).unwrap();
            t.push_blob(desc, &path, &|_| {}).await?;
        }
        let desc = Descriptor::new(
            MediaType::ImageManifest,
            e.manifest.len() as u64,
            oci_digest(&e.manifest_digest),
        );
        t.push_manifest(
            &e.manifest,
            &desc,
            ManifestRole::Root {
                tag: Some(&entry::tag(&config.key)),
            },
        )
        .await
    })
    .unwrap();
}

fn assert_steps(b: &Build, expected: &[(usize, &str)]) {
    let steps = b.steps();
    for (index, result) in expected {
        assert_eq!(
            steps.get(index).map(String::as_str),
            Some(*result),
            "step {index}: {:?}\n{}",
            steps,
            b.text()
        );
    }
}

#[test]
fn a_second_runner_restores_every_step_from_the_registry_and_gets_the_same_image() {
    let registry = Registry::start();
    // Each lookup's answer is slowed down, so lookups made one after the
    // other would show in the order of requests.
    let slow = FaultKind::Slow(std::time::Duration::from_millis(300));
    let proxy = Proxy::start(
        registry.port,
        vec![Fault::new("GET", "/manifests/jbuild-v1-", 1000, slow)],
    );
    let cache = format!("127.0.0.1:{}/cache", proxy.port);
    let t = tempfile::tempdir().unwrap();

    let home_a = t.path().join("a");
    let ctx_a = context(&t.path().join("ctx-a"), JAILFILE, 1_000_000);
    let a = build(&home_a, &ctx_a, &flag("--cache-to", &cache));
    assert_eq!(a.result()["steps_run"], LAYER_STEPS.len(), "{}", a.text());
    assert!(a.warnings().is_empty(), "{:?}", a.warnings());

    // Another machine: other paths for the root and the context, other
    // file times; only the registry is shared.
    let home_b = t.path().join("elsewhere/deeper/b");
    let ctx_b = context(&t.path().join("other/context"), JAILFILE, 1_700_000_000);
    proxy.clear_log();
    // As a CI job runs it: from and to the same repository.
    let mut both = flag("--cache-from", &cache);
    both.extend(flag("--cache-to", &cache));
    let b = build(&home_b, &ctx_b, &both);
    assert_eq!(b.result()["steps_run"], 0, "{}", b.text());
    assert_eq!(
        b.result()["steps_fetched"],
        LAYER_STEPS.len(),
        "{}",
        b.text()
    );
    let fetched: Vec<(usize, &str)> = LAYER_STEPS.iter().map(|i| (*i, "fetched")).collect();
    assert_steps(&b, &fetched);
    assert_eq!(b.digest(), a.digest(), "the same image on both runners");
    assert!(b.warnings().is_empty(), "{:?}", b.warnings());
    assert_eq!(
        step_keys(&home_a),
        step_keys(&home_b),
        "keys depend on nothing local to a machine"
    );

    // One lookup per step, at most: a manifest GET by the key's tag.
    let mut lookups: BTreeMap<String, usize> = BTreeMap::new();
    for r in proxy.requests() {
        if let Some(tag) = r.strip_prefix("GET /v2/cache/manifests/") {
            *lookups.entry(tag.to_string()).or_default() += 1;
        }
    }
    assert_eq!(lookups.len(), LAYER_STEPS.len(), "{lookups:?}");
    assert!(lookups.values().all(|n| *n == 1), "{lookups:?}");
    // All made at once, before the first step needed its answer: the
    // requests after the first `GET /v2/` are the six lookups.
    let first: Vec<String> = proxy.requests().into_iter().skip(1).take(6).collect();
    assert!(
        first
            .iter()
            .all(|r| r.starts_with("GET /v2/cache/manifests/")),
        "{:#?}",
        proxy.requests()
    );
    // Entries restored from the repository are not pushed back to it.
    let requests = proxy.requests();
    assert!(
        requests.iter().all(|r| r.starts_with("GET ")),
        "a build restored from its --cache-to repository writes nothing: {requests:?}"
    );
    // Per step restored: the lookup, the config, the layer; and one
    // `GET /v2/` as the connection opens (docs/cache.md, "Cost").
    assert_eq!(requests.len(), 3 * LAYER_STEPS.len() + 1, "{requests:#?}");

    // What was restored is sound, by jbuild check's rules.
    let mut check = registry_support::jbuild(&home_b);
    let out = run_bounded(check.arg("check"), LIMIT);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A changed line re-runs that step and the ones after it only (in a
    // third empty root, so nothing comes from a local snapshot).
    let changed = JAILFILE.replace("echo three >", "echo THREE >");
    let ctx_c = context(&t.path().join("ctx-c"), &changed, 1_000_000);
    let c = build(&t.path().join("c"), &ctx_c, &flag("--cache-from", &cache));
    assert_steps(
        &c,
        &[
            (2, "fetched"),
            (3, "fetched"),
            (4, "fetched"),
            (6, "fetched"),
            (7, "done"),
            (8, "done"),
        ],
    );
    assert_eq!(c.result()["steps_run"], 2, "{}", c.text());
}

#[test]
fn tampered_entries_are_refused_with_a_warning_naming_the_step_which_then_runs() {
    let registry = Registry::start();
    let host = registry.host();
    let cache = format!("{host}/cache");
    let t = tempfile::tempdir().unwrap();
    let home_a = t.path().join("a");
    let a = build(
        &home_a,
        &context(&t.path().join("ctx-a"), JAILFILE, 0),
        &flag("--cache-to", &cache),
    );
    let stored = entries(&host, &step_keys(&home_a));
    let by_start = |s: &str| {
        stored
            .iter()
            .find(|(text, _)| text.starts_with(s))
            .map(|(_, e)| e)
            .unwrap_or_else(|| panic!("no entry for `{s}`: {:?}", stored.keys()))
    };

    // Step 4 claims a diff ID its layer does not have.
    let s4 = by_start("RUN mkdir");
    let mut config = s4.config.clone();
    config.diff_id = Digest::of(b"not this layer");
    overwrite(&host, &config, &blob_of(&s4.manifest.layers()[0]), None);
    // Step 6 names the layer of step 7 (a real layer, another step's).
    let (s6, s7) = (by_start("RUN echo \"$WORD\""), by_start("RUN echo three"));
    overwrite(&host, &s6.config, &blob_of(&s7.manifest.layers()[0]), None);
    // Step 7's layer is one the applier refuses: it writes outside the root.
    let tar = hostile_support::Tar::new()
        .file(b"../../escaped", b"out of the root")
        .finish();
    let gz = hostile_support::gzip(&tar);
    let mut config = s7.config.clone();
    config.diff_id = Digest::of(&tar);
    let hostile = LayerBlob {
        digest: Digest::of(&gz),
        size: gz.len() as u64,
        media_type: hostile_support::GZIP.into(),
    };
    overwrite(&host, &config, &hostile, Some(&gz));

    let b = build(
        &t.path().join("b"),
        &context(&t.path().join("ctx-b"), JAILFILE, 0),
        &flag("--cache-from", &cache),
    );
    assert_steps(
        &b,
        &[
            (2, "fetched"),
            (3, "fetched"),
            (4, "done"),
            (6, "done"),
            (7, "done"),
            (8, "fetched"),
        ],
    );
    let warnings = b.warnings();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    for (w, step) in warnings.iter().zip([
        "step 4 (`RUN mkdir",
        "step 6 (`RUN echo",
        "step 7 (`RUN echo three",
    ]) {
        assert!(
            w.contains(step) && w.contains("is not used"),
            "a warning names the step: {w}"
        );
    }
    assert!(warnings[0].contains("does not match"), "{}", warnings[0]);
    assert!(!t.path().join("escaped").exists() && !Path::new("/escaped").exists());
    assert_eq!(b.digest(), a.digest(), "the steps ran: the same image");
    // Entries restored on top of steps that ran here are sound too.
    let mut check = registry_support::jbuild(&t.path().join("b"));
    let out = run_bounded(check.arg("check"), LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("all sound"),
        "{stdout}"
    );
}

#[test]
fn a_registry_that_fails_mid_build_or_is_absent_gives_one_warning_and_a_correct_image() {
    let registry = Registry::start();
    let host = registry.host();
    let t = tempfile::tempdir().unwrap();
    let home_a = t.path().join("a");
    // A is the cacheless build B must match.
    let a = build(
        &home_a,
        &context(&t.path().join("ctx-a"), JAILFILE, 0),
        &flag("--cache-to", &format!("{host}/cache")),
    );
    let stored = entries(&host, &step_keys(&home_a));
    let install = stored
        .iter()
        .find(|(text, _)| text.contains("--install"))
        .map(|(_, e)| e)
        .unwrap();
    // From step 3's layer on, every request for it breaks off: to the
    // build, the registry went away after the first steps.
    let layer: &'static str = Box::leak(
        install.manifest.layers()[0]
            .digest()
            .to_string()
            .into_boxed_str(),
    );
    let proxy = Proxy::start(
        registry.port,
        vec![Fault::new("GET", layer, 1000, FaultKind::Reset)],
    );
    let cache = format!("127.0.0.1:{}/cache", proxy.port);
    let b = build(
        &t.path().join("b"),
        &context(&t.path().join("ctx-b"), JAILFILE, 0),
        &flag("--cache-from", &cache),
    );
    assert_steps(&b, &[(2, "fetched"), (3, "done")]);
    let warnings = b.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("cannot be used") && warnings[0].contains(&cache),
        "{}",
        warnings[0]
    );
    assert_eq!(b.digest(), a.digest());

    // No registry at all, for both flags: one warning (no push is tried to
    // a registry found down), and every step runs.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let nowhere = format!("127.0.0.1:{gone}/cache");
    let mut flags = flag("--cache-from", &nowhere);
    flags.extend(flag("--cache-to", &nowhere));
    let c = build(
        &t.path().join("c"),
        &context(&t.path().join("ctx-c"), JAILFILE, 0),
        &flags,
    );
    let warnings = c.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("cannot be used"), "{warnings:?}");
    // Only --cache-to, to a registry that is not there: one warning, and
    // the build succeeds with the same image.
    let d = build(
        &t.path().join("d"),
        &context(&t.path().join("ctx-d"), JAILFILE, 0),
        &flag("--cache-to", &nowhere),
    );
    let warnings = d.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("the cache is not updated"),
        "{warnings:?}"
    );
    assert_eq!(d.digest(), a.digest());
    assert_eq!(c.result()["steps_run"], LAYER_STEPS.len());
    assert_eq!(c.digest(), a.digest());
}

#[test]
fn the_steps_of_every_stage_are_shared_not_only_the_targets() {
    let registry = Registry::start();
    let cache = format!("{}/cache", registry.host());
    let t = tempfile::tempdir().unwrap();
    // Native instructions only: no root or busybox needed here.
    let ctx = common::example("multi-stage", t.path());
    let a = build(&t.path().join("a"), &ctx, &flag("--cache-to", &cache));
    assert_eq!(a.result()["steps_run"], 7, "{}", a.text());
    let b = build(&t.path().join("b"), &ctx, &flag("--cache-from", &cache));
    assert_eq!(b.result()["steps_run"], 0, "{}", b.text());
    assert_eq!(b.result()["steps_fetched"], 7, "{}", b.text());
    assert_eq!(b.digest(), a.digest());

    // People are told too.
    let home = t.path().join("c");
    fs::create_dir_all(&home).unwrap();
    let mut c = registry_support::jbuild(&home);
    c.args(["build", "--cache-from", &cache]).arg(&ctx);
    let out = run_bounded(&mut c, LIMIT);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("[2/11] fetched from the registry cache")
            && stderr.contains("(0 steps run, 0 cached, 7 fetched from the registry cache)"),
        "{stderr}"
    );
}

#[test]
fn a_cache_repository_with_a_tag_is_refused_before_anything_runs() {
    let t = tempfile::tempdir().unwrap();
    let ctx = common::example("multi-stage", t.path());
    for (flag, repo) in [
        ("--cache-to", "registry.lan/cache:latest"),
        ("--cache-from", "registry.lan/cache@sha256:0000000000000000000000000000000000000000000000000000000000000000"),
    ] {
        let home = t.path().join("home");
        fs::create_dir_all(&home).unwrap();
        let mut c = registry_support::jbuild(&home);
        let out = run_bounded(c.args(["build", flag, repo]).arg(&ctx), LIMIT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("{flag} {repo}")) && stderr.contains("without a tag or digest"),
            "{stderr}"
        );
        assert!(!home.join("root/snapshots").exists(), "nothing ran");
    }
}
