//! The images of the store, walked from `index.json`: every manifest and
//! index, config and layer each entry reaches must be present, of the size
//! its descriptor gives, and parse as its media type says; a manifest's
//! config lists as many diff IDs as it has layers. A finding about one blob
//! is made once and names every image it breaks.

use std::collections::{HashMap, HashSet};

use oci_spec::image::{Descriptor, ImageConfiguration, ImageIndex};

use super::{Facts, Finding, Fix, Report};
use crate::digest::Digest;
use crate::image::media::{self, DocKind, Document, MAX_DOCUMENT};
use crate::store::{descriptor_digest, valid_ref_name, Store, REF_NAME};

/// Walks from every entry of the index; returns every digest reached.
pub(super) fn walk(
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
                .read_blob(&digest, MAX_DOCUMENT)
                .map_err(|e| e.to_string())
                .and_then(|bytes| Document::parse(&desc, &bytes).map_err(|e| e.to_string()));
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
    // An artifact's config (`application/vnd.oci.empty.v1+json`, a Helm
    // chart's, ...) is not an image config and is not read as one.
    if !media::is_config(desc.media_type()) {
        return None;
    }
    let bytes = match store.read_blob(digest, MAX_DOCUMENT) {
        Ok(b) => b,
        Err(e) => return Some(format!("cannot be read: {e}")),
    };
    serde_json::from_slice::<ImageConfiguration>(&bytes)
        .err()
        .map(|e| format!("is not a valid image config: {e}"))
}

/// The number of diff IDs in a manifest's config, if it can be read.
fn diff_id_count(store: &Store, config: &Descriptor, facts: &Facts) -> Option<usize> {
    if !media::is_config(config.media_type()) {
        return None;
    }
    let d = descriptor_digest(config).ok()?;
    if facts.corrupt.contains(&d) || !facts.blobs.contains_key(&d) {
        return None;
    }
    let bytes = store.read_blob(&d, MAX_DOCUMENT).ok()?;
    let c: ImageConfiguration = serde_json::from_slice(&bytes).ok()?;
    Some(c.rootfs().diff_ids().len())
}
