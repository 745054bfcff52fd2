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
use crate::image::walk::{Bounds, Node, Role, Walk};
use crate::store::{descriptor_digest, valid_ref_name, Store, REF_NAME};

/// Walks from every entry of the index; returns every digest reached.
///
/// Each entry is walked on its own ([`Walk`] visits a digest once), so a
/// blob shared by several images is met once per image, and each finding
/// about it names them all.
pub(super) fn walk(
    store: &Store,
    index: &ImageIndex,
    facts: &mut Facts,
    report: &mut Report,
) -> HashSet<Digest> {
    facts.walk_complete = true;
    let mut reached = HashSet::new();
    let mut findings = ByBlob::default();
    let index_path = store.path().join("index.json").display().to_string();
    for (i, desc) in index.manifests().iter().enumerate() {
        let reference = desc
            .annotations()
            .as_ref()
            .and_then(|a| a.get(REF_NAME))
            .cloned();
        let image = Image {
            name: reference
                .clone()
                .unwrap_or_else(|| format!("<untagged {}>", desc.digest())),
            reference,
        };
        if let Some(r) = &image.reference {
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
        let Ok(mut walk) = Walk::new([desc.clone()], Bounds::none()) else {
            report.push(
                Finding::damaged("bad-descriptor", format!("index.json entry {} ({}) has the digest `{}`; jbuild only uses sha256 digests", i + 1, image.name, desc.digest()), index_path.clone())
                    .action(remove_image_action(&image.reference)),
            );
            continue;
        };
        if DocKind::of(desc.media_type()).is_none() {
            report.push(
                Finding::damaged(
                    "bad-descriptor",
                    format!(
                        "index.json entry {} ({}) has media type `{}`, not a manifest or an index",
                        i + 1,
                        image.name,
                        desc.media_type()
                    ),
                    index_path.clone(),
                )
                .action(remove_image_action(&image.reference)),
            );
            continue;
        }
        // Unbounded, the walk refuses no graph: `next_node` and
        // `expand_usable` do not fail here.
        while let Ok(Some(node)) = walk.next_node() {
            reached.insert(node.digest.clone());
            if node.role == Role::Subject {
                // A referrer's subject may live elsewhere: it is only kept
                // reachable, and walked where the index names it.
                walk.leave(&node);
                continue;
            }
            if let Some(doc) = visit(store, &node, &image, facts, &mut findings, report) {
                // Children whose digest jbuild cannot use are not followed.
                if walk.expand_usable(&node, &doc).is_err() {
                    break;
                }
            }
        }
    }
    reached
}

/// The image an index entry names, as findings name it.
struct Image {
    reference: Option<String>,
    /// The ref name, or `<untagged DIGEST>`.
    name: String,
}

/// Findings about one blob are made once, and name every image it breaks.
#[derive(Default)]
struct ByBlob(HashMap<(Digest, &'static str), usize>);

impl ByBlob {
    /// Adds `image` to the finding of `kind` about `digest`, or makes it.
    fn note(
        &mut self,
        report: &mut Report,
        digest: &Digest,
        image: &Image,
        kind: &'static str,
        make: impl FnOnce() -> Finding,
    ) {
        match self.0.get(&(digest.clone(), kind)) {
            Some(&at) => add_image(&mut report.findings[at], image),
            None => {
                let mut f = make();
                f.images.push(image.name.clone());
                self.0.insert((digest.clone(), kind), report.findings.len());
                report.findings.push(f);
            }
        }
    }
}

fn add_image(f: &mut Finding, image: &Image) {
    if !f.images.contains(&image.name) {
        f.images.push(image.name.clone());
    }
}

/// Checks one node of `image`; returns the document to expand, if it is a
/// manifest or an index that could be read.
fn visit(
    store: &Store,
    node: &Node,
    image: &Image,
    facts: &mut Facts,
    findings: &mut ByBlob,
    report: &mut Report,
) -> Option<Document> {
    let (digest, desc) = (&node.digest, &node.desc);
    let what = what_blob(node);
    let at = || store.blob_path(digest).display().to_string();
    let Some(&size) = facts.blobs.get(digest) else {
        if node.is_document() {
            facts.walk_complete = false;
        }
        findings.note(report, digest, image, "missing-blob", || {
            Finding::damaged("missing-blob", format!("{what} {digest} is missing"), at())
                .action(pull_again_action(&image.reference))
        });
        return None;
    };
    if facts.corrupt.contains(digest) {
        if node.is_document() {
            facts.walk_complete = false;
        }
        // The corrupt-blob finding exists: add this image to it.
        if let Some(f) = report
            .findings
            .iter_mut()
            .find(|f| f.fix == Some(Fix::DeleteCorruptBlob(digest.clone())))
        {
            add_image(f, image);
            if let Some(rest) = f.what.strip_prefix("blob ") {
                f.what = format!("{what} {rest}");
            }
        }
        return None;
    }
    if size != desc.size() {
        findings.note(report, digest, image, "size-mismatch", || {
            Finding::damaged(
                "size-mismatch",
                format!(
                    "{what} {digest} is {size} bytes, but its descriptor says {}",
                    desc.size()
                ),
                at(),
            )
            .action(pull_again_action(&image.reference))
        });
    }
    if node.role == Role::Config {
        if let Some(problem) = config_problem(store, digest, desc) {
            findings.note(report, digest, image, "bad-config", || {
                Finding::damaged(
                    "bad-config",
                    format!("image config {digest} {problem}"),
                    at(),
                )
                .action(pull_again_action(&image.reference))
            });
        }
        return None;
    }
    if !node.is_document() {
        return None;
    }
    let parsed = store
        .read_blob(digest, MAX_DOCUMENT)
        .map_err(|e| e.to_string())
        .and_then(|bytes| Document::parse(desc, &bytes).map_err(|e| e.to_string()));
    let doc = match parsed {
        Ok(doc) => doc,
        Err(problem) => {
            facts.walk_complete = false;
            findings.note(report, digest, image, "bad-manifest", || {
                Finding::damaged(
                    "bad-manifest",
                    format!("{what} {digest} cannot be read: {problem}"),
                    at(),
                )
                .action(pull_again_action(&image.reference))
            });
            return None;
        }
    };
    if let Document::Manifest(m) = &doc {
        if let Some(n) = diff_id_count(store, m.config(), facts) {
            if n != m.layers().len() {
                findings.note(report, digest, image, "layer-count", || {
                    Finding::damaged(
                        "layer-count",
                        format!(
                            "manifest {digest} lists {} layers but its config lists {n} diff IDs",
                            m.layers().len()
                        ),
                        at(),
                    )
                    .action(pull_again_action(&image.reference))
                });
            }
        }
    }
    Some(doc)
}

fn what_blob(node: &Node) -> &'static str {
    if node.role == Role::Config {
        return "image config";
    }
    match DocKind::of(node.desc.media_type()) {
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
