//! Images: everything between "an image in the store" and "its snapshots".
//!
//! # Vocabulary
//!
//! An **image** is a tree of content-addressed documents and blobs in the
//! store (an OCI image layout): an *index* names one *manifest* per
//! platform (or further indexes); a manifest names a *config* and an
//! ordered list of *layers*. Each is referred to by a *descriptor* (media
//! type, digest, size). [`media`] answers every question about a media
//! type; [`platform`] picks a manifest out of an index.
//!
//! A **layer** is a tar (usually compressed) of the changes one step made.
//! Its *digest* names the blob as stored; its **diff ID** is the digest of
//! the uncompressed tar, and the config lists the diff IDs bottom first.
//! The **chain ID** of a layer names the whole stack up to it: the first
//! layer's diff ID, then `sha256(parent chain ID + " " + diff ID)`, so two
//! images that share a base share the chain IDs of its layers.
//!
//! Layers live as **snapshots** (see [`crate::snapshot`]). Their names say
//! where they came from ([`names`]):
//!
//! - `step-<key>`: what a build step committed, named by the step's cache
//!   key; looking it up is the build cache. Once exported it is labelled
//!   with its diff ID, chain ID and blob digests.
//! - `chain-<chain id>`: a layer unpacked from an image, so images that
//!   share a base share its snapshots.
//! - `active-<pid>-<n>`: work in progress of the process `pid`; one whose
//!   process is gone is a leftover.
//!
//! # What lives here
//!
//! - [`load`](mod@load): an image in the store, its manifest and config read
//!   (bounded, validated), a platform picked from an index;
//! - [`walk`]: the one walk of the image graph, used by garbage collection,
//!   `jbuild check`, the in-use set and every copy between transports;
//! - [`unpack`]: layers → `chain-` snapshots, each applied as hostile input;
//! - [`export`]: snapshots → layer blobs (a differ's change list, the tar
//!   writer, compression, both digests in one pass);
//! - [`write`](mod@write): a new config and manifest, byte for byte deterministic;
//! - [`pull`](mod@pull): the one pull transaction — copy untagged, unpack, and only
//!   then name; or roll back — used by `jbuild pull` and by a build's FROM;
//! - [`index`]: manifest lists (image indexes made here, one manifest per
//!   platform), and the check a list passes before it is pushed;
//! - [`list`] and [`list_format`]: `jbuild images` (rows, docker's
//!   filters, both sizes, `--format` templates);
//! - [`remove`]: `jbuild rmi`, names taken away as docker does;
//! - [`gc`]: what no image needs any more (blobs, unpacked layers, dead
//!   work), with a typed summary.
//!
//! This module sits above the snapshotter, the layer applier and writer and
//! the store, and below the engine, the transports and `check`.

pub mod arrivals;
pub mod config;
pub mod export;
pub mod gc;
pub mod index;
pub mod list;
pub mod list_format;
pub mod load;
pub mod media;
pub mod names;
pub mod platform;
pub mod pull;
pub mod remove;
pub mod unpack;
pub mod usage;
pub mod walk;
pub mod write;

mod error;

pub use config::{HistoryEntry, ImageState};
// Where they were before crate::jailparam gathered them.
pub use crate::jailparam::{
    jail_annotation_value, jail_labels, permission_value, JailLabel, JAIL_LABEL_PREFIX,
    OLD_JAIL_LABEL_PREFIX,
};
pub use error::ImageError;
pub use export::{export_layers, layer_changes, Layer, LayerChanges};
pub use load::{load, load_descriptor, LoadedImage};
pub use media::{DocKind, Document, DocumentError, MAX_DOCUMENT};
pub use names::{chain_ids, next_chain, SnapshotName};
pub use platform::{NoSuchPlatform, Platform};
pub use pull::{pull, ImageSource, PullError};
pub use unpack::{LayerPolicy, Unpacker};
pub use write::{rfc3339, ImageMeta, LayerRef, JAILFILE_LABEL};
