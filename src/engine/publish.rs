//! Sending a stored image to a place: the one push `jbuild push`,
//! `jbuild manifest push` and `jbuild build --push` share.
//!
//! What a push decides, in one place:
//! - the image is found in the store as the user typed it (a name, a
//!   digest, an ID prefix);
//! - the tag it gets: the one the [`Location`] names, else, for an OCI
//!   layout or archive (as `jbuild export`), the tag of the name the image
//!   was found by, or of its only name — none is invented;
//! - the copy itself, blobs first, through the Transport seam, and the
//!   destination completed (an archive is written at the end);
//! - for a registry, the signatures and attestations kept beside the image
//!   in the store go with it (`trust::carry`); a layout or archive gets
//!   the image alone.

use oci_spec::image::Descriptor;

use crate::report::Reporter;
use crate::store::{descriptor_digest, ImageName, Store, StoreError};
use crate::transport::{
    self, copy_image_with, CopyEvent, CopyOptions, LayoutTransport, Location, OpenOptions,
    RegistryOptions, Transport, TransportError,
};
use crate::trust::{self, TrustError};

/// How a push moves the image.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// Blobs moved at the same time.
    pub jobs: usize,
    /// How registries are reached.
    pub registry: RegistryOptions,
}

/// An image [`push`] sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The manifest digest at the destination.
    pub digest: String,
    /// The destination as the user would write it, with the tag written.
    pub place: String,
    /// The tag it was given there; `None`: by digest only.
    pub tag: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Boxed: a transport error is large, and most pushes succeed.
    #[error(transparent)]
    Transport(Box<TransportError>),
    /// The destination answered with a digest jbuild cannot read.
    #[error(transparent)]
    Digest(#[from] crate::digest::DigestError),
    /// Carrying the image's signatures and attestations failed.
    #[error(transparent)]
    Trust(#[from] TrustError),
    /// An OCI layout or archive written without a tag, for an image with
    /// no name or several: which one to use is the user's to say.
    #[error(
        "{destination}: no tag given, and image {typed} {had}: say the tag, as {destination}:TAG"
    )]
    NoTag {
        destination: String,
        typed: String,
        /// `has no name`, or `has N names (a, b)`.
        had: String,
    },
}

impl From<TransportError> for PushError {
    fn from(e: TransportError) -> PushError {
        PushError::Transport(Box::new(e))
    }
}

impl crate::blame::Blame for PushError {
    /// Whether the user can fix it (an image or place they named, a
    /// registry they must reach) rather than it being a fault of jbuild's.
    fn is_user_error(&self) -> bool {
        match self {
            PushError::Store(e) => e.is_user_error(),
            PushError::Transport(e) => e.is_user_error(),
            PushError::Trust(e) => e.is_user_error(),
            PushError::NoTag { .. } => true,
            PushError::Digest(_) => false,
        }
    }
}

/// Pushes the stored image `image` (as the user typed it: a name, a digest
/// or an ID prefix) to `to`, reporting the transfer to `reporter`. A name
/// without a transport is a registry reference. See the module docs.
pub fn push(
    store: &Store,
    image: &str,
    to: &Location,
    options: &PushOptions,
    reporter: &dyn Reporter,
) -> Result<Pushed, PushError> {
    let found = store.find(image)?;
    let to = to.clone().registry_named()?;
    let open = OpenOptions {
        registry: options.registry.clone(),
        ..OpenOptions::default()
    };
    let dst = to.open(&open)?;
    let tag = match to.tag() {
        Some(t) => Some(t),
        None if to.is_layout() => Some(layout_tag(store, image, found.name, &to)?),
        None => None,
    };
    let src = LayoutTransport::from_store(store.clone());
    let copy = CopyOptions {
        jobs: options.jobs,
        platform: None,
    };
    let digest = found.descriptor.digest().to_string();
    let out = send(&src, &digest, dst.as_ref(), tag.as_deref(), &copy, reporter)?;
    if !to.is_layout() {
        // Signatures and attestations kept beside the image go with it.
        let digest = descriptor_digest(&out)?;
        trust::carry(store, &digest, dst.as_ref())?;
    }
    let place = match &tag {
        Some(t) => format!("{}:{t}", dst.describe()),
        None => dst.describe(),
    };
    Ok(Pushed {
        digest: out.digest().to_string(),
        place,
        tag,
    })
}

/// Copies the image `reference` names at `src` to `dst` under `tag` and
/// completes `dst` (an archive is written at `finish`), reporting the
/// transfer to `reporter`: every command's copy between two places.
pub fn send(
    src: &dyn Transport,
    reference: &str,
    dst: &dyn Transport,
    tag: Option<&str>,
    options: &CopyOptions,
    reporter: &dyn Reporter,
) -> Result<Descriptor, TransportError> {
    let progress = |ev: CopyEvent| transport::registry::report(reporter, ev);
    transport::block_on(async {
        let d = copy_image_with(src, reference, dst, tag, options, &progress).await?;
        dst.finish().await?;
        Ok::<_, TransportError>(d)
    })
}

/// The tag an OCI layout or archive written without one gets: that of the
/// stored name `typed` matched (`found`), or, when `typed` was an ID or
/// digest, of the image's only name.
fn layout_tag(
    store: &Store,
    typed: &str,
    found: Option<String>,
    to: &Location,
) -> Result<String, PushError> {
    let name = match found {
        Some(n) => n,
        None => {
            let digest = store.find(typed)?.descriptor.digest().clone();
            let mut names = store.names_of(&digest)?;
            if names.len() != 1 {
                let had = if names.is_empty() {
                    "has no name".to_string()
                } else {
                    format!("has {} names ({})", names.len(), names.join(", "))
                };
                return Err(PushError::NoTag {
                    destination: to.to_string(),
                    typed: typed.to_string(),
                    had,
                });
            }
            names.remove(0)
        }
    };
    Ok(ImageName::parse(&name)
        .map(|n| n.tag().to_string())
        .unwrap_or(name))
}
