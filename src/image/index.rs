//! Manifest lists: image indexes made here, one manifest per platform,
//! as `podman manifest` makes them.
//!
//! A list lives in the store like any image: an OCI image index blob,
//! named in `index.json` by its own name (`web:1.0`). Its *children* are
//! image manifests in the store, each listed with its platform (taken
//! from the image's config unless the caller says otherwise) and
//! optional annotations. Every change writes a new index blob and moves
//! the name to it; the old blob is left for `jbuild prune`. Because the
//! store's walk follows indexes, a list keeps its children (and their
//! layers) alive: an image built untagged into a list is not pruned.
//!
//! [`check`] is what a push asks first: every child and every blob under
//! it in the store, one child per platform. It reads only the store, so
//! a list that would publish a broken or ambiguous "multi-arch" image is
//! refused before any request is made.

use crate::blame::Blame;
use std::collections::BTreeMap;

use oci_spec::image::{Descriptor, ImageIndex, ImageManifest};
use serde_json::{json, Value};

use super::load::load_descriptor;
use super::media::{self, MAX_DOCUMENT, OCI_INDEX};
use super::{ImageError, Platform};
use crate::digest::Digest;
use crate::store::{canonical_json, descriptor_digest, ImageName, Store, StoreError, StoreLock};

/// What can go wrong with a manifest list.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("no manifest list `{0}` in the store (make one with `jbuild manifest create {0}`)")]
    NotFound(String),
    #[error("`{name}` is a {media_type}, not a manifest list (`jbuild manifest create` makes one under another name)")]
    NotAList { name: String, media_type: String },
    #[error("`{0}` already names an image or list in the store; add to it with `jbuild manifest add`, or remove it with `jbuild manifest rm` first")]
    Exists(String),
    #[error("`{image}` is itself an index; add the manifest of one platform, by its digest")]
    NestedIndex { image: String },
    #[error("manifest list `{name}` has no entry `{what}` (see `jbuild manifest inspect {name}`)")]
    NoSuchEntry { name: String, what: String },
    #[error(
        "`{what}` matches more than one entry of manifest list `{name}`; give more of the digest"
    )]
    Ambiguous { name: String, what: String },
    #[error("manifest list `{name}` has two images for {platform}: {first} and {second}; remove one with `jbuild manifest remove {name} DIGEST`")]
    DuplicatePlatform {
        name: String,
        platform: String,
        first: String,
        second: String,
    },
    #[error("manifest list `{name}`: the image for {platform} ({child}) is incomplete in the store: its {what} {missing} is missing; build or pull that image again and `jbuild manifest add` it")]
    MissingChild {
        name: String,
        platform: String,
        child: String,
        what: &'static str,
        missing: String,
    },
    #[error("manifest list `{name}`: entry {child} says no platform; add it again with --platform OS/ARCH")]
    NoPlatform { name: String, child: String },
    #[error("manifest list `{name}`")]
    Image {
        name: String,
        #[source]
        source: Box<ImageError>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Blame for IndexError {
    /// Whether the user can fix this (a name, a child, a platform) rather
    /// than it being the store's or the system's fault.
    fn is_user_error(&self) -> bool {
        match self {
            IndexError::Image { source, .. } => source.is_user_error(),
            IndexError::Store(e) => e.is_user_error(),
            _ => true,
        }
    }
}

/// How a child is added.
#[derive(Debug, Clone, Default)]
pub struct AddOptions {
    /// The platform to list the image under (default: its config's).
    pub platform: Option<Platform>,
    /// Annotations of the entry (`--annotation K=V`).
    pub annotations: BTreeMap<String, String>,
    /// Replace the entry of the same platform (as `build --manifest`
    /// does), not only an entry of the same digest (as `manifest add`).
    pub replace_platform: bool,
}

/// One entry of a list, as `manifest inspect` and the tests read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    pub digest: Digest,
    pub platform: Option<Platform>,
}

/// The platform an index entry says, normalised (`x86_64` is `amd64`).
pub fn entry_platform(d: &Descriptor) -> Option<Platform> {
    let p = d.platform().as_ref()?;
    let mut parsed = Platform::parse(&format!("{}/{}", p.os(), p.architecture())).ok()?;
    parsed.variant = p.variant().as_ref().map(|v| v.to_lowercase());
    Some(parsed)
}

/// The list `name` names: its descriptor and parsed index.
pub fn read(store: &Store, name: &ImageName) -> Result<(Descriptor, ImageIndex), IndexError> {
    let desc = store
        .resolve(&name.tagged())?
        .ok_or_else(|| IndexError::NotFound(name.to_string()))?;
    let index = read_desc(store, &name.to_string(), &desc)?;
    Ok((desc, index))
}

/// The index `desc` describes (`name` names it in messages): what
/// `jbuild images` shows of a list, named or not.
pub fn read_desc(store: &Store, name: &str, desc: &Descriptor) -> Result<ImageIndex, IndexError> {
    if !media::is_index(desc.media_type()) {
        return Err(IndexError::NotAList {
            name: name.to_string(),
            media_type: desc.media_type().to_string(),
        });
    }
    let digest = descriptor_digest(desc).map_err(|source| IndexError::Image {
        name: name.to_string(),
        source: Box::new(ImageError::Digest {
            image: desc.digest().to_string(),
            source,
        }),
    })?;
    let bytes = store.read_blob(&digest, MAX_DOCUMENT)?;
    serde_json::from_slice(&bytes).map_err(|source| IndexError::Image {
        name: name.to_string(),
        source: Box::new(ImageError::Invalid {
            what: "image index",
            digest,
            source,
        }),
    })
}

/// The bytes of the list `name` names, as stored (`manifest inspect`).
pub fn raw(store: &Store, name: &ImageName) -> Result<Vec<u8>, IndexError> {
    let (desc, _) = read(store, name)?;
    Ok(store.read_blob(&digest_of(name, &desc)?, MAX_DOCUMENT)?)
}

/// The entries of the list `name`, in order.
pub fn children(store: &Store, name: &ImageName) -> Result<Vec<Child>, IndexError> {
    let (_, index) = read(store, name)?;
    index
        .manifests()
        .iter()
        .map(|d| {
            Ok(Child {
                digest: digest_of(name, d)?,
                platform: entry_platform(d),
            })
        })
        .collect()
}

/// Makes the list `name` with `images` (each a name, digest or prefix in
/// the store). A name already in use is refused.
pub fn create(
    store: &Store,
    name: &ImageName,
    images: &[String],
) -> Result<Descriptor, IndexError> {
    let _adding = StoreLock::shared(store)?;
    if store.resolve(&name.tagged())?.is_some() {
        return Err(IndexError::Exists(name.to_string()));
    }
    let mut entries = Vec::new();
    for image in images {
        let desc = resolve_image(store, name, image)?;
        let entry = entry_for(store, name, image, &desc, &AddOptions::default())?;
        merge(&mut entries, entry, false);
    }
    write_and_tag(store, name, entries)
}

/// Adds the image `image` (a name, digest or prefix in the store) to the
/// list `name`, replacing an entry of the same digest (and, with
/// `replace_platform`, of the same platform). With `create_missing`, a
/// list that does not exist yet is made.
pub fn add(
    store: &Store,
    name: &ImageName,
    image: &str,
    opts: &AddOptions,
    create_missing: bool,
) -> Result<Descriptor, IndexError> {
    let desc = resolve_image(store, name, image)?;
    add_descriptor(store, name, image, &desc, opts, create_missing)
}

/// [`add`] of the image `desc` describes (`image` names it in messages),
/// tagged or not: `build --manifest` adds the images it builds so.
pub fn add_descriptor(
    store: &Store,
    name: &ImageName,
    image: &str,
    desc: &Descriptor,
    opts: &AddOptions,
    create_missing: bool,
) -> Result<Descriptor, IndexError> {
    let _adding = StoreLock::shared(store)?;
    let entry = entry_for(store, name, image, desc, opts)?;
    let mut entries = match read(store, name) {
        Ok((_, index)) => index.manifests().clone(),
        Err(IndexError::NotFound(_)) if create_missing => Vec::new(),
        Err(e) => return Err(e),
    };
    merge(&mut entries, entry, opts.replace_platform);
    write_and_tag(store, name, entries)
}

/// Removes from the list `name` the entry `what` names: its digest (or a
/// unique prefix of it, 6 hex digits at least) or an image in the store.
pub fn remove(store: &Store, name: &ImageName, what: &str) -> Result<Descriptor, IndexError> {
    let _adding = StoreLock::shared(store)?;
    let (_, index) = read(store, name)?;
    let hex = what.strip_prefix("sha256:").unwrap_or(what);
    let image = store.resolve(what)?.map(|d| d.digest().clone());
    let matches = |d: &Descriptor| {
        Some(d.digest()) == image.as_ref()
            || (hex.len() >= 6 && d.as_digest_sha256().is_some_and(|h| h.starts_with(hex)))
    };
    let mut entries = index.manifests().clone();
    let before = entries.len();
    entries.retain(|d| !matches(d));
    match before - entries.len() {
        1 => {}
        0 => {
            return Err(IndexError::NoSuchEntry {
                name: name.to_string(),
                what: what.to_string(),
            })
        }
        _ => {
            return Err(IndexError::Ambiguous {
                name: name.to_string(),
                what: what.to_string(),
            })
        }
    }
    write_and_tag(store, name, entries)
}

/// The list `name` ready to push: every entry a manifest whose config and
/// layers are all in the store, each with a platform, no platform twice.
/// Reads only the store; returns the list's descriptor.
pub fn check(store: &Store, name: &ImageName) -> Result<Descriptor, IndexError> {
    let (desc, index) = read(store, name)?;
    let mut seen: Vec<(Platform, Digest)> = Vec::new();
    for entry in index.manifests() {
        let child = digest_of(name, entry)?;
        let Some(platform) = entry_platform(entry) else {
            return Err(IndexError::NoPlatform {
                name: name.to_string(),
                child: child.to_string(),
            });
        };
        if let Some((_, first)) = seen.iter().find(|(p, _)| *p == platform) {
            return Err(IndexError::DuplicatePlatform {
                name: name.to_string(),
                platform: platform.to_string(),
                first: first.to_string(),
                second: child.to_string(),
            });
        }
        let missing = |what, missing: Digest| IndexError::MissingChild {
            name: name.to_string(),
            platform: platform.to_string(),
            child: child.to_string(),
            what,
            missing: missing.to_string(),
        };
        if !media::is_manifest(entry.media_type()) {
            return Err(IndexError::NestedIndex {
                image: child.to_string(),
            });
        }
        if !store.has_blob(&child) {
            return Err(missing("manifest", child.clone()));
        }
        let bytes = store.read_blob(&child, MAX_DOCUMENT)?;
        let manifest: ImageManifest =
            serde_json::from_slice(&bytes).map_err(|source| IndexError::Image {
                name: name.to_string(),
                source: Box::new(ImageError::Invalid {
                    what: "manifest",
                    digest: child.clone(),
                    source,
                }),
            })?;
        let config = std::iter::once(("config", manifest.config()));
        for (what, blob) in config.chain(manifest.layers().iter().map(|l| ("layer", l))) {
            let d = digest_of(name, blob)?;
            if !store.has_blob(&d) {
                return Err(missing(what, d));
            }
        }
        seen.push((platform, child));
    }
    Ok(desc)
}

/// Removes the name `name` of a list (its children stay, for `jbuild
/// prune` to judge).
pub fn delete(store: &Store, name: &ImageName) -> Result<Descriptor, IndexError> {
    read(store, name)?;
    store
        .untag(name)?
        .ok_or_else(|| IndexError::NotFound(name.to_string()))
}

/// The index entry for `image`: its descriptor with the platform of its
/// config (or the one asked for) and the annotations asked for.
fn entry_for(
    store: &Store,
    name: &ImageName,
    image: &str,
    desc: &Descriptor,
    opts: &AddOptions,
) -> Result<Descriptor, IndexError> {
    let image_error = |source| IndexError::Image {
        name: name.to_string(),
        source: Box::new(source),
    };
    if media::is_index(desc.media_type()) {
        return Err(IndexError::NestedIndex {
            image: image.to_string(),
        });
    }
    let loaded =
        load_descriptor(store, desc, &Platform::default_for_host(), image).map_err(image_error)?;
    let platform = opts.platform.clone().unwrap_or_else(|| {
        let c = &loaded.config;
        let mut p =
            Platform::parse(&format!("{}/{}", c.os(), c.architecture())).unwrap_or(Platform {
                os: c.os().to_string(),
                architecture: c.architecture().to_string(),
                variant: None,
            });
        p.variant = c.variant().clone();
        p
    });
    let mut platform_json = json!({"os": platform.os, "architecture": platform.architecture});
    if let Some(v) = &platform.variant {
        platform_json["variant"] = json!(v);
    }
    let mut entry = json!({
        "mediaType": desc.media_type().to_string(),
        "digest": desc.digest().to_string(),
        "size": desc.size(),
        "platform": platform_json,
    });
    if !opts.annotations.is_empty() {
        entry["annotations"] = json!(opts.annotations);
    }
    Ok(serde_json::from_value(entry).expect("an index entry made of valid parts"))
}

/// The image `image` names in the store: by name, digest or prefix, or
/// by the full digest of a manifest the store holds without a name (an
/// image of another list).
fn resolve_image(store: &Store, name: &ImageName, image: &str) -> Result<Descriptor, IndexError> {
    if let Some(d) = store.resolve(image)? {
        return Ok(d);
    }
    let unnamed = image
        .parse::<Digest>()
        .ok()
        .filter(|d| store.has_blob(d))
        .and_then(|d| {
            #[derive(serde::Deserialize)]
            struct Head {
                #[serde(rename = "mediaType")]
                media_type: Option<String>,
            }
            let bytes = store.read_blob(&d, MAX_DOCUMENT).ok()?;
            let head: Head = serde_json::from_slice(&bytes).ok()?;
            let desc: Descriptor = serde_json::from_value(json!({
                "mediaType": head.media_type?,
                "digest": d.to_string(),
                "size": bytes.len(),
            }))
            .ok()?;
            media::is_manifest(desc.media_type()).then_some(desc)
        });
    unnamed.ok_or_else(|| IndexError::Image {
        name: name.to_string(),
        source: Box::new(ImageError::NotFound(image.to_string())),
    })
}

/// Puts `entry` into `entries`: in place of an entry of the same digest
/// (or, with `by_platform`, of the same platform), else at the end.
fn merge(entries: &mut Vec<Descriptor>, entry: Descriptor, by_platform: bool) {
    let platform = entry_platform(&entry);
    let same = |d: &Descriptor| {
        d.digest() == entry.digest() || (by_platform && entry_platform(d) == platform)
    };
    // Every entry it replaces goes (a second one of the same platform,
    // left by `manifest add`, too); the new one takes the first's place.
    let at = entries.iter().position(same);
    entries.retain(|d| !same(d));
    match at {
        Some(i) => entries.insert(i, entry),
        None => entries.push(entry),
    }
}

/// Writes the index of `entries` and names it `name`. Two edits of one
/// list at the same time: the last one wins, as with `jbuild tag`.
fn write_and_tag(
    store: &Store,
    name: &ImageName,
    entries: Vec<Descriptor>,
) -> Result<Descriptor, IndexError> {
    let manifests: Vec<Value> = entries
        .iter()
        .map(|d| serde_json::to_value(d).expect("a descriptor serialises"))
        .collect();
    let index = json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": manifests,
    });
    let (digest, size) = store.put_bytes(&canonical_json(&index))?;
    let desc: Descriptor = serde_json::from_value(json!({
        "mediaType": OCI_INDEX,
        "digest": digest.to_string(),
        "size": size,
    }))
    .expect("a descriptor made of valid parts");
    store.tag(name, &desc)?;
    Ok(desc)
}

fn digest_of(name: &ImageName, d: &Descriptor) -> Result<Digest, IndexError> {
    descriptor_digest(d).map_err(|source| IndexError::Image {
        name: name.to_string(),
        source: Box::new(ImageError::Digest {
            image: d.digest().to_string(),
            source,
        }),
    })
}

#[cfg(test)]
mod tests;
