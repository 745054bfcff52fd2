//! Checking the image store: the layout files, `index.json`, every blob
//! (re-hashed, streaming), and everything the index reaches.
//!
//! A blob whose content does not match its name is *corrupt*; `--repair`
//! deletes it, so the next `jbuild pull` (or build) writes it again. A blob
//! the index reaches but the store lacks is *missing*. Both name the images
//! they break. Blobs nothing reaches are reclaimable, as `jbuild prune`
//! would count them — but only when every manifest and index on the way
//! could be read: otherwise the walk cannot tell what they refer to, and
//! nothing is offered for removal.
//!
//! A file under `blobs/sha256/` whose name is not a digest is damage, not a
//! leftover: jbuild never writes one there (its temporary files live in
//! `.jbuild/tmp/`), OCI tools may refuse the layout because of it, and it is
//! not jbuild's to delete — the user moves it out.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io;
use std::path::Path;

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex};

use super::{CheckError, Finding, Fix, Report};
use crate::digest::{Digest, HashingReader};
use crate::store::json::{DocKind, Document, MAX_MANIFEST_SIZE};
use crate::store::{descriptor_digest, valid_ref_name, Store, REF_NAME};

const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

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

/// Checks the store at `dir`, adding findings to `report`.
pub fn check(dir: &Path, report: &mut Report) -> Result<Facts, CheckError> {
    let mut facts = Facts::default();
    if !dir.is_dir() {
        report
            .notes
            .push(format!("there is no store at {} yet", dir.display()));
        facts.walk_complete = true;
        return Ok(facts);
    }
    let store = Store::open_unchecked(dir);
    check_layout_file(dir, report);
    let index = read_index(dir, report);
    scan_blobs(&store, &mut facts, report)?;
    if let Some(index) = index {
        report.summary.images = index.manifests().len();
        let reachable = walk(&store, &index, &mut facts, report);
        if facts.walk_complete {
            let mut unreferenced: Vec<_> = facts
                .blobs
                .iter()
                .filter(|(d, _)| !reachable.contains(*d) && !facts.corrupt.contains(*d))
                .collect();
            unreferenced.sort();
            for (d, size) in unreferenced {
                report.push(
                    Finding::reclaimable(
                        "unreferenced-blob",
                        format!("blob {d} is not used by any image"),
                        store.blob_path(d).display().to_string(),
                        Fix::CollectBlob(d.clone()),
                    )
                    .bytes(*size),
                );
            }
        } else {
            report.notes.push(
                "blobs no image uses are not counted while a manifest is damaged or missing".into(),
            );
        }
    }
    settle_corrupt(&facts, report);
    report.summary.blobs = facts.blobs.len();
    report.summary.blob_bytes = facts.blobs.values().sum();
    facts.store = Some(store);
    Ok(facts)
}

/// A corrupt blob names the images to fetch again; one no image uses is
/// only reclaimable.
fn settle_corrupt(facts: &Facts, report: &mut Report) {
    for f in &mut report.findings {
        let Some(Fix::DeleteCorruptBlob(_)) = &f.fix else {
            continue;
        };
        if !f.images.is_empty() {
            let names: Vec<String> = f
                .images
                .iter()
                .filter(|i| !i.starts_with('<'))
                .map(|i| format!("`jbuild pull {i}`"))
                .collect();
            f.action = if names.is_empty() {
                "`jbuild check --repair` deletes it; then pull or build the image that used it again".into()
            } else {
                format!("`jbuild check --repair` deletes it; then fetch the image again ({}) or build it again", names.join(", "))
            };
        } else if facts.walk_complete {
            f.severity = super::Severity::Reclaimable;
            f.what.push_str(" (no image uses it)");
            f.action = "`jbuild check --repair` removes it".into();
        }
    }
}

fn check_layout_file(dir: &Path, report: &mut Report) {
    let path = dir.join("oci-layout");
    let location = path.display().to_string();
    let fix = Fix::WriteLayoutFile(path.clone());
    let problem = match fs::read(&path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            "the store's oci-layout file is missing".to_string()
        }
        Err(e) => format!("the store's oci-layout file cannot be read: {e}"),
        Ok(bytes) => match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => match v.get("imageLayoutVersion").and_then(|v| v.as_str()) {
                Some(ver) if ver.starts_with("1.") => return,
                Some(ver) => {
                    report.push(
                        Finding::damaged(
                            "layout-version",
                            format!("the store is an OCI layout of version {ver}, which jbuild does not read (1.x)"),
                            location,
                        )
                        .action("point $JBUILD_ROOT elsewhere, or move this store aside"),
                    );
                    return;
                }
                None => "the store's oci-layout file has no imageLayoutVersion".to_string(),
            },
            Err(e) => format!("the store's oci-layout file is not valid JSON ({e})"),
        },
    };
    report.push(
        Finding::damaged(
            "layout-file",
            format!("{problem}: OCI tools will not read the store"),
            location,
        )
        .action("`jbuild check --repair` writes it again ({\"imageLayoutVersion\":\"1.0.0\"})")
        .fix(fix),
    );
}

fn read_index(dir: &Path, report: &mut Report) -> Option<ImageIndex> {
    let path = dir.join("index.json");
    let location = path.display().to_string();
    let action = "restore index.json from a backup; blobs are not affected, but until then jbuild \
                  cannot tell which images the store holds (`jbuild check --repair` does not touch it)";
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            let what = match e.kind() {
                io::ErrorKind::NotFound => "the store's index.json is missing".to_string(),
                _ => format!("the store's index.json cannot be read: {e}"),
            };
            report.push(Finding::damaged("index", what, location).action(action));
            return None;
        }
    };
    match serde_json::from_slice::<ImageIndex>(&bytes) {
        Ok(i) => Some(i),
        Err(e) => {
            report.push(
                Finding::damaged(
                    "index",
                    format!("the store's index.json does not parse ({e})"),
                    location,
                )
                .action(action),
            );
            None
        }
    }
}

/// Re-hashes every file under `blobs/sha256/`, one buffer at a time.
fn scan_blobs(store: &Store, facts: &mut Facts, report: &mut Report) -> Result<(), CheckError> {
    let dir = store.path().join("blobs/sha256");
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(CheckError::io(format!("cannot read {}", dir.display()), e)),
    };
    for entry in entries {
        let entry =
            entry.map_err(|e| CheckError::io(format!("cannot read {}", dir.display()), e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        let digest = format!("sha256:{name}").parse::<Digest>().ok();
        let Some(digest) = digest.filter(|_| is_file) else {
            report.push(
                Finding::damaged(
                    "not-a-blob",
                    format!("`{name}` in the store's blob directory is not a blob (only files named by their sha256 digest belong there)"),
                    path.display().to_string(),
                )
                .action("move it out of the store: OCI tools may refuse the layout because of it"),
            );
            continue;
        };
        let file = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                report.push(
                    Finding::damaged(
                        "unreadable-blob",
                        format!("blob {digest} cannot be read: {e}"),
                        path.display().to_string(),
                    )
                    .action("check the file's permissions and the disk"),
                );
                continue;
            }
        };
        let mut reader = HashingReader::new(io::BufReader::with_capacity(1 << 20, file));
        if let Err(e) = io::copy(&mut reader, &mut io::sink()) {
            report.push(
                Finding::damaged("unreadable-blob", format!("blob {digest} cannot be read: {e}"), path.display().to_string())
                    .action("check the disk; `jbuild check --repair` deletes the blob, then pull or build what uses it again")
                    .fix(Fix::DeleteCorruptBlob(digest.clone())),
            );
            facts.corrupt.insert(digest.clone());
            facts.blobs.insert(digest, 0);
            continue;
        }
        let (actual, size, _) = reader.finish();
        if actual != digest {
            facts.corrupt.insert(digest.clone());
            report.push(
                Finding::damaged(
                    "corrupt-blob",
                    format!("blob {digest} is corrupt: its {size} bytes hash to {actual}"),
                    path.display().to_string(),
                )
                .action("`jbuild check --repair` deletes it; then pull or build the images that use it again")
                .fix(Fix::DeleteCorruptBlob(digest.clone()))
                .bytes(size),
            );
        }
        facts.blobs.insert(digest, size);
    }
    Ok(())
}

/// Walks from every entry of the index; returns every digest reached.
fn walk(
    store: &Store,
    index: &ImageIndex,
    facts: &mut Facts,
    report: &mut Report,
) -> HashSet<Digest> {
    facts.walk_complete = true;
    let mut reached = HashSet::new();
    // Findings about one blob are made once, and name every image it breaks.
    let mut by_blob: HashMap<(Digest, &'static str), usize> = HashMap::new();
    let index_path = store.path().join("index.json").display().to_string();
    for (i, desc) in index.manifests().iter().enumerate() {
        let reference = desc
            .annotations()
            .as_ref()
            .and_then(|a| a.get(REF_NAME))
            .cloned();
        let image = reference
            .clone()
            .unwrap_or_else(|| format!("<untagged {}>", desc.digest()));
        if let Some(r) = &reference {
            if !valid_ref_name(r) {
                report.push(
                    Finding::damaged(
                        "bad-ref-name",
                        format!(
                            "index.json entry {} has the name `{r}`, which OCI tools refuse",
                            i + 1
                        ),
                        index_path.clone(),
                    )
                    .action("edit index.json to remove or rename the entry"),
                );
            }
        }
        let Ok(digest) = descriptor_digest(desc) else {
            report.push(
                Finding::damaged("bad-descriptor", format!("index.json entry {} ({image}) has the digest `{}`; jbuild only uses sha256 digests", i + 1, desc.digest()), index_path.clone())
                    .action(remove_image_action(&reference)),
            );
            continue;
        };
        if DocKind::of(desc.media_type()).is_none() {
            report.push(
                Finding::damaged("bad-descriptor", format!("index.json entry {} ({image}) has media type `{}`, not a manifest or an index", i + 1, desc.media_type()), index_path.clone())
                    .action(remove_image_action(&reference)),
            );
            continue;
        }
        let mut seen = HashSet::new();
        let mut todo = vec![(digest, desc.clone(), false)];
        while let Some((digest, desc, is_config)) = todo.pop() {
            if !seen.insert(digest.clone()) {
                continue;
            }
            reached.insert(digest.clone());
            let mut note = |kind: &'static str, make: &dyn Fn() -> Finding| match by_blob
                .get(&(digest.clone(), kind))
            {
                Some(&at) => {
                    let f = &mut report.findings[at];
                    if !f.images.contains(&image) {
                        f.images.push(image.clone());
                    }
                }
                None => {
                    let mut f = make();
                    f.images.push(image.clone());
                    by_blob.insert((digest.clone(), kind), report.findings.len());
                    report.findings.push(f);
                }
            };
            let doc_kind = DocKind::of(desc.media_type());
            let Some(&size) = facts.blobs.get(&digest) else {
                if doc_kind.is_some() {
                    facts.walk_complete = false;
                }
                note("missing-blob", &|| {
                    Finding::damaged(
                        "missing-blob",
                        format!("{} {digest} is missing", what_blob(&desc, is_config)),
                        store.blob_path(&digest).display().to_string(),
                    )
                    .action(pull_again_action(&reference))
                });
                continue;
            };
            if facts.corrupt.contains(&digest) {
                if doc_kind.is_some() {
                    facts.walk_complete = false;
                }
                // The corrupt-blob finding exists: add this image to it.
                if let Some(f) = report
                    .findings
                    .iter_mut()
                    .find(|f| f.fix == Some(Fix::DeleteCorruptBlob(digest.clone())))
                {
                    if !f.images.contains(&image) {
                        f.images.push(image.clone());
                    }
                    if let Some(rest) = f.what.strip_prefix("blob ") {
                        f.what = format!("{} {rest}", what_blob(&desc, is_config));
                    }
                }
                continue;
            }
            if size != desc.size() {
                note("size-mismatch", &|| {
                    Finding::damaged(
                        "size-mismatch",
                        format!(
                            "{} {digest} is {size} bytes, but its descriptor says {}",
                            what_blob(&desc, is_config),
                            desc.size()
                        ),
                        store.blob_path(&digest).display().to_string(),
                    )
                    .action(pull_again_action(&reference))
                });
            }
            if is_config {
                if let Some(problem) = config_problem(store, &digest, &desc) {
                    note("bad-config", &|| {
                        Finding::damaged(
                            "bad-config",
                            format!("image config {digest} {problem}"),
                            store.blob_path(&digest).display().to_string(),
                        )
                        .action(pull_again_action(&reference))
                    });
                }
                continue;
            }
            if doc_kind.is_none() {
                continue;
            }
            let parsed = store
                .read_blob(&digest, MAX_MANIFEST_SIZE)
                .map_err(|e| e.to_string())
                .and_then(|bytes| Document::parse(&desc, &bytes));
            let doc = match parsed {
                Ok(doc) => doc,
                Err(problem) => {
                    facts.walk_complete = false;
                    note("bad-manifest", &|| {
                        Finding::damaged(
                            "bad-manifest",
                            format!(
                                "{} {digest} cannot be read: {problem}",
                                what_blob(&desc, false)
                            ),
                            store.blob_path(&digest).display().to_string(),
                        )
                        .action(pull_again_action(&reference))
                    });
                    continue;
                }
            };
            if let Document::Manifest(m) = &doc {
                if let Some(n) = diff_id_count(store, m.config(), facts) {
                    if n != m.layers().len() {
                        note("layer-count", &|| {
                            Finding::damaged("layer-count", format!("manifest {digest} lists {} layers but its config lists {n} diff IDs", m.layers().len()), store.blob_path(&digest).display().to_string()).action(pull_again_action(&reference))
                        });
                    }
                }
                if let Ok(d) = descriptor_digest(m.config()) {
                    todo.push((d, m.config().clone(), true));
                }
                for l in m.layers() {
                    if let Ok(d) = descriptor_digest(l) {
                        todo.push((d, l.clone(), false));
                    }
                }
                // A referrer's subject may live elsewhere: only keep it reachable.
                if let Some(s) = m.subject() {
                    if let Ok(d) = descriptor_digest(s) {
                        reached.insert(d);
                    }
                }
            } else {
                for child in doc.children() {
                    if let Ok(d) = descriptor_digest(child) {
                        todo.push((d, child.clone(), false));
                    }
                }
            }
        }
    }
    reached
}

fn what_blob(desc: &Descriptor, is_config: bool) -> &'static str {
    if is_config {
        return "image config";
    }
    match DocKind::of(desc.media_type()) {
        Some(DocKind::Manifest) => "manifest",
        Some(DocKind::Index) => "image index",
        None => "layer",
    }
}

fn pull_again_action(reference: &Option<String>) -> String {
    match reference {
        Some(r) => format!("pull `{r}` again (`jbuild pull`) or build it again; or remove it with `jbuild rmi {r}`"),
        None => "pull or build the image again; `jbuild check --repair` deletes damaged blob files first".into(),
    }
}

fn remove_image_action(reference: &Option<String>) -> String {
    match reference {
        Some(r) => format!("remove it with `jbuild rmi {r}` and pull or build it again"),
        None => "edit index.json to remove the entry".into(),
    }
}

/// What is wrong with an image config, if anything.
fn config_problem(store: &Store, digest: &Digest, desc: &Descriptor) -> Option<String> {
    let media = desc.media_type().to_string();
    if media != OCI_CONFIG && media != DOCKER_CONFIG {
        return Some(format!("has media type `{media}`, not an image config's"));
    }
    let bytes = match store.read_blob(digest, MAX_MANIFEST_SIZE) {
        Ok(b) => b,
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    serde_json::from_slice::<ImageConfiguration>(&bytes)
        .err()
        .map(|e| format!("is not a valid image config: {e}"))
}

/// The number of diff IDs in a manifest's config, if it can be read.
fn diff_id_count(store: &Store, config: &Descriptor, facts: &Facts) -> Option<usize> {
    let d = descriptor_digest(config).ok()?;
    if facts.corrupt.contains(&d) || !facts.blobs.contains_key(&d) {
        return None;
    }
    let bytes = store.read_blob(&d, MAX_MANIFEST_SIZE).ok()?;
    let c: ImageConfiguration = serde_json::from_slice(&bytes).ok()?;
    Some(c.rootfs().diff_ids().len())
}
