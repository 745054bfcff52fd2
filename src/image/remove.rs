//! `jbuild rmi`: taking names away from images, as docker's `rmi` does.
//!
//! Removing a name never deletes content: `jbuild prune` later frees what
//! no name (and no manifest list) needs. What is typed is found as
//! everywhere else ([`Store::lookup`]):
//!
//! - a **name** (`alpine`, `web:1.0`) takes that one name away;
//! - an **image ID** (a digest or a unique prefix of one) takes the image's
//!   only name away; an image with several names is refused unless
//!   `force` (docker's "must be forced"), which takes them all; an image
//!   kept without a name loses that entry;
//! - an image a **manifest list** in the store holds is refused when the
//!   last way to reach it by itself would go, unless `force` (the list
//!   still holds it afterwards, so nothing is lost).
//! - an image a **jail** was cloned from (`jbuild create` on ZFS) is
//!   refused in the same case, naming the jail, as docker refuses to
//!   remove an image a container uses; with `force` the name goes and the
//!   jail keeps its layers (`jbuild prune` leaves them while it stands on
//!   them).
//!
//! When an image loses its last name, the signatures and attestations
//! kept beside it (`jbuild sign`: `repo:sha256-<hex>.sig`, `.att`) lose
//! theirs too.
//!
//! Each reference is handled on its own: one that fails does not stop the
//! others ([`Removal`] says what happened to each).

use crate::blame::Blame;
use oci_spec::image::{Descriptor, Digest};

use super::index::read_desc;
use super::media;
use crate::snapshot::clones::JailClone;
use crate::store::{RefName, Store, StoreError};

/// What was taken away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removed {
    /// The name `name` no longer names the image `digest`.
    Untagged { name: String, digest: Digest },
    /// The entry keeping the unnamed image `digest` reachable is gone.
    Unlisted { digest: Digest },
}

#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "`{reference}` is image {digest}, which has several names ({}): name the one to remove, \
         or use `jbuild rmi -f {reference}` to remove them all",
        names.join(", ")
    )]
    SeveralNames {
        reference: String,
        digest: Digest,
        names: Vec<String>,
    },
    #[error(
        "`{reference}` (image {digest}) is still used by the manifest list {}: remove it from \
         the list first (`jbuild manifest remove LIST {digest}`), or use `jbuild rmi -f \
         {reference}` (the list keeps the image)",
        lists.join(", ")
    )]
    InList {
        reference: String,
        digest: Digest,
        lists: Vec<String>,
    },
    #[error(
        "`{reference}` (image {digest}) is used by {}: remove the jail first, or use \
         `jbuild rmi -f {reference}` (the jail keeps its layers; `jbuild prune` leaves them)",
        jails.join(", ")
    )]
    UsedByJail {
        reference: String,
        digest: Digest,
        /// `jail NAME (dataset D)` for each.
        jails: Vec<String>,
    },
}

impl Blame for RemoveError {
    /// Whether the user can fix it: a name that finds nothing, an ambiguous
    /// prefix, an image still used. The store's own failures are not.
    fn is_user_error(&self) -> bool {
        match self {
            RemoveError::Store(e) => e.is_user_error(),
            RemoveError::SeveralNames { .. }
            | RemoveError::InList { .. }
            | RemoveError::UsedByJail { .. } => true,
        }
    }
}

/// What happened to each reference given to [`remove`], in order.
#[derive(Debug)]
pub struct Removal {
    pub reference: String,
    pub outcome: Result<Vec<Removed>, RemoveError>,
}

/// Takes away what each of `references` names (see the module doc);
/// `jails` are the jails cloned from images here
/// ([`crate::snapshot::clones::jails_of`]).
pub fn remove(
    store: &Store,
    references: &[String],
    force: bool,
    jails: &[JailClone],
) -> Vec<Removal> {
    references
        .iter()
        .map(|r| Removal {
            reference: r.clone(),
            outcome: remove_one(store, r, force, jails),
        })
        .collect()
}

fn remove_one(
    store: &Store,
    reference: &str,
    force: bool,
    jails: &[JailClone],
) -> Result<Vec<Removed>, RemoveError> {
    let found = store.find(reference)?;
    let digest = found.descriptor.digest().clone();
    let names = store.names_of(&digest)?;
    let doomed: Vec<String> = match found.name {
        Some(name) => vec![name],
        None if names.len() > 1 && !force => {
            return Err(RemoveError::SeveralNames {
                reference: reference.to_string(),
                digest,
                names,
            })
        }
        None => names.clone(),
    };
    // The image stays reachable by itself if a name survives.
    if !force && doomed.len() == names.len() {
        let lists = lists_holding(store, &digest)?;
        if !lists.is_empty() {
            return Err(RemoveError::InList {
                reference: reference.to_string(),
                digest,
                lists,
            });
        }
        let users = jails_using(store, reference, &found.descriptor, jails);
        if !users.is_empty() {
            return Err(RemoveError::UsedByJail {
                reference: reference.to_string(),
                digest,
                jails: users,
            });
        }
    }
    if doomed.is_empty() {
        store.remove_untagged(&found.descriptor)?;
        return Ok(vec![Removed::Unlisted { digest }]);
    }
    let last = doomed.len() == names.len();
    let mut doomed = doomed;
    if last {
        // Its signatures and attestations (`repo:sha256-<hex>.sig`) go
        // with its last name: hidden from `jbuild images`, they would
        // otherwise keep it (their subject) alive unseen.
        doomed.extend(artifacts_of(store, &digest)?);
    }
    let mut removed = Vec::new();
    for name in doomed {
        if let Some(d) = store.untag_ref(&name)? {
            removed.push(Removed::Untagged {
                name,
                digest: d.digest().clone(),
            });
        }
    }
    Ok(removed)
}

/// The store's names of artifacts kept beside the image `digest`
/// ([`media::artifact_tag`]).
fn artifacts_of(store: &Store, digest: &Digest) -> Result<Vec<String>, StoreError> {
    let wanted = digest.to_string();
    Ok(store
        .list()?
        .into_iter()
        .filter_map(|(name, _)| match name {
            RefName::Image(n) if media::artifact_tag(n.tag()).is_some_and(|(_, d)| d == wanted) => {
                Some(n.tagged())
            }
            _ => None,
        })
        .collect())
}

/// The manifest lists in the store that hold the image `digest`, by name
/// (an unnamed list by its digest). A list that cannot be read holds
/// nothing here: `jbuild check` reports it.
fn lists_holding(store: &Store, digest: &Digest) -> Result<Vec<String>, StoreError> {
    let mut lists = Vec::new();
    for (name, desc) in store.list()? {
        if !media::is_index(desc.media_type()) || desc.digest() == digest {
            continue;
        }
        let holds = read_desc(store, &name.to_string(), &desc)
            .is_ok_and(|index| index.manifests().iter().any(|m| m.digest() == digest));
        if holds {
            lists.push(shown(&name, &desc));
        }
    }
    lists.sort();
    lists.dedup();
    Ok(lists)
}

/// The jails made from the image `desc` (from one of its platforms' if it
/// is a manifest list), as `jail NAME (dataset D)`.
fn jails_using(
    store: &Store,
    reference: &str,
    desc: &Descriptor,
    jails: &[JailClone],
) -> Vec<String> {
    if jails.is_empty() {
        return Vec::new();
    }
    let mut images = vec![desc.digest().to_string()];
    if media::is_index(desc.media_type()) {
        if let Ok(index) = read_desc(store, reference, desc) {
            images.extend(index.manifests().iter().map(|m| m.digest().to_string()));
        }
    }
    let mut out: Vec<String> = jails
        .iter()
        .filter(|j| images.contains(&j.image))
        .map(|j| format!("jail `{}` (dataset {})", j.jail, j.dataset))
        .collect();
    out.sort();
    out
}

fn shown(name: &RefName, desc: &Descriptor) -> String {
    match name {
        RefName::Untagged => desc.digest().to_string(),
        n => format!("`{n}`"),
    }
}
